package bw

import (
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/pureverbs/pureverbs/uverbs"
)

// What the loops need of a QP and a CQ (*uverbs.QP, *uverbs.CQ; fakes in
// tests).
type (
	sender interface {
		PostSend(wrs []uverbs.SendWR) error
	}
	receiver interface {
		PostRecv(wrs []uverbs.RecvWR) error
	}
	poller interface {
		Poll(wcs []uverbs.WC) (int, error)
	}
	// waiter sleeps until the next completion event of the loop's CQ,
	// acknowledges it and asks for the next one (ctx_notify_events);
	// nil when the loop polls (perftest without -e).
	waiter interface {
		wait() error
	}
)

// sendCompError is perftest's NOTIFY_COMP_ERROR_SEND: a send queue's
// completion with an error, and the counts at that point.
func sendCompError(wc *uverbs.WC, scnt, ccnt uint64) error {
	return msgError{" Completion with error at client",
		fmt.Sprintf(" Failed status %d: wr_id %d syndrom 0x%x", wc.Status, int(wc.ID), wc.VendorErr),
		fmt.Sprintf("scnt=%d, ccnt=%d", scnt, ccnt)}
}

// recvCompError is perftest's NOTIFY_COMP_ERROR_RECV: a receive's
// completion with an error, and the receives counted before it.
func recvCompError(wc *uverbs.WC, rcnt uint64) error {
	return msgError{" Completion with error at server",
		fmt.Sprintf(" Failed status %d: wr_id %d syndrom 0x%x", wc.Status, int(wc.ID), wc.VendorErr),
		fmt.Sprintf(" rcnt=%d", rcnt)}
}

// pollBatch is how many completions one poll reads (CTX_POLL_BATCH).
const pollBatch = 16

// inc is perftest's INC: a message's stride in the cycle buffer, at least
// a cache line.
func inc(size, cacheLine uint64) uint64 {
	if size > cacheLine {
		return uint64(roundUp(int(size), int(cacheLine)))
	}
	return cacheLine
}

// nextAddr is increase_loc_addr/increase_rem_addr: step addr to the next
// message slot in the cycle buffer that starts at base; after cnt+1
// messages fill the cycle buffer, start over at base.
func nextAddr(addr, base, size, cnt, cacheLine, cycle uint64) uint64 {
	step := inc(size, cacheLine)
	addr += step
	if (cnt+1)%(cycle/step) == 0 {
		addr = base
	}
	return addr
}

// Phases of a run of fixed duration (-D): perftest's states, driven by
// SIGALRM there and by a timer goroutine here.
const (
	phaseWarmUp   int32 = iota // the first margin: not measured
	phaseSample                // measured: completions count
	phaseCoolDown              // the last margin: not measured
	phaseEnd                   // time is up: the loops stop
)

// background is a loop's helper goroutine (the -D clock, the
// watchdog): start runs f, which sleeps with the function it is given;
// halt stops it (a sleep then returns false) and waits for it.
type background struct {
	stop, exited chan struct{}
	// wait, when set (by tests), replaces each sleep's timer: it returns
	// when the sleep is over, or false once stop is closed. A test ends
	// its phases after the loop has made progress, not after a time a
	// loaded host may not give the loop.
	wait func(d time.Duration, stop <-chan struct{}) bool
}

func (b *background) start(f func(sleep func(time.Duration) bool)) {
	b.stop, b.exited = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(b.exited)
		f(b.sleep)
	}()
}

// sleep waits for t, or returns false when halt came first.
func (b *background) sleep(t time.Duration) bool {
	if b.wait != nil {
		return b.wait(t, b.stop)
	}
	if t <= 0 {
		return true
	}
	tick := time.NewTimer(t)
	defer tick.Stop()
	select {
	case <-tick.C:
		return true
	case <-b.stop:
		return false
	}
}

// halt stops the goroutine if it runs and waits for it to end.
func (b *background) halt() {
	if b.stop == nil {
		return
	}
	close(b.stop)
	<-b.exited
	b.stop, b.exited = nil, nil
}

// duration runs the clock of a -D run: the margin, then the measured
// stretch (its start and end stamped as timing's posted[0] and
// completed[0]), then the margin again. The loops read the phase with
// one atomic load per post and per completion. A run without end
// (--run_infinitely) stays in phaseSample until stop.
type duration struct {
	background
	total, margin time.Duration
	forever       bool
	phase         atomic.Int32
	// cpu, when set (--cpu_util), takes /proc/stat's figures where the
	// measured stretch starts and ends.
	cpu *cpuSample
}

