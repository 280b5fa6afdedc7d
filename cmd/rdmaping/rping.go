package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/pureverbs/pureverbs/internal/memlock"
	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/rdmacm"
	"github.com/pureverbs/pureverbs/uverbs"
)

// Constants of rping.c.
const (
	sqDepth        = 16              // RPING_SQ_DEPTH: send queue; the CQ has twice as many entries
	rqDepth        = 2               // receives the QP can hold (one is posted at a time)
	resolveTimeout = 2 * time.Second // rdma_resolve_addr and rdma_resolve_route
	listenBacklog  = 3
	enomem         = 12
)

// How long the teardown waits: for the flushed receive that ends the
// completion goroutine after a disconnect (as the C tool's pthread_join
// of its cq thread does, but bounded), and for the verbs objects'
// destruction.
const (
	flushWait    = 10 * time.Second
	destroyWaits = 10 * time.Second
)

// state is rping's enum test_state, with its values: the C tool prints
// them ("wait for RDMA_WRITE_ADV state 10").
type state int32

const (
	stIdle state = iota + 1
	stConnectRequest
	stAddrResolved
	stRouteResolved
	stConnected
	stReadAdv
	stReadComplete
	stWriteAdv
	stWriteComplete
	stDisconnected
	stError
)

// semaphore counts posts as sem_t does: the CM and completion goroutines
// post each step, the protocol's goroutine waits for them one by one. A
// step that happened before the wait is not lost (the server's first
// receive may complete before its ESTABLISHED event). One waiter at a
// time.
type semaphore struct {
	mu   sync.Mutex
	n    int
	wake chan struct{}
}

func newSemaphore() *semaphore { return &semaphore{wake: make(chan struct{}, 1)} }

