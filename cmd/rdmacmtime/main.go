// Command rdmacmtime is librdmacm's cmtime example in Go: it times the
// steps of setting up and tearing down many RDMA CM connections at once.
// The client (-s server) creates -c IDs, binds them (-b), resolves each
// one's address and route, makes its QP (rdma_create_qp with no PD and no
// CQs: the device's default PD, a CQ and completion channel per
// direction), connects, disconnects and destroys them, one step at a time
// for all connections, and prints each step's total time, the slowest
// and fastest connection and the time per connection. The server (no -s)
// listens on port 7471 (-p), makes a QP for each request and accepts it,
// and disconnects and destroys each connection its client ends; it runs
// until it is killed.
//
// It is wire compatible with rdmacm-utils' cmtime in both roles and
// prints what cmtime prints, with the same exit status, so that the two
// can be timed against each other (docs/performance.md, "Connection
// set-up at scale"). It is named rdmacmtime so that the test VM, which
// installs every cmd/ tool in /usr/bin, keeps the C cmtime beside it.
//
// Options as cmtime's: -s server address, -b bind address, -c
// connections (100), -p port (7471), -r retries of a resolution that
// failed and the connection's retry count (2), -t resolution timeout in
// milliseconds (2000).
//
// One difference is deliberate: a server whose set-up fails (an address
// that does not resolve or cannot be bound) prints what cmtime prints and
// exits with its status, where cmtime then dies of SIGSEGV (cleanup_nodes
// walks the client's node array, which a server never allocates).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/pureverbs/pureverbs/internal/cmsync"
	"github.com/pureverbs/pureverbs/internal/getopt"
	"github.com/pureverbs/pureverbs/rdmacm"
	"github.com/pureverbs/pureverbs/uverbs"
)

func main() {
	os.Exit(Main(context.Background(), os.Args[0], os.Args[1:], os.Stdout, os.Stderr))
}

// The steps, in cmtime's order (enum step).
const (
	stepCreateID = iota
	stepBind
	stepResolveAddr
	stepResolveRoute
	stepCreateQP
	stepConnect
	stepDisconnect
	stepDestroy
	stepCnt
)

var stepStr = [stepCnt]string{
	"create id", "bind addr", "resolve addr", "resolve route",
	"create qp", "connect", "disconnect", "destroy",
}

// timeval is a gettimeofday(2) reading: cmtime's clock, to the
// microsecond.
type timeval struct{ sec, usec int64 }

func now() timeval {
	t := time.Now()
	return timeval{t.Unix(), int64(t.Nanosecond() / 1000)}
}

func (t timeval) zero() bool { return t.sec == 0 && t.usec == 0 }

// diffUS is cmtime's diff_us: the difference in microseconds, computed
// in double and returned as a float.
func diffUS(end, start timeval) float32 {
	return float32(float64(end.sec-start.sec)*1000000. + float64(end.usec-start.usec))
}

// node is one connection (struct node).
type node struct {
	id      *rdmacm.ID
	times   [stepCnt][2]timeval
	error   bool
	retries int
}

// tool is cmtime's globals.
type tool struct {
	stdout, stderr io.Writer
	ch             *rdmacm.EventChannel
	src, dst       cmsync.Host
	port           string
	timeout        int
	retries        int
	connections    int
	ai             *rdmacm.AddrInfo
	qpAttr         uverbs.QPInitAttr
	conn           rdmacm.ConnParam

	// mu guards the nodes' times and flags and the counters: the event
	// goroutine and the main one share them, as cmtime's event thread
	// and main thread share its globals. outMu orders the output (C's
	// stdio locks its FILE).
	outMu     sync.Mutex
	mu        sync.Mutex
	nodes     []node
	byID      map[*rdmacm.ID]*node
	times     [stepCnt][2]timeval
	started   [stepCnt]int
	completed [stepCnt]int
	progress  chan struct{} // a step's completion was counted
}