func newDuration(total, margin time.Duration) *duration {
	return &duration{total: total, margin: margin}
}

// newForever is the clock of a run that ends only when stop is called
// (or fails).
func newForever() *duration { return &duration{forever: true} }

// stop ends the run: the loops return at their next look at the phase.
func (d *duration) stop() { d.phase.Store(phaseEnd) }

// start starts the clock; tm receives the two stamps (written before the
// phase that follows them is published).
func (d *duration) start(tm *timing) {
	if d.forever {
		// Whatever stopped an earlier run ends this one too.
		d.phase.CompareAndSwap(phaseWarmUp, phaseSample)
		return
	}
	d.phase.Store(phaseWarmUp)
	d.background.start(func(sleep func(time.Duration) bool) {
		if !sleep(d.margin) {
			return
		}
		d.cpu.take(0)
		tm.posted[0] = stamp()
		d.phase.Store(phaseSample)
		if !sleep(d.total - 2*d.margin) {
			return
		}
		tm.completed[0] = stamp()
		d.cpu.take(1)
		d.phase.Store(phaseCoolDown)
		if !sleep(d.margin) {
			return
		}
		d.phase.Store(phaseEnd)
	})
}

// cpuSample is --cpu_util's: the host's CPU time in user mode and idle
// (/proc/stat's first line, in clock ticks) at the start [0] and the end
// [1] of a -D run's measured stretch (perftest's get_cpu_stats).
type cpuSample struct {
	user, idle [2]uint64
}

// procStat is the file take reads (tests replace it).
var procStat = "/proc/stat"

// take reads sample i; a nil sample takes none. What cannot be read
// counts as 0, as perftest's atoll of a missing word does.
func (c *cpuSample) take(i int) {
	if c == nil {
		return
	}
	c.user[i], c.idle[i] = 0, 0
	b, err := os.ReadFile(procStat)
	if err != nil {
		return
	}
	line, _, _ := strings.Cut(string(b), "\n")
	// "cpu  user nice system idle iowait ..."
	f := strings.Fields(line)
	if len(f) > 1 {
		c.user[i], _ = strconv.ParseUint(f[1], 10, 64)
	}
	if len(f) > 4 {
		c.idle[i], _ = strconv.ParseUint(f[4], 10, 64)
	}
}

// util is calc_cpu_util: the stretch's user time as a percentage of
// its user and idle time (0 when neither moved, or nothing was read).
func (c *cpuSample) util() float32 {
	user, idle := int64(c.user[1]-c.user[0]), int64(c.idle[1]-c.idle[0])
	if user+idle == 0 {
		return 0
	}
	return float32(user) / float32(user+idle) * 100
}

// aliveEnv sets the watchdog's period (a Go duration, "2s"): perftest's
// is 60 s; tests shorten it.
const aliveEnv = "PUREVERBS_BW_ALIVE"

// watchdog is perftest's check_alive for the send server of a run of
// iterations: every period it compares the receives with those of the
// last check, and when none came and the run is not complete it gives
// up: stuck is set and the event waits' context, if any, canceled.
type watchdog struct {
	background
	period time.Duration
	cancel context.CancelFunc // nil when polling
	stuck  atomic.Bool
}

// start watches alive, the receives so far, against iters.
func (w *watchdog) start(alive *atomic.Uint64, iters uint64) {
	w.stuck.Store(false)
	w.background.start(func(sleep func(time.Duration) bool) {
		last := uint64(0)
		for sleep(w.period) {
			cur := alive.Load()
			if cur > last {
				last = cur
				continue
			}
			if cur < iters {
				w.stuck.Store(true)
				if w.cancel != nil {
					w.cancel()
				}
				return
			}
		}
	})
}

// sendLoop is the client side of a run (run_iter_bw): keep up to
// txDepth messages in flight on each QP, ask for a completion every
// cqMod messages (and for each QP's last), and count cqMod messages per
// completion. The QPs share one CQ; a completion's wr_id is its QP's
// index. Every value it posts and polls lives in the struct, so a run
// allocates nothing.
type sendLoop struct {
	qps     []sendQP
	cq      poller
	events  waiter    // -e
	dur     *duration // -D: iters is 0, the loop runs until phaseEnd
	sampled uint64    // -D: messages completed in phaseSample
	wc      [pollBatch]uverbs.WC
	verb    Verb
	atomic  AtomicOp // the atomic verb's operation
	iters   uint64   // per QP
	txDepth uint64   // per QP
	cqMod   uint64
	// postList > 1 (-l): each post is a QP's chain list (with its SGEs
	// in lsge), cqMod divides it.
	postList uint64
	noPeak   bool
	size     uint64
	cycle    uint64
	line     uint64 // cache line
	base     uint64 // where local starts
	local    []byte // the registered memory at base (inline sends copy from it)
	inline   int    // send and write messages up to this size inline
	tm       timing // iters * len(qps) stamps (one without the peak)
	scnt     uint64 // messages posted, all QPs
	ccnt     uint64 // messages completed, all QPs
	// progress is ccnt, published after each batch of completions for
	// the reports of a run without end.
	progress atomic.Uint64
	y        yielder
	// rate, when set (--rate_limit with the SW limiter), spaces the
	// posts into bursts.
	rate *swRate
}