func (s *semaphore) post() {
	s.mu.Lock()
	s.n++
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *semaphore) wait(ctx context.Context) error {
	for {
		s.mu.Lock()
		if s.n > 0 {
			s.n--
			s.mu.Unlock()
			return nil
		}
		s.mu.Unlock()
		select {
		case <-s.wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// output serialises the lines of all goroutines on the two streams.
// Once the run has ended on a fatal CM event (where the C tool's cm
// thread calls exit), mute drops what the other goroutines would still
// print and the C tool never does.
type output struct {
	mu   sync.Mutex
	mute atomic.Bool
}

type lineWriter struct {
	o     *output
	w     io.Writer
	muted bool // obeys mute
}

func (l lineWriter) Write(p []byte) (int, error) {
	if l.muted && l.o.mute.Load() {
		return len(p), nil
	}
	l.o.mu.Lock()
	defer l.o.mu.Unlock()
	return l.w.Write(p)
}

// errFatal ends a wait when a CM event ended the run.
var errFatal = errors.New("the run ended on a connection manager event")

// runner is one run of the tool: the event channel, the parent ID (the
// client's, or the server's listener) and the sessions its events go to.
type runner struct {
	o      options
	out    *output
	stdout io.Writer // muted after a fatal event
	stderr io.Writer // muted after a fatal event
	teardn io.Writer // stderr, never muted: teardown failures

	ctx    context.Context // ends on a fatal event (or the caller's end)
	cancel context.CancelFunc
	fatal  atomic.Int32 // exit status of the fatal event, 0 for none
	// mainLast: the fatal event was the client's failed resolution or
	// connection (dieAfterMain), and the main goroutine prints its failed
	// wait before the run ends.
	mainLast atomic.Bool

	ch   *rdmacm.EventChannel
	cmID *rdmacm.ID // "parent"
	root *session   // the client's, or the listener's

	cmDone chan struct{} // closed when the CM goroutine has returned

	mu       sync.Mutex
	sessions map[*rdmacm.ID]*session // connection IDs to their session
	conns    sync.WaitGroup          // persistent server: one goroutine per connection (added by the CM goroutine)
}

func (r *runner) debugf(format string, a ...any) {
	if r.o.debug {
		fmt.Fprintf(r.stdout, format, a...)
	}
}

func (r *runner) errf(format string, a ...any) { fmt.Fprintf(r.stderr, format, a...) }

// detail prints the library's error under a C message that has none.
func (r *runner) detail(err error) {
	if err != nil {
		fmt.Fprintf(r.stderr, "  (%v)\n", err)
	}
}

// perror prints "what: strerror(errno)" as perror(3) does; an error
// without an errno is printed whole.
func (r *runner) perror(what string, err error) {
	if n, ok := errnoOf(err); ok {
		fmt.Fprintf(r.stderr, "%s: %s\n", what, strerror(n))
		return
	}
	fmt.Fprintf(r.stderr, "%s: %v\n", what, err)
}

// errnoOf finds the errno an error wraps.
func errnoOf(err error) (syscall.Errno, bool) {
	var n syscall.Errno
	if errors.As(err, &n) && n != 0 {
		return n, true
	}
	return 0, false
}

// retOf is the C tool's int for a failed call: the errno, else -1.
func retOf(err error) int {
	if n, ok := errnoOf(err); ok {
		return int(n)
	}
	return -1
}

// strerror is glibc's text for n.
func strerror(n syscall.Errno) string { return sys.Strerror(n) }

// die ends the run as the C tool's cm thread does with exit(status):
// every wait returns, nothing more is printed, and the teardown follows.
func (r *runner) die(status int) {
	r.fatal.CompareAndSwap(0, int32(status&0xff))
	r.out.mute.Store(true)
	r.cancel()
}

// dieAfterMain is die for the client's failed address or route
// resolution or connection (ADDR_ERROR, ROUTE_ERROR, CONNECT_ERROR,
// UNREACHABLE, REJECTED). There C's cm thread wakes the main thread
// before it calls exit(-1), and the main thread, whose wait has ended,
// prints its failed state ("wait for CONNECTED state 4", "connect error
// -1") while exit runs the libraries' destructors: alone it nearly
// always does (6.1, no server: 6 of 6 runs). So the status is set, but
// the output stays open until the main goroutine has printed those lines
// and calls mainDied.
func (r *runner) dieAfterMain(status int) {
	if r.fatal.CompareAndSwap(0, int32(status&0xff)) {
		r.mainLast.Store(true)
	}
}

// mainDied ends a run that dieAfterMain marked, once the main goroutine
// has printed its lines: the rest is silent, as C's exit makes it.
func (r *runner) mainDied() {
	if r.mainLast.Load() {
		r.die(int(r.fatal.Load()))
	}
}

func (r *runner) dead() bool { return r.fatal.Load() != 0 }

// session is one connection (rping's control block struct rping_cb as a
// server thread or the client uses it): its state, its verbs objects and
// its completion goroutine.
type session struct {
	r      *runner
	server bool
	id     *rdmacm.ID // the connection's ID: the client's, or the server's child
	sem    *semaphore

	mu     sync.Mutex
	st     state
	remote rdmaInfo // server: the buffer the client advertised last

	pd *uverbs.PD
	cc *uverbs.CompChannel
	cq *uverbs.CQ
	qp *uverbs.QP

	recvBuf, sendBuf, rdmaBuf, startBuf []byte
	rdmaMem, startMem                   *uverbs.Buffer // rdmaBuf's and startBuf's memory: outside the heap, so a huge -S fails as malloc does
	recvMR, sendMR, rdmaMR, startMR     *uverbs.MR

	recvWR [1]uverbs.RecvWR
	sendWR [1]uverbs.SendWR
	rdmaWR [1]uverbs.SendWR

	cqCancel context.CancelFunc
	cqDone   chan struct{}
}

func (r *runner) newSession(server bool, id *rdmacm.ID) *session {
	return &session{r: r, server: server, id: id, sem: newSemaphore(), st: stIdle}
}

func (s *session) state() state {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st
}

func (s *session) setState(st state) {
	s.mu.Lock()
	s.st = st
	s.mu.Unlock()
}

// wait waits for the next post; errFatal (or the caller's context error)
// when the run ended first.
func (s *session) wait() error {
	err := s.sem.wait(s.r.ctx)
	if s.r.dead() && !s.r.mainLast.Load() {
		return errFatal
	}
	return err
}

// quit is the status a session returns when its wait failed: a fatal
// event's (already reported), or the end of the caller's context.
func (s *session) quit(err error) int {
	if errors.Is(err, errFatal) {
		return int(s.r.fatal.Load())
	}
	s.r.errf("rping: interrupted: %v\n", err)
	return exitFailed
}

// register routes the events of id to s.
func (r *runner) register(id *rdmacm.ID, s *session) {
	r.mu.Lock()
	r.sessions[id] = s
	r.mu.Unlock()
}

// destroyID stops routing id's events and destroys it.
func (r *runner) destroyID(id *rdmacm.ID) {
	r.mu.Lock()
	delete(r.sessions, id)
	r.mu.Unlock()
	if err := id.Destroy(); err != nil && !errors.Is(err, rdmacm.ErrClosed) {
		fmt.Fprintf(r.teardn, "rdma_destroy_id: %v\n", err)
	}
}

func (r *runner) session(id *rdmacm.ID) *session {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sessions[id]
}

// cmLoop is the C tool's cm thread: it reads the channel's events and
// hands each to its session, until the run ends.
func (r *runner) cmLoop() {
	defer close(r.cmDone)
	for {
		ev, err := r.ch.GetEvent(r.ctx)
		if err != nil {
			if r.ctx.Err() == nil {
				r.perror("rdma_get_cm_event", err)
				r.die(exitFailed)
			}
			return
		}
		r.event(ev)
		if r.dead() {
			return
		}
	}
}

// event is rping_cma_event_handler.
func (r *runner) event(ev rdmacm.Event) {
	kind := "child"
	if ev.ID == r.cmID {
		kind = "parent"
	}
	r.debugf("cma_event type %s cma_id %p (%s)\n", ev.Type, ev.ID, kind)
	if ev.Type == rdmacm.EventConnectRequest {
		r.connectRequest(ev)
		return
	}
	s := r.session(ev.ID)
	if s == nil {
		return // an ID whose session has ended
	}
	switch ev.Type {
	case rdmacm.EventAddrResolved:
		s.setState(stAddrResolved)
		if err := ev.ID.ResolveRoute(resolveTimeout); err != nil {
			s.setState(stError)
			r.perror("rdma_resolve_route", err)
			s.sem.post()
		}
	case rdmacm.EventRouteResolved:
		s.setState(stRouteResolved)
		s.sem.post()
	case rdmacm.EventConnectResponse: // only for an ID without a QP: -q
		r.debugf("CONNECT_RESPONSE\n")
		s.setState(stConnected)
		s.sem.post()
	case rdmacm.EventEstablished:
		r.debugf("ESTABLISHED\n")
		// The server goes on when the first receive completes.
		if !s.server {
			s.setState(stConnected)
		}
		s.sem.post()
	case rdmacm.EventAddrError, rdmacm.EventRouteError, rdmacm.EventConnectError,
		rdmacm.EventUnreachable, rdmacm.EventRejected:
		r.errf("cma event %s, error %d\n", ev.Type, ev.Status)
		if s.server {
			r.die(exitFailed)
		} else {
			r.dieAfterMain(exitFailed)
		}
		s.sem.post()
	case rdmacm.EventDisconnected:
		side := "client"
		if s.server {
			side = "server"
		}
		r.errf("%s DISCONNECT EVENT...\n", side)
		s.setState(stDisconnected)
		s.sem.post()
	case rdmacm.EventDeviceRemoval:
		r.errf("cma detected device removal!!!!\n")
		s.setState(stError)
		r.die(exitFailed)
		s.sem.post()
	default:
		r.errf("unhandled event: %s, ignoring\n", ev.Type)
	}
}

// connectRequest hands a new connection to the server: to a goroutine of
// its own in persistent mode, else to the one session the server runs.
func (r *runner) connectRequest(ev rdmacm.Event) {
	if r.o.persistent {
		s := r.newSession(true, ev.ID)
		s.st = stConnectRequest
		r.register(ev.ID, s)
		r.debugf("child cma %p\n", ev.ID)
		r.conns.Add(1)
		go func() {
			defer r.conns.Done()
			s.servePersistent()
		}()
		return
	}
	root := r.root
	root.mu.Lock()
	busy := root.id != nil
	if !busy {
		root.id, root.st = ev.ID, stConnectRequest
	}
	root.mu.Unlock()
	if busy {
		// v44's cm thread takes the request over the running session
		// (it overwrites child_cm_id and posts the semaphore): that
		// session fails, its disconnect goes to the new, unconnected
		// ID, and server and first client hang in the CQ thread's
		// join; the second client waits out the CM's timeout. (Later
		// rdma-core holds the thread on an accept_ready semaphore.)
		// This one turns the request down, a deliberate difference
		// (docs/testing.md).
		r.debugf("rejecting a second connection request: cma %p\n", ev.ID)
		if err := ev.ID.Reject(nil); err != nil {
			r.debugf("rdma_reject: %v\n", err)
		}
		r.destroyID(ev.ID)
		return
	}
	r.register(ev.ID, root)
	r.debugf("child cma %p\n", ev.ID)
	root.sem.post()
}

// setupQP is rping_setup_qp: PD, completion channel, CQ (armed) and the
// ID's QP on the device of the connection's ID. It returns the C tool's
// status (0, an errno or -1).
func (s *session) setupQP() int {
	r := s.r
	dev := s.id.Context()
	if dev == nil {
		r.errf("ibv_alloc_pd failed\n")
		r.detail(errors.New("the rdma_cm ID has no device"))
		return -1
	}
	var err error
	if s.pd, err = dev.AllocPD(); err != nil {
		r.errf("ibv_alloc_pd failed\n")
		r.detail(err)
		return retOf(err)
	}
	r.debugf("created pd %p\n", s.pd)
	if s.cc, err = dev.CreateCompChannel(); err != nil {
		r.errf("ibv_create_comp_channel failed\n")
		r.detail(err)
		s.freeQP()
		return retOf(err)
	}
	r.debugf("created channel %p\n", s.cc)
	if s.cq, err = dev.CreateCQ(2*sqDepth, &uverbs.CQOptions{Channel: s.cc}); err != nil {
		r.errf("ibv_create_cq failed\n")
		r.detail(err)
		s.freeQP()
		return retOf(err)
	}
	r.debugf("created cq %p\n", s.cq)
	if err := s.cq.ReqNotify(false); err != nil {
		r.errf("ibv_create_cq failed\n") // sic: the C tool's message for ibv_req_notify_cq
		r.detail(err)
		s.freeQP()
		return retOf(err)
	}
	if ret := s.createQP(); ret != 0 {
		s.freeQP()
		return ret
	}
	r.debugf("created qp %p\n", s.qp)
	return 0
}

// createQP is rping_create_qp: the ID's QP (rdma_create_qp), or with -q
// one the tool creates with the verbs and moves to INIT on the ID's port
// itself, with no remote access: the connection manager's attributes
// grant it when selfModify moves the QP to INIT again.
func (s *session) createQP() int {
	r := s.r
	attr := uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: s.cq, RecvCQ: s.cq,
		Cap: uverbs.QPCap{MaxSendWR: sqDepth, MaxRecvWR: rqDepth, MaxSendSGE: 1, MaxRecvSGE: 1}}
	if !r.o.selfQP {
		var err error
		if s.qp, err = s.id.CreateQP(s.pd, attr); err != nil {
			r.perror("rdma_create_qp", err)
			return -1
		}
		return 0
	}
	qp, err := s.pd.CreateQP(attr)
	if err != nil {
		r.perror("ibv_create_qp", err)
		return -1
	}
	err = qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateInit, PortNum: uint8(s.id.Port())},
		uverbs.QPAttrState|uverbs.QPAttrPKeyIndex|uverbs.QPAttrPort|uverbs.QPAttrAccessFlags)
	if err != nil {
		r.perror("ibv_modify_qp", err)
		ctx, cancel := context.WithTimeout(context.Background(), destroyWaits)
		defer cancel()
		qp.Destroy(ctx)
		return -1
	}
	s.qp = qp
	return 0
}

