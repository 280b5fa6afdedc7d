// Command rdmamckey is librdmacm's mckey example in Go: -c UD IDs join
// the IP multicast group -m through the RDMA CM; a sender (-s) posts -C
// messages of -S bytes to the group (SEND with immediate data, not
// signalled), a receiver waits for -C completions on each joined ID. It
// talks to rdmacm-utils' mckey in both roles and prints what mckey
// prints, with the same exit status. It is named rdmamckey so that the
// test VM, which installs every cmd/ tool in /usr/bin, keeps the C mckey
// beside it.
//
// Options as mckey's: -m group address, -s sender, -b bind address, -c
// IDs, -C message count, -S message size, -p port space (0x111 for UDP,
// the default; 0x2 for IPoIB), -o join as a send-only full member, -l
// block the QP's own multicast (IBV_QP_CREATE_BLOCK_SELF_MCAST_LB, which
// rxe lacks, as with mckey), -M a group given as a GID (an AF_IB
// address; the kernel has no AF_IB groups on RoCE, so on rxe the join
// fails as mckey's does).
//
// As mckey does, it pauses three seconds between the joins and the
// transfer (for a subnet manager to program the switches), and the
// receiver busy-polls until every message arrived. Unlike mckey, the
// sender signals each ID's last message and waits for its completion
// before it leaves the group and destroys its QP: mckey leaves as soon as
// it has posted, and on 6.12, where rxe sends from a work queue, its QP
// is gone before its messages leave, so no receiver gets them.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/pureverbs/pureverbs/internal/cmexample"
	"github.com/pureverbs/pureverbs/internal/cmsync"
	"github.com/pureverbs/pureverbs/internal/getopt"
	"github.com/pureverbs/pureverbs/rdmacm"
	"github.com/pureverbs/pureverbs/uverbs"
)

func main() {
	os.Exit(Main(context.Background(), os.Args[0], os.Args[1:], os.Stdout, os.Stderr))
}

// pause is mckey's sleep(3) between the joins and the transfer.
var pause = 3 * time.Second

// eaddrnotavail is what rdma_leave_multicast sets for a group the ID
// never joined.
const eaddrnotavail = "Cannot assign requested address"

// Main runs the tool as prog with args and returns the exit status: the C
// main's return value (0, -1 for a failed librdmacm call, an event's
// status, a getaddrinfo code) as the shell sees it, 1 for a bad command
// line or IDs that cannot be made.
func Main(ctx context.Context, prog string, args []string, stdout, stderr io.Writer) int {
	out := &lockedWriter{w: stdout} // the event goroutine prints too
	t := &test{Env: cmexample.Env{Name: "mckey", Stdout: out, Stderr: stderr,
		O: cmexample.Options{Connections: 1, Count: 10, Size: 100, PS: rdmacm.PortSpaceUDP}}}
	opts, _, perr := getopt.Parse(args, "m:M:sb:c:C:S:p:ol", nil)
	for _, op := range opts {
		switch op.Val {
		case 'm':
			t.O.Dst = cmsync.SetHost(op.Arg)
		case 'M':
			t.unmapped, t.O.Dst = true, cmsync.SetHost(op.Arg)
		case 's':
			t.sender = true
		case 'b':
			t.O.Src = cmsync.SetHost(op.Arg)
		case 'c':
			t.O.Connections = int(getopt.Atoi(op.Arg))
		case 'C':
			t.O.Count = int(getopt.Atoi(op.Arg))
		case 'S':
			t.O.Size = int(getopt.Atoi(op.Arg))
		case 'p':
			t.O.PS = rdmacm.PortSpace(getopt.Strtol(op.Arg))
		case 'o':
			t.sendOnly = true
		case 'l':
			t.noLoopback = true
		}
	}
	if perr != nil {
		fmt.Fprintf(stderr, "%s: %v\n", prog, perr)
		fmt.Fprintf(out, "usage: %s\n\t-m multicast_address\n\t[-M unmapped_multicast_address]\n"+
			"\t replaces -m and requires -b\n\t[-s(ender)]\n\t[-b bind_address]\n\t[-c connections]\n"+
			"\t[-C message_count]\n\t[-S message_size]\n\t[-p port_space - 0x111 for UDP (default), 0x2 for IPOIB]\n"+
			"\t[-o join as a send-only full-member]\n\t[-l join without multicast loopback]\n", prog)
		return 1
	}
	if t.unmapped && !t.O.Src.Set {
		t.Printf("unmapped multicast address requires binding to source address\n")
		return 1
	}
	t.ConnectsLeft = t.O.Connections
	var err error
	if t.Ch, err = cmsync.CreateFirstEventChannel(stderr); err != nil {
		return 1
	}
	if !t.NodesFit(t.O.Connections) {
		t.Ch.Close()
		return 1
	}
	t.nodes = make([]node, t.O.Connections)
	for i := range t.nodes {
		if t.nodes[i].ID, err = t.Ch.CreateID(t.O.PS); err != nil {
			t.destroyNodes()
			t.Ch.Close()
			return 1
		}
	}
	ret := t.run(ctx)
	t.Printf("test complete\n")
	t.destroyNodes()
	t.Ch.Close()
	t.Printf("return status %d\n", ret)
	return ret & 0xff
}

