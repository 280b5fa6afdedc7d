// Command rdmaudaddy is librdmacm's udaddy example in Go: UD "connections"
// through the RDMA CM (the IB CM's SIDR exchange) on port 7174. The
// client (-s server) resolves, connects -c IDs, sends -C messages of -S
// bytes on each (SEND with its QP number as immediate data) and waits for
// as many replies; the server accepts -c requests, receives the messages,
// answers each sender through an address handle made from its first
// completion, and waits for its sends. It is wire compatible with
// rdmacm-utils' udaddy in both roles and prints what udaddy prints, with
// the same exit status. It is named rdmaudaddy so that the test VM, which
// installs every cmd/ tool in /usr/bin, keeps the C udaddy beside it.
//
// Options as udaddy's: -s server, -b bind address, -c connections, -C
// message count, -S message size, -t type of service, -f address format
// (name, ip; gid is refused: AF_IB), -P port space (udp; ipoib is
// refused) and -p its number (0x111 for UDP).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pureverbs/pureverbs/internal/cmsync"
	"github.com/pureverbs/pureverbs/internal/getopt"
	"github.com/pureverbs/pureverbs/rdmacm"
	"github.com/pureverbs/pureverbs/uverbs"
)

func main() {
	os.Exit(Main(context.Background(), filepath.Base(os.Args[0]), os.Args[1:], os.Stdout, os.Stderr))
}

// port is udaddy's, fixed.
const port = "7174"

// grhLen is struct ibv_grh's size: every UD receive starts with it.
const grhLen = 40

// options are udaddy's command line.
type options struct {
	dst, src    string
	connections int
	count, size int
	tos         uint8
	setTOS      bool
	ps          rdmacm.PortSpace
	flags       rdmacm.AIFlags
	family      int
}

// Main runs the tool as prog with args and returns the exit status: the C
// main's return value (0, a negative errno or an event's status, a
// getaddrinfo code) as the shell sees it, 1 for a bad command line.
func Main(ctx context.Context, prog string, args []string, stdout, stderr io.Writer) int {
	o := options{connections: 1, count: 10, size: 100, ps: rdmacm.PortSpaceUDP}
	opts, _, perr := getopt.Parse(args, "s:b:c:C:S:t:p:P:f:", nil)
	for _, op := range opts {
		switch op.Val {
		case 's':
			o.dst = op.Arg
		case 'b':
			o.src = op.Arg
		case 'c':
			o.connections = int(getopt.Atoi(op.Arg))
		case 'C':
			o.count = int(getopt.Atoi(op.Arg))
		case 'S':
			o.size = int(getopt.Atoi(op.Arg))
		case 't':
			o.setTOS, o.tos = true, uint8(getopt.Strtoul(op.Arg))
		case 'p':
			o.ps = rdmacm.PortSpace(getopt.Strtol(op.Arg))
		case 'f':
			switch a := strings.ToLower(op.Arg); {
			case strings.HasPrefix(a, "ip"):
				o.flags = rdmacm.AINumericHost
			case strings.HasPrefix(a, "gid"):
				o.flags, o.family = rdmacm.AINumericHost|rdmacm.AIFamily, familyIB
			case !strings.HasPrefix(a, "name"):
				fmt.Fprintf(stderr, "Warning: unknown address format\n")
			}
		case 'P':
			switch a := strings.ToLower(op.Arg); {
			case strings.HasPrefix(a, "ipoib"):
				o.ps = portSpaceIPoIB
			case !strings.HasPrefix(a, "udp"):
				fmt.Fprintf(stderr, "Warning: unknown port space format\n")
			}
		}
	}
	if perr != nil {
		fmt.Fprintf(stderr, "%s: %v\n", prog, perr)
		fmt.Fprintf(stdout, "usage: %s\n\t[-s server_address]\n\t[-b bind_address]\n\t[-f address_format]\n"+
			"\t    name, ip, ipv6, or gid\n\t[-P port_space]\n\t    udp or ipoib\n\t[-c connections]\n"+
			"\t[-C message_count]\n\t[-S message_size]\n\t[-t type_of_service]\n"+
			"\t[-p port_space - %#x for UDP (default), %#x for IPOIB]\n", prog, uint16(rdmacm.PortSpaceUDP), uint16(portSpaceIPoIB))
		return 1
	}
	if o.connections < 0 {
		o.connections = 0
	}
	if o.size == 0 {
		o.count = 0
	}
	t := &test{o: o, stdout: stdout, stderr: stderr}
	var err error
	if t.ch, err = cmsync.CreateFirstEventChannel(stderr); err != nil {
		return 1
	}
	if err := t.allocNodes(); err != nil {
		t.ch.Close()
		return 1
	}
	var ret int
	if o.dst != "" {
		ret = t.runClient(ctx)
	} else {
		t.o.flags |= rdmacm.AIPassive
		ret = t.runServer(ctx)
	}
	fmt.Fprintf(stdout, "test complete\n")
	t.destroyNodes()
	t.ch.Close()
	fmt.Fprintf(stdout, "return status %d\n", ret)
	return ret & 0xff
}