// Main runs the tool as prog with args and returns the exit status:
// cmtime's main's return value as the shell sees it (the last librdmacm
// call's result, a getaddrinfo code), 1 for a bad command line.
func Main(ctx context.Context, prog string, args []string, stdout, stderr io.Writer) int {
	t := &tool{stdout: stdout, stderr: stderr, port: "7471", timeout: 2000, retries: 2, connections: 100,
		byID: map[*rdmacm.ID]*node{}, progress: make(chan struct{}, 1)}
	opts, _, perr := getopt.Parse(args, "s:b:c:p:r:t:", nil)
	for _, op := range opts {
		switch op.Val {
		case 's':
			t.dst = cmsync.SetHost(op.Arg)
		case 'b':
			t.src = cmsync.SetHost(op.Arg)
		case 'c':
			t.connections = int(getopt.Atoi(op.Arg))
		case 'p':
			t.port = op.Arg
		case 'r':
			t.retries = int(getopt.Atoi(op.Arg))
		case 't':
			t.timeout = int(getopt.Atoi(op.Arg))
		}
	}
	if perr != nil {
		fmt.Fprintf(stderr, "%s: %v\n", prog, perr)
		fmt.Fprintf(stdout, "usage: %s\n\t[-s server_address]\n\t[-b bind_address]\n\t[-c connections]\n"+
			"\t[-p port_number]\n\t[-r retries]\n\t[-t timeout_ms]\n", prog)
		return 1
	}
	t.qpAttr = uverbs.QPInitAttr{Type: uverbs.QPTypeRC,
		Cap: uverbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}}
	var err error
	if t.ch, err = cmsync.CreateFirstEventChannel(stderr); err != nil {
		return 1
	}
	var ret int
	if t.dst.Set {
		t.allocNodes()
		ret = t.runClient(ctx)
	} else {
		var crashed bool
		ret, crashed = t.runServer(ctx)
		if crashed {
			// cmtime's cleanup_nodes dereferences the NULL node array
			// here: it prints its line and dies.
			t.printf("destroying id\n")
			t.ch.Close()
			return ret & 0xff
		}
	}
	t.cleanupNodes()
	t.ch.Close()
	t.showPerf()
	return ret & 0xff
}

func (t *tool) printf(format string, args ...any) {
	t.outMu.Lock()
	defer t.outMu.Unlock()
	fmt.Fprintf(t.stdout, format, args...)
}

// perror prints perror(3)'s line for a failed librdmacm call.
func (t *tool) perror(what string, err error) {
	t.outMu.Lock()
	defer t.outMu.Unlock()
	cmsync.Perror(t.stderr, what, err)
}

// allocNodes is alloc_nodes: the nodes and, on a client, their IDs.
// calloc refuses a negative count (connections is an int), and then
// nothing is printed or timed; a failed create destroys the IDs made so
// far and leaves no node, where cmtime goes on with the freed array.
func (t *tool) allocNodes() {
	if t.connections < 0 {
		return
	}
	t.nodes = make([]node, t.connections)
	t.printf("creating id\n")
	t.times[stepCreateID][0] = now()
	for i := range t.nodes {
		n := &t.nodes[i]
		n.times[stepCreateID][0] = now()
		id, err := t.ch.CreateID(rdmacm.PortSpaceTCP)
		if err != nil {
			for j := i - 1; j >= 0; j-- {
				t.nodes[j].id.Destroy()
			}
			t.nodes = nil
			t.byID = map[*rdmacm.ID]*node{}
			return
		}
		n.id = id
		t.mu.Lock()
		t.byID[id] = n
		t.mu.Unlock()
		n.times[stepCreateID][1] = now()
	}
	t.times[stepCreateID][1] = now()
}

// cleanupNodes is cleanup_nodes: every ID destroyed, timed.
func (t *tool) cleanupNodes() {
	t.printf("destroying id\n")
	t.times[stepDestroy][0] = now()
	for i := range t.nodes {
		n := &t.nodes[i]
		n.times[stepDestroy][0] = now()
		if n.id != nil {
			n.id.Destroy()
		}
		n.times[stepDestroy][1] = now()
	}
	t.times[stepDestroy][1] = now()
}

