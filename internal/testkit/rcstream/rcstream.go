// Package rcstream is the RC stream the fault tests run traffic with
// (internal/testkit/faults on one host, internal/testkit/twohost across
// the wire): two ends that keep numbered sends in flight and receives
// posted, check every message in order, and collect every completion,
// flush statuses included, so that a test can tell how a failure (a link
// going down, a peer killed or powered off) reached each end.
//
// The tests decide where an end's peer is and how it is started; this
// package only connects a QP to a given GID and streams.
package rcstream

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/uverbs"
)

// Timers are the RC transport's retry settings for a connection:
// Timeout is the ACK timeout exponent (4.096 us << Timeout), Retry the
// retries before the requester gives up (IBV_WC_RETRY_EXC_ERR).
type Timers struct{ Timeout, Retry uint8 }

// QuickTimers give up on a silent peer within about a second (7 tries of
// 67 ms), yet leave room for a guest that is slow under TCG. Not 7
// retries: rxe's completer never counts a retry_cnt of 7 down
// (`if (qp->comp.retry_cnt != 7) qp->comp.retry_cnt--`), so 7 retries
// for ever, like the RNR retry count's 7 in the specification.
var QuickTimers = Timers{Timeout: 14, Retry: 6}

// Connect drives qp RESET→RTS on port 1 towards the QP numbered dest
// behind dgid, from the local GID at sgidIndex with the given hop limit
// (1 on one host, more across a wire), with the retry settings tm.
func Connect(qp *uverbs.QP, dest uint32, dgid uverbs.GID, sgidIndex, hopLimit uint8, tm Timers) error {
	steps := []struct {
		attr uverbs.QPAttr
		mask uverbs.QPAttrMask
	}{
		{uverbs.QPAttr{State: uverbs.QPStateInit, PortNum: 1, AccessFlags: uverbs.AccessLocalWrite},
			uverbs.QPAttrState | uverbs.QPAttrPKeyIndex | uverbs.QPAttrPort | uverbs.QPAttrAccessFlags},
		{uverbs.QPAttr{State: uverbs.QPStateRTR, PathMTU: 3, DestQPN: dest, MaxDestRdAtomic: 1, MinRNRTimer: 1,
			AH: uverbs.AHAttr{DGID: dgid, SGIDIndex: sgidIndex, HopLimit: hopLimit, IsGlobal: true, PortNum: 1}},
			uverbs.QPAttrState | uverbs.QPAttrAV | uverbs.QPAttrPathMTU | uverbs.QPAttrDestQPN | uverbs.QPAttrRQPSN |
				uverbs.QPAttrMaxDestRdAtomic | uverbs.QPAttrMinRNRTimer},
		{uverbs.QPAttr{State: uverbs.QPStateRTS, Timeout: tm.Timeout, RetryCnt: tm.Retry, RNRRetry: 7, MaxRdAtomic: 1},
			uverbs.QPAttrState | uverbs.QPAttrTimeout | uverbs.QPAttrRetryCnt | uverbs.QPAttrRNRRetry |
				uverbs.QPAttrSQPSN | uverbs.QPAttrMaxQPRdAtomic},
	}
	for _, s := range steps {
		if err := qp.Modify(&s.attr, s.mask); err != nil {
			return fmt.Errorf("modify QP %#x to %v: %w", qp.QPN(), s.attr.State, err)
		}
	}
	return nil
}

// slotSize is the bytes of each receive and send slot of an end's buffer.
const slotSize = 256

// WR ids: a sequence number (unique per end), the kind and the slot.
const (
	KindSend = 1 // a send
	KindRecv = 2 // a receive
)

func wrID(seq uint64, kind, slot int) uint64 { return seq<<16 | uint64(kind)<<12 | uint64(slot) }
func wrSlot(id uint64) int                   { return int(id & 0xfff) }

// Kind returns the kind of request (KindSend or KindRecv) the work
// request id of one of an End's completions stands for.
func Kind(id uint64) int { return int(id >> 12 & 0xf) }

