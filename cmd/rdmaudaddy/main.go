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
	"strings"

	"github.com/pureverbs/pureverbs/internal/cmexample"
	"github.com/pureverbs/pureverbs/internal/getopt"
	"github.com/pureverbs/pureverbs/rdmacm"
	"github.com/pureverbs/pureverbs/uverbs"
)

func main() {
	os.Exit(Main(context.Background(), os.Args[0], os.Args[1:], os.Stdout, os.Stderr))
}

// port is udaddy's, fixed.
const port = "7174"

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
type node = cmexample.UDNode

// test is struct cmatest.
type test struct {
	cmexample.Env
	nodes     []node
	connIndex int
}

// allocNodes makes the nodes and, on the client, their IDs.
func (t *test) allocNodes() error {
	if !t.NodesFit(t.O.Connections) {
		return cmexample.ErrNodes
	}
	ids, err := t.NewIDs(t.O.Connections)
	t.nodes = make([]node, len(ids))
	for i, id := range ids {
		t.nodes[i].ID = id
	}
	return err
}

// destroyNodes takes every node down, its ID last.
func (t *test) destroyNodes() {
	for i := range t.nodes {
		t.nodes[i].Destroy()
	}
}

func (t *test) runServer(ctx context.Context) int {
	listen, ret := t.Listen(ctx)
	if listen == nil {
		return ret
	}
	defer listen.Destroy()
	t.ConnectEvents(ctx, t.handle)
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
		ids[i] = t.nodes[i].ID
	}
	if ret := t.Connect(ctx, ids); ret != 0 {
		return ret
	}
	if ret := t.ConnectEvents(ctx, t.handle); ret != 0 {
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

// nodeOf is the node of id.
func (t *test) nodeOf(id *rdmacm.ID) *node {
	for i := range t.nodes {
		if t.nodes[i].ID == id {
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
		return t.AddrResolved(n.ID, nil)
	case rdmacm.EventRouteResolved:
		if ret := t.initNode(n); ret != 0 {
			t.ConnectsLeft--
			return ret
		}
		if err := n.ID.Connect(&rdmacm.ConnParam{}); err != nil {
			t.Perror("failure connecting", err)
			t.ConnectsLeft--
			return cmexample.CMFailed
		}
	case rdmacm.EventEstablished:
		n.RemoteQPN, n.RemoteQKey = ev.UD.QPNum, ev.UD.QKey
		ah, err := n.PD.CreateAH(ev.UD.AH)
		if err != nil {
			t.Printf("udaddy: failure creating address handle\n")
			t.ConnectsLeft--
			return -1
		}
		n.AH, n.Connected = ah, true
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
	n.ID = id
	if ret := t.initNode(n); ret != 0 {
		t.ConnectsLeft--
		return fail(ret)
	}
	if err := id.Accept(&rdmacm.ConnParam{QPNum: n.QP.QPN()}); err != nil {
		t.Perror("failure accepting", err)
		t.ConnectsLeft--
		return fail(cmexample.CMFailed)
	}
	n.Connected = true
	t.ConnectsLeft--
	return 0
}

// initNode is verify_test_params, init_node and post_recvs: the node's
// resources (cmexample.InitUD) and a receive per message.
func (t *test) initNode(n *node) int {
	if ret, _ := t.InitUD(n, 0); ret != 0 || t.O.Count == 0 {
		return ret
	}
	return t.PostRecvs(n.QP, n.MR, t.O.Count)
}

// postSends posts the node's messages, SEND with immediate data (the
// QP's number) to its peer (post_sends).
func (t *test) postSends(n *node, flags uverbs.SendFlags) int {
	if !n.Connected || t.O.Count == 0 {
		return 0
	}
	return t.PostSends(n.QP, []uverbs.SendWR{n.UDSend(t.O.Size, flags)}, t.O.Count)
}

// pollCQs polls each connected node's CQ for -C completions; on the
// server the first receive's completion gives the address handle and QP
// number to answer (poll_cqs, create_reply_ah).
func (t *test) pollCQs(ctx context.Context) int {
	for i := range t.nodes {
		n := &t.nodes[i]
		if !n.Connected {
			continue
		}
		if ret := t.Poll(ctx, n.CQ, t.O.Count, func(wc *uverbs.WC) int {
			if n.AH == nil && !t.replyAH(n, wc) {
				t.Printf("udaddy: failed to create reply AH\n")
				return -1
			}
			return 0
		}); ret != 0 {
			return ret
		}
	}
	return 0
}

// replyAH answers the sender of wc: an address handle from the completion
// and the GRH at the start of the buffer, its QP number from the
// immediate data, and this QP's own Q_Key (create_reply_ah). It reports
// whether all of them were had: C's fails on the AH's creation (an
// error completion carries no GRH flag, and RoCE wants a GRH) and on the
// query.
func (t *test) replyAH(n *node, wc *uverbs.WC) bool {
	ah, err := n.PD.CreateAHFromWC(n.ID.Port(), wc, n.Mem[:cmexample.GRHLen])
	if err != nil {
		return false
	}
	n.AH = ah
	n.RemoteQPN = wc.ImmData
	a, _, err := n.QP.Query(uverbs.QPAttrQKey)
	if err != nil {
		return false
	}
	n.RemoteQKey = a.QKey
	return true
}