// swRate is run_iter_bw's SW rate limiter: the posts go in bursts of
// burst messages (any QPs), a burst starting gap after the last one
// started; between bursts the loop only polls.
type swRate struct {
	limit    float64
	units    rateUnit
	burst    uint64
	gap      int64 // stamp units
	deadline int64 // when the next burst may start
	sending  bool
	sent     uint64 // messages of the burst posted
}

// setGap sets the gap between bursts of size-byte messages (gapNanos,
// in stamp units) and starts the limiter afresh.
func (r *swRate) setGap(size uint64) {
	r.gap = stampsPer(time.Duration(r.gapNanos(size)))
	r.deadline, r.sending, r.sent = 0, false, 0
}

// gapNanos is the gap between the starts of two bursts of size-byte
// messages, with perftest's integer messages per second and bursts per
// second. Below one burst a second (where perftest divides by zero) it
// is the burst's share of the rate.
func (r *swRate) gapNanos(size uint64) float64 {
	var pps float64
	switch r.units {
	case unitMBps:
		pps = r.limit / float64(size) * 1048576
	case unitGbps:
		pps = r.limit / float64(size*8) * 1e9
	default:
		pps = r.limit
	}
	if bursts := int64(pps) / int64(r.burst); bursts > 0 {
		return 1e9 / float64(bursts)
	}
	return float64(r.burst) / pps * 1e9
}

// sendQP is one QP of a sendLoop: its requests and counts (perftest's
// wr[i], scnt[i], ccnt[i], my_addr[i], rem_addr[i]).
type sendQP struct {
	qp      sender
	wr      [1]uverbs.SendWR
	sge     [1]uverbs.SGE
	list    []uverbs.SendWR
	lsge    []uverbs.SGE
	posting []uverbs.SendWR // what one PostSend posts: wr, or list
	myAddr  uint64          // this QP's slice of the local buffer
	remAddr uint64          // the peer's area for this QP (write, read)
	rkey    uint32          // the peer's key for it
	lkey    uint32          // this QP's MR's
	ah      *uverbs.AH      // UD: the address of the peer's QP,
	remQPN  uint32          // and its number
	remQKey uint32          // and Q_Key
	scnt    uint64
	ccnt    uint64
}

// setup prepares the work requests of every QP for size-byte messages
// (ctx_set_send_wqes): one, or a chain of postList whose slots follow
// each other in the cycle buffer and stay put from post to post, a
// completion asked for every cqMod of them.
func (l *sendLoop) setup(size uint64) {
	l.size = size
	l.postList = max(l.postList, 1)
	if l.rate != nil {
		l.rate.setGap(size)
	}
	for i := range l.qps {
		l.setupQP(&l.qps[i], uint64(i))
	}
}

func (l *sendLoop) setupQP(q *sendQP, id uint64) {
	if l.postList == 1 {
		q.posting = q.wr[:]
		l.setupWR(&q.wr[0], q.sge[:], q, id, q.myAddr, q.remAddr)
		if l.cqMod == 1 {
			q.wr[0].Flags |= uverbs.SendSignaled
		}
		return
	}
	if uint64(len(q.list)) != l.postList {
		q.list = make([]uverbs.SendWR, l.postList)
		q.lsge = make([]uverbs.SGE, l.postList)
	}
	q.posting = q.list
	addr, rem := q.myAddr, q.remAddr
	for j := range q.list {
		if j > 0 && l.size <= l.cycle/2 {
			addr = nextAddr(addr, q.myAddr, l.size, uint64(j-1), l.line, l.cycle)
			rem = nextAddr(rem, q.remAddr, l.size, uint64(j-1), l.line, l.cycle)
		}
		l.setupWR(&q.list[j], q.lsge[j:j+1], q, id, addr, rem)
		if uint64(j+1)%l.cqMod == 0 {
			q.list[j].Flags |= uverbs.SendSignaled
		}
	}
}

