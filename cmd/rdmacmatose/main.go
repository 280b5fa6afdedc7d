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
	"io"
	"os"
	"strings"

	"github.com/pureverbs/pureverbs/internal/cmexample"
	"github.com/pureverbs/pureverbs/internal/cmsync"
	"github.com/pureverbs/pureverbs/internal/getopt"
	"github.com/pureverbs/pureverbs/rdmacm"
	"github.com/pureverbs/pureverbs/uverbs"
)

func main() {
	os.Exit(Main(context.Background(), os.Args[0], os.Args[1:], os.Stdout, os.Stderr))
}

// Main runs the tool as prog with args and returns the exit status: the C
// main's return value (0, -1 for a failed librdmacm call, an event's
// status, a getaddrinfo code) as the shell sees it, 1 for a bad command
// line.
func Main(ctx context.Context, prog string, args []string, stdout, stderr io.Writer) int {
	t := &test{Env: cmexample.Env{Name: "cmatose", Stdout: stdout, Stderr: stderr,
		O: cmexample.Options{Port: "7471", Connections: 1, Count: 10, Size: 100, PS: rdmacm.PortSpaceTCP}}}
	opts, _, perr := getopt.Parse(args, "s:b:f:P:c:C:S:t:p:a:m", nil)
	for _, op := range opts {
		if t.O.Common(op, stderr) {
			continue
		}
		switch op.Val {
		case 'P':
			switch a := strings.ToLower(op.Arg); {
			case strings.HasPrefix(a, "ib"):
				t.O.PS = rdmacm.PortSpaceIB
			case !strings.HasPrefix(a, "tcp"):
				io.WriteString(stderr, "Warning: unknown port space format\n")
			}
		case 'p':
			t.O.Port = op.Arg
		case 'a':
			t.setTimeout, t.timeout = true, uint8(getopt.Strtoul(op.Arg))
		case 'm':
			t.migrate = true
		}
	}
	if perr != nil {
		return cmexample.Usage(prog, perr, stdout, stderr, "tcp or ib", "[-p port_number]", "[-m(igrate)]", "[-a ack_timeout]")
	}
	return t.Run(ctx, t.allocNodes, t.runClient, t.runServer, t.destroyNodes)
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
	mem       *uverbs.Buffer // outside the heap: a -S too big fails, as malloc does, instead of the runtime
}

// test is struct cmatest and cmatose's own options.
type test struct {
	cmexample.Env
	timeout         uint8
	setTimeout      bool // -a
	migrate         bool // -m
	nodes           []node
	connIndex       int
	disconnectsLeft int
}

