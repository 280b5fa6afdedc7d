package uverbs

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/pureverbs/pureverbs/abi"
	"github.com/pureverbs/pureverbs/internal/core"
	"github.com/pureverbs/pureverbs/internal/sys"
)

// CompChannel is a completion event channel (struct ibv_comp_channel,
// ibv_create_comp_channel(3)): the file descriptor on which the CQs
// created on it report that a completion arrived, once per ReqNotify.
// One channel may serve many CQs; each event names its CQ.
//
// The descriptor is non-blocking and registered with the Go runtime
// poller: GetCQEvent parks the goroutine, not an OS thread. Fd returns it
// for callers with their own epoll loop; when it polls readable, call
// TryGetCQEvent.
type CompChannel struct {
	ctx *Context
	r   *sys.RecordReader

	// cqs maps the user handles of the channel's CQs to them: read
	// (shared lock) for every event, written when a CQ joins or leaves.
	// Joining costs O(1) however many CQs share the channel (a
	// copy-on-write map made creating the 1,000th CQ twice as slow as
	// the first: docs/performance.md, "Scale").
	cqsMu  sync.RWMutex
	cqs    map[uint64]*CQ
	mu     sync.Mutex // serialises attach, detach and closed
	closed bool

	// recSem (capacity 1) guards rec from a read to its decode: a channel
	// rather than a mutex, so that a second GetCQEvent waits for the first
	// only until its own ctx ends, and TryGetCQEvent does not wait at all.
	recSem chan struct{}
	rec    [8]byte // ib_uverbs_comp_event_desc

	thread atomic.Bool // WaitThread mode

	// The arm bookkeeping (arm.go) that lets a wait skip the read that
	// would fail.
	armMu  sync.Mutex
	armed  []*CQ // armed, not yet seen to fire
	queued int   // an upper bound on the events queued and not yet read
}

// WaitMode says how GetCQEvent waits for an event that is not yet queued.
type WaitMode int

const (
	// WaitPoller parks the goroutine on the Go runtime poller (the
	// default): no OS thread is held, any number of goroutines may wait.
	// An event not yet queued costs the futex sleep and wake-up and the
	// read; the read that fails first is left out when the channel's
	// record of its CQs' arms proves nothing can be queued.
	WaitPoller WaitMode = iota
	// WaitThread blocks the calling goroutine's OS thread in ppoll(2) on
	// the channel (and a wake-up eventfd for its context and Close), then
	// reads: an event already queued takes one read, one not yet queued
	// the ppoll and the read (and a failed read first where the
	// bookkeeping cannot prove the channel empty). An opt-in for the few
	// latency-critical waiters that justify a thread each; see
	// docs/performance.md for what it buys.
	WaitThread
)

// SetWaitMode sets how GetCQEvent waits from now on.
func (ch *CompChannel) SetWaitMode(m WaitMode) error {
	if ch == nil || ch.r == nil {
		return invalidErr("comp_channel", "set_wait_mode", "nil channel")
	}
	switch m {
	case WaitPoller, WaitThread:
	default:
		return invalidErr("comp_channel", "set_wait_mode", "unknown wait mode %d", int(m))
	}
	ch.thread.Store(m == WaitThread)
	return nil
}