// setupWR fills in one request of QP q (index id) for a message at addr
// (and, for write and read, the peer's rem), unsignaled.
func (l *sendLoop) setupWR(w *uverbs.SendWR, sgl []uverbs.SGE, q *sendQP, id, addr, rem uint64) {
	sgl[0] = uverbs.SGE{Addr: addr, Length: uint32(l.size), LKey: q.lkey}
	*w = uverbs.SendWR{ID: id, SGL: sgl}
	switch l.verb {
	case Write:
		w.Opcode = uverbs.WRRDMAWrite
	case Read:
		w.Opcode = uverbs.WRRDMARead
	case Atomic:
		// perftest's operands, the same for every request: add 1, or
		// compare with 0 and swap in 0.
		if l.atomic == CmpAndSwap {
			w.Opcode, w.CompareAdd, w.Swap = uverbs.WRAtomicCmpAndSwp, 0, 0
		} else {
			w.Opcode, w.CompareAdd = uverbs.WRAtomicFetchAndAdd, 1
		}
	default:
		w.Opcode = uverbs.WRSend
	}
	if l.verb != Send {
		w.RemoteAddr, w.RKey = rem, q.rkey
	}
	if q.ah != nil {
		w.AH, w.RemoteQPN, w.RemoteQKey = q.ah, q.remQPN, q.remQKey
	}
	if !l.verb.ReadsBack() && l.size <= uint64(l.inline) {
		// IBV_SEND_INLINE: the bytes go into the queue at post time, so
		// the request names them instead of an SGE.
		off := addr - l.base
		w.Flags |= uverbs.SendInline
		w.SGL = nil
		w.Inline = l.local[off : off+l.size]
	}
}

// run posts iters messages on each QP and waits for their completions,
// recording the timestamps the report needs; with -D it posts until the
// time is up and counts the completions of the measured stretch in
// sampled.
func (l *sendLoop) run() error {
	l.reset()
	if l.dur == nil {
		if l.noPeak {
			l.tm.posted[0] = stamp()
		}
		if err := l.loop(l.iters); err != nil {
			return err
		}
		if l.noPeak {
			l.tm.completed[0] = stamp()
		}
	} else {
		// perftest leaves the messages still in flight at the end
		// uncompleted; destroying the QP flushes them.
		l.dur.start(&l.tm)
		err := l.loop(math.MaxUint64)
		l.dur.halt()
		if err != nil {
			return err
		}
	}
	toNanos(l.tm.posted, l.tm.completed)
	return nil
}

// warmUp is --perform_warm_up (perform_warm_up: write_bw, read_bw and
// atomic_bw), after setup
// and before a size's run: it empties the CQ, then on each QP posts a
// window of tx depth requests (or one post list) and waits until they
// completed. perftest waits for a completion per request (per list) but
// asks for one per cq_mod of them, so with moderation it waits for ever;
// here each warm-up request of a window is signaled, and a list waits
// for the completions it asks for.
func (l *sendLoop) warmUp() error {
	for {
		n, err := l.cq.Poll(l.wc[:])
		if err != nil {
			return msgError{"poll CQ failed: " + err.Error()}
		}
		if n == 0 {
			break
		}
	}
	for i := range l.qps {
		q := &l.qps[i]
		posts, want := l.txDepth, l.txDepth
		if l.postList > 1 {
			posts, want = 1, l.postList/l.cqMod
		}
		saved := q.wr[0].Flags
		if l.postList == 1 {
			q.wr[0].Flags |= uverbs.SendSignaled
		}
		var err error
		for j := uint64(0); j < posts && err == nil; j++ {
			if err = q.qp.PostSend(q.posting); err != nil {
				err = msgError{fmt.Sprintf("Couldn't post send during warm up: qp %d scnt=%d ", i, j*l.postList), "  (" + err.Error() + ")"}
			}
		}
		q.wr[0].Flags = saved
		if err != nil {
			return err
		}
		for want > 0 {
			n, err := l.cq.Poll(l.wc[:min(want, uint64(len(l.wc)))])
			if err != nil {
				return msgError{"poll CQ failed: " + err.Error()}
			}
			for k := range n {
				if l.wc[k].Status != uverbs.WCSuccess {
					return sendCompError(&l.wc[k], 0, 0)
				}
			}
			want -= uint64(n)
		}
	}
	return nil
}