// selfModify is rping_self_modify_qp (-q): INIT, RTR and RTS, each with
// the attributes the connection manager gives for the session's ID.
func (s *session) selfModify() error {
	for _, st := range []uverbs.QPState{uverbs.QPStateInit, uverbs.QPStateRTR, uverbs.QPStateRTS} {
		a, m, err := s.id.InitQPAttr(st)
		if err != nil {
			return err
		}
		if err := s.qp.Modify(&a, m); err != nil {
			return err
		}
	}
	return nil
}

// connParam is rping_init_conn_param: one responder resource and
// initiator depth each way (the server reads the client's buffer), seven
// retries of each kind, and with -q the tool's own QP.
func (s *session) connParam() *rdmacm.ConnParam {
	p := &rdmacm.ConnParam{ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7}
	if s.r.o.selfQP {
		p.QPNum = s.qp.QPN()
	}
	return p
}

// freeQP is rping_free_qp: QP, CQ, channel and PD, whichever exist.
func (s *session) freeQP() {
	ctx, cancel := context.WithTimeout(context.Background(), destroyWaits)
	defer cancel()
	w := s.r.teardn
	if s.qp != nil {
		if err := s.qp.Destroy(ctx); err != nil {
			fmt.Fprintf(w, "ibv_destroy_qp: %v\n", err)
		}
		s.qp = nil
	}
	if s.cq != nil {
		if err := s.cq.Destroy(ctx); err != nil {
			fmt.Fprintf(w, "ibv_destroy_cq: %v\n", err)
		}
		s.cq = nil
	}
	if s.cc != nil {
		if err := s.cc.Close(); err != nil {
			fmt.Fprintf(w, "ibv_destroy_comp_channel: %v\n", err)
		}
		s.cc = nil
	}
	if s.pd != nil {
		if err := s.pd.Dealloc(); err != nil {
			fmt.Fprintf(w, "ibv_dealloc_pd: %v\n", err)
		}
		s.pd = nil
	}
}