// lockedWriter serialises the lines of the main and event goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// node is one ID (struct cmatest_node) and its join, once asked for
// (librdmacm's mc_list).
type node struct {
	cmexample.UDNode
	mc *rdmacm.Multicast
}

// test is struct cmatest with mckey's options.
type test struct {
	cmexample.Env
	nodes                []node
	unmapped, sender     bool
	sendOnly, noLoopback bool
	src, dst             netip.Addr
	mgid                 uverbs.GID // -M's
	lastErr              error      // errno's stand-in for perror after addr_handler
}

// destroyNodes takes every node down, its ID last (destroy_node).
func (t *test) destroyNodes() {
	for i := range t.nodes {
		t.nodes[i].Destroy()
	}
}

// getAddr is mckey's get_addr: getaddrinfo(3) of a host with no service
// and no hints, its line on a failure and getaddrinfo's code. An empty
// host (no option, or "") fails with EAI_NONAME, as getaddrinfo fails
// for it with no service (and GetAddrInfo fails "*" so).
func (t *test) getAddr(ctx context.Context, host string) (netip.Addr, int) {
	var ai *rdmacm.AddrInfo
	err := error(&rdmacm.GAIError{Code: rdmacm.EAINoName}) // getaddrinfo(NULL, NULL) fails so
	if host != "" {
		ai, err = rdmacm.GetAddrInfo(ctx, host, "", nil)
	}
	if err != nil {
		var ge *rdmacm.GAIError
		if !errors.As(err, &ge) {
			ge = &rdmacm.GAIError{Code: rdmacm.EAIFail}
		}
		t.Printf("getaddrinfo failed (%s) - invalid hostname or IP address\n", ge.Reason())
		return netip.Addr{}, ge.Code
	}
	return ai.Dst.Addr(), 0
}

// run is mckey's run: the addresses, the joins, the pause, the transfer,
// and the leaves, whose result is the run's status.
func (t *test) run(ctx context.Context) int {
	role := "server"
	if t.sender {
		role = "client"
	}
	t.Printf("mckey: starting %s\n", role)
	var ret int
	if t.O.Src.Set {
		if t.src, ret = t.getAddr(ctx, t.O.Src.Name); ret != 0 {
			return ret
		}
	}
	if t.unmapped {
		// get_dst_addr: inet_pton(AF_INET6) into a zeroed sockaddr_ib,
		// unchecked.
		if a, err := netip.ParseAddr(t.O.Dst.Name); err == nil && a.Is6() && a.Zone() == "" {
			t.mgid = a.As16()
		}
	} else if t.dst, ret = t.getAddr(ctx, t.O.Dst.Name); ret != 0 {
		return ret
	}
	t.Printf("mckey: joining\n")
	for i := range t.nodes {
		id := t.nodes[i].ID
		if t.src.IsValid() {
			if err := id.BindAddr(netip.AddrPortFrom(t.src, 0)); err != nil {
				t.Perror("addr bind failure", err)
				t.ConnectsLeft--
				return cmexample.CMFailed
			}
		}
		if t.unmapped {
			// Bound (-M needs -b): no resolution, the join at once.
			if ret := t.addrHandler(&t.nodes[i]); ret != 0 {
				t.perrorLast("resolve addr failure")
				t.ConnectsLeft--
				return ret
			}
			continue
		}
		var src netip.AddrPort
		if t.src.IsValid() {
			src = netip.AddrPortFrom(t.src, 0)
		}
		if err := id.ResolveAddr(src, netip.AddrPortFrom(t.dst, 0), 2000*time.Millisecond); err != nil {
			t.Perror("resolve addr failure", err)
			t.ConnectsLeft--
			return cmexample.CMFailed
		}
	}
	ret = t.ConnectEvents(ctx, t.handle)
	if ret == 0 {
		ret = t.transfer(ctx)
	}
	for i := range t.nodes {
		ret = t.leave(&t.nodes[i])
	}
	return ret
}

// transfer is run's middle: the event goroutine (cma_thread) while the
// group settles for three seconds and the messages go or come.
func (t *test) transfer(ctx context.Context) int {
	ectx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go t.watch(ectx, done)
	defer func() { stop(); <-done }()
	timer := time.NewTimer(pause)
	select {
	case <-ctx.Done():
		timer.Stop()
		return -1
	case <-timer.C:
	}
	if t.O.Count == 0 {
		return 0
	}
	if t.sender {
		t.Printf("initiating data transfers\n")
		for i := range t.nodes {
			if ret := t.postSends(&t.nodes[i]); ret != 0 {
				return ret
			}
		}
		for i := range t.nodes {
			// The last message's completion: every message has left.
			if n := &t.nodes[i]; n.Connected {
				if ret := t.Poll(ctx, n.CQ, 1, nil); ret != 0 {
					return ret
				}
			}
		}
	} else {
		t.Printf("receiving data transfers\n")
		for i := range t.nodes {
			if n := &t.nodes[i]; n.Connected {
				if ret := t.Poll(ctx, n.CQ, t.O.Count, nil); ret != 0 {
					return ret
				}
			}
		}
	}
	t.Printf("data transfers complete\n")
	return 0
}

