// Package cq is a completion queue whose notifications arrive on a file
// descriptor, consumed the way librpma's users consume rpma_cq
// (rpma_cq_get_fd(3), rpma_cq_wait(3), rpma_cq_get_wc(3)), in Go: Wait
// takes a context and parks the goroutine on the runtime poller, GetWC
// polls into the caller's slice without allocating, and All iterates over
// completions.
//
// A CQ has its own completion channel, or shares one (NewChannel) with
// other CQs, as a connection's main CQ, its receive CQ and an SRQ's
// receive CQ may; Channel.Wait then waits on all of them at once.
//
// Every completion event is acknowledged as it is read, so destroying a CQ
// never waits for the application on their account. Asynchronous events
// naming the CQ (IBV_EVENT_CQ_ERR, read with an async.Reader) are the
// application's to acknowledge: Close waits for those (ibv_destroy_cq(3)).
package cq

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"sync"

	"github.com/pureverbs/pureverbs/uverbs"
)

// Options are the optional parameters of New.
type Options struct {
	// Channel is a shared completion channel; nil gives the CQ its own.
	Channel *Channel
	// CompVector is the completion vector (ibv_create_cq's comp_vector).
	CompVector int
	// WaitThread makes Wait on the CQ's own channel block an OS thread
	// instead of parking on the runtime poller (uverbs.WaitThread): the
	// opt-in lowest-latency mode. (A shared Channel has SetWaitMode.)
	WaitThread bool
}

// CQ is a completion queue with a completion channel.
type CQ struct {
	cq  *uverbs.CQ
	ch  *Channel
	own bool // ch was created for this CQ

	// signal receives the events of this CQ that another goroutine read
	// from a shared channel.
	signal chan struct{}
	// wait is held by Wait (one waiter per CQ at a time); guards armed.
	wait  chan struct{}
	armed bool
	// needArm (guarded by ch.mu) says an event of the CQ was read and the
	// CQ not re-armed (the reader's ctx ended first).
	needArm bool

	// mu guards closed and the wait context: on a shared channel a Wait
	// waits under a child of its ctx (derived once per distinct ctx, so
	// a loop with one ctx allocates nothing; changed only under wait)
	// that Close cancels, which wakes a Wait parked reading the channel
	// for the other CQs. done is closed by Close.
	mu      sync.Mutex
	closed  bool
	done    chan struct{}
	closing chan struct{} // held by Close: one at a time
	parent  context.Context
	derived context.Context
	cancel  context.CancelFunc
}

// Channel is a completion channel shared by several CQs.
type Channel struct {
	ch  *uverbs.CompChannel
	own bool // created by New for one CQ

	// reader is held by the goroutine reading the channel's fd; the
	// others wait for their CQ's signal or for their turn.
	reader chan struct{}
	// kick (capacity 1) tells a Channel.Wait waiting for the reader that
	// a CQ.Wait put a CQ on the recheck list: it looks there again.
	kick chan struct{}

	mu  sync.Mutex
	cqs map[*uverbs.CQ]*CQ
	// recheck lists, oldest first, the CQs that may hold completions no
	// event will announce: those whose event was read (completions that
	// came between the event and the re-arm, or that the application left
	// unpolled) and those whose re-arm failed. Channel.Wait looks at these
	// and at no other CQ, so a call costs O(len(recheck)), not O(CQs). A
	// CQ joins and leaves it only while its wait lock is held.
	recheck []*CQ
	// spare holds the Channel.Wait calls' copies of recheck between
	// calls (one per concurrent caller at most), so that a long list
	// costs no allocation once a copy of its length exists.
	spare [][]*CQ
}

// NewChannel creates a completion channel for several CQs
// (ibv_create_comp_channel(3)).
func NewChannel(c *uverbs.Context) (*Channel, error) {
	ch, err := c.CreateCompChannel()
	if err != nil {
		return nil, err
	}
	return &Channel{ch: ch, reader: make(chan struct{}, 1), kick: make(chan struct{}, 1), cqs: map[*uverbs.CQ]*CQ{}}, nil
}

