package bw

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/uverbs"
)

// readLatFake is the QP and the CQ of ib_read_lat's client: a post is one
// read in flight, which completes (raising an event when armed) at the
// next poll; a poll with a read in flight finds it only after emptyPolls
// empty polls. Posting with a read in flight fails the test's run: the
// loop must wait for each read.
type readLatFake struct {
	ev          *fakeEvents
	inFlight    bool
	posts       int
	emptyPolls  int
	empties     int
	fail        bool
	wr          uverbs.SendWR
	overlapping bool
	posting     atomic.Uint64 // posts, for a test's clock
}

func (f *readLatFake) PostSend(wrs []uverbs.SendWR) error {
	if f.inFlight {
		f.overlapping = true
	}
	f.inFlight, f.wr = true, wrs[0]
	f.posts++
	f.posting.Add(1)
	if f.ev != nil {
		f.ev.arrive()
	}
	return nil
}

func (f *readLatFake) Poll(wcs []uverbs.WC) (int, error) {
	if !f.inFlight {
		return 0, nil
	}
	if f.empties < f.emptyPolls {
		f.empties++
		return 0, nil
	}
	f.inFlight, f.empties = false, 0
	wcs[0] = uverbs.WC{Status: uverbs.WCSuccess, Opcode: uverbs.WCRDMARead}
	if f.fail {
		wcs[0].Status = uverbs.WCStatus(5)
	}
	return 1, nil
}

// TestLatReadLoop: ib_read_lat's client posts one signaled RDMA READ of
// the peer's memory at a time, stamps each post, never posts before the
// last read completed, and allocates nothing per read.
func TestLatReadLoop(t *testing.T) {
	f := &readLatFake{emptyPolls: 3}
	l := &latReadLoop{qp: f, cq: f, iters: 40, posted: make([]int64, 40)}
	l.setup(512, 0x10000, 0x90000, 7, 8)
	if err := l.run(); err != nil || f.posts != 40 || f.overlapping || f.inFlight {
		t.Fatalf("run: %v, %d posts, overlapping %v, in flight %v", err, f.posts, f.overlapping, f.inFlight)
	}
	w := f.wr
	if w.Opcode != uverbs.WRRDMARead || w.Flags != uverbs.SendSignaled || w.RemoteAddr != 0x90000 || w.RKey != 7 ||
		len(w.SGL) != 1 || w.SGL[0] != (uverbs.SGE{Addr: 0x10000, Length: 512, LKey: 8}) {
		t.Errorf("work request %+v", w)
	}
	for i := 1; i < 40; i++ {
		if l.posted[i] < l.posted[i-1] || l.posted[i] == 0 {
			t.Fatalf("stamps %v", l.posted)
		}
	}
	testkit.NoAllocs(t, 5, func() {
		if err := l.run(); err != nil {
			t.Fatal(err)
		}
	})
	// A failed read ends the run with perftest's lines.
	f.fail = true
	err := l.run()
	var m msgError
	if !errors.As(err, &m) || len(m) != 3 || m[0] != " Completion with error at client" || m[1] != " Failed status 5: wr_id 0 syndrom 0x0" || m[2] != "scnt=1, ccnt=1" {
		t.Errorf("failed read: %q", err)
	}
	// ... which ends the tool with perftest's status 17.
	var se statusError
	if !errors.As(failed17(err), &se) || se.status != 17 {
		t.Errorf("failed17: %v", failed17(err))
	}
}

// TestLatAtomicLoop: ib_atomic_lat's client is the read loop posting
// 8-byte atomics with perftest's operands, one at a time.
func TestLatAtomicLoop(t *testing.T) {
	for _, c := range []struct {
		op                  AtomicOp
		want                uverbs.WROpcode
		compareAdd, swapArg uint64
	}{
		{FetchAdd, uverbs.WRAtomicFetchAndAdd, 1, 0},
		{CmpAndSwap, uverbs.WRAtomicCmpAndSwp, 0, 0},
	} {
		f := &readLatFake{}
		l := &latReadLoop{qp: f, cq: f, iters: 20, posted: make([]int64, 20), atomic: true, op: c.op}
		l.setup(8, 0x10000, 0x90040, 7, 8)
		if err := l.run(); err != nil || f.posts != 20 || f.overlapping {
			t.Fatalf("%v: run: %v, %d posts, overlapping %v", c.op, err, f.posts, f.overlapping)
		}
		w := f.wr
		if w.Opcode != c.want || w.CompareAdd != c.compareAdd || w.Swap != c.swapArg || w.Flags != uverbs.SendSignaled ||
			w.RemoteAddr != 0x90040 || w.RKey != 7 || len(w.SGL) != 1 || w.SGL[0] != (uverbs.SGE{Addr: 0x10000, Length: 8, LKey: 8}) {
			t.Errorf("%v: work request %+v", c.op, w)
		}
	}
}