// watch reports the events that come after the joins, as mckey's
// cma_thread does, until ctx ends.
func (t *test) watch(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	for {
		ev, err := t.Ch.GetEvent(ctx)
		if err != nil {
			if ctx.Err() == nil {
				cmsync.Perror(t.Stderr, "rdma_get_cm_event", err)
			}
			return
		}
		switch ev.Type {
		case rdmacm.EventMulticastError, rdmacm.EventAddrChange:
			t.Printf("mckey: event: %s, status: %d\n", ev.Type, ev.Status)
		}
	}
}

// perrorLast is perror(what) with the errno of the last failure (glibc's
// "Success" when none set it).
func (t *test) perrorLast(what string) {
	if _, ok := cmsync.Errno(t.lastErr); !ok {
		fmt.Fprintf(t.Stderr, "mckey: %s: Success\n", what)
		return
	}
	t.Perror(what, t.lastErr)
}

// leave is rdma_leave_multicast of the group: -1 with perror's line when
// it fails, EADDRNOTAVAIL for an ID that never asked to join.
func (t *test) leave(n *node) int {
	if n.mc == nil {
		fmt.Fprintf(t.Stderr, "mckey: failure leaving: %s\n", eaddrnotavail)
		return cmexample.CMFailed
	}
	mc := n.mc
	n.mc = nil
	if err := mc.Leave(); err != nil {
		t.Perror("failure leaving", err)
		return cmexample.CMFailed
	}
	return 0
}

// handle is cma_handler.
func (t *test) handle(ev *rdmacm.Event) int {
	var n *node
	for i := range t.nodes {
		if t.nodes[i].ID == ev.ID {
			n = &t.nodes[i]
		}
	}
	switch ev.Type {
	case rdmacm.EventAddrResolved:
		if n != nil {
			return t.addrHandler(n)
		}
	case rdmacm.EventMulticastJoin:
		if n != nil {
			return t.joinHandler(n, &ev.UD)
		}
	case rdmacm.EventAddrError, rdmacm.EventRouteError, rdmacm.EventMulticastError:
		t.Printf("mckey: event: %s, error: %d\n", ev.Type, ev.Status)
		t.ConnectsLeft--
		return int(ev.Status)
	}
	return 0
}

// addrHandler checks the message size against the port's MTU, makes the
// node's resources, posts the receiver's receives and joins the group
// (addr_handler); a failure counts the node as done.
func (t *test) addrHandler(n *node) int {
	ret := t.initNode(n)
	if ret == 0 && !t.sender {
		ret = t.PostRecvs(n.QP, n.MR, t.O.Count)
	}
	if ret == 0 {
		var err error
		if t.unmapped {
			n.mc, err = n.ID.JoinMulticastGID(t.mgid, t.sendOnly)
		} else {
			n.mc, err = n.ID.JoinMulticast(t.dst, t.sendOnly)
		}
		if err != nil {
			t.Perror("failure joining", err)
			t.lastErr, ret = err, cmexample.CMFailed
		}
	}
	if ret != 0 {
		t.ConnectsLeft--
	}
	return ret
}

// initNode is verify_test_params, init_node and create_message
// (cmexample.InitUD), with -l's create flag.
func (t *test) initNode(n *node) int {
	var flags uverbs.QPCreateFlags
	if t.noLoopback {
		flags = uverbs.QPCreateBlockSelfMcastLB
	}
	ret, err := t.InitUD(&n.UDNode, flags)
	if err != nil {
		t.lastErr = err
	}
	return ret
}

// joinHandler takes the group's address vector, QP number and Q_Key
// from the join (join_handler).
func (t *test) joinHandler(n *node, ud *rdmacm.UDParam) int {
	t.Printf("mckey: joined dgid: %s mlid 0x%x sl %d\n", ud.AH.DGID.InetNtop(), ud.AH.DLID, ud.AH.SL)
	n.RemoteQPN, n.RemoteQKey = ud.QPNum, ud.QKey
	ah, err := n.PD.CreateAH(ud.AH)
	if err != nil {
		t.Printf("mckey: failure creating address handle\n")
		t.ConnectsLeft--
		return -1
	}
	n.AH, n.Connected = ah, true
	t.ConnectsLeft--
	return 0
}

// postSends posts the node's messages to the group, SEND with immediate
// data (the QP's number), the last one signalled (post_sends signals
// none).
func (t *test) postSends(n *node) int {
	if !n.Connected || t.O.Count == 0 {
		return 0
	}
	if ret := t.PostSends(n.QP, []uverbs.SendWR{n.UDSend(t.O.Size, 0)}, t.O.Count-1); ret != 0 {
		return ret
	}
	return t.PostSends(n.QP, []uverbs.SendWR{n.UDSend(t.O.Size, uverbs.SendSignaled)}, 1)
}