// New creates a CQ of at least size entries on c with a completion
// channel: its own, or opts.Channel. It is armed before New returns, so
// the first completion already raises an event.
func New(c *uverbs.Context, size int, opts *Options) (*CQ, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	ch := o.Channel
	own := ch == nil
	if own {
		var err error
		if ch, err = NewChannel(c); err != nil {
			return nil, err
		}
		ch.own = true
		if o.WaitThread {
			ch.ch.SetWaitMode(uverbs.WaitThread)
		}
	}
	vcq, err := c.CreateCQ(size, &uverbs.CQOptions{Channel: ch.ch, CompVector: o.CompVector})
	if err != nil {
		if own {
			ch.ch.Close()
		}
		return nil, err
	}
	q := &CQ{cq: vcq, ch: ch, own: own, signal: make(chan struct{}, 1), wait: make(chan struct{}, 1), done: make(chan struct{}), closing: make(chan struct{}, 1)}
	if err := vcq.ReqNotify(false); err != nil {
		vcq.Destroy(context.Background())
		if own {
			ch.ch.Close()
		}
		return nil, err
	}
	q.armed = true
	ch.mu.Lock()
	ch.cqs[vcq] = q
	ch.mu.Unlock()
	return q, nil
}

// errNil is the error of a nil or unusable CQ (the seed's RPMA_E_INVAL).
func errNil(method string) error {
	return &uverbs.OpError{Object: "cq", Method: method, Err: fmt.Errorf("%w: nil cq.CQ (use cq.New)", uverbs.ErrInvalid)}
}

// Verbs returns the verbs CQ, to create QPs with (QPInitAttr.SendCQ,
// RecvCQ).
func (q *CQ) Verbs() *uverbs.CQ {
	if q == nil {
		return nil
	}
	return q.cq
}

// Fd returns the descriptor that becomes readable when a completion is
// ready (rpma_cq_get_fd(3)): the CQ's completion channel, shared with the
// other CQs of its Channel. It is in non-blocking mode (the runtime poller
// needs that): read(2) returns EAGAIN rather than blocking when nothing is
// queued. Do not switch it to blocking with fcntl(2) (librpma's default):
// the descriptor is shared with the library, whose reads, made without the
// runtime's system-call bookkeeping because they never block, would then
// block in the kernel holding a runtime processor, which stalls the
// garbage collector and with it the program, and no context could end
// them. As with librpma, when it polls readable call Wait, which then
// returns at once (it reads and acknowledges the event and re-arms the
// CQ), and then GetWC: an event left unread keeps the descriptor
// readable, and a CQ not re-armed raises no further event.
// A nil or closed CQ gives an error wrapping uverbs.ErrInvalid or
// uverbs.ErrClosed, and -1.
func (q *CQ) Fd() (int, error) {
	if q == nil || q.cq == nil {
		return -1, errNil("get_fd")
	}
	if q.isClosed() {
		return -1, errClosed("get_fd")
	}
	fd := q.ch.ch.Fd()
	if fd < 0 {
		return -1, &uverbs.OpError{Object: "cq", Method: "get_fd", Err: uverbs.ErrClosed}
	}
	return fd, nil
}

// errClosed is the error of a closed CQ.
func errClosed(method string) error {
	return &uverbs.OpError{Object: "cq", Method: method, Err: uverbs.ErrClosed}
}

func (q *CQ) isClosed() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.closed
}

// waitContext returns the context a Wait waits under (the caller holds
// q.wait): ctx itself on the CQ's own channel (Close closes the channel,
// which wakes the reader), else ctx's child that Close cancels.
func (q *CQ) waitContext(ctx context.Context) (context.Context, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil, errClosed("wait")
	}
	if q.own {
		return ctx, nil
	}
	if ctx != q.parent {
		if q.cancel != nil {
			q.cancel()
		}
		q.derived, q.cancel = context.WithCancel(ctx)
		q.parent = ctx
	}
	return q.derived, nil
}

// waitErr is the error of a Wait whose wait context wctx ended: ctx's
// own error, or ErrClosed when Close ended it.
func (q *CQ) waitErr(ctx, wctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if q.isClosed() {
		return errClosed("wait")
	}
	return wctx.Err()
}

// GetWC polls up to len(wcs) completions into wcs and returns how many
// (rpma_cq_get_wc(3); 0 when none is ready). An empty wcs is an error
// wrapping uverbs.ErrInvalid, as librpma refuses num_entries below 1. It
// makes no system call and allocates nothing.
func (q *CQ) GetWC(wcs []uverbs.WC) (int, error) {
	if q == nil || q.cq == nil {
		return 0, errNil("get_wc")
	}
	if len(wcs) == 0 {
		// rpma_cq_get_wc(3): RPMA_E_INVAL for num_entries < 1.
		return 0, &uverbs.OpError{Object: "cq", Method: "get_wc", Err: fmt.Errorf("%w: no room for a completion (len(wcs) is 0)", uverbs.ErrInvalid)}
	}
	return q.cq.Poll(wcs)
}