// reset zeroes the counts and stamps before a run (a stamp the run does
// not take stays zero).
func (l *sendLoop) reset() {
	l.scnt, l.ccnt, l.sampled = 0, 0, 0
	if l.rate != nil {
		l.rate.deadline, l.rate.sending, l.rate.sent = 0, false, 0
	}
	l.progress.Store(0)
	l.y.reset()
	for i := range l.qps {
		l.qps[i].scnt, l.qps[i].ccnt = 0, 0
	}
	clear(l.tm.posted)
	clear(l.tm.completed)
}

// total is the messages of a run of iters per QP over all the QPs
// (math.MaxUint64 stays: -D).
func total(iters uint64, qps int) uint64 {
	if iters == math.MaxUint64 {
		return iters
	}
	return iters * uint64(qps)
}

// loop is run_iter_bw's loop for iters messages per QP (math.MaxUint64
// with -D: until phaseEnd): each turn tops up every QP, then polls.
func (l *sendLoop) loop(iters uint64) error {
	dur := l.dur
	tot := total(iters, len(l.qps))
	ne := 0
	for l.scnt < tot || l.ccnt < tot {
		if dur != nil && dur.phase.Load() == phaseEnd {
			return nil
		}
		// A peer that has gone never acknowledges what is in flight,
		// and rxe retries it for ever at perftest's retry count of 7.
		if l.y.check() && l.y.peerLost() {
			return errPeerGone
		}
		if end, err := l.post(iters); end || err != nil {
			return err
		}
		if l.ccnt < tot {
			// With events, sleep only after a poll found nothing: the
			// completions that came before the last re-arm raised no
			// event (perftest after 6.06; 6.06 sleeps before every poll,
			// and waits for an event that never comes when more
			// completions are queued than one poll reads).
			// (Nothing in flight between two bursts: no event to wait
			// for. Nor, with the rate limiter holding the next burst
			// back, may there be one: the requests in flight can all be
			// unsignaled, their signaled one in a burst not yet posted;
			// then the loop polls until the burst is due.)
			if l.events != nil && ne == 0 && l.scnt > l.ccnt && (l.rate == nil || l.rate.sending) {
				if err := l.events.wait(); err != nil {
					if l.y.peerLost() {
						return errPeerGone
					}
					return msgError{"Couldn't request CQ notification", "  (" + err.Error() + ")"}
				}
			}
			var err error
			if ne, err = l.poll(tot); err != nil {
				return err
			}
		}
	}
	return nil
}

// post tops up the window of every QP (the posting loops of run_iter_bw
// and run_iter_bi) for a run of iters messages per QP; end is true when
// the time of a -D run is up.
func (l *sendLoop) post(iters uint64) (end bool, err error) {
	cqMod, dur, step := l.cqMod, l.dur, l.postList
	single := step == 1 // a list's requests keep their slots and signals
	cycling := single && l.size <= l.cycle/2
	rate := l.rate
	for i := range l.qps {
		q := &l.qps[i]
		w := &q.wr[0]
		if rate != nil && !rate.sending {
			now := stamp()
			if rate.deadline > now {
				continue // not this QP's turn yet: poll
			}
			rate.deadline, rate.sending, rate.sent = now+rate.gap, true, 0
		}
		for q.scnt < iters && q.scnt-q.ccnt+step <= l.txDepth && (rate == nil || rate.sending) {
			if dur != nil && dur.phase.Load() == phaseEnd {
				return true, nil
			}
			if single && q.scnt%cqMod == 0 && cqMod > 1 && q.scnt != iters-1 {
				w.Flags &^= uverbs.SendSignaled
			}
			now := stamp()
			if l.y.at(now) {
				now = stamp()
			}
			if !l.noPeak {
				l.tm.posted[l.scnt] = now
			}
			if err := q.qp.PostSend(q.posting); err != nil {
				return false, msgError{fmt.Sprintf("Couldn't post send: qp %d scnt=%d ", i, q.scnt), "  (" + err.Error() + ")"}
			}
			if cycling {
				q.sge[0].Addr = nextAddr(q.sge[0].Addr, q.myAddr, l.size, q.scnt, l.line, l.cycle)
				if w.Inline != nil {
					off := q.sge[0].Addr - l.base
					w.Inline = l.local[off : off+l.size]
				}
				if l.verb != Send {
					w.RemoteAddr = nextAddr(w.RemoteAddr, q.remAddr, l.size, q.scnt, l.line, l.cycle)
				}
			}
			q.scnt += step
			l.scnt += step
			if single && (q.scnt%cqMod == cqMod-1 || q.scnt == iters-1) {
				w.Flags |= uverbs.SendSignaled
			}
			if rate != nil {
				if rate.sent += step; rate.sent >= rate.burst {
					rate.sending = false
				}
			}
		}
	}
	return false, nil
}

