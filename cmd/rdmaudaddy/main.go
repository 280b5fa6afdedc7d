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
// (name, ip; gid is refused: AF_IB), -P port space (udp or ipoib) and -p
// its number (0x111 for UDP, 0x2 for IPoIB).
package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/pureverbs/pureverbs/internal/cmexample"
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

// Main runs the tool as prog with args and returns the exit status: the C
// main's return value (0, -1 for a failed librdmacm call, -22 for a
// message over the MTU, an event's status, a getaddrinfo code) as the
// shell sees it, 1 for a bad command line.
func Main(ctx context.Context, prog string, args []string, stdout, stderr io.Writer) int {
	t := &test{Env: cmexample.Env{Name: "udaddy", Stdout: stdout, Stderr: stderr,
		O: cmexample.Options{Port: port, Connections: 1, Count: 10, Size: 100, PS: rdmacm.PortSpaceUDP}}}
	opts, _, perr := getopt.Parse(args, "s:b:c:C:S:t:p:P:f:", nil)
	for _, op := range opts {
		if t.O.Common(op, stderr) {
			continue
		}
		switch op.Val {
		case 'p':
			t.O.PS = rdmacm.PortSpace(getopt.Strtol(op.Arg))
		case 'P':
			switch a := strings.ToLower(op.Arg); {
			case strings.HasPrefix(a, "ipoib"):
				t.O.PS = rdmacm.PortSpaceIPoIB
			case !strings.HasPrefix(a, "udp"):
				io.WriteString(stderr, "Warning: unknown port space format\n")
			}
		}
	}
	if perr != nil {
		return cmexample.Usage(prog, perr, stdout, stderr, "udp or ipoib", "[-p port_space - 0x111 for UDP (default), 0x2 for IPOIB]")
	}
	return t.Run(ctx, t.allocNodes, t.runClient, t.runServer, t.destroyNodes)
}

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

// test is struct cmatest.
type test struct {
	cmexample.Env
	nodes     []node
	connIndex int
}