// setupBuffers is rping_setup_buffers: the 16-byte receive and send
// buffers, the RDMA buffer (the server's sink for its read, the client's
// sink for the server's write) and the client's start buffer, each
// registered, and the work requests that use them.
func (s *session) setupBuffers() int {
	r := s.r
	r.debugf("rping_setup_buffers called on cb %p\n", s)
	var err error
	s.recvBuf = make([]byte, rdmaInfoLen)
	if s.recvMR, err = s.pd.RegMR(s.recvBuf, uverbs.AccessLocalWrite); err != nil {
		r.errf("recv_buf reg_mr failed\n")
		r.detail(err)
		return retOf(err)
	}
	s.sendBuf = make([]byte, rdmaInfoLen)
	if s.sendMR, err = s.pd.RegMR(s.sendBuf, 0); err != nil {
		r.errf("send_buf reg_mr failed\n")
		r.detail(err)
		s.freeBuffers()
		return retOf(err)
	}
	remote := uverbs.AccessLocalWrite | uverbs.AccessRemoteRead | uverbs.AccessRemoteWrite
	size := int(r.o.size)
	if size <= 0 {
		// Only a size that slipped past the checks (-S 0 -a ADDR: the
		// good -a clears -S's status, as in the C tool) gets here; the
		// C tool's malloc fails on a negative one.
		r.errf("rdma_buf malloc failed\n")
		r.detail(fmt.Errorf("ping data size %d", size))
		s.freeBuffers()
		return -enomem
	}
	if s.rdmaMem, err = uverbs.AllocBuffer(size); err != nil { // -S 2147483647 -a ADDR
		r.errf("rdma_buf malloc failed\n")
		s.freeBuffers()
		return -enomem
	}
	s.rdmaBuf = s.rdmaMem.Bytes()
	if s.rdmaMR, err = s.pd.RegMR(s.rdmaBuf, remote); err != nil {
		r.errf("rdma_buf reg_mr failed\n")
		r.detail(err)
		s.freeBuffers()
		return retOf(err)
	}
	if !s.server {
		if s.startMem, err = uverbs.AllocBuffer(size); err != nil {
			r.errf("start_buf malloc failed\n")
			s.freeBuffers()
			return -enomem
		}
		s.startBuf = s.startMem.Bytes()
		if s.startMR, err = s.pd.RegMR(s.startBuf, remote); err != nil {
			r.errf("start_buf reg_mr failed\n")
			r.detail(err)
			s.freeBuffers()
			return retOf(err)
		}
	}
	s.recvWR[0] = uverbs.RecvWR{SGL: []uverbs.SGE{s.recvMR.SGE(0, rdmaInfoLen)}}
	s.sendWR[0] = uverbs.SendWR{Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{s.sendMR.SGE(0, rdmaInfoLen)}}
	s.rdmaWR[0] = uverbs.SendWR{Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{s.rdmaMR.SGE(0, size)}}
	r.debugf("allocated & registered buffers...\n")
	return 0
}

