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
// never waits for the application.
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
}

// Channel is a completion channel shared by several CQs.
type Channel struct {
	ch  *uverbs.CompChannel
	own bool // created by New for one CQ

	// reader is held by the goroutine reading the channel's fd; the
	// others wait for their CQ's signal or for their turn.
	reader chan struct{}

	mu  sync.Mutex
	cqs map[*uverbs.CQ]*CQ
	// recheck lists, oldest first, the CQs that may hold completions no
	// event will announce: those whose event was read (completions that
	// came between the event and the re-arm, or that the application left
	// unpolled) and those whose re-arm failed. Channel.Wait looks at these
	// and at no other CQ, so a call costs O(len(recheck)), not O(CQs). A
	// CQ joins and leaves it only while its wait lock is held.
	recheck []*CQ
}

// NewChannel creates a completion channel for several CQs
// (ibv_create_comp_channel(3)).
func NewChannel(c *uverbs.Context) (*Channel, error) {
	ch, err := c.CreateCompChannel()
	if err != nil {
		return nil, err
	}
	return &Channel{ch: ch, reader: make(chan struct{}, 1), cqs: map[*uverbs.CQ]*CQ{}}, nil
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
	q := &CQ{cq: vcq, ch: ch, own: own, signal: make(chan struct{}, 1), wait: make(chan struct{}, 1)}
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
// queued; do not switch it to blocking with fcntl(2), which would make
// Wait hold an OS thread. Having seen it readable you may consume the
// completions with GetWC without calling Wait; the next Wait may then
// report a completion that was already consumed, harmlessly (it returns
// and GetWC finds nothing). A nil or closed CQ gives an error wrapping
// uverbs.ErrInvalid or uverbs.ErrClosed, and -1.
func (q *CQ) Fd() (int, error) {
	if q == nil || q.cq == nil {
		return -1, errNil("get_fd")
	}
	fd := q.ch.ch.Fd()
	if fd < 0 {
		return -1, &uverbs.OpError{Object: "cq", Method: "get_fd", Err: uverbs.ErrClosed}
	}
	return fd, nil
}

// GetWC polls up to len(wcs) completions into wcs and returns how many
// (rpma_cq_get_wc(3); 0 when none is ready). It makes no system call and
// allocates nothing.
func (q *CQ) GetWC(wcs []uverbs.WC) (int, error) {
	if q == nil || q.cq == nil {
		return 0, errNil("get_wc")
	}
	return q.cq.Poll(wcs)
}

// Wait blocks until a completion may be ready to GetWC, ctx ends
// (ctx.Err()), or the CQ is closed (rpma_cq_wait(3)). It keeps the CQ
// armed and re-polls after every arm, so a completion that arrives
// between a GetWC that found nothing and the arm is never slept through:
// Wait returns at once if completions are waiting. Each event is
// acknowledged as it is read; after an event Wait re-arms before it
// returns. It may return when the completion it was woken for was already
// consumed (see Fd). It allocates nothing when ctx is the same across
// calls.
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
	}
	defer func() { <-q.wait }()
	if q.takeNeedArm() || !q.armed {
		if err := q.rearm(); err != nil {
			return err
		}
	}
	if n, err := q.cq.Ready(); err != nil || n > 0 {
		return err
	}
	for {
		select {
		case <-q.signal:
			return q.rearm()
		default:
		}
		select {
		case <-q.signal:
			return q.rearm()
		case q.ch.reader <- struct{}{}:
			mine, err := q.ch.readOne(ctx, q)
			<-q.ch.reader
			if err != nil {
				return err
			}
			if mine {
				return q.rearm()
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
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
	if err := vcq.AckEvents(1); err != nil {
		return false, err
	}
	if self != nil && vcq == self.cq {
		return true, nil
	}
	ch.mu.Lock()
	other := ch.cqs[vcq]
	ch.mu.Unlock()
	if other != nil {
		select {
		case other.signal <- struct{}{}:
		default: // already signalled
		}
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
				if ctx.Err() == nil {
					yield(uverbs.WC{}, err)
				}
				return
			}
		}
	}
}

// Close destroys the CQ (after the QPs that use it) and, if it had its own
// channel, closes that. ctx bounds the destroy's wait for acknowledgements
// (the CQ acknowledges its events itself, so it does not wait). A blocked
// Wait returns an error matching uverbs.ErrClosed.
func (q *CQ) Close(ctx context.Context) error {
	if q == nil || q.cq == nil {
		return errNil("close")
	}
	if err := q.cq.Destroy(ctx); err != nil {
		return err
	}
	q.ch.mu.Lock()
	delete(q.ch.cqs, q.cq)
	q.ch.recheck = slices.DeleteFunc(q.ch.recheck, func(o *CQ) bool { return o == q })
	q.ch.mu.Unlock()
	if q.own {
		return q.ch.ch.Close()
	}
	return nil
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
// once, and then two may be handed the same CQ. Use either Channel.Wait
// or the CQs' own Wait on a channel at any one time: an event that
// Channel.Wait reads is reported here, not to a CQ.Wait.
func (ch *Channel) Wait(ctx context.Context) (*CQ, error) {
	if ch == nil || ch.ch == nil {
		return nil, &uverbs.OpError{Object: "cq_channel", Method: "wait", Err: fmt.Errorf("%w: nil channel", uverbs.ErrInvalid)}
	}
	if ctx == nil {
		return nil, &uverbs.OpError{Object: "cq_channel", Method: "wait", Err: fmt.Errorf("%w: nil context.Context", uverbs.ErrInvalid)}
	}
	var buf [16]*CQ
	ch.mu.Lock()
	cqs := append(buf[:0], ch.recheck...)
	ch.mu.Unlock()
	for _, q := range cqs {
		ready, err := q.recheckOne(ctx)
		if err != nil {
			return nil, err
		}
		if ready {
			return q, nil
		}
	}
	select {
	case ch.reader <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-ch.reader }()
	var q *CQ
	for q == nil {
		vcq, err := ch.ch.GetCQEvent(ctx)
		if err != nil {
			return nil, err
		}
		if err := vcq.AckEvents(1); err != nil && !errors.Is(err, uverbs.ErrClosed) {
			return nil, err
		}
		ch.mu.Lock()
		q = ch.cqs[vcq] // nil: closed since; its event means nothing
		ch.mu.Unlock()
	}
	var err error
	// Re-arm under the CQ's own wait lock, and have the next Wait look at
	// the CQ again: what came between the event and the arm raises none.
	select {
	case q.wait <- struct{}{}:
		q.ch.markRecheck(q)
		err = q.rearm()
		<-q.wait
	case <-ctx.Done():
		// Not re-armed: the next Wait re-arms it.
		ch.mu.Lock()
		if ch.cqs[q.cq] == q {
			q.needArm = true
			ch.recheck = slices.DeleteFunc(ch.recheck, func(o *CQ) bool { return o == q })
			ch.recheck = append(ch.recheck, q)
		}
		ch.mu.Unlock()
		err = ctx.Err()
	}
	return q, err
}

// recheckOne arms q if it is not, and reports whether completions are
// waiting in it; an armed and empty CQ leaves the recheck list, since its
// next completion raises an event. Both happen under q's wait lock, which
// the event path holds to put q back on the list, so q cannot leave the
// list after an event that came since the check.
func (q *CQ) recheckOne(ctx context.Context) (bool, error) {
	select {
	case q.wait <- struct{}{}:
	case <-ctx.Done():
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
	q.ch.unmarkRecheck(q)
	return false, nil
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