// poll reads one batch of send completions and counts them (cqMod
// messages each, for the QP each names) in a run of tot messages; it
// returns how many it read.
func (l *sendLoop) poll(tot uint64) (int, error) {
	cqMod, dur := l.cqMod, l.dur
	n, err := l.cq.Poll(l.wc[:])
	if err != nil {
		return 0, msgError{"poll CQ failed: " + err.Error()}
	}
	for i := 0; i < n; i++ {
		wc := &l.wc[i]
		if wc.ID >= uint64(len(l.qps)) {
			return 0, unknownID(wc)
		}
		if wc.Status != uverbs.WCSuccess {
			return 0, sendCompError(wc, l.scnt, l.ccnt)
		}
		l.qps[wc.ID].ccnt += cqMod
		l.ccnt += cqMod
		if dur != nil && dur.phase.Load() == phaseSample {
			l.sampled += cqMod
		}
		if !l.noPeak {
			if l.ccnt > tot {
				l.tm.completed[tot-1] = stamp()
			} else {
				l.tm.completed[l.ccnt-1] = stamp()
			}
		}
	}
	if n > 0 && dur != nil {
		l.progress.Store(l.ccnt)
	}
	return n, nil
}

// recvLoop is the server side of ib_send_bw (run_iter_bw_server): count
// receive completions, posting a new receive on the QP of each one until
// iters receives are posted on each. The QPs share one CQ; a
// completion's wr_id is its QP's index. The clock starts at the first
// completion.
type recvLoop struct {
	qps     []recvQP
	cq      poller
	events  waiter    // -e
	dur     *duration // -D: iters is 0, the loop runs until phaseEnd
	sampled uint64    // -D: receives in phaseSample
	watch   *watchdog // iterations: give up when the client stops sending
	// progress is rcnt, published after each batch of completions for
	// the watchdog and for the reports of a run without end.
	progress atomic.Uint64
	y        yielder
	wc       [pollBatch]uverbs.WC
	iters    uint64 // per QP
	depth    uint64 // receives posted on each QP before the run (rx depth)
	// postList > 1 (--recv_post_list): receives go in chains of this
	// many, a QP's chain posted again once as many of its receives
	// completed.
	postList uint64
	grh      uint64 // UD: room for the GRH before each message
	size     uint64
	cycle    uint64
	line     uint64
	tm       timing
	rcnt     uint64 // receives, all QPs
}

// recvQP is one QP of a recvLoop (perftest's rwr[i], rx_buffer_addr[i],
// posted_per_qp[i], rcnt_for_qp[i]).
type recvQP struct {
	qp      receiver
	rwr     [1]uverbs.RecvWR
	rsge    [1]uverbs.SGE
	list    []uverbs.RecvWR
	lsge    []uverbs.SGE
	posting []uverbs.RecvWR // what one PostRecv posts: rwr, or list
	rxAddr  uint64          // this QP's receive area
	lkey    uint32          // its MR's
	posted  uint64
	rcnt    uint64
	unused  uint64 // receives completed and not posted again (perftest's unused_recv_for_qp)
}

// prepost posts the first receives of each QP for size-byte messages
// (ctx_set_recv_wqes): depth of them, or depth/postList chains of
// postList whose slots follow each other in the cycle buffer and stay
// put from post to post.
func (l *recvLoop) prepost(size uint64) error {
	l.size = size
	l.postList = max(l.postList, 1)
	cycling := size <= l.cycle/2
	for i := range l.qps {
		q := &l.qps[i]
		q.rsge[0] = uverbs.SGE{Addr: q.rxAddr, Length: uint32(size + l.grh), LKey: q.lkey}
		q.rwr[0] = uverbs.RecvWR{ID: uint64(i), SGL: q.rsge[:]}
		q.posting = q.rwr[:]
		if l.postList > 1 {
			if uint64(len(q.list)) != l.postList {
				q.list = make([]uverbs.RecvWR, l.postList)
				q.lsge = make([]uverbs.SGE, l.postList)
			}
			addr := q.rxAddr
			for j := range q.list {
				if j > 0 && cycling {
					addr = nextAddr(addr, q.rxAddr, size, uint64(j), l.line, l.cycle)
				}
				q.lsge[j] = uverbs.SGE{Addr: addr, Length: uint32(size + l.grh), LKey: q.lkey}
				q.list[j] = uverbs.RecvWR{ID: uint64(i), SGL: q.lsge[j : j+1]}
			}
			q.posting = q.list
		}
		chains := l.depth / l.postList
		for j := uint64(0); j < chains; j++ {
			if err := q.qp.PostRecv(q.posting); err != nil {
				return msgError{fmt.Sprintf("Couldn't post recv Qp = %d: counter=%d", i, j), "  (" + err.Error() + ")"}
			}
			if cycling && l.postList == 1 {
				q.rsge[0].Addr = nextAddr(q.rsge[0].Addr, q.rxAddr, size, j, l.line, l.cycle)
			}
		}
		q.rsge[0].Addr = q.rxAddr
		q.posted = chains * l.postList
		q.unused = 0
	}
	return nil
}