// End is one side of an RC stream: a QP whose sends and receives complete
// on one cq.CQ, and a registered buffer of depth receive slots followed
// by depth send slots. It keeps every work request it posted until that
// request's completion arrives, so that a completion never posted, or
// one delivered twice, and a request that never completes, are caught.
//
// Only Stream's goroutine may use an End while Stream runs, but for
// Progress, Reached and Watchdog.
type End struct {
	Name string
	QP   *uverbs.QP

	// MaxSends, if not 0, caps the sends of Stream (a receiving end that
	// sends one message to start its peer).
	MaxSends int
	// Progress counts successful receives, for other goroutines.
	Progress atomic.Int64
	// Reached, if not nil, is closed at the Milestone-th successful
	// receive.
	Milestone int
	Reached   chan struct{}

	// Bad holds the completions with an error status, in order.
	Bad []uverbs.WC
	// Forced: after a failure, requests stayed outstanding for
	// FlushStall and Stream moved the QP to ERR itself to flush them;
	// StalledState is the QP's state then, StalledOut how many requests
	// the kernel had not flushed, StalledSends and StalledRecvs the
	// same by queue.
	Forced       bool
	StalledState uverbs.QPState
	StalledOut   int
	StalledSends int
	StalledRecvs int

	// Watchdog, if set (nanoseconds; another goroutine may set it while
	// Stream runs), bounds each wait of an end that has seen no failure
	// yet: after that long without a completion Stream moves the QP to
	// ERR itself, as an application's watchdog would, and sets
	// WatchdogFired (Forced and the stalled state too). For a kernel that
	// stops retrying a dead connection without reporting it.
	Watchdog      atomic.Int64
	WatchdogFired bool

	q     *cq.CQ
	mr    *uverbs.MR
	buf   []byte
	depth int

	seq      uint64
	out      map[uint64]bool // posted, not completed
	maybe    map[uint64]bool // posted with an error from PostSend: may complete
	inflight int             // sends in out

	sent     int // sends posted
	sendsOK  int // successful send completions
	recvsOK  int // successful receives (each checked in order)
	postErrs []error

	swr [1]uverbs.SendWR
	rwr [1]uverbs.RecvWR
	wcs [32]uverbs.WC
}

// New creates an end named name (for messages) on pd of c: its CQ, its
// RC QP of depth sends and depth receives, and its registered buffer.
func New(name string, c *uverbs.Context, pd *uverbs.PD, depth int) (*End, error) {
	e := &End{Name: name, depth: depth, buf: make([]byte, 2*depth*slotSize), out: map[uint64]bool{}, maybe: map[uint64]bool{}}
	var err error
	if e.q, err = cq.New(c, 4*depth, nil); err != nil {
		return nil, err
	}
	if e.QP, err = pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: e.q.Verbs(), RecvCQ: e.q.Verbs(),
		Cap: uverbs.QPCap{MaxSendWR: depth, MaxRecvWR: depth, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		e.q.Close(context.Background())
		return nil, err
	}
	if e.mr, err = pd.RegMR(e.buf, uverbs.AccessLocalWrite); err != nil {
		e.Close(context.Background())
		return nil, err
	}
	return e, nil
}

// Close destroys what New created and returns the first error.
func (e *End) Close(ctx context.Context) error {
	var errs []error
	if e.QP != nil {
		errs = append(errs, e.QP.Destroy(ctx))
	}
	errs = append(errs, e.q.Close(ctx))
	if e.mr != nil {
		errs = append(errs, e.mr.Dereg())
	}
	return errors.Join(errs...)
}

// Outstanding returns how many requests the end posted whose completion
// has not arrived.
func (e *End) Outstanding() int { return len(e.out) }

func (e *End) sge(slot int) []uverbs.SGE {
	return []uverbs.SGE{{Addr: e.mr.Addr() + uint64(slot*slotSize), Length: slotSize, LKey: e.mr.LKey()}}
}

func (e *End) postRecv(slot int) error {
	e.seq++
	id := wrID(e.seq, KindRecv, slot)
	e.rwr[0] = uverbs.RecvWR{ID: id, SGL: e.sge(slot)}
	if err := e.QP.PostRecv(e.rwr[:]); err != nil {
		return fmt.Errorf("%s: post receive: %w", e.Name, err)
	}
	e.out[id] = true
	return nil
}