// freeBuffers is rping_free_buffers.
func (s *session) freeBuffers() {
	s.r.debugf("rping_free_buffers called on cb %p\n", s)
	for _, mr := range []**uverbs.MR{&s.recvMR, &s.sendMR, &s.rdmaMR, &s.startMR} {
		if *mr != nil {
			if err := (*mr).Dereg(); err != nil {
				fmt.Fprintf(s.r.teardn, "ibv_dereg_mr: %v\n", err)
			}
			*mr = nil
		}
	}
	for _, b := range []**uverbs.Buffer{&s.rdmaMem, &s.startMem} {
		if *b != nil {
			(*b).Close()
			*b = nil
		}
	}
	s.rdmaBuf, s.startBuf = nil, nil
}

func (s *session) postRecv() error { return s.qp.PostRecv(s.recvWR[:]) }

func (s *session) postSend() error { return s.qp.PostSend(s.sendWR[:]) }

// formatSend is rping_format_send: the send buffer advertises mr's
// memory, with the ping size.
func (s *session) formatSend(mr *uverbs.MR) {
	m := rdmaInfo{Addr: mr.IOVA(), RKey: mr.RKey(), Size: uint32(s.r.o.size)}
	m.put(s.sendBuf)
	s.r.debugf("RDMA addr %x rkey %x len %d\n", m.Addr, m.RKey, int32(m.Size))
}

// startCQ starts the completion goroutine (the C tool's cq thread).
func (s *session) startCQ() {
	ctx, cancel := context.WithCancel(s.r.ctx)
	s.cqCancel, s.cqDone = cancel, make(chan struct{})
	go s.cqLoop(ctx)
}

// joinCQ waits for the completion goroutine to end by itself, which it
// does on the flushed receive after a disconnect, for at most flushWait,
// then stops it.
func (s *session) joinCQ() {
	if s.cqDone == nil {
		return
	}
	t := time.NewTimer(flushWait)
	defer t.Stop()
	select {
	case <-s.cqDone:
	case <-s.r.ctx.Done():
	case <-t.C:
		fmt.Fprintf(s.r.teardn, "rping: no flushed completion %v after the disconnect; stopping the completion goroutine\n", flushWait)
	}
	s.stopCQ()
}

// stopCQ ends the completion goroutine and waits for it.
func (s *session) stopCQ() {
	if s.cqDone == nil {
		return
	}
	s.cqCancel()
	<-s.cqDone
	s.cqDone = nil
}

// cqLoop is the cq thread: it sleeps on the completion channel, re-arms
// the CQ, handles every completion and acknowledges the event, until a
// flushed completion (the connection is over), an error, or its context
// ends.
func (s *session) cqLoop(ctx context.Context) {
	defer close(s.cqDone)
	r := s.r
	r.debugf("cq_thread started.\n")
	wcs := make([]uverbs.WC, 1)
	for {
		cq, err := s.cc.GetCQEvent(ctx)
		if err != nil {
			if ctx.Err() == nil {
				r.errf("Failed to get cq event!\n")
				r.detail(err)
			}
			return
		}
		if cq != s.cq {
			r.errf("Unknown CQ!\n")
			cq.AckEvents(1)
			return
		}
		if err := s.cq.ReqNotify(false); err != nil {
			r.errf("Failed to set notify!\n")
			r.detail(err)
			s.cq.AckEvents(1)
			return
		}
		ret := s.completions(wcs)
		s.cq.AckEvents(1)
		if ret != 0 {
			return
		}
	}
}

// completions is rping_cq_event_handler: it polls the CQ empty and moves
// the state on. It returns 1 when a request completed flushed, -1 on an
// error (the state is then ERROR), else 0.
func (s *session) completions(wcs []uverbs.WC) int {
	r := s.r
	flushed := false
	for {
		n, err := s.cq.Poll(wcs)
		if err != nil {
			r.errf("poll error %d\n", -1)
			r.detail(err)
			return s.failed()
		}
		if n == 0 {
			break
		}
		wc := &wcs[0]
		if wc.Status != uverbs.WCSuccess {
			if wc.Status == uverbs.WCWRFlushErr {
				flushed = true
				continue
			}
			r.errf("cq completion failed status %d\n", wc.Status)
			return s.failed()
		}
		switch wc.Opcode {
		case uverbs.WCSend:
			r.debugf("send completion\n")
		case uverbs.WCRDMAWrite:
			r.debugf("rdma write completion\n")
			s.setState(stWriteComplete)
			s.sem.post()
		case uverbs.WCRDMARead:
			r.debugf("rdma read completion\n")
			s.setState(stReadComplete)
			s.sem.post()
		case uverbs.WCRecv:
			r.debugf("recv completion\n")
			if wc.ByteLen != rdmaInfoLen {
				r.errf("Received bogus data, size %d\n", wc.ByteLen)
				r.errf("recv wc error: %d\n", -1)
				return s.failed()
			}
			if s.server {
				s.serverRecv()
			} else {
				s.clientRecv()
			}
			if err := s.postRecv(); err != nil {
				r.errf("post recv error: %d\n", retOf(err))
				r.detail(err)
				return s.failed()
			}
			s.sem.post()
		default:
			r.debugf("unknown!!!!! completion\n")
			return s.failed()
		}
	}
	if flushed {
		return 1
	}
	return 0
}