// allocNodes makes the nodes and, on the client, their IDs.
func (t *test) allocNodes() error {
	ids, err := t.NewIDs(t.O.Connections)
	t.nodes = make([]node, len(ids))
	for i, id := range ids {
		t.nodes[i].id = id
	}
	return err
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

func (t *test) runServer(ctx context.Context) int {
	listen, ret := t.Listen(ctx)
	if listen == nil {
		return ret
	}
	defer listen.Destroy()
	t.connectEvents(ctx)
	if t.O.Count == 0 {
		return 0
	}
	t.Printf("receiving data transfers\n")
	if ret := t.pollCQs(ctx); ret != 0 {
		return ret
	}
	t.Printf("sending replies\n")
	for i := range t.nodes {
		if ret := t.postSends(&t.nodes[i], uverbs.SendSignaled); ret != 0 {
			return ret
		}
	}
	if ret := t.pollCQs(ctx); ret != 0 {
		return ret
	}
	t.Printf("data transfers complete\n")
	return 0
}

func (t *test) runClient(ctx context.Context) int {
	ids := make([]*rdmacm.ID, len(t.nodes))
	for i := range t.nodes {
		ids[i] = t.nodes[i].id
	}
	if ret := t.Connect(ctx, ids); ret != 0 {
		return ret
	}
	if ret := t.connectEvents(ctx); ret != 0 {
		return ret
	}
	if t.O.Count == 0 {
		return 0
	}
	t.Printf("initiating data transfers\n")
	for i := range t.nodes {
		if ret := t.postSends(&t.nodes[i], 0); ret != 0 {
			return ret
		}
	}
	t.Printf("receiving data transfers\n")
	if ret := t.pollCQs(ctx); ret != 0 {
		return ret
	}
	t.Printf("data transfers complete\n")
	return 0
}

// connectEvents handles events until every connection is made or failed
// (connect_events).
func (t *test) connectEvents(ctx context.Context) int {
	ret := 0
	for t.ConnectsLeft > 0 && ret == 0 {
		ev, err := t.Ch.GetEvent(ctx)
		if err != nil {
			t.Perror("rdma_get_cm_event", err)
			return cmexample.CMFailed
		}
		ret = t.handle(&ev)
	}
	return ret
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
	if cmexample.IsError(ev) {
		return t.EventError(ev)
	}
	switch ev.Type {
	case rdmacm.EventConnectRequest:
		return t.connectHandler(ev.ID)
	}
	n := t.nodeOf(ev.ID)
	if n == nil {
		return 0
	}
	switch ev.Type {
	case rdmacm.EventAddrResolved:
		return t.AddrResolved(n.id, nil)
	case rdmacm.EventRouteResolved:
		if ret := t.initNode(n); ret != 0 {
			t.ConnectsLeft--
			return ret
		}
		if err := n.id.Connect(&rdmacm.ConnParam{}); err != nil {
			t.Perror("failure connecting", err)
			t.ConnectsLeft--
			return cmexample.CMFailed
		}
	case rdmacm.EventEstablished:
		n.remoteQPN, n.remoteQKey = ev.UD.QPNum, ev.UD.QKey
		ah, err := n.pd.CreateAH(ev.UD.AH)
		if err != nil {
			t.Printf("udaddy: failure creating address handle\n")
			t.ConnectsLeft--
			return -1
		}
		n.ah, n.connected = ah, true
		t.ConnectsLeft--
	}
	return 0
}

// connectHandler takes a request into the next node and accepts it with
// the node's QP (connect_handler).
func (t *test) connectHandler(id *rdmacm.ID) int {
	fail := func(ret int) int {
		t.Printf("udaddy: failing connection request\n")
		id.Reject(nil)
		return ret
	}
	if t.connIndex == len(t.nodes) {
		return fail(-cmexample.ENOMEM)
	}
	n := &t.nodes[t.connIndex]
	t.connIndex++
	n.id = id
	if ret := t.initNode(n); ret != 0 {
		t.ConnectsLeft--
		return fail(ret)
	}
	if err := id.Accept(&rdmacm.ConnParam{QPNum: n.qp.QPN()}); err != nil {
		t.Perror("failure accepting", err)
		t.ConnectsLeft--
		return fail(cmexample.CMFailed)
	}
	n.connected = true
	t.ConnectsLeft--
	return 0
}

// initNode is verify_test_params, init_node and post_recvs: the message
// must fit the port's active MTU; a PD, a CQ, a UD QP, the message buffer
// (with room for the GRH) and a receive per message.
func (t *test) initNode(n *node) int {
	c := n.id.Context()
	pa, err := c.QueryPort(n.id.Port())
	if err != nil {
		return cmsync.ErrnoValue(err) // ibv_query_port's return
	}
	if mtu := pa.ActiveMTU.Bytes(); t.O.Count > 0 && t.O.Size > mtu {
		t.Printf("udaddy: message_size %d is larger than active mtu %d\n", t.O.Size, mtu)
		return -22 // -EINVAL
	}
	if n.pd, err = c.AllocPD(); err != nil {
		t.Printf("udaddy: unable to allocate PD\n")
		return -cmexample.ENOMEM
	}
	cqe, wrs := 2, 1
	if t.O.Count > 0 {
		cqe, wrs = 2*t.O.Count, t.O.Count
	}
	if n.cq, err = c.CreateCQ(cqe, nil); err != nil {
		t.Printf("udaddy: unable to create CQ\n")
		return -cmexample.ENOMEM
	}
	n.qp, err = n.id.CreateQP(n.pd, uverbs.QPInitAttr{Type: uverbs.QPTypeUD, SendCQ: n.cq, RecvCQ: n.cq,
		Cap: uverbs.QPCap{MaxSendWR: wrs, MaxRecvWR: wrs, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Perror("unable to create QP", err)
		return cmexample.CMFailed
	}
	if t.O.Count == 0 {
		return 0
	}
	n.mem = make([]byte, t.O.Size+grhLen)
	if n.mr, err = n.pd.RegMR(n.mem, uverbs.AccessLocalWrite); err != nil {
		t.Printf("failed to reg MR\n")
		t.Printf("udaddy: failed to create messages: %d\n", -1)
		return -1
	}
	return t.PostRecvs(n.qp, n.mr, t.O.Count)
}

// postSends posts the node's messages, SEND with immediate data (the
// QP's number) to its peer (post_sends).
func (t *test) postSends(n *node, flags uverbs.SendFlags) int {
	if !n.connected || t.O.Count == 0 {
		return 0
	}
	return t.PostSends(n.qp, []uverbs.SendWR{{Opcode: uverbs.WRSendWithImm, Flags: flags, ImmData: n.qp.QPN(),
		SGL: []uverbs.SGE{n.mr.SGE(0, t.O.Size)}, AH: n.ah, RemoteQPN: n.remoteQPN, RemoteQKey: n.remoteQKey}}, t.O.Count)
}

// pollCQs polls each connected node's CQ for -C completions; on the
// server the first receive's completion gives the address handle and QP
// number to answer (poll_cqs, create_reply_ah).
func (t *test) pollCQs(ctx context.Context) int {
	for i := range t.nodes {
		n := &t.nodes[i]
		if !n.connected {
			continue
		}
		if ret := t.Poll(ctx, n.cq, t.O.Count, func(wc *uverbs.WC) {
			if n.ah == nil {
				t.replyAH(n, wc)
			}
		}); ret != 0 {
			return ret
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
