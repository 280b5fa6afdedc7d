// Command rdmacmatose is librdmacm's cmatose example (rdmacm-utils'
// ucmatose) in Go: RC connections through the RDMA CM. The client (-s
// server) connects -c IDs; the server accepts them and sends -C messages
// of -S bytes on each, the client answers each, and the server then
// disconnects, the client's disconnect answering. With -m both sides
// first move every ID (the listener too) to a new event channel
// (rdma_migrate_id) and close the old one. It is wire compatible with
// ucmatose in both roles and prints what it prints, with the same exit
// status.
//
// Options as cmatose's: -s server, -b bind address, -p port (7471), -c
// connections, -C message count, -S message size, -t type of service, -f
// address format (name, ip; gid is refused: AF_IB), -P port space (tcp,
// ib), -a ACK timeout and -m.
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

// options are cmatose's command line.
type options struct {
	dst, src    string
	port        string
	connections int
	count, size int
	tos         uint8
	setTOS      bool
	timeout     uint8
	setTimeout  bool
	migrate     bool
	ps          rdmacm.PortSpace
	flags       rdmacm.AIFlags
	family      int
}

// familyIB is AF_IB, which -f gid asks for and GetAddrInfo refuses.
const familyIB = 27

// Main runs the tool as prog with args and returns the exit status: the C
// main's return value (0, -1 for a failed librdmacm call, an event's
// status, a getaddrinfo code) as the shell sees it, 1 for a bad command
// line.
func Main(ctx context.Context, prog string, args []string, stdout, stderr io.Writer) int {
	o := options{port: "7471", connections: 1, count: 10, size: 100, ps: rdmacm.PortSpaceTCP}
	opts, _, perr := getopt.Parse(args, "s:b:f:P:c:C:S:t:p:a:m", nil)
	for _, op := range opts {
		switch op.Val {
		case 's':
			o.dst = op.Arg
		case 'b':
			o.src = op.Arg
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
			case strings.HasPrefix(a, "ib"):
				o.ps = rdmacm.PortSpaceIB
			case !strings.HasPrefix(a, "tcp"):
				fmt.Fprintf(stderr, "Warning: unknown port space format\n")
			}
		case 'c':
			o.connections = int(getopt.Atoi(op.Arg))
		case 'C':
			o.count = int(getopt.Atoi(op.Arg))
		case 'S':
			o.size = int(getopt.Atoi(op.Arg))
		case 't':
			o.setTOS, o.tos = true, uint8(getopt.Strtoul(op.Arg))
		case 'p':
			o.port = op.Arg
		case 'a':
			o.setTimeout, o.timeout = true, uint8(getopt.Strtoul(op.Arg))
		case 'm':
			o.migrate = true
		}
	}
	if perr != nil {
		fmt.Fprintf(stderr, "%s: %v\n", prog, perr)
		fmt.Fprintf(stdout, "usage: %s\n\t[-s server_address]\n\t[-b bind_address]\n\t[-f address_format]\n"+
			"\t    name, ip, ipv6, or gid\n\t[-P port_space]\n\t    tcp or ib\n\t[-c connections]\n"+
			"\t[-C message_count]\n\t[-S message_size]\n\t[-t type_of_service]\n\t[-p port_number]\n\t[-m(igrate)]\n\t[-a ack_timeout]\n", prog)
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

// node is one connection (struct cmatest_node): a send and a receive CQ.
type node struct {
	id        *rdmacm.ID
	connected bool
	pd        *uverbs.PD
	sendCQ    *uverbs.CQ
	recvCQ    *uverbs.CQ
	qp        *uverbs.QP
	mr        *uverbs.MR
	mem       []byte
}

// test is struct cmatest and the options.
type test struct {
	o               options
	stdout, stderr  io.Writer
	ch              *rdmacm.EventChannel
	nodes           []node
	connIndex       int
	connectsLeft    int
	disconnectsLeft int
	ai              *rdmacm.AddrInfo
}

// cmFailed is what a failed librdmacm call returns (it sets errno).
const cmFailed = -1

// errENOMEM is what connect_handler returns for a request beyond -c.
const errENOMEM = 12

func (t *test) hints() *rdmacm.AddrInfo {
	return &rdmacm.AddrInfo{Flags: t.o.flags, Family: t.o.family, PortSpace: t.o.ps}
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
		if n.qp != nil {
			n.qp.Destroy(context.Background())
		}
		for _, cq := range []*uverbs.CQ{n.sendCQ, n.recvCQ} {
			if cq != nil {
				cq.Destroy(context.Background())
			}
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

func (t *test) runServer(ctx context.Context) int {
	fmt.Fprintf(t.stdout, "cmatose: starting server\n")
	listen, err := t.ch.CreateID(t.o.ps)
	if err != nil {
		cmsync.Perror(t.stderr, "cmatose: listen request failed", err)
		return cmFailed
	}
	defer listen.Destroy()
	if t.ai, err = cmsync.GetRDMAAddr(ctx, t.o.src, t.o.dst, t.o.port, t.hints()); err != nil {
		return cmsync.GAIStatus(t.stdout, "cmatose: getrdmaaddr", err)
	}
	if err := listen.BindAddr(t.ai.Src); err != nil {
		cmsync.Perror(t.stderr, "cmatose: bind address failed", err)
		return cmFailed
	}
	if err := listen.Listen(0); err != nil {
		cmsync.Perror(t.stderr, "cmatose: failure trying to listen", err)
		return cmFailed
	}
	if ret := t.events(ctx, &t.connectsLeft, "connect"); ret != 0 {
		return ret
	}
	if t.o.count > 0 {
		fmt.Fprintf(t.stdout, "initiating data transfers\n")
		for i := range t.nodes {
			if ret := t.postSends(&t.nodes[i]); ret != 0 {
				return ret
			}
		}
		fmt.Fprintf(t.stdout, "completing sends\n")
		if ret := t.pollCQs(ctx, true); ret != 0 {
			return ret
		}
		fmt.Fprintf(t.stdout, "receiving data transfers\n")
		if ret := t.pollCQs(ctx, false); ret != 0 {
			return ret
		}
		fmt.Fprintf(t.stdout, "data transfers complete\n")
	}
	if t.o.migrate {
		if ret := t.migrateChannel(listen); ret != 0 {
			return ret
		}
	}
	fmt.Fprintf(t.stdout, "cmatose: disconnecting\n")
	for i := range t.nodes {
		if n := &t.nodes[i]; n.connected {
			n.connected = false
			n.id.Disconnect()
		}
	}
	ret := t.events(ctx, &t.disconnectsLeft, "disconnect")
	fmt.Fprintf(t.stdout, "disconnected\n")
	return ret
}

func (t *test) runClient(ctx context.Context) int {
	fmt.Fprintf(t.stdout, "cmatose: starting client\n")
	var err error
	if t.ai, err = cmsync.GetRDMAAddr(ctx, t.o.src, t.o.dst, t.o.port, t.hints()); err != nil {
		return cmsync.GAIStatus(t.stdout, "cmatose: getaddrinfo", err)
	}
	fmt.Fprintf(t.stdout, "cmatose: connecting\n")
	for i := range t.nodes {
		if err := t.nodes[i].id.ResolveAddr(t.ai.Src, t.ai.Dst, 2*time.Second); err != nil {
			cmsync.Perror(t.stderr, "cmatose: failure getting addr", err)
			t.connectsLeft--
			return cmFailed
		}
	}
	ret := t.events(ctx, &t.connectsLeft, "connect")
	if ret == 0 {
		ret = t.clientTransfers(ctx)
		if ret == 0 && t.o.migrate {
			if ret = t.migrateChannel(nil); ret != 0 {
				return ret
			}
		}
	}
	if ret2 := t.events(ctx, &t.disconnectsLeft, "disconnect"); ret2 != 0 {
		ret = ret2
	}
	return ret
}

// clientTransfers receives the server's messages and answers them.
func (t *test) clientTransfers(ctx context.Context) int {
	if t.o.count == 0 {
		return 0
	}
	fmt.Fprintf(t.stdout, "receiving data transfers\n")
	if ret := t.pollCQs(ctx, false); ret != 0 {
		return ret
	}
	fmt.Fprintf(t.stdout, "sending replies\n")
	for i := range t.nodes {
		if ret := t.postSends(&t.nodes[i]); ret != 0 {
			return ret
		}
	}
	fmt.Fprintf(t.stdout, "data transfers complete\n")
	return 0
}

// events handles events while *left is above zero (connect_events,
// disconnect_events).
func (t *test) events(ctx context.Context, left *int, what string) int {
	ret := 0
	for *left > 0 && ret == 0 {
		ev, err := t.ch.GetEvent(ctx)
		if err != nil {
			cmsync.Perror(t.stderr, "cmatose: failure in rdma_get_cm_event in "+what+" events", err)
			return cmsync.ErrnoValue(err)
		}
		ret = t.handle(&ev)
	}
	return ret
}

// migrateChannel moves the listener (on the server) and every node's ID
// to a new channel and closes the old one (migrate_channel).
func (t *test) migrateChannel(listen *rdmacm.ID) int {
	fmt.Fprintf(t.stdout, "migrating to new event channel\n")
	ch, err := rdmacm.Open()
	if err != nil {
		cmsync.Perror(t.stderr, "cmatose: failed to create event channel", err)
		return cmFailed
	}
	if listen != nil {
		err = listen.Migrate(ch)
	}
	for i := 0; i < len(t.nodes) && err == nil; i++ {
		if id := t.nodes[i].id; id != nil {
			err = id.Migrate(ch)
		}
	}
	if err != nil {
		cmsync.Perror(t.stderr, "cmatose: failure migrating to channel", err)
		ch.Close()
		return cmFailed
	}
	t.ch.Close()
	t.ch = ch
	return 0
}

// nodeOf is the node of id.
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
				cmsync.Perror(t.stderr, "cmatose: set TOS option failed", err)
			}
		}
		t.setAckTimeout(n.id)
		if err := n.id.ResolveRoute(2 * time.Second); err != nil {
			cmsync.Perror(t.stderr, "cmatose: resolve route failed", err)
			t.connectsLeft--
			return cmFailed
		}
	case rdmacm.EventRouteResolved:
		n := t.nodeOf(ev.ID)
		if n == nil {
			return 0
		}
		if ret := t.initNode(n); ret != 0 {
			t.connectsLeft--
			return ret
		}
		if err := n.id.Connect(&rdmacm.ConnParam{ResponderResources: 1, InitiatorDepth: 1, RetryCount: 5}); err != nil {
			cmsync.Perror(t.stderr, "cmatose: failure connecting", err)
			t.connectsLeft--
			return cmFailed
		}
	case rdmacm.EventConnectRequest:
		return t.connectHandler(ev.ID)
	case rdmacm.EventEstablished:
		if n := t.nodeOf(ev.ID); n != nil {
			n.connected = true
		}
		t.connectsLeft--
		t.disconnectsLeft++
	case rdmacm.EventAddrError, rdmacm.EventRouteError, rdmacm.EventConnectError, rdmacm.EventUnreachable, rdmacm.EventRejected:
		fmt.Fprintf(t.stdout, "cmatose: event: %s, error: %d\n", ev.Type, ev.Status)
		t.connectsLeft--
		return int(ev.Status)
	case rdmacm.EventDisconnected:
		ev.ID.Disconnect()
		t.disconnectsLeft--
	}
	return 0
}