// CreateCompChannel creates a completion channel
// (ibv_create_comp_channel(3)) with the write command CREATE_COMP_CHANNEL.
// Close it after the CQs that use it.
func (c *Context) CreateCompChannel() (*CompChannel, error) {
	if c == nil {
		return nil, errNilContext
	}
	if c.Closed() {
		return nil, closedErr("comp_channel", "create")
	}
	var req abi.IbUverbsCreateCompChannel
	var resp abi.IbUverbsCreateCompChannelResp
	w := sys.WriteCmd{Cmd: abi.IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL, Req: sys.AsBytes(&req), Resp: sys.AsBytes(&resp)}
	if err := c.execWrite(&w, "comp_channel", "create"); err != nil {
		return nil, err
	}
	fd, err := sys.NewFDKind(int(resp.Fd), c.dev.Name, "completion channel")
	if err != nil {
		return nil, c.opErr("comp_channel", "create", err)
	}
	r, err := sys.NewRecordReader(fd)
	if err != nil {
		fd.Close()
		return nil, c.opErr("comp_channel", "create", err)
	}
	ch := &CompChannel{ctx: c, r: r, cqs: map[uint64]*CQ{}, recSem: make(chan struct{}, 1)}
	r.SetHint(ch.mayHaveEvent)
	if err := c.addChannel(ch); err != nil {
		r.Close()
		return nil, err
	}
	return ch, nil
}