// Wait blocks until a completion may be ready to GetWC, ctx ends
// (ctx.Err()), or the CQ is closed (rpma_cq_wait(3)). It keeps the CQ
// armed and re-polls after every arm, so a completion that arrives
// between a GetWC that found nothing and the arm is never slept through:
// Wait returns at once if completions are waiting, reading and
// acknowledging their event if it is queued and re-arming. Each event is
// acknowledged as it is read; after an event Wait re-arms before it
// returns. It may return when the completion it was woken for was already
// consumed. It allocates nothing when ctx is the same across calls. Close
// wakes it with an error matching uverbs.ErrClosed, on a shared Channel
// too.
func (q *CQ) Wait(ctx context.Context) error {
	if q == nil || q.cq == nil {
		return errNil("wait")
	}
	if ctx == nil {
		return &uverbs.OpError{Object: "cq", Method: "wait", Err: fmt.Errorf("%w: nil context.Context", uverbs.ErrInvalid)}
	}
	select {
	case q.wait <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	case <-q.done:
		return errClosed("wait")
	}
	defer func() { <-q.wait }()
	wctx, err := q.waitContext(ctx)
	if err != nil {
		return err
	}
	if q.takeNeedArm() || !q.armed {
		if err := q.rearm(); err != nil {
			return err
		}
	}
	if n, err := q.cq.Ready(); err != nil || n > 0 {
		if err != nil {
			return err
		}
		return q.takeQueued()
	}
	for {
		select {
		case <-q.signal:
			return q.signalled()
		default:
		}
		select {
		case <-q.signal:
			return q.signalled()
		case q.ch.reader <- struct{}{}:
			mine, err := q.ch.readOne(wctx, q)
			<-q.ch.reader
			if err != nil {
				if wctx.Err() != nil {
					return q.waitErr(ctx, wctx)
				}
				return err
			}
			if mine {
				return q.rearm()
			}
		case <-wctx.Done():
			return q.waitErr(ctx, wctx)
		}
	}
}

// takeQueued is Wait's end when completions are already waiting (the
// caller holds q.wait): if q's event is queued too (q was armed when they
// came), it reads and acknowledges it and re-arms q, as rpma_cq_wait(3)
// always reads one event. Left unread, the event would keep Fd readable
// for completions already served, and q, disarmed by it, would raise no
// further event: a loop on an edge-triggered epoll would hang. It does
// not wait: when another goroutine is reading the channel, that one hands
// q's event on (q.signal, or needArm for q's next Wait).
func (q *CQ) takeQueued() error {
	select {
	case <-q.signal: // read by another goroutine already
		return q.signalled()
	default:
	}
	select {
	case q.ch.reader <- struct{}{}:
	default:
		return nil
	}
	defer func() { <-q.ch.reader }()
	for {
		mine, err := q.ch.readQueued(q)
		if errors.Is(err, uverbs.ErrNoEvent) {
			return nil
		}
		if err != nil {
			return err
		}
		if mine {
			return q.rearm()
		}
	}
}

// signalled re-arms q after another goroutine read its event and
// signalled it (the caller holds q.wait); the flag that goroutine may have
// set for the next Wait is taken as well, so q is armed once, not twice.
func (q *CQ) signalled() error {
	q.takeNeedArm()
	return q.rearm()
}

// rearm arms the CQ again after its event (under q.wait).
func (q *CQ) rearm() error {
	q.armed = false
	if err := q.cq.ReqNotify(false); err != nil {
		q.ch.markRecheck(q)
		return err
	}
	q.armed = true
	return nil
}

// markRecheck puts q at the end of the channel's recheck list (the caller
// holds q.wait).
func (ch *Channel) markRecheck(q *CQ) {
	ch.mu.Lock()
	ch.recheck = slices.DeleteFunc(ch.recheck, func(o *CQ) bool { return o == q })
	if ch.cqs[q.cq] == q { // not once Close has taken it off the channel
		ch.recheck = append(ch.recheck, q)
	}
	ch.mu.Unlock()
}