// setAckTimeout sets -a's ACK timeout on id, if given.
func (t *test) setAckTimeout(id *rdmacm.ID) {
	if t.o.setTimeout {
		if err := id.SetAckTimeout(t.o.timeout); err != nil {
			cmsync.Perror(t.stderr, "cmatose: set ack timeout option failed", err)
		}
	}
}

// connectHandler takes a request into the next node, posts its receives
// and accepts it (connect_handler).
func (t *test) connectHandler(id *rdmacm.ID) int {
	fail := func(ret int) int {
		fmt.Fprintf(t.stdout, "cmatose: failing connection request\n")
		id.Reject(nil)
		return ret
	}
	if t.connIndex == len(t.nodes) {
		return fail(-errENOMEM)
	}
	n := &t.nodes[t.connIndex]
	t.connIndex++
	n.id = id
	if ret := t.initNode(n); ret != 0 {
		t.connectsLeft--
		return fail(ret)
	}
	t.setAckTimeout(id)
	if err := id.Accept(nil); err != nil {
		cmsync.Perror(t.stderr, "cmatose: failure accepting", err)
		t.connectsLeft--
		return fail(cmFailed)
	}
	return 0
}

// initNode is init_node and post_recvs: a PD, a send and a receive CQ, an
// RC QP signalling every send, the message buffer and a receive per
// message.
func (t *test) initNode(n *node) int {
	c := n.id.Context()
	var err error
	if n.pd, err = c.AllocPD(); err != nil {
		fmt.Fprintf(t.stdout, "cmatose: unable to allocate PD\n")
		return -errENOMEM
	}
	cqe := max(t.o.count, 1)
	n.sendCQ, err = c.CreateCQ(cqe, nil)
	if err == nil {
		n.recvCQ, err = c.CreateCQ(cqe, nil)
	}
	if err != nil {
		fmt.Fprintf(t.stdout, "cmatose: unable to create CQ\n")
		return -errENOMEM
	}
	n.qp, err = n.id.CreateQP(n.pd, uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: n.sendCQ, RecvCQ: n.recvCQ, SigAll: true,
		Cap: uverbs.QPCap{MaxSendWR: cqe, MaxRecvWR: cqe, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		cmsync.Perror(t.stderr, "cmatose: unable to create QP", err)
		return cmFailed
	}
	if t.o.count == 0 {
		return 0
	}
	n.mem = make([]byte, t.o.size)
	if n.mr, err = n.pd.RegMR(n.mem, uverbs.AccessLocalWrite); err != nil {
		fmt.Fprintf(t.stdout, "failed to reg MR\n")
		fmt.Fprintf(t.stdout, "cmatose: failed to create messages: %d\n", -1)
		return -1
	}
	for range t.o.count {
		if err := n.qp.PostRecv([]uverbs.RecvWR{{SGL: []uverbs.SGE{n.mr.SGE(0, t.o.size)}}}); err != nil {
			fmt.Fprintf(t.stdout, "failed to post receives: %d\n", cmsync.ErrnoValue(err))
			return cmsync.ErrnoValue(err)
		}
	}
	return 0
}

// postSends posts the node's -C messages (post_sends).
func (t *test) postSends(n *node) int {
	if !n.connected || t.o.count == 0 {
		return 0
	}
	wr := []uverbs.SendWR{{Opcode: uverbs.WRSend, SGL: []uverbs.SGE{n.mr.SGE(0, t.o.size)}}}
	for range t.o.count {
		if err := n.qp.PostSend(wr); err != nil {
			fmt.Fprintf(t.stdout, "failed to post sends: %d\n", cmsync.ErrnoValue(err))
			return cmsync.ErrnoValue(err)
		}
	}
	return 0
}

// pollCQs busy-polls each connected node's send or receive CQ for -C
// completions (poll_cqs); ctx bounds the wait (the C tool spins for
// ever).
func (t *test) pollCQs(ctx context.Context, send bool) int {
	var wc [8]uverbs.WC
	for i := range t.nodes {
		n := &t.nodes[i]
		if !n.connected {
			continue
		}
		cq := n.recvCQ
		if send {
			cq = n.sendCQ
		}
		for done := 0; done < t.o.count; {
			if err := ctx.Err(); err != nil {
				fmt.Fprintf(t.stdout, "cmatose: failed polling CQ: %v\n", err)
				return -1
			}
			got, err := cq.Poll(wc[:])
			if err != nil {
				fmt.Fprintf(t.stdout, "cmatose: failed polling CQ: %d\n", -cmsync.ErrnoValue(err))
				return -cmsync.ErrnoValue(err)
			}
			done += got
		}
	}
	return 0
}