// RDMA_PS_IPOIB and AF_IB, which udaddy names and this port refuses.
const portSpaceIPoIB rdmacm.PortSpace = 0x0002

const familyIB = 27

// node is one connection (struct cmatest_node).
type node struct {
	id         *rdmacm.ID
	connected  bool
	pd         *uverbs.PD
	cq         *uverbs.CQ
	qp         *uverbs.QP
	mr         *uverbs.MR
	ah         *uverbs.AH
	mem        []byte
	remoteQPN  uint32
	remoteQKey uint32
}

// test is struct cmatest and the options.
type test struct {
	o            options
	stdout       io.Writer
	stderr       io.Writer
	ch           *rdmacm.EventChannel
	nodes        []node
	connIndex    int
	connectsLeft int
	ai           *rdmacm.AddrInfo
}

// allocNodes makes the nodes and, on the client, their IDs.
func (t *test) allocNodes() error {
	t.nodes = make([]node, t.o.connections)
	t.connectsLeft = t.o.connections
	if t.o.dst == "" {
		return nil
	}
	for i := range t.nodes {
		id, err := t.ch.CreateID(t.o.ps)
		if err != nil {
			return err
		}
		t.nodes[i].id = id
	}
	return nil
}

// destroyNodes takes every node down, its ID last.
func (t *test) destroyNodes() {
	for i := range t.nodes {
		n := &t.nodes[i]
		if n.id == nil {
			continue
		}
		if n.ah != nil {
			n.ah.Destroy()
		}
		if n.qp != nil {
			n.qp.Destroy(context.Background())
		}
		if n.cq != nil {
			n.cq.Destroy(context.Background())
		}
		if n.mr != nil {
			n.mr.Dereg()
		}
		if n.pd != nil {
			n.pd.Dealloc()
		}
		n.id.Destroy()
	}
}

// hints are getaddrinfo's hints from the options.
func (t *test) hints() *rdmacm.AddrInfo {
	return &rdmacm.AddrInfo{Flags: t.o.flags, Family: t.o.family, PortSpace: t.o.ps}
}

// cmFailed is what a failed librdmacm call returns (it sets errno).
const cmFailed = -1

func (t *test) runServer(ctx context.Context) int {
	fmt.Fprintf(t.stdout, "udaddy: starting server\n")
	listen, err := t.ch.CreateID(t.o.ps)
	if err != nil {
		cmsync.Perror(t.stderr, "udaddy: listen request failed", err)
		return cmFailed
	}
	defer listen.Destroy()
	if t.ai, err = cmsync.GetRDMAAddr(ctx, t.o.src, t.o.dst, port, t.hints()); err != nil {
		return cmsync.GAIStatus(t.stdout, "udaddy: getrdmaaddr", err)
	}
	if err := listen.BindAddr(t.ai.Src); err != nil {
		cmsync.Perror(t.stderr, "udaddy: bind address failed", err)
		return cmFailed
	}
	if err := listen.Listen(0); err != nil {
		cmsync.Perror(t.stderr, "udaddy: failure trying to listen", err)
		return cmFailed
	}
	t.connectEvents(ctx)
	if t.o.count == 0 {
		return 0
	}
	fmt.Fprintf(t.stdout, "receiving data transfers\n")
	if ret := t.pollCQs(ctx); ret != 0 {
		return ret
	}
	fmt.Fprintf(t.stdout, "sending replies\n")
	for i := range t.nodes {
		if ret := t.postSends(&t.nodes[i], uverbs.SendSignaled); ret != 0 {
			return ret
		}
	}
	if ret := t.pollCQs(ctx); ret != 0 {
		return ret
	}
	fmt.Fprintf(t.stdout, "data transfers complete\n")
	return 0
}

func (t *test) runClient(ctx context.Context) int {
	fmt.Fprintf(t.stdout, "udaddy: starting client\n")
	var err error
	if t.ai, err = cmsync.GetRDMAAddr(ctx, t.o.src, t.o.dst, port, t.hints()); err != nil {
		return cmsync.GAIStatus(t.stdout, "udaddy: getaddrinfo", err)
	}
	fmt.Fprintf(t.stdout, "udaddy: connecting\n")
	for i := range t.nodes {
		if err := t.nodes[i].id.ResolveAddr(t.ai.Src, t.ai.Dst, 2*time.Second); err != nil {
			cmsync.Perror(t.stderr, "udaddy: failure getting addr", err)
			t.connectsLeft--
			return cmFailed
		}
	}
	if ret := t.connectEvents(ctx); ret != 0 {
		return ret
	}
	if t.o.count == 0 {
		return 0
	}
	fmt.Fprintf(t.stdout, "initiating data transfers\n")
	for i := range t.nodes {
		if ret := t.postSends(&t.nodes[i], 0); ret != 0 {
			return ret
		}
	}
	fmt.Fprintf(t.stdout, "receiving data transfers\n")
	if ret := t.pollCQs(ctx); ret != 0 {
		return ret
	}
	fmt.Fprintf(t.stdout, "data transfers complete\n")
	return 0
}

