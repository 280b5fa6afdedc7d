package twohost

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

// An RC stream across the wire for the power-off test: the same
// bookkeeping as the fault tests' stream (internal/testkit/faults,
// stream_test.go: a test package, so it cannot be imported), with the
// QPs connected to the other host's GID.

// rcTimers are the RC transport's retry settings for a connection:
// Timeout is the ACK timeout exponent (4.096 us << Timeout), Retry the
// retries before the requester gives up (IBV_WC_RETRY_EXC_ERR).
type rcTimers struct{ Timeout, Retry uint8 }

// quickTimers give up on a silent peer within about a second (7 tries of
// 67 ms), as the fault tests' do. Not 7 retries: rxe's completer never
// counts a retry_cnt of 7 down, so 7 retries for ever.
var quickTimers = rcTimers{Timeout: 14, Retry: 6}

// connectStream drives qp RESET→RTS towards the QP numbered dest on the
// host whose GID (index 1 of its WireDev) is dgid.
func connectStream(qp *uverbs.QP, dest uint32, dgid uverbs.GID, tm rcTimers) error {
	steps := []struct {
		attr uverbs.QPAttr
		mask uverbs.QPAttrMask
	}{
		{uverbs.QPAttr{State: uverbs.QPStateInit, PortNum: 1, AccessFlags: uverbs.AccessLocalWrite},
			uverbs.QPAttrState | uverbs.QPAttrPKeyIndex | uverbs.QPAttrPort | uverbs.QPAttrAccessFlags},
		{uverbs.QPAttr{State: uverbs.QPStateRTR, PathMTU: 3, DestQPN: dest, MaxDestRdAtomic: 1, MinRNRTimer: 1,
			AH: uverbs.AHAttr{DGID: dgid, SGIDIndex: 1, HopLimit: 64, IsGlobal: true, PortNum: 1}},
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

// streamSlot is the bytes of each receive and send slot of an end's buffer.
const streamSlot = 256

// WR ids: a sequence number (unique per end), the kind and the slot.
const (
	kindSend = 1
	kindRecv = 2
)

func wrID(seq uint64, kind, slot int) uint64 { return seq<<16 | uint64(kind)<<12 | uint64(slot) }
func wrKind(id uint64) int                   { return int(id >> 12 & 0xf) }
func wrSlot(id uint64) int                   { return int(id & 0xfff) }

// streamEnd is one side of an RC stream: a QP whose sends and receives
// complete on one cq.CQ, and a registered buffer of depth receive slots
// followed by depth send slots. It keeps every work request it posted
// until that request's completion arrives, so that a completion never
// posted, or one delivered twice, and a request that never completes, are
// caught.
type streamEnd struct {
	name  string
	qp    *uverbs.QP
	q     *cq.CQ
	mr    *uverbs.MR
	buf   []byte
	depth int
	// maxSends, if not 0, caps the sends of stream (a receiving end that
	// sends one message to start its peer).
	maxSends int
	// progress counts successful receives, for other goroutines;
	// reached is closed at the milestone-th.
	progress  atomic.Int64
	milestone int
	reached   chan struct{}

	seq      uint64
	out      map[uint64]bool // posted, not completed
	maybe    map[uint64]bool // posted with an error from PostSend: may complete
	inflight int             // sends in out

	sent     int         // sends posted
	sendsOK  int         // successful send completions
	recvsOK  int         // successful receives (each checked in order)
	bad      []uverbs.WC // completions with an error status, in order
	postErrs []error
	// forced: after a failure, requests stayed outstanding for
	// flushStall and stream moved the QP to ERR itself to flush them;
	// stalledState and stalledOut are the QP's state then and how many
	// requests the kernel had not flushed.
	forced       bool
	stalledState uverbs.QPState
	stalledOut   int

	swr [1]uverbs.SendWR
	rwr [1]uverbs.RecvWR
	wcs [32]uverbs.WC
}

// newStreamEnd creates an end; reached closes at its milestone-th
// successful receive.
func newStreamEnd(name string, c *uverbs.Context, pd *uverbs.PD, depth, milestone int) (*streamEnd, error) {
	e := &streamEnd{name: name, depth: depth, buf: make([]byte, 2*depth*streamSlot), out: map[uint64]bool{}, maybe: map[uint64]bool{},
		milestone: milestone, reached: make(chan struct{})}
	var err error
	if e.q, err = cq.New(c, 4*depth, nil); err != nil {
		return nil, err
	}
	if e.qp, err = pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: e.q.Verbs(), RecvCQ: e.q.Verbs(),
		Cap: uverbs.QPCap{MaxSendWR: depth, MaxRecvWR: depth, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		e.q.Close(context.Background())
		return nil, err
	}
	if e.mr, err = pd.RegMR(e.buf, uverbs.AccessLocalWrite); err != nil {
		e.close(context.Background())
		return nil, err
	}
	return e, nil
}

// close destroys what newStreamEnd created and returns the first error.
func (e *streamEnd) close(ctx context.Context) error {
	var errs []error
	if e.qp != nil {
		errs = append(errs, e.qp.Destroy(ctx))
	}
	errs = append(errs, e.q.Close(ctx))
	if e.mr != nil {
		errs = append(errs, e.mr.Dereg())
	}
	return errors.Join(errs...)
}

func (e *streamEnd) sge(slot int) []uverbs.SGE {
	return []uverbs.SGE{{Addr: e.mr.Addr() + uint64(slot*streamSlot), Length: streamSlot, LKey: e.mr.LKey()}}
}

func (e *streamEnd) postRecv(slot int) error {
	e.seq++
	id := wrID(e.seq, kindRecv, slot)
	e.rwr[0] = uverbs.RecvWR{ID: id, SGL: e.sge(slot)}
	if err := e.qp.PostRecv(e.rwr[:]); err != nil {
		return fmt.Errorf("%s: post receive: %w", e.name, err)
	}
	e.out[id] = true
	return nil
}

// postSend posts the next numbered message. An error from PostSend after
// the request reached the ring (a refused doorbell) leaves it in maybe.
func (e *streamEnd) postSend() error {
	slot := e.depth + e.sent%e.depth
	binary.LittleEndian.PutUint64(e.buf[slot*streamSlot:], uint64(e.sent))
	e.seq++
	id := wrID(e.seq, kindSend, slot)
	e.swr[0] = uverbs.SendWR{ID: id, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: e.sge(slot)}
	if err := e.qp.PostSend(e.swr[:]); err != nil {
		e.maybe[id] = true
		e.postErrs = append(e.postErrs, err)
		return err
	}
	e.out[id] = true
	e.inflight++
	e.sent++
	return nil
}

// flushStall is how long stream waits, after a failed completion, for the
// kernel to flush what is still outstanding before it moves the QP to ERR
// itself (ibv_modify_qp to IBV_QPS_ERR, what applications do to flush).
const flushStall = 2 * time.Second

// stream runs the end's half of a two-way stream until it fails: it keeps
// up to window numbered sends in flight and consumes (checks, in order)
// and reposts receives, sleeping in cq.Wait when nothing is ready. It
// returns nil once a completion carried an error status and every request
// it posted has completed (flushed; if the kernel leaves requests
// unflushed for flushStall, as 6.1's rxe does with receives, it moves the
// QP to ERR, as applications do). With waitFirst it sends nothing until
// its first receive completed (a peer that must not talk to a QP not yet
// connected). It returns an error when a completion arrives for a request
// not outstanding, or when ctx ends first, naming what is outstanding.
func (e *streamEnd) stream(ctx context.Context, window int, waitFirst bool) error {
	for i := range e.depth {
		if err := e.postRecv(i); err != nil {
			return err
		}
	}
	failed := false
	for {
		if !failed {
			for (e.maxSends == 0 || e.sent < e.maxSends) && e.inflight < window && (!waitFirst || e.recvsOK > 0) {
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
			return fmt.Errorf("%s: GetWC: %w", e.name, err)
		}
		if k == 0 {
			if !failed || e.forced {
				if err := e.q.Wait(ctx); err != nil {
					return fmt.Errorf("%s: Wait: %w; %s", e.name, err, e.state())
				}
				continue
			}
			wctx, cancel := context.WithTimeout(ctx, flushStall)
			err := e.q.Wait(wctx)
			cancel()
			if err == nil {
				continue
			}
			if ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("%s: Wait: %w; %s", e.name, err, e.state())
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
				return fmt.Errorf("%s: completion for wr %#x, which is not outstanding (never posted, or completed twice): %+v (%v)", e.name, wc.ID, wc, wc.Status)
			}
			delete(e.out, wc.ID)
			if wrKind(wc.ID) == kindSend {
				e.inflight--
			}
			if wc.Status != uverbs.WCSuccess {
				e.bad = append(e.bad, wc)
				failed = true
				continue
			}
			switch wrKind(wc.ID) {
			case kindSend:
				e.sendsOK++
			case kindRecv:
				slot := wrSlot(wc.ID)
				if got := binary.LittleEndian.Uint64(e.buf[slot*streamSlot:]); got != uint64(e.recvsOK) {
					return fmt.Errorf("%s: receive %d carries message %d", e.name, e.recvsOK, got)
				}
				e.recvsOK++
				e.progress.Add(1)
				if e.recvsOK == e.milestone {
					close(e.reached)
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
func (e *streamEnd) forceErr() error {
	e.forced, e.stalledOut = true, len(e.out)
	attr, _, err := e.qp.Query(uverbs.QPAttrState)
	if err != nil {
		return fmt.Errorf("%s: Query: %w", e.name, err)
	}
	e.stalledState = attr.State
	if err := e.qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateErr}, uverbs.QPAttrState); err != nil {
		return fmt.Errorf("%s: Modify to ERR: %w", e.name, err)
	}
	return nil
}

// state describes the counts and what is outstanding, for messages.
func (e *streamEnd) state() string {
	kinds := map[int]int{}
	for id := range e.out {
		kinds[wrKind(id)]++
	}
	return fmt.Sprintf("%s: %d sent, %d sends and %d receives ok, %d failed (%s), outstanding %d sends and %d receives, %d post errors %v",
		e.name, e.sent, e.sendsOK, e.recvsOK, len(e.bad), e.statuses(), kinds[kindSend], kinds[kindRecv], len(e.postErrs), e.postErrs)
}

// statuses counts the failed completions by status, "first: X" first.
func (e *streamEnd) statuses() string {
	if len(e.bad) == 0 {
		return "none"
	}
	n := map[string]int{}
	for _, wc := range e.bad {
		n[wc.Status.String()]++
	}
	var parts []string
	for _, s := range slices.Sorted(maps.Keys(n)) {
		parts = append(parts, fmt.Sprintf("%d %s", n[s], s))
	}
	return fmt.Sprintf("first %q; %s", e.bad[0].Status.String(), strings.Join(parts, ", "))
}