// Fd returns the channel's descriptor (ibv_comp_channel.fd) for the
// caller's own poll/epoll loop, or -1 after Close. It is in non-blocking
// mode (O_NONBLOCK): reading it directly returns EAGAIN when no event is
// queued. Changing the mode with fcntl(2) would make this library's waits
// block an OS thread; leave it as it is. Each event that is read must be
// acknowledged (CQ.AckEvents), so read it with TryGetCQEvent, which counts
// it, rather than with read(2).
func (ch *CompChannel) Fd() int {
	if ch == nil {
		return -1
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.closed || ch.r == nil {
		return -1
	}
	return ch.r.Fd()
}

// Context returns the context the channel was created on.
func (ch *CompChannel) Context() *Context {
	if ch == nil {
		return nil
	}
	return ch.ctx
}

// GetCQEvent waits, parked on the runtime poller, for the next completion
// event and returns the CQ it concerns (ibv_get_cq_event(3)). Each event
// must be acknowledged with that CQ's AckEvents (in batches if you like);
// destroying the CQ waits for it. It returns ctx.Err() when ctx ends and
// an error matching ErrClosed when the channel or its Context is closed.
// It allocates nothing when ctx is the same across calls.
func (ch *CompChannel) GetCQEvent(ctx context.Context) (*CQ, error) {
	if ch == nil || ch.r == nil {
		return nil, invalidErr("comp_channel", "get_cq_event", "nil channel")
	}
	if ctx == nil {
		return nil, invalidErr("comp_channel", "get_cq_event", "nil context.Context")
	}
	return ch.readEvent(ctx, true)
}

// TryGetCQEvent is ibv_get_cq_event(3) on a non-blocking channel: it
// returns the next queued completion event without waiting,
// or an error matching ErrNoEvent (and unix.EAGAIN) when none is queued.
func (ch *CompChannel) TryGetCQEvent() (*CQ, error) {
	if ch == nil || ch.r == nil {
		return nil, invalidErr("comp_channel", "get_cq_event", "nil channel")
	}
	return ch.readEvent(context.Background(), false)
}

// ErrNoEvent is returned by TryGetCQEvent when no event is queued; it
// matches unix.EAGAIN.
var ErrNoEvent error = noEvent{}

type noEvent struct{}

func (noEvent) Error() string        { return "uverbs: no completion event queued" }
func (noEvent) Is(target error) bool { return target == sys.EAGAIN }

func (ch *CompChannel) readEvent(ctx context.Context, wait bool) (*CQ, error) {
	for {
		cq, err := ch.readOne(ctx, wait)
		if cq != nil || err != nil {
			return cq, err
		}
	}
}

// readOne reads one event; a nil CQ and nil error is an event of a CQ no
// longer known, which the caller drops.
func (ch *CompChannel) readOne(ctx context.Context, wait bool) (*CQ, error) {
	// The record buffer is the channel's: one reader at a time reads into
	// it and decodes it (recSem). A reader parked in GetCQEvent holds it:
	// another waits for it only as long as its own ctx allows, and a try
	// finds nothing to read (the parked reader takes the next event).
	select {
	case ch.recSem <- struct{}{}:
	default:
		if !wait {
			return nil, ErrNoEvent
		}
		select {
		case ch.recSem <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	var n int
	var err error
	if wait {
		if ch.thread.Load() {
			n, err = ch.r.ReadThread(ctx, ch.rec[:])
		} else {
			n, err = ch.r.Read(ctx, ch.rec[:])
		}
	} else {
		n, err = ch.r.TryRead(ch.rec[:])
	}
	uh := binary.LittleEndian.Uint64(ch.rec[:])
	<-ch.recSem
	switch {
	case err == sys.EAGAIN:
		return nil, ErrNoEvent
	case errors.Is(err, sys.ErrFileClosed):
		return nil, closedErr("comp_channel", "get_cq_event")
	case err == sys.EIO && ch.ctx.Closed():
		// Context.Close closes the command fd before the channels; the
		// kernel then marks the channel's event queue closed, and a
		// parked read wakes with EIO before the channel's own close.
		return nil, closedErr("comp_channel", "get_cq_event")
	case err == context.Canceled || err == context.DeadlineExceeded:
		return nil, err
	case err != nil:
		return nil, ch.ctx.opErr("comp_channel", "get_cq_event", err)
	case n != 8:
		return nil, &OpError{Object: "comp_channel", Method: "get_cq_event", Err: fmt.Errorf("%w: %d-byte completion event record", ErrInvalid, n)}
	}
	hook("comp_channel:read")
	ch.cqsMu.RLock()
	cq := ch.cqs[uh]
	ch.cqsMu.RUnlock()
	if cq == nil {
		// The kernel drops the unread events of a destroyed CQ, and a CQ
		// being destroyed stays in the map until its reported events are
		// acknowledged (life.destroy); unless that Destroy's context
		// ended first (an UnackedError): then its event, read before
		// the destroy, means nothing to anyone, and a reader waiting for
		// another CQ's must not fail on it.
		return nil, nil
	}
	ch.delivered(cq)
	cq.counts.Delivered(core.CompEvents, 0)
	return cq, nil
}

// attach adds cq to the channel (before its create command: an event can
// only follow a ReqNotify on the returned CQ, but the map must be ready).
func (ch *CompChannel) attach(cq *CQ) error {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.closed {
		return closedErr("cq", "create")
	}
	ch.cqsMu.Lock()
	ch.cqs[cq.uh] = cq
	ch.cqsMu.Unlock()
	return nil
}

// detach removes cq (after its destroy, or a failed create).
func (ch *CompChannel) detach(cq *CQ) {
	ch.forget(cq)
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.cqsMu.Lock()
	if ch.cqs[cq.uh] == cq {
		delete(ch.cqs, cq.uh)
	}
	ch.cqsMu.Unlock()
}

// Close closes the channel (ibv_destroy_comp_channel(3)). Like libibverbs
// it refuses with an error wrapping EBUSY while CQs created on it live.
// A goroutine blocked in GetCQEvent returns an error matching ErrClosed.
// Closing twice is a no-op.
func (ch *CompChannel) Close() error {
	if ch == nil || ch.r == nil {
		return invalidErr("comp_channel", "close", "nil channel")
	}
	ch.mu.Lock()
	if ch.closed {
		ch.mu.Unlock()
		return nil
	}
	ch.cqsMu.RLock()
	n := len(ch.cqs)
	ch.cqsMu.RUnlock()
	if n > 0 && !ch.ctx.Closed() {
		ch.mu.Unlock()
		return &OpError{Object: "comp_channel", Method: "close", Err: fmt.Errorf("%w: %d CQs still use the channel", sys.EBUSY, n)}
	}
	ch.closed = true
	ch.mu.Unlock()
	ch.ctx.removeChannel(ch)
	return ch.r.Close()
}

// closeForContext is Context.Close's end of a channel.
func (ch *CompChannel) closeForContext() {
	ch.mu.Lock()
	ch.closed = true
	ch.mu.Unlock()
	ch.r.Close()
}