// allocNodes makes the nodes and, on the client, their IDs.
func (t *test) allocNodes() error {
	if !t.NodesFit(t.O.Connections) {
		return cmexample.ErrNodes
	}
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
		if n.mem != nil {
			n.mem.Close()
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
	if ret := t.events(ctx, &t.ConnectsLeft, "connect"); ret != 0 {
		return ret
	}
	if t.O.Count != 0 { // "if (message_count)": a server of no nodes keeps a negative -C
		t.Printf("initiating data transfers\n")
		for i := range t.nodes {
			if ret := t.postSends(&t.nodes[i]); ret != 0 {
				return ret
			}
		}
		t.Printf("completing sends\n")
		if ret := t.pollCQs(ctx, true); ret != 0 {
			return ret
		}
		t.Printf("receiving data transfers\n")
		if ret := t.pollCQs(ctx, false); ret != 0 {
			return ret
		}
		t.Printf("data transfers complete\n")
	}
	if t.migrate {
		if ret := t.migrateChannel(listen); ret != 0 {
			return ret
		}
	}
	t.Printf("cmatose: disconnecting\n")
	for i := range t.nodes {
		if n := &t.nodes[i]; n.connected {
			n.connected = false
			n.id.Disconnect()
		}
	}
	ret = t.events(ctx, &t.disconnectsLeft, "disconnect")
	t.Printf("disconnected\n")
	return ret
}

func (t *test) runClient(ctx context.Context) int {
	ids := make([]*rdmacm.ID, len(t.nodes))
	for i := range t.nodes {
		ids[i] = t.nodes[i].id
	}
	if ret := t.Connect(ctx, ids); ret != 0 {
		return ret
	}
	ret := t.events(ctx, &t.ConnectsLeft, "connect")
	if ret == 0 {
		ret = t.clientTransfers(ctx)
		if ret == 0 && t.migrate {
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
	if t.O.Count == 0 {
		return 0
	}
	t.Printf("receiving data transfers\n")
	if ret := t.pollCQs(ctx, false); ret != 0 {
		return ret
	}
	t.Printf("sending replies\n")
	for i := range t.nodes {
		if ret := t.postSends(&t.nodes[i]); ret != 0 {
			return ret
		}
	}
	t.Printf("data transfers complete\n")
	return 0
}

// events handles events while *left is above zero (connect_events,
// disconnect_events).
func (t *test) events(ctx context.Context, left *int, what string) int {
	ret := 0
	for *left > 0 && ret == 0 {
		ev, err := t.Ch.GetEvent(ctx)
		if err != nil {
			t.Perror("failure in rdma_get_cm_event in "+what+" events", err)
			return cmsync.ErrnoValue(err) // errno
		}
		ret = t.handle(&ev)
	}
	return ret
}

// migrateChannel moves the listener (on the server) and every node's ID
// to a new channel and closes the old one (migrate_channel).
func (t *test) migrateChannel(listen *rdmacm.ID) int {
	t.Printf("migrating to new event channel\n")
	ch, err := rdmacm.Open()
	if err != nil {
		t.Perror("failed to create event channel", err)
		return cmexample.CMFailed
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
		t.Perror("failure migrating to channel", err)
		ch.Close()
		return cmexample.CMFailed
	}
	t.Ch.Close()
	t.Ch = ch
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
	if cmexample.IsError(ev) {
		return t.EventError(ev)
	}
	switch ev.Type {
	case rdmacm.EventConnectRequest:
		return t.connectHandler(ev.ID)
	case rdmacm.EventDisconnected:
		ev.ID.Disconnect()
		t.disconnectsLeft--
		return 0
	case rdmacm.EventEstablished:
		if n := t.nodeOf(ev.ID); n != nil {
			n.connected = true
		}
		t.ConnectsLeft--
		t.disconnectsLeft++
		return 0
	}
	n := t.nodeOf(ev.ID)
	if n == nil {
		return 0
	}
	switch ev.Type {
	case rdmacm.EventAddrResolved:
		return t.AddrResolved(n.id, t.setAckTimeout)
	case rdmacm.EventRouteResolved:
		if ret := t.initNode(n); ret != 0 {
			t.ConnectsLeft--
			return ret
		}
		if err := n.id.Connect(&rdmacm.ConnParam{ResponderResources: 1, InitiatorDepth: 1, RetryCount: 5}); err != nil {
			t.Perror("failure connecting", err)
			t.ConnectsLeft--
			return cmexample.CMFailed
		}
	}
	return 0
}

// setAckTimeout sets -a's ACK timeout on id, if given.
func (t *test) setAckTimeout(id *rdmacm.ID) {
	if t.setTimeout {
		if err := id.SetAckTimeout(t.timeout); err != nil {
			t.Perror("set ack timeout option failed", err)
		}
	}
}

// connectHandler takes a request into the next node, posts its receives
// and accepts it (connect_handler).
func (t *test) connectHandler(id *rdmacm.ID) int {
	fail := func(ret int) int {
		t.Printf("cmatose: failing connection request\n")
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
	t.setAckTimeout(id)
	if err := id.Accept(nil); err != nil {
		t.Perror("failure accepting", err)
		t.ConnectsLeft--
		return fail(cmexample.CMFailed)
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
		t.Printf("cmatose: unable to allocate PD\n")
		return -cmexample.ENOMEM
	}
	cqe := t.O.Count // cmatose's "message_count ? message_count : 1": a negative -C fails the CQ
	if cqe == 0 {
		cqe = 1
	}
	n.sendCQ, err = c.CreateCQ(cqe, nil)
	if err == nil {
		n.recvCQ, err = c.CreateCQ(cqe, nil)
	}
	if err != nil {
		t.Printf("cmatose: unable to create CQ\n")
		return -cmexample.ENOMEM
	}
	n.qp, err = n.id.CreateQP(n.pd, uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: n.sendCQ, RecvCQ: n.recvCQ, SigAll: true,
		Cap: uverbs.QPCap{MaxSendWR: cqe, MaxRecvWR: cqe, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Perror("unable to create QP", err)
		return cmexample.CMFailed
	}
	t.ZeroCount()
	if t.O.Count == 0 {
		return 0
	}
	if t.O.Size < 0 { // malloc of the wrapped size_t fails
		t.Printf("failed message allocation\n")
		t.Printf("cmatose: failed to create messages: %d\n", -1)
		return -1
	}
	if n.mem, err = uverbs.AllocBuffer(t.O.Size); err != nil { // -S 2147483647 on a small machine
		t.Printf("failed message allocation\n")
		t.Printf("cmatose: failed to create messages: %d\n", -1)
		return -1
	}
	if n.mr, err = n.pd.RegMR(n.mem.Bytes(), uverbs.AccessLocalWrite); err != nil {
		t.Printf("failed to reg MR\n")
		t.Printf("cmatose: failed to create messages: %d\n", -1)
		return -1
	}
	return t.PostRecvs(n.qp, n.mr, t.O.Count)
}

// postSends posts the node's -C messages (post_sends).
func (t *test) postSends(n *node) int {
	if !n.connected || t.O.Count == 0 {
		return 0
	}
	return t.PostSends(n.qp, []uverbs.SendWR{{Opcode: uverbs.WRSend, SGL: []uverbs.SGE{n.mr.SGE(0, t.O.Size)}}}, t.O.Count)
}

// pollCQs polls each connected node's send or receive CQ for -C
// completions (poll_cqs).
func (t *test) pollCQs(ctx context.Context, send bool) int {
	for i := range t.nodes {
		n := &t.nodes[i]
		if !n.connected {
			continue
		}
		cq := n.recvCQ
		if send {
			cq = n.sendCQ
		}
		if ret := t.Poll(ctx, cq, t.O.Count, nil); ret != 0 {
			return ret
		}
	}
	return 0
}