// connectEvents handles events until every connection is made or failed
// (connect_events).
func (t *test) connectEvents(ctx context.Context) int {
	ret := 0
	for t.connectsLeft > 0 && ret == 0 {
		ev, err := t.ch.GetEvent(ctx)
		if err != nil {
			cmsync.Perror(t.stderr, "udaddy: rdma_get_cm_event", err)
			return cmFailed
		}
		ret = t.handle(&ev)
	}
	return ret
}

// nodeOf is the client node of id.
func (t *test) nodeOf(id *rdmacm.ID) *node {
	for i := range t.nodes {
		if t.nodes[i].id == id {
			return &t.nodes[i]
		}
	}
	return nil
}

// handle is cma_handler.
func (t *test) handle(ev *rdmacm.Event) int {
	switch ev.Type {
	case rdmacm.EventAddrResolved:
		n := t.nodeOf(ev.ID)
		if n == nil {
			return 0
		}
		if t.o.setTOS {
			if err := n.id.SetTOS(t.o.tos); err != nil {
				cmsync.Perror(t.stderr, "udaddy: set TOS option failed", err)
			}
		}
		if err := n.id.ResolveRoute(2 * time.Second); err != nil {
			cmsync.Perror(t.stderr, "udaddy: resolve route failed", err)
			t.connectsLeft--
			return cmFailed
		}
	case rdmacm.EventRouteResolved:
		n := t.nodeOf(ev.ID)
		if n == nil {
			return 0
		}
		if ret := t.routeHandler(n); ret != 0 {
			t.connectsLeft--
			return ret
		}
	case rdmacm.EventConnectRequest:
		return t.connectHandler(ev.ID)
	case rdmacm.EventEstablished:
		n := t.nodeOf(ev.ID)
		if n == nil {
			return 0
		}
		n.remoteQPN, n.remoteQKey = ev.UD.QPNum, ev.UD.QKey
		ah, err := n.pd.CreateAH(ev.UD.AH)
		if err != nil {
			fmt.Fprintf(t.stdout, "udaddy: failure creating address handle\n")
			t.connectsLeft--
			return -1
		}
		n.ah, n.connected = ah, true
		t.connectsLeft--
	case rdmacm.EventAddrError, rdmacm.EventRouteError, rdmacm.EventConnectError, rdmacm.EventUnreachable, rdmacm.EventRejected:
		fmt.Fprintf(t.stdout, "udaddy: event: %s, error: %d\n", ev.Type, ev.Status)
		t.connectsLeft--
		return int(ev.Status)
	}
	return 0
}

// routeHandler checks the message size, makes the node's resources,
// posts its receives and connects (route_handler).
func (t *test) routeHandler(n *node) int {
	if ret := t.initNode(n); ret != 0 {
		return ret
	}
	if err := n.id.Connect(&rdmacm.ConnParam{}); err != nil {
		cmsync.Perror(t.stderr, "udaddy: failure connecting", err)
		return cmFailed
	}
	return 0
}

// connectHandler takes a request into the next node and accepts it with
// the node's QP (connect_handler).
func (t *test) connectHandler(id *rdmacm.ID) int {
	fail := func(ret int) int {
		fmt.Fprintf(t.stdout, "udaddy: failing connection request\n")
		id.Reject(nil)
		return ret
	}
	if t.connIndex == len(t.nodes) {
		return fail(-int(errENOMEM))
	}
	n := &t.nodes[t.connIndex]
	t.connIndex++
	n.id = id
	if ret := t.initNode(n); ret != 0 {
		t.connectsLeft--
		return fail(ret)
	}
	if err := id.Accept(&rdmacm.ConnParam{QPNum: n.qp.QPN()}); err != nil {
		cmsync.Perror(t.stderr, "udaddy: failure accepting", err)
		t.connectsLeft--
		return fail(cmFailed)
	}
	n.connected = true
	t.connectsLeft--
	return 0
}

// errENOMEM is what connect_handler returns for a request beyond -c.
const errENOMEM = 12