// flagNeedArm records that q's event was read and q not re-armed, and
// puts q at the end of the recheck list, unless Close took q off the
// channel: q's next Wait, or a Channel.Wait's recheck, re-arms it.
func (ch *Channel) flagNeedArm(q *CQ) {
	ch.mu.Lock()
	if ch.cqs[q.cq] == q {
		q.needArm = true
		ch.recheck = slices.DeleteFunc(ch.recheck, func(o *CQ) bool { return o == q })
		ch.recheck = append(ch.recheck, q)
	}
	ch.mu.Unlock()
}

// unmarkRecheck takes q off the channel's recheck list (the caller holds
// q.wait).
func (ch *Channel) unmarkRecheck(q *CQ) {
	ch.mu.Lock()
	if !q.needArm || ch.cqs[q.cq] != q {
		ch.recheck = slices.DeleteFunc(ch.recheck, func(o *CQ) bool { return o == q })
	}
	ch.mu.Unlock()
}

// takeNeedArm reports and clears needArm (the caller holds q.wait).
func (q *CQ) takeNeedArm() bool {
	q.ch.mu.Lock()
	defer q.ch.mu.Unlock()
	need := q.needArm
	q.needArm = false
	return need
}

// readOne reads one event of the channel (the caller holds ch.reader),
// acknowledges it, and reports whether it is self's; another CQ's event
// is handed to that CQ's waiter.
func (ch *Channel) readOne(ctx context.Context, self *CQ) (bool, error) {
	vcq, err := ch.ch.GetCQEvent(ctx)
	if err != nil {
		return false, err
	}
	return ch.dispatch(vcq, self)
}

// readQueued is readOne without waiting: uverbs.ErrNoEvent when no event
// is queued.
func (ch *Channel) readQueued(self *CQ) (bool, error) {
	vcq, err := ch.ch.TryGetCQEvent()
	if err != nil {
		return false, err
	}
	return ch.dispatch(vcq, self)
}

// dispatch acknowledges vcq's event and reports whether it is self's;
// another CQ's is handed to that CQ's waiter.
func (ch *Channel) dispatch(vcq *uverbs.CQ, self *CQ) (bool, error) {
	if err := vcq.AckEvents(1); err != nil {
		return false, err
	}
	if self != nil && vcq == self.cq {
		return true, nil
	}
	ch.mu.Lock()
	other := ch.cqs[vcq]
	ch.mu.Unlock()
	if other == nil {
		return false, nil
	}
	select {
	case other.wait <- struct{}{}:
		// No Wait runs on it: its next CQ.Wait, or a Channel.Wait's
		// recheck, re-arms it and looks for its completions.
		ch.flagNeedArm(other)
		<-other.wait
		select {
		case ch.kick <- struct{}{}:
		default:
		}
	default:
		// A Wait holds it. A CQ.Wait takes the signal and re-arms; a
		// Channel.Wait's recheck may instead have found other armed and
		// empty just before this event disarmed it, so other is flagged
		// too, for the next recheck to re-arm.
		ch.flagNeedArm(other)
		select {
		case other.signal <- struct{}{}:
		default: // already signalled
		}
		select {
		case ch.kick <- struct{}{}:
		default:
		}
		hook("dispatch:busy", other)
	}
	return false, nil
}

// All returns an iterator over the CQ's completions as they arrive: it
// polls into buf (len(buf) at a time; nil means 16) and Waits when none is
// ready. It ends when ctx ends (quietly) or on an error, which it yields
// last.
func (q *CQ) All(ctx context.Context, buf []uverbs.WC) iter.Seq2[uverbs.WC, error] {
	if len(buf) == 0 {
		buf = make([]uverbs.WC, 16)
	}
	return func(yield func(uverbs.WC, error) bool) {
		for {
			n, err := q.GetWC(buf)
			if err != nil {
				yield(uverbs.WC{}, err)
				return
			}
			for _, wc := range buf[:n] {
				if !yield(wc, nil) {
					return
				}
			}
			if n > 0 {
				continue
			}
			if err := q.Wait(ctx); err != nil {
				if ctx == nil || ctx.Err() == nil { // Wait refused a nil ctx
					yield(uverbs.WC{}, err)
				}
				return
			}
		}
	}
}