// reset zeroes the counts and stamps before a run.
func (l *recvLoop) reset() {
	l.rcnt, l.sampled = 0, 0
	l.progress.Store(0)
	l.y.reset()
	for i := range l.qps {
		l.qps[i].rcnt = 0
	}
	clear(l.tm.posted)
	clear(l.tm.completed)
}

// run receives iters messages on each QP; with -D it receives until the
// time is up, its clock started by the first receive, and counts the
// receives of the measured stretch in sampled.
func (l *recvLoop) run() error {
	l.reset()
	iters := l.iters
	if l.dur != nil {
		iters = math.MaxUint64
		if !l.dur.forever { // (a stop before the run must hold)
			l.dur.phase.Store(phaseWarmUp)
		}
	}
	err := guarded(l.dur, l.watch, &l.progress, total(iters, len(l.qps)), func() error { return l.loop(iters) })
	if err != nil {
		return err
	}
	if l.dur == nil {
		l.tm.completed[0] = stamp()
	}
	toNanos(l.tm.posted, l.tm.completed)
	return nil
}

// loop is run_iter_bw_server's loop for iters receives per QP
// (math.MaxUint64 with -D: until phaseEnd).
func (l *recvLoop) loop(iters uint64) error {
	dur := l.dur
	tot := total(iters, len(l.qps))
	first := true
	for l.rcnt < tot {
		if dur != nil && dur.phase.Load() == phaseEnd {
			return nil
		}
		if l.watch != nil && l.watch.stuck.Load() {
			return l.stuck()
		}
		// With events: sleep, then poll until the CQ is empty.
		if l.events != nil {
			if err := l.events.wait(); err != nil {
				if l.watch != nil && l.watch.stuck.Load() {
					return l.stuck()
				}
				return msgError{" Failed to notify events to CQ", "  (" + err.Error() + ")"}
			}
		}
		for {
			if dur != nil && dur.phase.Load() == phaseEnd {
				return nil
			}
			l.y.check()
			n, err := l.cq.Poll(l.wc[:])
			if err != nil {
				return msgError{"Poll Receive CQ failed: " + err.Error()}
			}
			if n == 0 {
				break
			}
			if first {
				if dur != nil {
					dur.start(&l.tm)
				} else {
					l.tm.posted[0] = stamp()
				}
				first = false
			}
			if err := l.complete(n); err != nil {
				return err
			}
		}
	}
	return nil
}

// complete counts the n receive completions in l.wc and posts a new
// receive on the QP of each while the run needs more (always with -D),
// then publishes the count.
func (l *recvLoop) complete(n int) error {
	cycling := l.size <= l.cycle/2
	dur := l.dur
	for i := 0; i < n; i++ {
		wc := &l.wc[i]
		if wc.ID >= uint64(len(l.qps)) {
			return unknownID(wc)
		}
		q := &l.qps[wc.ID]
		if wc.Status != uverbs.WCSuccess {
			return recvCompError(wc, q.rcnt)
		}
		q.rcnt++
		l.rcnt++
		q.unused++
		if dur != nil && dur.phase.Load() == phaseSample {
			l.sampled++
		}
		if (dur != nil || q.posted+l.postList <= l.iters) && q.unused >= l.postList {
			if err := q.qp.PostRecv(q.posting); err != nil {
				return msgError{fmt.Sprintf("Couldn't post recv Qp=%d rcnt=%d", wc.ID, q.rcnt), "  (" + err.Error() + ")"}
			}
			q.unused -= l.postList
			q.posted += l.postList
			if cycling && l.postList == 1 {
				q.rsge[0].Addr = nextAddr(q.rsge[0].Addr, q.rxAddr, l.size, q.posted, l.line, l.cycle)
			}
		}
	}
	l.progress.Store(l.rcnt)
	return nil
}