// initNode is verify_test_params, init_node and post_recvs: the message
// must fit the port's active MTU; a PD, a CQ, a UD QP, the message buffer
// (with room for the GRH) and a receive per message.
func (t *test) initNode(n *node) int {
	c := n.id.Context()
	pa, err := c.QueryPort(n.id.Port())
	if err != nil {
		return cmsync.ErrnoValue(err)
	}
	if mtu := pa.ActiveMTU.Bytes(); t.o.count > 0 && t.o.size > mtu {
		fmt.Fprintf(t.stdout, "udaddy: message_size %d is larger than active mtu %d\n", t.o.size, mtu)
		return -22 // -EINVAL
	}
	if n.pd, err = c.AllocPD(); err != nil {
		fmt.Fprintf(t.stdout, "udaddy: unable to allocate PD\n")
		return -int(errENOMEM)
	}
	cqe, wrs := 2, 1
	if t.o.count > 0 {
		cqe, wrs = 2*t.o.count, t.o.count
	}
	if n.cq, err = c.CreateCQ(cqe, nil); err != nil {
		fmt.Fprintf(t.stdout, "udaddy: unable to create CQ\n")
		return -int(errENOMEM)
	}
	n.qp, err = n.id.CreateQP(n.pd, uverbs.QPInitAttr{Type: uverbs.QPTypeUD, SendCQ: n.cq, RecvCQ: n.cq,
		Cap: uverbs.QPCap{MaxSendWR: wrs, MaxRecvWR: wrs, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		cmsync.Perror(t.stderr, "udaddy: unable to create QP", err)
		return -1
	}
	if t.o.count == 0 {
		return 0
	}
	n.mem = make([]byte, t.o.size+grhLen)
	if n.mr, err = n.pd.RegMR(n.mem, uverbs.AccessLocalWrite); err != nil {
		fmt.Fprintf(t.stdout, "failed to reg MR\n")
		fmt.Fprintf(t.stdout, "udaddy: failed to create messages: %d\n", -1)
		return -1
	}
	for range t.o.count {
		if err := n.qp.PostRecv([]uverbs.RecvWR{{SGL: []uverbs.SGE{n.mr.SGE(0, len(n.mem))}}}); err != nil {
			fmt.Fprintf(t.stdout, "failed to post receives: %d\n", cmsync.ErrnoValue(err))
			return cmsync.ErrnoValue(err)
		}
	}
	return 0
}

// postSends posts the node's messages, SEND with immediate data (the
// QP's number) to its peer (post_sends).
func (t *test) postSends(n *node, flags uverbs.SendFlags) int {
	if !n.connected || t.o.count == 0 {
		return 0
	}
	wr := []uverbs.SendWR{{Opcode: uverbs.WRSendWithImm, Flags: flags, ImmData: n.qp.QPN(),
		SGL: []uverbs.SGE{n.mr.SGE(0, t.o.size)}, AH: n.ah, RemoteQPN: n.remoteQPN, RemoteQKey: n.remoteQKey}}
	for range t.o.count {
		if err := n.qp.PostSend(wr); err != nil {
			fmt.Fprintf(t.stdout, "failed to post sends: %d\n", cmsync.ErrnoValue(err))
			return cmsync.ErrnoValue(err)
		}
	}
	return 0
}

// pollCQs busy-polls each connected node's CQ for -C completions; on the
// server the first receive's completion gives the address handle and QP
// number to answer (poll_cqs, create_reply_ah). ctx bounds the wait (the
// C tool spins for ever).
func (t *test) pollCQs(ctx context.Context) int {
	var wc [8]uverbs.WC
	for i := range t.nodes {
		n := &t.nodes[i]
		if !n.connected {
			continue
		}
		for done := 0; done < t.o.count; {
			if err := ctx.Err(); err != nil {
				fmt.Fprintf(t.stdout, "udaddy: failed polling CQ: %v\n", err)
				return -1
			}
			got, err := n.cq.Poll(wc[:])
			if err != nil {
				fmt.Fprintf(t.stdout, "udaddy: failed polling CQ: %d\n", -cmsync.ErrnoValue(err))
				return -cmsync.ErrnoValue(err)
			}
			if got > 0 && n.ah == nil {
				t.replyAH(n, &wc[0])
			}
			done += got
		}
	}
	return 0
}

// replyAH answers the sender of wc: an address handle from the completion
// and the GRH at the start of the buffer, its QP number from the
// immediate data, and this QP's own Q_Key.
func (t *test) replyAH(n *node, wc *uverbs.WC) {
	n.ah, _ = n.pd.CreateAHFromWC(n.id.Port(), wc, n.mem[:grhLen])
	n.remoteQPN = wc.ImmData
	if a, _, err := n.qp.Query(uverbs.QPAttrQKey); err == nil {
		n.remoteQKey = a.QKey
	}
}