// postSend posts the next numbered message. An error from PostSend after
// the request reached the ring (a refused doorbell) leaves it in maybe.
func (e *End) postSend() error {
	slot := e.depth + e.sent%e.depth
	binary.LittleEndian.PutUint64(e.buf[slot*slotSize:], uint64(e.sent))
	e.seq++
	id := wrID(e.seq, KindSend, slot)
	e.swr[0] = uverbs.SendWR{ID: id, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: e.sge(slot)}
	if err := e.QP.PostSend(e.swr[:]); err != nil {
		e.maybe[id] = true
		e.postErrs = append(e.postErrs, err)
		return err
	}
	e.out[id] = true
	e.inflight++
	e.sent++
	return nil
}

// FlushStall is how long Stream waits, after a failed completion, for the
// kernel to flush what is still outstanding before it moves the QP to ERR
// itself (ibv_modify_qp to IBV_QPS_ERR, what applications do to flush).
// With sends outstanding it waits SendFlushStall: rxe flushes those on
// its own (6.12 always), in a workqueue that a loaded host may hold up
// for seconds, and a send left unflushed fails a 6.12 test.
const (
	FlushStall     = 2 * time.Second
	SendFlushStall = 6 * time.Second
)

// flushWait is how long to wait for the kernel's flush of what is
// outstanding: SendFlushStall while a send is, else FlushStall.
func (e *End) flushWait() time.Duration {
	for id := range e.out {
		if Kind(id) == KindSend {
			return SendFlushStall
		}
	}
	return FlushStall
}

// Stream runs the end's half of a two-way stream: it keeps up to window
// numbered sends in flight and consumes (checks, in order) and reposts
// receives, sleeping in cq.Wait when nothing is ready. It returns nil
// when
//
//   - n >= 0: n sends and n receives completed successfully, or
//   - a completion carried an error status: then it stops posting and
//     drains until every request it posted has completed (flushed). If
//     the kernel leaves requests unflushed for FlushStall (SendFlushStall
//     while a send is outstanding; rxe does
//     with receives posted once the QP is in ERR, 6.1's with others
//     too), it moves the QP to ERR, as applications do.
//
// With n < 0 only the second ends it. With waitFirst it sends nothing
// until the first receive completed (a peer that must not talk to a QP
// not yet connected). It returns an error when a completion arrives for a
// request not outstanding (never posted, or completed before), or when
// ctx ends first, naming what is still outstanding.
func (e *End) Stream(ctx context.Context, n, window int, waitFirst bool) error {
	for i := range e.depth {
		if err := e.postRecv(i); err != nil {
			return err
		}
	}
	failed := false
	for {
		if !failed {
			if n >= 0 && e.sendsOK >= n && e.recvsOK >= n {
				return nil
			}
			for (n < 0 || e.sent < n) && (e.MaxSends == 0 || e.sent < e.MaxSends) && e.inflight < window && (!waitFirst || e.recvsOK > 0) {
				if err := e.postSend(); err != nil {
					failed = true // the QP refuses: drain what it has
					break
				}
			}
		} else if len(e.out) == 0 {
			return nil
		}
		k, err := e.q.GetWC(e.wcs[:])
		if err != nil {
			return fmt.Errorf("%s: GetWC: %w", e.Name, err)
		}
		if k == 0 {
			if !failed || e.Forced {
				wctx, cancel := ctx, context.CancelFunc(func() {})
				if d := time.Duration(e.Watchdog.Load()); d > 0 && !failed {
					wctx, cancel = context.WithTimeout(ctx, d)
				}
				err := e.q.Wait(wctx)
				cancel()
				if err != nil && !failed && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
					e.WatchdogFired = true
					if err := e.forceErr(); err != nil {
						return err
					}
					continue
				}
				if err != nil {
					return fmt.Errorf("%s: Wait: %w; %s", e.Name, err, e.State())
				}
				continue
			}
			wctx, cancel := context.WithTimeout(ctx, e.flushWait())
			err := e.q.Wait(wctx)
			cancel()
			if err == nil {
				continue
			}
			if ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("%s: Wait: %w; %s", e.Name, err, e.State())
			}
			if err := e.forceErr(); err != nil {
				return err
			}
			continue
		}
		for _, wc := range e.wcs[:k] {
			if !e.out[wc.ID] {
				if e.maybe[wc.ID] {
					delete(e.maybe, wc.ID)
					continue
				}
				return fmt.Errorf("%s: completion for wr %#x, which is not outstanding (never posted, or completed twice): %+v (%v)", e.Name, wc.ID, wc, wc.Status)
			}
			delete(e.out, wc.ID)
			if Kind(wc.ID) == KindSend {
				e.inflight--
			}
			if wc.Status != uverbs.WCSuccess {
				e.Bad = append(e.Bad, wc)
				failed = true
				continue
			}
			switch Kind(wc.ID) {
			case KindSend:
				e.sendsOK++
			case KindRecv:
				slot := wrSlot(wc.ID)
				if got := binary.LittleEndian.Uint64(e.buf[slot*slotSize:]); got != uint64(e.recvsOK) {
					return fmt.Errorf("%s: receive %d carries message %d", e.Name, e.recvsOK, got)
				}
				e.recvsOK++
				e.Progress.Add(1)
				if e.Reached != nil && e.recvsOK == e.Milestone {
					close(e.Reached)
				}
				if !failed {
					if err := e.postRecv(slot); err != nil {
						failed = true
					}
				}
			}
		}
	}
}