// biLoop is both sides of ib_send_bw -b (run_iter_bi): each sends iters
// messages per QP through s and receives as many through r, in one loop
// that tops up the send windows, then reads a batch of receives
// (reposting), then a batch of send completions. The server sends only
// after its first receive (so that it does not start before the
// client), and the clock of a -D run starts there; the client's starts
// with the loop. The report times the sends (s.tm); with -D it counts
// the sends and receives of the measured stretch.
type biLoop struct {
	s      *sendLoop
	r      *recvLoop
	server bool
}

// run runs the loop for iters messages per QP each way (the loops'
// iters), or until the time of a -D run is up.
func (b *biLoop) run() error {
	s, r := b.s, b.r
	s.reset()
	r.reset()
	iters := s.iters
	if s.noPeak {
		s.tm.posted[0] = stamp()
	}
	if s.dur != nil {
		iters = math.MaxUint64
		if !b.server {
			s.dur.start(&s.tm)
		} else if !s.dur.forever {
			s.dur.phase.Store(phaseWarmUp)
		}
	}
	err := guarded(s.dur, r.watch, &r.progress, total(iters, len(r.qps)), func() error { return b.loop(iters) })
	if err != nil {
		return err
	}
	if s.noPeak && s.dur == nil {
		s.tm.completed[0] = stamp()
	}
	toNanos(s.tm.posted, s.tm.completed)
	return nil
}

// sampled is what a -D run reports: the sends and the receives of the
// measured stretch.
func (b *biLoop) sampled() uint64 { return b.s.sampled + b.r.sampled }

func (b *biLoop) loop(iters uint64) error {
	s, r, dur := b.s, b.r, b.s.dur
	tot := total(iters, len(s.qps))
	sending := !b.server
	idle := false
	for dur != nil || s.ccnt < tot || r.rcnt < tot {
		if dur != nil && dur.phase.Load() == phaseEnd {
			return nil
		}
		if r.watch != nil && r.watch.stuck.Load() {
			return r.stuck()
		}
		if s.y.check() && s.y.peerLost() {
			return errPeerGone
		}
		if sending {
			if end, err := s.post(iters); end || err != nil {
				return err
			}
		}
		// With events, sleep only after a turn whose polls found
		// nothing (perftest sleeps before every turn, and can wait for
		// an event that never comes; see sendLoop.loop).
		if s.events != nil && idle {
			if err := s.events.wait(); err != nil {
				if r.watch != nil && r.watch.stuck.Load() {
					return r.stuck()
				}
				if s.y.peerLost() {
					return errPeerGone
				}
				return msgError{"Failed to notify events to CQ", "  (" + err.Error() + ")"}
			}
		}
		// Every receive that has come (perftest polls rx depth at once),
		// a batch at a time.
		n := 0
		for {
			k, err := r.cq.Poll(r.wc[:])
			if err != nil {
				return msgError{"poll CQ failed: " + err.Error()}
			}
			if k == 0 {
				break
			}
			if !sending {
				sending = true
				if dur != nil {
					dur.start(&s.tm)
				}
			}
			if err := r.complete(k); err != nil {
				return err
			}
			if n += k; k < len(r.wc) {
				break
			}
		}
		m, err := s.poll(tot)
		if err != nil {
			return err
		}
		idle = n == 0 && m == 0
	}
	return nil
}

// unknownID is the error for a completion whose wr_id names no QP of the
// loop (the loops post with the QP's index; perftest would index out of
// its arrays).
func unknownID(wc *uverbs.WC) error {
	return msgError{fmt.Sprintf(" Completion with an unknown wr_id %d (status %d)", wc.ID, wc.Status)}
}

// guarded runs a receiving loop with its helpers: the watchdog, in a
// run of iterations, watching progress against tot; after it, the -D
// clock and the watchdog stop.
func guarded(dur *duration, watch *watchdog, progress *atomic.Uint64, tot uint64, loop func() error) error {
	if watch != nil && dur == nil {
		watch.start(progress, tot)
	}
	err := loop()
	if dur != nil {
		dur.halt()
	}
	if watch != nil {
		watch.halt()
	}
	return err
}

// stuck is check_alive's verdict: perftest prints it and exits with 17,
// or with 1 when it sleeps on events ("cannot produce a report").
func (l *recvLoop) stuck() error {
	m := msgError{" Did not get Message for 120 Seconds, exiting..",
		fmt.Sprintf(" Total Received=%d, Total Iters Required=%d", l.rcnt, total(l.iters, len(l.qps)))}
	if l.events != nil {
		return statusError{append(m, " Due to this issue, Perftest cannot produce a report when in event mode."), 1}
	}
	return statusError{m, 17}
}