func (s *session) failed() int {
	s.setState(stError)
	s.sem.post()
	return -1
}

// serverRecv is server_recv: the client advertised a buffer, its start
// buffer (read it) or its sink (write to it).
func (s *session) serverRecv() {
	m := readInfo(s.recvBuf)
	s.mu.Lock()
	s.remote = m
	if s.st <= stConnected || s.st == stWriteComplete {
		s.st = stReadAdv
	} else {
		s.st = stWriteAdv
	}
	s.mu.Unlock()
	s.r.debugf("Received rkey %x addr %x len %d from peer\n", m.RKey, m.Addr, int32(m.Size))
}

// clientRecv is client_recv: the server's "go ahead", after its read or
// after its write.
func (s *session) clientRecv() {
	s.mu.Lock()
	if s.st == stReadAdv {
		s.st = stWriteAdv
	} else {
		s.st = stWriteComplete
	}
	s.mu.Unlock()
}

// expect waits for the next step and checks that it reached want; else
// it prints the C tool's complaint. ok false with status 0 means the
// wait ended with the run (status is then the run's).
func (s *session) expect(want state, name string) (status int, ok bool) {
	if err := s.wait(); err != nil {
		return s.quit(err), false
	}
	if st := s.state(); st != want {
		s.r.errf("wait for %s state %d\n", name, st)
		return -1, false
	}
	return 0, true
}

// testServer is rping_test_server: per ping, read the client's start
// buffer, say go ahead, write the data to its sink, say go ahead again;
// until the client disconnects (status 0) or something fails.
func (s *session) testServer() int {
	r := s.r
	ret := 0
	for {
		var ok bool
		if ret, ok = s.expect(stReadAdv, "RDMA_READ_ADV"); !ok {
			break
		}
		r.debugf("server received sink adv\n")
		s.mu.Lock()
		m := s.remote
		s.mu.Unlock()
		wr := &s.rdmaWR[0]
		wr.Opcode, wr.RKey, wr.RemoteAddr = uverbs.WRRDMARead, m.RKey, m.Addr
		wr.SGL[0].Length = m.Size
		if err := s.qp.PostSend(s.rdmaWR[:]); err != nil {
			ret = retOf(err)
			r.errf("post send error %d\n", ret)
			r.detail(err)
			break
		}
		r.debugf("server posted rdma read req \n")

		if ret, ok = s.expect(stReadComplete, "RDMA_READ_COMPLETE"); !ok {
			break
		}
		r.debugf("server received read complete\n")
		if r.o.verbose {
			io.WriteString(r.stdout, pingLine(true, s.rdmaBuf))
		}
		if err := s.postSend(); err != nil {
			ret = retOf(err)
			r.errf("post send error %d\n", ret)
			r.detail(err)
			break
		}
		r.debugf("server posted go ahead\n")

		if ret, ok = s.expect(stWriteAdv, "RDMA_WRITE_ADV"); !ok {
			break
		}
		r.debugf("server received sink adv\n")
		s.mu.Lock()
		m = s.remote
		s.mu.Unlock()
		wr.Opcode, wr.RKey, wr.RemoteAddr = uverbs.WRRDMAWrite, m.RKey, m.Addr
		// strlen(rdma_buf) + 1: the text and its NUL.
		wr.SGL[0].Length = uint32(min(len(cString(s.rdmaBuf))+1, len(s.rdmaBuf)))
		r.debugf("rdma write from lkey %x laddr %x len %d\n", wr.SGL[0].LKey, wr.SGL[0].Addr, wr.SGL[0].Length)
		if err := s.qp.PostSend(s.rdmaWR[:]); err != nil {
			ret = retOf(err)
			r.errf("post send error %d\n", ret)
			r.detail(err)
			break
		}

		if ret, ok = s.expect(stWriteComplete, "RDMA_WRITE_COMPLETE"); !ok {
			break
		}
		r.debugf("server rdma write complete \n")
		if err := s.postSend(); err != nil {
			ret = retOf(err)
			r.errf("post send error %d\n", ret)
			r.detail(err)
			break
		}
		r.debugf("server posted go ahead\n")
	}
	if r.dead() {
		return ret
	}
	if s.state() == stDisconnected {
		return 0
	}
	return ret
}

// testClient is rping_test_client: count pings (forever with 0), each
// advertising the start buffer for the server's read, then the sink for
// its write, and checking (-V) and printing (-v) what came back.
func (s *session) testClient() int {
	r := s.r
	ret := 0
	start := byte(firstChar)
	for ping := int32(0); r.o.count == 0 || ping < r.o.count; ping++ {
		s.setState(stReadAdv)
		fillPing(s.startBuf, ping, start)
		start = nextChar(start)

		s.formatSend(s.startMR)
		if err := s.postSend(); err != nil {
			ret = retOf(err)
			r.errf("post send error %d\n", ret)
			r.detail(err)
			break
		}
		var ok bool
		if ret, ok = s.expect(stWriteAdv, "RDMA_WRITE_ADV"); !ok {
			break
		}
		s.formatSend(s.rdmaMR)
		if err := s.postSend(); err != nil {
			ret = retOf(err)
			r.errf("post send error %d\n", ret)
			r.detail(err)
			break
		}
		if ret, ok = s.expect(stWriteComplete, "RDMA_WRITE_COMPLETE"); !ok {
			break
		}
		if r.o.validate && string(s.startBuf) != string(s.rdmaBuf) {
			r.errf("data mismatch!\n")
			ret = -1
			break
		}
		if r.o.verbose {
			io.WriteString(r.stdout, pingLine(false, s.rdmaBuf))
		}
	}
	if r.dead() {
		return ret
	}
	if s.state() == stDisconnected {
		return 0
	}
	return ret
}