// showPerf is show_perf, with cmtime's float arithmetic and glibc's
// printing of it (inf, -nan), so that the same times print alike.
func (t *tool) showPerf() {
	var hi, lo [stepCnt]float32
	for i := range stepCnt {
		hi[i] = 0
		lo[i] = 999999999.
		for c := range t.nodes {
			tv := t.nodes[c].times[i]
			if !tv[0].zero() && !tv[1].zero() {
				us := diffUS(tv[1], tv[0])
				if us > hi[i] {
					hi[i] = us
				}
				if us < lo[i] {
					lo[i] = us
				}
			}
		}
	}
	t.printf("step              total ms     max ms     min us  us / conn\n")
	conns := float32(t.connections)
	for i := range stepCnt {
		if i == stepBind && !t.src.Set {
			continue
		}
		us := diffUS(t.times[i][1], t.times[i][0])
		perConn := us / conns
		t.printf("%-13s: %s%s%s%s\n", stepStr[i], cFloat(float64(us)/1000.), cFloat(float64(hi[i])/1000.),
			cFloat(float64(lo[i])), cFloat(float64(perConn)))
	}
}

// cFloat is glibc's printf("%11.2f", v), whose infinities and NaNs are
// "inf", "-inf", "nan" and "-nan" (the sign of a NaN shows).
func cFloat(v float64) string {
	var s string
	switch {
	case math.IsNaN(v):
		s = "nan"
		if math.Signbit(v) {
			s = "-nan"
		}
	case math.IsInf(v, 1):
		s = "inf"
	case math.IsInf(v, -1):
		s = "-inf"
	default:
		s = strconv.FormatFloat(v, 'f', 2, 64)
	}
	return fmt.Sprintf("%11s", s)
}

// complete counts a completion of step s for n, as the handlers do.
func (t *tool) complete(n *node, s int) {
	n.times[s][1] = now()
	t.completed[s]++
	select {
	case t.progress <- struct{}{}:
	default:
	}
}