// forceErr records the stalled QP's state and moves it to ERR.
func (e *End) forceErr() error {
	// A Wait that timed out with completions already in the ring slept
	// past them (a lost event, a missed re-arm): the library's failure,
	// which forcing the QP to ERR would hide behind the kernel's.
	if n, err := e.q.Verbs().Ready(); err == nil && n > 0 {
		return fmt.Errorf("%s: Wait timed out with %d completions ready in the CQ: it slept past them; %s", e.Name, n, e.State())
	}
	e.Forced, e.StalledOut = true, len(e.out)
	e.StalledSends, e.StalledRecvs = 0, 0
	for id := range e.out {
		if Kind(id) == KindSend {
			e.StalledSends++
		} else {
			e.StalledRecvs++
		}
	}
	attr, _, err := e.QP.Query(uverbs.QPAttrState)
	if err != nil {
		return fmt.Errorf("%s: Query: %w", e.Name, err)
	}
	e.StalledState = attr.State
	if err := e.QP.Modify(&uverbs.QPAttr{State: uverbs.QPStateErr}, uverbs.QPAttrState); err != nil {
		return fmt.Errorf("%s: Modify to ERR: %w", e.Name, err)
	}
	return nil
}

// Stall describes what forceErr found: how many sends and receives the
// kernel had left unflushed, and the QP's state.
func (e *End) Stall() string {
	wait := FlushStall
	if e.StalledSends > 0 {
		wait = SendFlushStall
	}
	return fmt.Sprintf("the kernel left %d sends and %d receives unflushed for %v (QP state %v)",
		e.StalledSends, e.StalledRecvs, wait, e.StalledState)
}

// State describes the counts and what is outstanding, for messages.
func (e *End) State() string {
	kinds := map[int]int{}
	for id := range e.out {
		kinds[Kind(id)]++
	}
	return fmt.Sprintf("%s: %d sent, %d sends and %d receives ok, %d failed (%s), outstanding %d sends and %d receives, %d post errors %v",
		e.Name, e.sent, e.sendsOK, e.recvsOK, len(e.Bad), e.Statuses(), kinds[KindSend], kinds[KindRecv], len(e.postErrs), e.postErrs)
}

// Statuses counts the failed completions by status, "first: X" first.
func (e *End) Statuses() string {
	if len(e.Bad) == 0 {
		return "none"
	}
	n := map[string]int{}
	for _, wc := range e.Bad {
		n[wc.Status.String()]++
	}
	var parts []string
	for _, s := range slices.Sorted(maps.Keys(n)) {
		parts = append(parts, fmt.Sprintf("%d %s", n[s], s))
	}
	return fmt.Sprintf("first %q; %s", e.Bad[0].Status.String(), strings.Join(parts, ", "))
}