// disconnect is rping_disconnect (its return is ignored, as the C tool
// ignores it). With -q the tool moves its QP to ERR itself first, and
// does not disconnect if that fails, as the C tool.
func (s *session) disconnect() {
	if s.r.o.selfQP {
		if err := s.qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateErr}, uverbs.QPAttrState); err != nil {
			s.r.debugf("ibv_modify_qp: %v\n", err)
			return
		}
	}
	if err := s.id.Disconnect(); err != nil {
		s.r.debugf("rdma_disconnect: %v\n", err)
	}
}

// accept is rping_accept.
func (s *session) accept() int {
	r := s.r
	r.debugf("accepting client connection request\n")
	var p *rdmacm.ConnParam
	if r.o.selfQP {
		if err := s.selfModify(); err != nil {
			return retOf(err)
		}
		p = s.connParam()
	}
	if err := s.id.Accept(p); err != nil {
		r.perror("rdma_accept", err)
		return -1
	}
	if err := s.wait(); err != nil {
		return s.quit(err)
	}
	if st := s.state(); st == stError {
		r.errf("wait for CONNECTED state %d\n", st)
		return -1
	}
	return 0
}

// bindServer is rping_bind_server: bind to -a's address and -p's port,
// and listen.
func (r *runner) bindServer() int {
	if err := r.cmID.BindAddr(netip.AddrPortFrom(r.o.addr, r.o.port)); err != nil {
		r.perror("rdma_bind_addr", err)
		return -1
	}
	r.debugf("rdma_bind_addr successful\n")
	r.debugf("rdma_listen\n")
	if err := r.cmID.Listen(listenBacklog); err != nil {
		r.perror("rdma_listen", err)
		return -1
	}
	return 0
}

// runServer is rping_run_server: one connection, then the end.
func (r *runner) runServer() int {
	if ret := r.bindServer(); ret != 0 {
		return ret
	}
	s := r.root
	if err := s.wait(); err != nil {
		return s.quit(err)
	}
	if st := s.state(); st != stConnectRequest {
		r.errf("wait for CONNECT_REQUEST state %d\n", st)
		return -1
	}
	defer r.destroyID(s.id)
	return s.serve(true)
}

// servePersistent is rping_persistent_server_thread: one connection of a
// persistent server. Its failures are printed; the server goes on.
func (s *session) servePersistent() {
	defer s.r.destroyID(s.id)
	s.serve(false)
}

// setUp makes a connection's QP and buffers, posts the first receive
// and starts the completion goroutine (rping's setup_qp,
// rping_setup_buffers, ibv_post_recv and cq thread, with their
// complaints); on a failure it releases what it made. tearDown releases
// it all.
func (s *session) setUp() int {
	r := s.r
	if ret := s.setupQP(); ret != 0 {
		r.errf("setup_qp failed: %d\n", ret)
		return ret
	}
	if ret := s.setupBuffers(); ret != 0 {
		r.errf("rping_setup_buffers failed: %d\n", ret)
		s.freeQP()
		return ret
	}
	if err := s.postRecv(); err != nil {
		ret := retOf(err)
		r.errf("ibv_post_recv failed: %d\n", ret)
		r.detail(err)
		s.freeBuffers()
		s.freeQP()
		return ret
	}
	s.startCQ()
	return 0
}

func (s *session) tearDown() {
	s.stopCQ()
	s.freeBuffers()
	s.freeQP()
}

// serve runs the server side of one accepted connection request, from
// the verbs objects to their release. report says whether a failed ping
// loop is reported ("rping server failed", not in persistent mode).
func (s *session) serve(report bool) int {
	r := s.r
	if ret := s.setUp(); ret != 0 {
		return ret
	}
	defer s.tearDown()
	if ret := s.accept(); ret != 0 {
		if !r.dead() {
			r.errf("connect error %d\n", ret)
		}
		return ret
	}
	ret := s.testServer()
	if ret != 0 && report && !r.dead() {
		r.errf("rping server failed: %d\n", ret)
	}
	s.disconnect()
	s.joinCQ()
	return ret
}

// runPersistentServer is rping_run_persistent_server: every connection
// request gets a goroutine (the CM goroutine starts them); it runs until
// a fatal event or the caller's end.
func (r *runner) runPersistentServer() int {
	if ret := r.bindServer(); ret != 0 {
		return ret
	}
	<-r.ctx.Done()
	<-r.cmDone // no connection starts after this
	r.conns.Wait()
	if r.dead() {
		return int(r.fatal.Load())
	}
	return 0
}