// TestLatReadLoopEvents: with -e the loop sleeps on the channel for each
// read (one wait per read), polls after the event and posts the next
// read only after the completion; a wait that fails ends the run.
func TestLatReadLoopEvents(t *testing.T) {
	ev := &fakeEvents{armed: true}
	f := &readLatFake{ev: ev}
	l := &latReadLoop{qp: f, cq: f, events: ev, iters: 25, posted: make([]int64, 25)}
	l.setup(2, 0x10000, 0x90000, 7, 8)
	if err := l.run(); err != nil || f.posts != 25 || ev.waits != 25 || f.overlapping {
		t.Fatalf("run: %v, %d posts, %d waits, overlapping %v", err, f.posts, ev.waits, f.overlapping)
	}
	// No event: the wait's error is the run's.
	ev.armed = false
	err := l.run()
	if err == nil || !strings.HasPrefix(err.Error(), "Couldn't request CQ notification\n") || !strings.Contains(err.Error(), "never comes") {
		t.Errorf("failed wait: %v", err)
	}
}

// TestLatReadLoopDuration: with -D the loop reads until the clock ends
// it, counts the completions of the measured stretch only, stamps its
// ends, and leaves no read in flight but possibly the last.
func TestLatReadLoopDuration(t *testing.T) {
	f := &readLatFake{}
	l := &latReadLoop{qp: f, cq: f, dur: newDuration(80*time.Millisecond, 20*time.Millisecond),
		tm: timing{posted: make([]int64, 1), completed: make([]int64, 1)}}
	l.dur.wait = afterProgress(20, &f.posting) // each phase holds reads, however slow the host
	l.setup(64, 0x10000, 0x90000, 7, 8)
	if err := l.run(); err != nil || l.sampled == 0 || l.sampled >= uint64(f.posts) || l.tm.completed[0] <= l.tm.posted[0] || f.overlapping {
		t.Errorf("%v: %d sampled of %d posts, stamps %v %v, overlapping %v", err, l.sampled, f.posts, l.tm.posted, l.tm.completed, f.overlapping)
	}
	if l.scnt != 0 {
		t.Errorf("scnt %d: perftest counts posts only when it stamps them", l.scnt)
	}
}

// TestComputeLatRead: a read's sample is one whole read (rtt factor 1),
// not half a round trip, in the table and with -D.
func TestComputeLatRead(t *testing.T) {
	posted := []int64{0, 10, 30, 36, 56, 156, 160}
	r := computeLat(nil, 8, 7, posted, 1, make([]uint64, 7), latOptions{rtt: 1})
	// Samples 10 20 6 20 100 4; kept 4 6 10 20: the same as TestComputeLatSamples' halves, doubled.
	if r.Min != 4 || r.Typical != 8 || r.Max != 20 || r.Avg != 10 {
		t.Errorf("%+v", r)
	}
	if d := computeLatDuration(64, 5000, 2e9, 1); d.Avg != 400 || d.TPS != 2500 {
		t.Errorf("-D: %+v", d)
	}
}

// TestLatencyGap: --latency_gap spins before each post, so consecutive
// posts are at least the gap apart, in every latency loop.
func TestLatencyGap(t *testing.T) {
	gap := gapStamps(200) // 200 us
	if gap <= 0 || gapStamps(0) != 0 {
		t.Fatalf("gapStamps(200) = %d, gapStamps(0) = %d", gap, gapStamps(0))
	}
	check := func(name string, posted []int64) {
		t.Helper()
		for i := 1; i < len(posted); i++ {
			if d := posted[i] - posted[i-1]; d < gap {
				t.Errorf("%s: posts %d and %d %d apart, gap %d", name, i-1, i, d, gap)
			}
		}
	}
	rf := &readLatFake{}
	rl := &latReadLoop{qp: rf, cq: rf, iters: 10, posted: make([]int64, 10), gap: gap}
	rl.setup(2, 0x10000, 0x90000, 7, 8)
	if err := rl.run(); err != nil {
		t.Fatal(err)
	}
	check("read", rl.posted)
	sf := &sendLatFake{}
	sl := &latSendLoop{qp: sf, rqp: sf, scq: sf, rcq: sf, client: true, iters: 10, depth: 10, cqMod: 1, posted: make([]int64, 10), gap: gap}
	sl.setup(2, make([]byte, 64), 0x10000, 0x10000, 0x10020, 5, 0, nil, 0, 0, 0)
	if err := sl.run(); err != nil {
		t.Fatal(err)
	}
	check("send", sl.posted)
	wf := &latFake{}
	mem := make([]byte, 8192)
	wl := &latWriteLoop{qp: wf, cq: wf, iters: 10, posted: make([]int64, 10), gap: gap}
	wl.setup(64, mem, 0x10000, 0x10000, 0x11000, 0x90000, 7, 8, 0)
	wf.mem, wf.recv = mem, 0x1000+63
	mem[wf.recv] = 1
	if err := wl.run(); err != nil {
		t.Fatal(err)
	}
	check("write", wl.posted)
}