// wait is cmtime's busy wait for a step's completions (started ==
// completed), parked instead of spinning; ctx bounds it.
func (t *tool) wait(ctx context.Context, s int) error {
	for {
		t.mu.Lock()
		done := t.started[s] == t.completed[s]
		t.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-t.progress:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// errno is a failed librdmacm call's return value (-1), 0 for success.
func errno(err error) int {
	if err != nil {
		return -1
	}
	return 0
}

// handle is cma_handler for one event.
func (t *tool) handle(ev *rdmacm.Event, req, disc *workList) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.byID[ev.ID]
	timeout := time.Duration(t.timeout) * time.Millisecond
	switch ev.Type {
	case rdmacm.EventAddrResolved:
		if n != nil {
			t.complete(n, stepResolveAddr)
		}
	case rdmacm.EventRouteResolved:
		if n != nil {
			t.complete(n, stepResolveRoute)
		}
	case rdmacm.EventConnectRequest:
		if req != nil {
			req.add(ev.ID)
		}
	case rdmacm.EventEstablished:
		if n != nil {
			t.complete(n, stepConnect)
		}
	case rdmacm.EventAddrError:
		if n == nil {
			return
		}
		if n.retries != 0 {
			n.retries--
			if n.id.ResolveAddr(t.ai.Src, t.ai.Dst, timeout) == nil {
				return
			}
		} else {
			n.retries--
		}
		t.printf("RDMA_CM_EVENT_ADDR_ERROR, error: %d\n", ev.Status)
		t.complete(n, stepResolveAddr)
		n.error = true
	case rdmacm.EventRouteError:
		if n == nil {
			return
		}
		if n.retries != 0 {
			n.retries--
			if n.id.ResolveRoute(timeout) == nil {
				return
			}
		} else {
			n.retries--
		}
		t.printf("RDMA_CM_EVENT_ROUTE_ERROR, error: %d\n", ev.Status)
		t.complete(n, stepResolveRoute)
		n.error = true
	case rdmacm.EventConnectError, rdmacm.EventUnreachable, rdmacm.EventRejected:
		if n == nil {
			return
		}
		t.printf("event: %s, error: %d\n", ev.Type, ev.Status)
		t.complete(n, stepConnect)
		n.error = true
	case rdmacm.EventDisconnected:
		if n == nil {
			if disc != nil {
				disc.add(ev.ID)
			}
		} else {
			t.complete(n, stepDisconnect)
		}
	}
}

// processEvents is process_events: every event handled until the
// channel fails. A client's channel closes under it at the end (where
// cmtime's thread dies with the process), a server's when ctx ends:
// neither is reported.
func (t *tool) processEvents(ctx context.Context, req, disc *workList) {
	var ev rdmacm.Event
	for {
		if err := t.ch.GetEventInto(ctx, &ev); err != nil {
			if !errors.Is(err, rdmacm.ErrClosed) && ctx.Err() == nil {
				t.perror("failure in rdma_get_cm_event in process_server_events", err)
			}
			return
		}
		t.handle(&ev, req, disc)
	}
}

// workList is cmtime's work_list: IDs queued by the event goroutine for
// a worker, in order.
type workList struct {
	mu    sync.Mutex
	ids   []*rdmacm.ID
	ready chan struct{}
}

func newWorkList() *workList { return &workList{ready: make(chan struct{}, 1)} }

func (w *workList) add(id *rdmacm.ID) {
	w.mu.Lock()
	w.ids = append(w.ids, id)
	w.mu.Unlock()
	select {
	case w.ready <- struct{}{}:
	default:
	}
}

// run hands each queued ID to f, in order, until ctx ends.
func (w *workList) run(ctx context.Context, f func(*rdmacm.ID)) {
	for {
		w.mu.Lock()
		var id *rdmacm.ID
		if len(w.ids) > 0 {
			id = w.ids[0]
			w.ids[0] = nil
			w.ids = w.ids[1:]
		}
		w.mu.Unlock()
		if id != nil {
			f(id)
			continue
		}
		select {
		case <-w.ready:
		case <-ctx.Done():
			return
		}
	}
}

// runServer is run_server; crashed reports that cmtime would die in
// cleanup_nodes after it returned (it walks the node array a server
// never allocates).
func (t *tool) runServer(ctx context.Context) (ret int, crashed bool) {
	crashed = t.connections > 0
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, disc := newWorkList(), newWorkList()
	var workers sync.WaitGroup
	workers.Add(2)
	go func() {
		defer workers.Done()
		req.run(ctx, t.acceptRequest)
	}()
	go func() {
		defer workers.Done()
		disc.run(ctx, func(id *rdmacm.ID) {
			id.Disconnect()
			id.DestroyQP(ctx)
			id.Destroy()
		})
	}()
	defer workers.Wait()
	defer cancel()

	listen, err := t.ch.CreateID(rdmacm.PortSpaceTCP)
	if err != nil {
		t.perror("listen request failed", err)
		return -1, crashed
	}
	defer listen.Destroy()
	hints := rdmacm.AddrInfo{Flags: rdmacm.AIPassive, PortSpace: rdmacm.PortSpaceTCP, QPType: uverbs.QPTypeRC}
	if t.ai, err = cmsync.GetRDMAAddr(ctx, t.src, t.dst, t.port, &hints); err != nil {
		return cmsync.GAIStatus(t.stdout, "getrdmaaddr", err), crashed
	}
	if err := listen.BindAddr(t.ai.Src); err != nil {
		t.perror("bind address failed", err)
		return -1, crashed
	}
	if err := listen.Listen(0); err != nil {
		t.perror("failure trying to listen", err)
		return -1, crashed
	}
	t.processEvents(ctx, req, disc)
	if ctx.Err() != nil {
		return 0, false // stopped: the in-process run's end, not cmtime's
	}
	return 0, crashed
}

// acceptRequest is __req_handler: a QP in the default PD with CQs of its
// own, and the accept; a failure rejects and destroys the request.
func (t *tool) acceptRequest(id *rdmacm.ID) {
	if err := t.createQP(id); err != nil {
		t.perror("failure creating qp", err)
	} else if err := id.Accept(nil); err != nil {
		t.perror("failure accepting", err)
		id.DestroyQP(context.Background())
	} else {
		return
	}
	t.printf("failing connection request\n")
	id.Reject(nil)
	id.Destroy()
}

// createQP is cmtime's rdma_create_qp(id, NULL, &init_qp_attr), which
// writes the QP's attributes back into the shared init_qp_attr: its CQs
// (made for the first QP, as it named none) and capabilities. So every
// later QP of the process shares the first one's CQs, and only the first
// DestroyQP tries to destroy them (the kernel refuses while other QPs
// use them, and they stay, as in cmtime). Called by one goroutine at a
// time (the client's main one, the server's request worker).
func (t *tool) createQP(id *rdmacm.ID) error {
	qp, err := id.CreateQP(nil, t.qpAttr)
	if err != nil {
		return err
	}
	t.qpAttr.SendCQ, t.qpAttr.RecvCQ, t.qpAttr.Cap = qp.SendCQ(), qp.RecvCQ(), qp.Cap()
	return nil
}

// runClient is run_client.
func (t *tool) runClient(ctx context.Context) int {
	hints := rdmacm.AddrInfo{PortSpace: rdmacm.PortSpaceTCP, QPType: uverbs.QPTypeRC}
	var err error
	if t.ai, err = cmsync.GetRDMAAddr(ctx, t.src, t.dst, t.port, &hints); err != nil {
		return cmsync.GAIStatus(t.stdout, "getaddrinfo", err)
	}
	t.conn = rdmacm.ConnParam{ResponderResources: 1, InitiatorDepth: 1, RetryCount: uint8(t.retries)}

	evctx, stop := context.WithCancel(ctx)
	var events sync.WaitGroup
	events.Add(1)
	go func() {
		defer events.Done()
		t.processEvents(evctx, nil, nil)
	}()
	defer events.Wait()
	defer stop()

	var ret int
	timeout := time.Duration(t.timeout) * time.Millisecond
	// each runs one step's call on every node still without error.
	each := func(s int, async bool, call func(n *node) error, failure string) error {
		t.mu.Lock()
		t.times[s][0] = now()
		t.mu.Unlock()
		for i := range t.nodes {
			n := &t.nodes[i]
			t.mu.Lock()
			skip := n.error
			if !skip {
				n.retries = t.retries
				n.times[s][0] = now()
			}
			t.mu.Unlock()
			if skip {
				continue
			}
			err := call(n)
			ret = errno(err)
			t.mu.Lock()
			switch {
			case err != nil:
				t.perror(failure, err)
				n.error = true
			case async:
				t.started[s]++
			default:
				n.times[s][1] = now()
			}
			t.mu.Unlock()
		}
		var werr error
		if async {
			werr = t.wait(ctx, s)
		}
		t.mu.Lock()
		t.times[s][1] = now()
		t.mu.Unlock()
		return werr
	}

	if t.src.Set {
		t.printf("binding source address\n")
		each(stepBind, false, func(n *node) error { return n.id.BindAddr(t.ai.Src) }, "failure bind addr")
	}
	t.printf("resolving address\n")
	if err := each(stepResolveAddr, true, func(n *node) error { return n.id.ResolveAddr(t.ai.Src, t.ai.Dst, timeout) }, "failure getting addr"); err != nil {
		return t.stopped(err)
	}
	t.printf("resolving route\n")
	if err := each(stepResolveRoute, true, func(n *node) error { return n.id.ResolveRoute(timeout) }, "failure resolving route"); err != nil {
		return t.stopped(err)
	}
	t.printf("creating qp\n")
	each(stepCreateQP, false, func(n *node) error { return t.createQP(n.id) }, "failure creating qp")
	t.printf("connecting\n")
	if err := each(stepConnect, true, func(n *node) error { return n.id.Connect(&t.conn) }, "failure rconnecting"); err != nil {
		return t.stopped(err)
	}
	t.printf("disconnecting\n")
	saved := ret // cmtime does not look at these calls' results
	if err := each(stepDisconnect, true, func(n *node) error {
		n.id.Disconnect()
		n.id.DestroyQP(ctx)
		return nil
	}, ""); err != nil {
		return t.stopped(err)
	}
	return saved
}

// stopped is the status of a client whose ctx ended while it waited for
// a step's events (cmtime would wait for ever): -1, with the reason.
func (t *tool) stopped(err error) int {
	t.outMu.Lock()
	defer t.outMu.Unlock()
	fmt.Fprintf(t.stderr, "cmtime: %v\n", err)
	return -1
}