// Close destroys the CQ (ibv_destroy_cq(3), as librpma's internal
// rpma_cq_delete does; after the QPs that use it: the kernel refuses
// with EBUSY before, and the CQ stays usable) and, if it had its own
// channel, closes that. ctx bounds the destroy's wait for the application
// to acknowledge the asynchronous events naming the CQ that it read
// (completion events the CQ acknowledges itself). A blocked Wait returns
// an error matching uverbs.ErrClosed, as do Wait, GetWC and Fd after.
// When that wait ends with ctx (a *uverbs.UnackedError), the CQ is
// destroyed all the same and its own channel closed. Concurrent Closes
// take turns: a later one waits (bounded by its ctx) for the one under
// way and then reports the CQ closed.
func (q *CQ) Close(ctx context.Context) error {
	if q == nil || q.cq == nil {
		return errNil("close")
	}
	if ctx == nil {
		return q.cq.Destroy(ctx) // its nil-ctx error
	}
	// A ctx that has ended still destroys (its end only cuts short the
	// wait for acknowledgements): it bounds only the wait for another
	// Close's turn.
	select {
	case q.closing <- struct{}{}:
	default:
		select {
		case q.closing <- struct{}{}:
		case <-ctx.Done():
			return &uverbs.OpError{Object: "cq", Method: "destroy", Err: ctx.Err()}
		}
	}
	defer func() { <-q.closing }()
	err := q.cq.Destroy(ctx)
	if err != nil {
		if _, rerr := q.cq.Ready(); !errors.Is(rerr, uverbs.ErrClosed) {
			return err // refused: the CQ lives on
		}
	}
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return err
	}
	q.closed = true
	close(q.done)
	if q.cancel != nil {
		q.cancel()
	}
	q.parent, q.derived, q.cancel = nil, nil, nil
	q.mu.Unlock()
	q.ch.mu.Lock()
	delete(q.ch.cqs, q.cq)
	q.ch.recheck = slices.DeleteFunc(q.ch.recheck, func(o *CQ) bool { return o == q })
	q.ch.mu.Unlock()
	if q.own {
		if cerr := q.ch.ch.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// Fd returns the shared channel's descriptor (see CQ.Fd).
func (ch *Channel) Fd() (int, error) {
	if ch == nil || ch.ch == nil {
		return -1, &uverbs.OpError{Object: "cq_channel", Method: "get_fd", Err: fmt.Errorf("%w: nil channel", uverbs.ErrInvalid)}
	}
	fd := ch.ch.Fd()
	if fd < 0 {
		return -1, &uverbs.OpError{Object: "cq_channel", Method: "get_fd", Err: uverbs.ErrClosed}
	}
	return fd, nil
}

// Wait waits on every CQ of the channel at once and returns one that may
// have completions ready: first a CQ it returned before that still has
// completions waiting (the application may have left some, or more came
// before the re-arm), oldest first, else the CQ of the next event
// (acknowledged and re-armed). Its cost does not grow with the number of
// CQs on the channel: it looks again only at the CQs it returned (until it
// finds them empty) and at those whose re-arm failed, because every other
// CQ is armed and empty, so its next completion raises an event. For
// servers with many CQs on one channel; several goroutines may call it at
// once, and then two may be handed the same CQ. Mixing it with the CQs'
// own Wait on one channel is allowed: a CQ whose event one reads is
// handed to the other's waiter if one is waiting on it (so both may
// return for one event), and nothing is slept through; but a program
// normally uses one or the other.
func (ch *Channel) Wait(ctx context.Context) (*CQ, error) {
	if ch == nil || ch.ch == nil {
		return nil, &uverbs.OpError{Object: "cq_channel", Method: "wait", Err: fmt.Errorf("%w: nil channel", uverbs.ErrInvalid)}
	}
	if ctx == nil {
		return nil, &uverbs.OpError{Object: "cq_channel", Method: "wait", Err: fmt.Errorf("%w: nil context.Context", uverbs.ErrInvalid)}
	}
	for {
		if q, err := ch.recheckAll(ctx); q != nil || err != nil {
			return q, err
		}
		select {
		case ch.reader <- struct{}{}:
		case <-ch.kick:
			continue // a CQ.Wait read an event for the list
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		select {
		case <-ch.kick: // since the list was read
			<-ch.reader
			continue
		default:
		}
		break
	}
	defer func() { <-ch.reader }()
	for {
		vcq, err := ch.ch.GetCQEvent(ctx)
		if err != nil {
			return nil, err
		}
		if err := vcq.AckEvents(1); err != nil && !errors.Is(err, uverbs.ErrClosed) {
			return nil, err
		}
		ch.mu.Lock()
		q := ch.cqs[vcq] // nil: closed since; its event means nothing
		ch.mu.Unlock()
		if q == nil {
			continue
		}
		hook("event:found", q)
		// Re-arm under the CQ's own wait lock, and have the next Wait look
		// at the CQ again: what came between the event and the arm raises
		// none. The lock is taken only if free, never waited for while
		// this goroutine holds the reader (a CQ.Wait on q holds q's lock
		// and may be waiting for the reader): if it is held, q's next Wait
		// re-arms it, and a CQ.Wait holding it is told of the event.
		select {
		case q.wait <- struct{}{}:
			q.ch.markRecheck(q)
			err = q.rearm()
			closed := errors.Is(err, uverbs.ErrClosed)
			if closed {
				q.ch.unmarkRecheck(q)
			}
			<-q.wait
			if closed {
				// Closed since the lookup: its event means nothing, as
				// for one closed before it; the channel is fine.
				continue
			}
		default:
			ch.flagNeedArm(q)
			select {
			case q.signal <- struct{}{}:
			default:
			}
		}
		return q, err
	}
}

// recheckAll runs recheckOne over a copy of the recheck list (taken
// under mu; recheckOne changes the list) until a CQ is ready, and
// returns it, or nil when none is.
func (ch *Channel) recheckAll(ctx context.Context) (*CQ, error) {
	ch.mu.Lock()
	var cqs []*CQ
	if n := len(ch.spare); n > 0 {
		cqs, ch.spare = ch.spare[n-1], ch.spare[:n-1]
	}
	cqs = append(cqs[:0], ch.recheck...)
	ch.mu.Unlock()
	var ready *CQ
	var err error
	for _, q := range cqs {
		var ok bool
		if ok, err = q.recheckOne(ctx); err != nil {
			break
		}
		if ok {
			ready = q
			break
		}
	}
	clear(cqs) // no references kept to CQs closed since
	ch.mu.Lock()
	ch.spare = append(ch.spare, cqs[:0])
	ch.mu.Unlock()
	return ready, err
}

// recheckOne arms q if it is not, and reports whether completions are
// waiting in it; an armed and empty CQ leaves the recheck list, since its
// next completion raises an event. Both happen under q's wait lock, which
// the event path holds to put q back on the list, so q cannot leave the
// list after an event that came since the check.
func (q *CQ) recheckOne(ctx context.Context) (bool, error) {
	select {
	case q.wait <- struct{}{}:
	default:
		// A Wait holds it (a CQ.Wait, or another Channel.Wait's recheck):
		// that one looks after q, which stays on the list.
		return false, ctx.Err()
	}
	defer func() { <-q.wait }()
	if q.takeNeedArm() || !q.armed {
		if err := q.rearm(); err != nil {
			if errors.Is(err, uverbs.ErrClosed) { // closed since the list was read
				q.ch.unmarkRecheck(q)
				return false, nil
			}
			return false, err
		}
	}
	n, err := q.cq.Ready()
	if errors.Is(err, uverbs.ErrClosed) {
		q.ch.unmarkRecheck(q)
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if n > 0 {
		q.ch.markRecheck(q) // to the end: the others' turn first next time
		return true, nil
	}
	// An event read now by another goroutine's Wait finds q's lock held;
	// that Wait flags q for re-arming, which keeps q on the list.
	hook("recheck:empty", q)
	q.ch.unmarkRecheck(q)
	return false, nil
}

// testHook, when a test sets it (before any Wait runs), is called at named
// points of the waits, so that a test can interleave two of them
// deterministically.
var testHook func(point string, q *CQ)

func hook(point string, q *CQ) {
	if testHook != nil {
		testHook(point, q)
	}
}

// SetWaitMode sets how waits on the channel wait (uverbs.WaitPoller, the
// default, or uverbs.WaitThread).
func (ch *Channel) SetWaitMode(m uverbs.WaitMode) error {
	if ch == nil || ch.ch == nil {
		return &uverbs.OpError{Object: "cq_channel", Method: "set_wait_mode", Err: fmt.Errorf("%w: nil channel", uverbs.ErrInvalid)}
	}
	return ch.ch.SetWaitMode(m)
}

// Close closes the shared channel (after its CQs: EBUSY before).
func (ch *Channel) Close() error {
	if ch == nil || ch.ch == nil {
		return &uverbs.OpError{Object: "cq_channel", Method: "close", Err: fmt.Errorf("%w: nil channel", uverbs.ErrInvalid)}
	}
	return ch.ch.Close()
}