// runClient is rping_run_client.
func (r *runner) runClient() int {
	s := r.root
	dst := netip.AddrPortFrom(r.o.addr, r.o.port)
	var src netip.AddrPort
	if r.o.src.IsValid() {
		src = netip.AddrPortFrom(r.o.src, 0)
	}
	if err := s.id.ResolveAddr(src, dst, resolveTimeout); err != nil {
		r.perror("rdma_resolve_addr", err)
		return -1
	}
	if err := s.wait(); err != nil {
		return s.quit(err)
	}
	if st := s.state(); st != stRouteResolved {
		r.errf("waiting for addr/route resolution state %d\n", st)
		r.mainDied()
		return -1
	}
	r.debugf("rdma_resolve_addr - rdma_resolve_route successful\n")

	if ret := s.setUp(); ret != 0 {
		return ret
	}
	defer s.tearDown()
	if ret := s.connect(); ret != 0 {
		if !r.dead() || r.mainLast.Load() {
			r.errf("connect error %d\n", ret)
		}
		r.mainDied()
		return ret
	}
	ret := s.testClient()
	if ret != 0 && !r.dead() {
		r.errf("rping client failed: %d\n", ret)
	}
	s.disconnect()
	s.joinCQ()
	return ret
}

// connect is rping_connect_client. With -q the connection manager's
// response comes as EventConnectResponse: the tool moves its QP to RTS
// and sends the ready-to-use itself (rdma_establish).
func (s *session) connect() int {
	r := s.r
	if err := s.id.Connect(s.connParam()); err != nil {
		r.perror("rdma_connect", err)
		return -1
	}
	if err := s.wait(); err != nil {
		return s.quit(err)
	}
	if st := s.state(); st != stConnected {
		r.errf("wait for CONNECTED state %d\n", st)
		return -1
	}
	if r.o.selfQP {
		if err := s.selfModify(); err != nil {
			r.perror("rping_modify_qp", err)
			return retOf(err)
		}
		if err := s.id.Establish(); err != nil {
			r.perror("rdma_establish", err)
			return retOf(err)
		}
	}
	r.debugf("rdma_connect successful\n")
	return 0
}

// run is main after the command line: the event channel, the parent ID,
// the CM goroutine, then the server or the client. It returns the exit
// status.
func run(ctx context.Context, o options, stdout, stderr io.Writer) int {
	out := &output{}
	r := &runner{o: o, out: out, stdout: lineWriter{out, stdout, true}, stderr: lineWriter{out, stderr, true},
		teardn: lineWriter{out, stderr, false}, sessions: map[*rdmacm.ID]*session{}}
	r.ctx, r.cancel = context.WithCancel(ctx)
	defer r.cancel()

	// create_event_channel (librdmacm's examples' common.c): librdmacm
	// fails with ENODEV when there is no RDMA device at all. It is rping's
	// first librdmacm call (rping.c:1365; get_addr's is glibc's
	// getaddrinfo): its ucma_init (cma.c:571) lists the devices (cma.c:322),
	// and that first ibv_get_device_list prints libibverbs' RLIMIT_MEMLOCK
	// warning, devices or not.
	memlock.Warn(r.stderr)
	if devs, err := uverbs.Devices(); err != nil || len(devs) == 0 {
		r.errf("No RDMA devices were detected\n")
		if err != nil && !errors.Is(err, uverbs.ErrNoDevice) {
			r.detail(err)
		}
		return exitENODEV
	}
	ch, err := rdmacm.Open()
	if err != nil {
		r.perror("failed to create RDMA CM event channel", err)
		r.detail(err)
		return retOf(err) & 0xff
	}
	r.ch = ch
	defer func() {
		if err := ch.Close(); err != nil {
			fmt.Fprintf(r.teardn, "rdma_destroy_event_channel: %v\n", err)
		}
	}()
	id, err := ch.CreateID(rdmacm.PortSpaceTCP)
	if err != nil {
		r.perror("rdma_create_id", err)
		return exitFailed
	}
	r.cmID = id
	r.debugf("created cm_id %p\n", id)
	server := o.server == 1
	r.root = r.newSession(server, nil)
	if !server {
		r.root.id = id
	}
	// The parent's events go to the root session (the listener's to the
	// server's, whose connection ID comes with the request).
	r.register(id, r.root)
	r.cmDone = make(chan struct{})
	go r.cmLoop()

	var ret int
	switch {
	case server && o.persistent:
		ret = r.runPersistentServer()
	case server:
		ret = r.runServer()
	default:
		ret = r.runClient()
	}

	r.debugf("destroy cm_id %p\n", id)
	r.cancel()
	<-r.cmDone
	r.destroyID(id)
	if r.dead() {
		return int(r.fatal.Load())
	}
	return ret & 0xff
}

// Main is the whole tool: it parses args (without the program name) as
// rping does, runs the server or the client and returns the exit status,
// the C tool's: 0, an errno, 255 for its -1 (a failed rdma_cm call, a
// connection refused or a failed ping) or getaddrinfo's code. The ping
// data (-v), usage, getaddrinfo's complaint and the -d lines go to
// stdout, every other message to stderr, as rping prints them.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, status := parseArgs(ctx, args, stdout, stderr)
	if status != 0 {
		return status
	}
	return run(ctx, o, stdout, stderr)
}
