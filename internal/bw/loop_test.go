package bw

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/uverbs"
)

// afterProgress is a test's clock for a background (its wait): each
// sleep lasts until every counter has advanced by n since the sleep
// began, however long that takes, or until the background is halted. A
// phase of a -D run or a line of a run without end then always holds
// work, however slowly a loaded host runs the loop.
func afterProgress(n uint64, counters ...*atomic.Uint64) func(time.Duration, <-chan struct{}) bool {
	return func(_ time.Duration, stop <-chan struct{}) bool {
		from := make([]uint64, len(counters))
		for i, c := range counters {
			from[i] = c.Load()
		}
		tick := time.NewTicker(100 * time.Microsecond)
		defer tick.Stop()
		for {
			done := true
			for i, c := range counters {
				done = done && c.Load() >= from[i]+n
			}
			if done {
				return true
			}
			select {
			case <-stop:
				return false
			case <-tick.C:
			}
		}
	}
}

// fakeSQ is a send queue and its CQ: every signaled request completes at
// the next polls, a few per poll. It records what was posted without
// allocating (fixed arrays).
type fakeSQ struct {
	posts    int
	signaled [64]int // indexes of signaled posts (first 64)
	nsig     int
	addrs    [256]uint64 // local address of each post (first 256)
	remotes  [256]uint64
	ids      [256]uint64 // wr_id of each post (first 256)
	ops      [256]uverbs.WROpcode
	operands [256][2]uint64 // CompareAdd and Swap
	lengths  [256]uint32    // the SGE's length
	inline   [256]int       // inline sends: cap of the payload slice (its offset from the end of the memory)
	pending  int            // signaled, not yet polled
	queue    idQueue        // their wr_ids, in order
	perPoll  int
	ev       *fakeEvents // -e: a signaled post raises an event when armed
	calls    int         // PostSend calls
	lastLen  int         // requests in the last one
}

// fakeEvents is a completion channel with one CQ: a completion raises an
// event only while the CQ is armed, and a wait with no event queued is
// an error (the real wait would sleep for ever).
type fakeEvents struct {
	armed, queued bool
	waits         int
}

func (e *fakeEvents) arrive() {
	if e.armed {
		e.armed, e.queued = false, true
	}
}

func (e *fakeEvents) wait() error {
	if !e.queued {
		return errors.New("waiting for an event that never comes")
	}
	e.queued, e.armed = false, true
	e.waits++
	return nil
}

func (f *fakeSQ) PostSend(wrs []uverbs.SendWR) error {
	f.calls++
	f.lastLen = len(wrs)
	for i := range wrs {
		w := &wrs[i]
		if f.posts < len(f.addrs) {
			if w.Flags&uverbs.SendInline != 0 {
				f.inline[f.posts] = cap(w.Inline)
			} else {
				f.addrs[f.posts] = w.SGL[0].Addr
			}
			f.remotes[f.posts] = w.RemoteAddr
			f.ids[f.posts] = w.ID
			f.ops[f.posts] = w.Opcode
			f.operands[f.posts] = [2]uint64{w.CompareAdd, w.Swap}
			if len(w.SGL) > 0 {
				f.lengths[f.posts] = w.SGL[0].Length
			}
		}
		if w.Flags&uverbs.SendSignaled != 0 {
			f.queue.push(w.ID)
			if f.nsig < len(f.signaled) {
				f.signaled[f.nsig] = f.posts
			}
			f.nsig++
			f.pending++
			if f.ev != nil {
				f.ev.arrive()
			}
		}
		f.posts++
	}
	return nil
}

func (f *fakeSQ) Poll(wcs []uverbs.WC) (int, error) {
	n := min(f.pending, f.perPoll, len(wcs))
	for i := range n {
		wcs[i] = uverbs.WC{ID: f.queue.pop(), Status: uverbs.WCSuccess}
	}
	f.pending -= n
	return n, nil
}

// idQueue is a FIFO of wr_ids in a fixed ring (no allocation).
type idQueue struct {
	ring       [4096]uint64
	head, tail int
}

func (q *idQueue) push(id uint64) {
	q.ring[q.tail%len(q.ring)] = id
	q.tail++
}

func (q *idQueue) pop() uint64 {
	id := q.ring[q.head%len(q.ring)]
	q.head++
	return id
}

func newSendLoop(f *fakeSQ, v Verb, iters, tx, cqMod uint64, noPeak bool) *sendLoop {
	return &sendLoop{qps: []sendQP{{qp: f, myAddr: 0x10000, remAddr: 0x90000, rkey: 2}}, cq: f, verb: v, iters: iters,
		txDepth: tx, cqMod: cqMod, noPeak: noPeak, cycle: 4096, line: 64, base: 0x10000, tm: newTiming(iters, noPeak)}
}

func TestSendLoop(t *testing.T) {
	for _, c := range []struct {
		iters, tx, cqMod uint64
		size             uint64
		noPeak           bool
	}{
		{1000, 128, 100, 64, false},
		{1050, 128, 100, 64, false}, // the last message is signaled on its own
		{300, 128, 1, 65536, false},
		{500, 16, 16, 4096, true},
	} {
		f := &fakeSQ{perPoll: 3}
		l := newSendLoop(f, Write, c.iters, c.tx, c.cqMod, c.noPeak)
		l.setup(c.size)
		if err := l.run(); err != nil {
			t.Fatal(err)
		}
		if f.posts != int(c.iters) || l.scnt != c.iters || l.ccnt < c.iters {
			t.Errorf("%+v: %d posts, scnt %d ccnt %d", c, f.posts, l.scnt, l.ccnt)
		}
		// Signaled: every cqMod-th message and the last.
		var want []int
		for k := 0; k < int(c.iters); k++ {
			if uint64(k)%c.cqMod == c.cqMod-1 || k == int(c.iters)-1 {
				want = append(want, k)
			}
		}
		if f.nsig != len(want) {
			t.Errorf("%+v: %d signaled, want %d", c, f.nsig, len(want))
		}
		for i := 0; i < min(len(want), len(f.signaled)); i++ {
			if f.signaled[i] != want[i] {
				t.Errorf("%+v: signaled post %d is %d, want %d", c, i, f.signaled[i], want[i])
				break
			}
		}
		// Message slots cycle through the page in cache-line (or size)
		// steps; messages over half a page stay put.
		for k := 0; k < min(int(c.iters), len(f.addrs)); k++ {
			off := uint64(0)
			if c.size <= 2048 {
				step := max(c.size, 64)
				off = uint64(k) % (4096 / step) * step
			}
			if f.addrs[k] != 0x10000+off || f.remotes[k] != 0x90000+off {
				t.Errorf("%+v: post %d at %#x -> %#x, want offset %#x", c, k, f.addrs[k], f.remotes[k], off)
				break
			}
		}
		r := computeReport(c.size, c.iters, &l.tm, int(c.cqMod), 1, c.noPeak, false)
		if r.Avg <= 0 || (!c.noPeak && r.Peak <= 0) {
			t.Errorf("%+v: report %+v", c, r)
		}
	}
}

// TestSendLoopAtomic: the atomic verb posts 8-byte atomics with
// perftest's operands, fetch and add 1 or compare with 0 and swap in 0,
// on remote addresses that step through the page in cache lines (so
// each stays 8-byte aligned); each verb posts its own opcode.
func TestSendLoopAtomic(t *testing.T) {
	for _, c := range []struct {
		v        Verb
		op       AtomicOp
		want     uverbs.WROpcode
		operands [2]uint64
	}{
		{Atomic, FetchAdd, uverbs.WRAtomicFetchAndAdd, [2]uint64{1, 0}},
		{Atomic, CmpAndSwap, uverbs.WRAtomicCmpAndSwp, [2]uint64{0, 0}},
		{Read, FetchAdd, uverbs.WRRDMARead, [2]uint64{0, 0}},
		{Write, CmpAndSwap, uverbs.WRRDMAWrite, [2]uint64{0, 0}},
	} {
		f := &fakeSQ{perPoll: 4}
		l := newSendLoop(f, c.v, 200, 128, 100, false)
		l.atomic = c.op
		l.setup(8)
		if err := l.run(); err != nil {
			t.Fatal(err)
		}
		if f.posts != 200 {
			t.Fatalf("%v %v: %d posts", c.v, c.op, f.posts)
		}
		for k := range 200 {
			if f.ops[k] != c.want || f.operands[k] != c.operands || f.lengths[k] != 8 {
				t.Fatalf("%v %v: post %d: opcode %v operands %v length %d, want %v %v 8", c.v, c.op, k, f.ops[k], f.operands[k], f.lengths[k], c.want, c.operands)
			}
			if off := uint64(k) % 64 * 64; f.remotes[k] != 0x90000+off || f.remotes[k]%8 != 0 {
				t.Fatalf("%v %v: post %d to %#x, want %#x", c.v, c.op, k, f.remotes[k], 0x90000+off)
			}
		}
	}
}

// TestSendLoopInline: messages up to the inline size go inline, from the
// same cycling slots of the local memory.
func TestSendLoopInline(t *testing.T) {
	f := &fakeSQ{perPoll: 3}
	l := newSendLoop(f, Write, 300, 64, 10, false)
	l.local, l.inline = make([]byte, 8192), 128
	l.setup(100)
	if err := l.run(); err != nil {
		t.Fatal(err)
	}
	for k := range 100 {
		off := k % (4096 / 128) * 128
		if f.inline[k] != 8192-off || f.remotes[k] != 0x90000+uint64(off) {
			t.Fatalf("post %d: inline payload cap %d, remote %#x; want offset %d", k, f.inline[k], f.remotes[k], off)
		}
	}
	f2 := &fakeSQ{perPoll: 3}
	l = newSendLoop(f2, Write, 10, 64, 10, false)
	l.local, l.inline = make([]byte, 8192), 128
	l.setup(129)
	if err := l.run(); err != nil || f2.inline[0] != 0 || f2.addrs[0] != 0x10000 {
		t.Errorf("129 B with inline 128: %v, inline %d, address %#x", err, f2.inline[0], f2.addrs[0])
	}
}

// TestSendLoopPostList: with -l each PostSend posts a chain of the
// list's size; the requests of a list take consecutive slots that stay
// put from list to list, and every cqMod-th of a list asks for a
// completion.
func TestSendLoopPostList(t *testing.T) {
	for _, c := range []struct{ list, cqMod, size uint64 }{{4, 4, 64}, {8, 4, 64}, {8, 8, 4096}} {
		f := &fakeSQ{perPoll: 3}
		l := newSendLoop(f, Write, 96, 32, c.cqMod, false)
		l.postList = c.list
		l.setup(c.size)
		if err := l.run(); err != nil {
			t.Fatal(err)
		}
		if f.posts != 96 || f.calls != 96/int(c.list) || f.lastLen != int(c.list) || l.ccnt < 96 {
			t.Errorf("%+v: %d requests in %d posts of %d, ccnt %d", c, f.posts, f.calls, f.lastLen, l.ccnt)
		}
		for k := 0; k < 96; k++ {
			j := uint64(k) % c.list
			off := j * max(c.size, 64)
			if c.size > 2048 {
				off = 0
			}
			if f.addrs[k] != 0x10000+off || f.remotes[k] != 0x90000+off {
				t.Errorf("%+v: request %d at %#x -> %#x, want offset %#x", c, k, f.addrs[k], f.remotes[k], off)
				break
			}
		}
		if f.nsig != 96/int(c.cqMod) {
			t.Errorf("%+v: %d signaled", c, f.nsig)
		}
		for i := 0; i < min(f.nsig, len(f.signaled)); i++ {
			if uint64(f.signaled[i]+1)%c.cqMod != 0 {
				t.Errorf("%+v: request %d signaled", c, f.signaled[i])
				break
			}
		}
	}
}

// TestSendLoopInlineSignaled: a completion for every inline message
// (-I with -Q 1) keeps both flags.
func TestSendLoopInlineSignaled(t *testing.T) {
	f := &fakeSQ{perPoll: 3}
	l := newSendLoop(f, Send, 20, 8, 1, false)
	l.local, l.inline = make([]byte, 8192), 64
	l.setup(64)
	if want := uverbs.SendInline | uverbs.SendSignaled; l.qps[0].wr[0].Flags != want {
		t.Errorf("flags %v, want %v", l.qps[0].wr[0].Flags, want)
	}
	if err := l.run(); err != nil || f.nsig != 20 || f.inline[19] == 0 {
		t.Errorf("%v: %d signaled, inline %v", err, f.nsig, f.inline[:20])
	}
}

// TestSendLoopTxDepth: never more than tx depth messages without a
// completion covering them.
func TestSendLoopTxDepth(t *testing.T) {
	f := &fakeSQ{perPoll: 1}
	l := newSendLoop(f, Send, 1000, 32, 8, false)
	var credit uint64
	l.cq = pollFunc(func(wcs []uverbs.WC) (int, error) {
		n, err := f.Poll(wcs)
		credit += uint64(n) * 8
		if in := l.scnt - min(credit, l.scnt); in > 32 {
			t.Fatalf("%d in flight", in)
		}
		return n, err
	})
	l.setup(64)
	if err := l.run(); err != nil {
		t.Fatal(err)
	}
	if f.remotes[5] != 0 {
		t.Errorf("send set a remote address %#x", f.remotes[5])
	}
}

type pollFunc func([]uverbs.WC) (int, error)

func (p pollFunc) Poll(wcs []uverbs.WC) (int, error) { return p(wcs) }

// fakeRQ is a receive queue whose receives complete at once, a few per
// poll.
type fakeRQ struct {
	posted, done int
	addrs        [256]uint64
	perQP        [4][64]uint64 // the first receive addresses of QPs 0-3
	nQP          [4]int        // receives posted on each
	perPoll      int
	ev           *fakeEvents
	queue        idQueue
	calls        int        // PostRecv calls
	lens         [64]int    // how many calls posted n receives (n < 64)
	lkeys        [16]uint64 // receives posted with each lkey (< 16)
}

func (f *fakeRQ) PostRecv(wrs []uverbs.RecvWR) error {
	f.calls++
	f.lens[min(len(wrs), len(f.lens)-1)]++
	for _, wr := range wrs {
		f.lkeys[min(wr.SGL[0].LKey, uint32(len(f.lkeys)-1))]++
		if f.posted < len(f.addrs) {
			f.addrs[f.posted] = wr.SGL[0].Addr
		}
		if id := wr.ID; id < uint64(len(f.nQP)) {
			if f.nQP[id] < len(f.perQP[id]) {
				f.perQP[id][f.nQP[id]] = wr.SGL[0].Addr
			}
			f.nQP[id]++
		}
		f.queue.push(wr.ID)
		f.posted++
	}
	if f.ev != nil {
		f.ev.arrive()
	}
	return nil
}

func (f *fakeRQ) Poll(wcs []uverbs.WC) (int, error) {
	n := min(f.posted-f.done, f.perPoll, len(wcs))
	for i := range n {
		wcs[i] = uverbs.WC{ID: f.queue.pop(), Status: uverbs.WCSuccess}
	}
	f.done += n
	return n, nil
}

// TestSendLoopQPs: with -q the loop keeps each QP's own window of tx
// depth, posts from each QP's own slice to the peer's area for it, names
// the QP in wr_id, and counts a completion for the QP it names; the run
// and the report cover iters messages per QP.
func TestSendLoopQPs(t *testing.T) {
	const nqp, iters, tx, cqMod = 3, 100, 16, 4
	f := &fakeSQ{perPoll: 2}
	l := newSendLoop(f, Write, iters, tx, cqMod, false)
	l.qps = make([]sendQP, nqp)
	for i := range l.qps {
		l.qps[i] = sendQP{qp: f, myAddr: 0x10000 + uint64(i)*0x1000, remAddr: 0x90000 + uint64(i)*0x1000, rkey: 2}
	}
	l.tm = newTiming(iters*nqp, false)
	var inFlight [nqp]uint64
	l.cq = pollFunc(func(wcs []uverbs.WC) (int, error) {
		for i := range inFlight {
			if n := l.qps[i].scnt - l.qps[i].ccnt; n > tx {
				t.Fatalf("QP %d: %d in flight", i, n)
			}
		}
		return f.Poll(wcs)
	})
	l.setup(64)
	if err := l.run(); err != nil {
		t.Fatal(err)
	}
	if f.posts != iters*nqp || l.scnt != iters*nqp || l.ccnt < iters*nqp {
		t.Fatalf("%d posts, scnt %d ccnt %d", f.posts, l.scnt, l.ccnt)
	}
	var posts [nqp]int
	for k := 0; k < len(f.ids); k++ {
		id := f.ids[k]
		if id >= nqp {
			t.Fatalf("post %d: wr_id %d", k, id)
		}
		off := uint64(posts[id]) % 64 * 64
		if f.addrs[k] != l.qps[id].myAddr+off || f.remotes[k] != l.qps[id].remAddr+off {
			t.Fatalf("post %d (QP %d, its %dth): %#x -> %#x", k, id, posts[id], f.addrs[k], f.remotes[k])
		}
		posts[id]++
	}
	for i := range l.qps {
		if l.qps[i].scnt != iters || l.qps[i].ccnt < iters {
			t.Errorf("QP %d: scnt %d ccnt %d", i, l.qps[i].scnt, l.qps[i].ccnt)
		}
	}
	// The first round fills every QP's window before the first poll.
	if f.ids[0] != 0 || f.ids[tx] != 1 || f.ids[2*tx] != 2 {
		t.Errorf("first posts from QPs %d, %d, %d", f.ids[0], f.ids[tx], f.ids[2*tx])
	}
	if r := computeReport(64, iters*nqp, &l.tm, cqMod, 1, false, false); r.Iters != iters*nqp || r.Avg <= 0 || r.Peak <= 0 {
		t.Errorf("report %+v", r)
	}
}

// TestLoopsUnknownID: a completion naming no QP of the loop ends the run
// with an error, not an index out of range.
func TestLoopsUnknownID(t *testing.T) {
	f := &fakeSQ{perPoll: 1}
	l := newSendLoop(f, Write, 10, 4, 1, false)
	l.cq = pollFunc(func(wcs []uverbs.WC) (int, error) {
		wcs[0] = uverbs.WC{ID: 7}
		return 1, nil
	})
	l.setup(64)
	if err := l.run(); err == nil || !strings.Contains(err.Error(), "unknown wr_id 7") {
		t.Errorf("send: %v", err)
	}
	r := &fakeRQ{perPoll: 1}
	rl := &recvLoop{qps: []recvQP{{qp: r, rxAddr: 0x20000}}, cq: pollFunc(func(wcs []uverbs.WC) (int, error) {
		wcs[0] = uverbs.WC{ID: 1}
		return 1, nil
	}), iters: 10, depth: 4, cycle: 4096, line: 64, tm: newTiming(1, true)}
	if err := rl.prepost(64); err != nil {
		t.Fatal(err)
	}
	if err := rl.run(); err == nil || !strings.Contains(err.Error(), "unknown wr_id 1") {
		t.Errorf("receive: %v", err)
	}
}

// TestRecvLoopQPs: with -q each QP gets rx depth receives in its own
// area, a completion is refilled on the QP it names, and the run ends
// after iters receives on each.
func TestRecvLoopQPs(t *testing.T) {
	const nqp, iters, depth = 3, 100, 8
	f := &fakeRQ{perPoll: 5}
	l := &recvLoop{cq: f, iters: iters, depth: depth, cycle: 4096, line: 64, tm: newTiming(1, true)}
	for i := range nqp {
		l.qps = append(l.qps, recvQP{qp: f, rxAddr: 0x20000 + uint64(i)*0x1000})
	}
	if err := l.prepost(128); err != nil {
		t.Fatal(err)
	}
	if f.posted != nqp*depth {
		t.Fatalf("preposted %d", f.posted)
	}
	if err := l.run(); err != nil {
		t.Fatal(err)
	}
	if f.posted != nqp*iters || f.done != nqp*iters || l.rcnt != nqp*iters {
		t.Errorf("posted %d, done %d, rcnt %d", f.posted, f.done, l.rcnt)
	}
	for i := range nqp {
		if f.nQP[i] != iters || l.qps[i].rcnt != iters {
			t.Errorf("QP %d: %d posted, %d received", i, f.nQP[i], l.qps[i].rcnt)
		}
		// The preposted receives cycle through the QP's area; so do the
		// refills, from its start again (as in perftest).
		for k := range 64 {
			a, rx := f.perQP[i][k], l.qps[i].rxAddr
			if (k < depth && a != rx+uint64(k)*128) || (k == depth && a != rx) || a < rx || a >= rx+4096 || (a-rx)%128 != 0 {
				t.Fatalf("QP %d receive %d at %#x (area %#x)", i, k, a, rx)
			}
		}
	}
}

// TestRecvLoopPostList: with --recv_post_list each QP preposts rx
// depth / list size chains of the list size, whose slots follow each
// other in the QP's area and stay put, and posts its chain again each
// time that many of its receives completed, until iters are posted; each
// QP's receives carry its own lkey (--mr_per_qp).
func TestRecvLoopPostList(t *testing.T) {
	const nqp, iters, depth, list = 2, 96, 20, 8
	f := &fakeRQ{perPoll: 5}
	l := &recvLoop{cq: f, iters: iters, depth: depth, postList: list, cycle: 4096, line: 64, tm: newTiming(1, true)}
	for i := range nqp {
		l.qps = append(l.qps, recvQP{qp: f, rxAddr: 0x20000 + uint64(i)*0x1000, lkey: uint32(10 + i)})
	}
	if err := l.prepost(128); err != nil {
		t.Fatal(err)
	}
	if f.posted != nqp*16 || f.calls != nqp*2 {
		t.Fatalf("preposted %d receives in %d calls, want %d in %d", f.posted, f.calls, nqp*16, nqp*2)
	}
	if err := l.run(); err != nil {
		t.Fatal(err)
	}
	if f.posted != nqp*iters || f.done != nqp*iters || l.rcnt != nqp*iters {
		t.Errorf("posted %d, done %d, rcnt %d", f.posted, f.done, l.rcnt)
	}
	if f.lens[list] != f.calls || f.calls != nqp*iters/list {
		t.Errorf("chains posted (length: calls) %v", f.lens)
	}
	for i := range nqp {
		rx := l.qps[i].rxAddr
		for k := range 64 {
			if want := rx + uint64(k%list)*128; f.perQP[i][k] != want {
				t.Fatalf("QP %d receive %d at %#x, want %#x", i, k, f.perQP[i][k], want)
			}
		}
		if f.lkeys[uint32(10+i)] != iters {
			t.Errorf("QP %d: %d receives with its lkey", i, f.lkeys[uint32(10+i)])
		}
	}
	// With -D the chains keep coming until the time is up.
	f = &fakeRQ{perPoll: 3}
	l = &recvLoop{qps: []recvQP{{qp: f, rxAddr: 0x20000}}, cq: f, depth: 16, postList: 4, cycle: 4096, line: 64, tm: newTiming(1, true)}
	l.dur = newDuration(0, 0)
	l.dur.wait = afterProgress(200, &l.progress)
	if err := l.prepost(64); err != nil {
		t.Fatal(err)
	}
	if err := l.run(); err != nil {
		t.Fatal(err)
	}
	if l.rcnt < 200 || f.posted < 200 || f.lens[4] != f.calls {
		t.Errorf("-D: %d received, %d posted, chains %v", l.rcnt, f.posted, f.lens)
	}
}

func TestRecvLoop(t *testing.T) {
	f := &fakeRQ{perPoll: 5}
	l := &recvLoop{qps: []recvQP{{qp: f, rxAddr: 0x20000}}, cq: f, iters: 1000, depth: 512, cycle: 4096, line: 64, tm: newTiming(1, true)}
	if err := l.prepost(128); err != nil {
		t.Fatal(err)
	}
	if f.posted != 512 {
		t.Fatalf("preposted %d", f.posted)
	}
	if err := l.run(); err != nil {
		t.Fatal(err)
	}
	if f.posted != 1000 || f.done != 1000 || l.rcnt != 1000 {
		t.Errorf("posted %d, done %d, rcnt %d", f.posted, f.done, l.rcnt)
	}
	for k := range 32 {
		if want := 0x20000 + uint64(k%32)*128; f.addrs[k] != want {
			t.Errorf("receive %d at %#x, want %#x", k, f.addrs[k], want)
		}
	}
	if l.tm.completed[0] < l.tm.posted[0] {
		t.Errorf("timing %+v", l.tm)
	}
}

// TestLoopsEvents: with -e the loops sleep on completion events and
// never wait for one that cannot come (a completion raises an event only
// while its CQ is armed), whatever the moderation and however many
// completions one poll reads; every message completes.
func TestLoopsEvents(t *testing.T) {
	for _, c := range []struct{ iters, tx, cqMod, perPoll uint64 }{
		{1000, 128, 100, 16},
		{1000, 128, 1, 16}, // 128 completions queued at once, 16 per poll
		{1000, 128, 1, 3},
		{300, 16, 4, 1},
	} {
		ev := &fakeEvents{armed: true}
		f := &fakeSQ{perPoll: int(c.perPoll), ev: ev}
		l := newSendLoop(f, Read, c.iters, c.tx, c.cqMod, false)
		l.events = ev
		l.setup(64)
		if err := l.run(); err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		if l.scnt != c.iters || l.ccnt < c.iters || f.pending != 0 || ev.waits == 0 {
			t.Errorf("%+v: scnt %d ccnt %d, %d completions left, %d waits", c, l.scnt, l.ccnt, f.pending, ev.waits)
		}
	}
	ev := &fakeEvents{armed: true}
	r := &fakeRQ{perPoll: 5, ev: ev}
	rl := &recvLoop{qps: []recvQP{{qp: r, rxAddr: 0x20000}}, cq: r, events: ev, iters: 1000, depth: 512, cycle: 4096, line: 64, tm: newTiming(1, true)}
	if err := rl.prepost(128); err != nil {
		t.Fatal(err)
	}
	if err := rl.run(); err != nil {
		t.Fatal(err)
	}
	if r.posted != 1000 || r.done != 1000 || rl.rcnt != 1000 || ev.waits == 0 {
		t.Errorf("receive loop: posted %d, done %d, rcnt %d, %d waits", r.posted, r.done, rl.rcnt, ev.waits)
	}
	// A failed wait ends the run with perftest's message.
	f := &fakeSQ{perPoll: 1, ev: &fakeEvents{}}
	l := newSendLoop(f, Send, 10, 4, 1, false)
	l.events = f.ev
	l.setup(64)
	if err := l.run(); err == nil || !strings.Contains(err.Error(), "Couldn't request CQ notification") {
		t.Errorf("unarmed CQ: %v", err)
	}
}

// TestLoopsDuration: with -D both loops run until the time is up: the
// measured stretch lies between the margins, only its completions count,
// and the clock's goroutine is gone after the run, failed or not.
func TestLoopsDuration(t *testing.T) {
	const total, margin = 300 * time.Millisecond, 50 * time.Millisecond
	testkit.LeakCheck(t) // the clock's goroutine ends with the run, failed or not
	f := &fakeSQ{perPoll: 2}
	l := newSendLoop(f, Write, 0, 128, 4, true)
	l.dur = newDuration(total, margin)
	l.setup(64)
	start := time.Now()
	if err := l.run(); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	sample := time.Duration(l.tm.completed[0] - l.tm.posted[0])
	if l.sampled == 0 || l.sampled >= l.ccnt || l.ccnt > l.scnt || took < total || sample < total-2*margin || sample >= took {
		t.Errorf("send: %d posted, %d completed, %d in the sample of %v; the run took %v", l.scnt, l.ccnt, l.sampled, sample, took)
	}
	if r := computeReport(64, l.sampled, &l.tm, 4, 1, true, false); r.Avg <= 0 || r.Iters != l.sampled {
		t.Errorf("report %+v", r)
	}
	r := &fakeRQ{perPoll: 5}
	rl := &recvLoop{qps: []recvQP{{qp: r, rxAddr: 0x20000}}, cq: r, dur: newDuration(total, 0), iters: 0, depth: 64, cycle: 4096, line: 64, tm: newTiming(1, true)}
	if err := rl.prepost(128); err != nil {
		t.Fatal(err)
	}
	if err := rl.run(); err != nil {
		t.Fatal(err)
	}
	if rl.sampled == 0 || rl.sampled > rl.rcnt || r.posted != int(rl.rcnt)+64 || time.Duration(rl.tm.completed[0]-rl.tm.posted[0]) < total {
		t.Errorf("receive: %d received, %d in the sample, %d posted, timing %+v", rl.rcnt, rl.sampled, r.posted, rl.tm)
	}
	// A run that fails stops its clock at once.
	l = newSendLoop(f, Write, 0, 128, 4, true)
	l.qps[0].qp = failingSQ{}
	l.dur = newDuration(time.Hour, 0)
	l.setup(64)
	if err := l.run(); err == nil {
		t.Error("a failed post did not end the run")
	}
}

type failingSQ struct{}

func (failingSQ) PostSend([]uverbs.SendWR) error { return errors.New("post failed") }

// TestRecvLoopWatchdog: perftest's check_alive. A client that stops
// sending ends the server's run after a period without a receive, with
// perftest's lines and status (17 polling, 1 sleeping on events, whose
// wait the watchdog cancels); a slow client that keeps sending does not.
func TestRecvLoopWatchdog(t *testing.T) {
	const period = 50 * time.Millisecond
	newLoop := func(q *stallingRQ) *recvLoop {
		return &recvLoop{qps: []recvQP{{qp: q, rxAddr: 0x20000}}, cq: q, iters: 1000, depth: 64, cycle: 4096, line: 64,
			tm: newTiming(1, true), watch: &watchdog{period: period}}
	}
	q := &stallingRQ{fakeRQ: fakeRQ{perPoll: 5}, limit: 100}
	l := newLoop(q)
	if err := l.prepost(64); err != nil {
		t.Fatal(err)
	}
	err := l.run()
	var se statusError
	if !errors.As(err, &se) || se.status != 17 || !strings.Contains(err.Error(), "Did not get Message for 120 Seconds, exiting..\n Total Received=100, Total Iters Required=1000") {
		t.Errorf("polling: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q = &stallingRQ{fakeRQ: fakeRQ{perPoll: 5}, limit: 100}
	l = newLoop(q)
	l.events = ctxWaiter{ctx: ctx, q: q}
	l.watch.cancel = cancel
	if err := l.prepost(64); err != nil {
		t.Fatal(err)
	}
	err = l.run()
	if !errors.As(err, &se) || se.status != 1 || !strings.Contains(err.Error(), "cannot produce a report when in event mode") {
		t.Errorf("events: %v", err)
	}
	// Ten receives, one every fifth of a period: never a whole period
	// without. (Each period ends only after a receive, so a loaded host
	// that runs the watchdog late cannot fail the case.)
	q = &stallingRQ{fakeRQ: fakeRQ{perPoll: 1}, limit: 1 << 30, every: period / 5}
	l = newLoop(q)
	l.watch.wait = afterProgress(1, &l.progress)
	l.iters, l.depth = 10, 10
	if err := l.prepost(64); err != nil {
		t.Fatal(err)
	}
	if err := l.run(); err != nil || l.rcnt != 10 {
		t.Errorf("slow client: %v after %d receives", err, l.rcnt)
	}
}

// stallingRQ is a fakeRQ whose receives stop completing after limit,
// and which waits every (simulating a slow sender) before each one.
type stallingRQ struct {
	fakeRQ
	limit int
	every time.Duration
}

func (q *stallingRQ) Poll(wcs []uverbs.WC) (int, error) {
	if q.done >= q.limit {
		return 0, nil
	}
	time.Sleep(q.every)
	return q.fakeRQ.Poll(wcs[:min(len(wcs), q.limit-q.done)])
}

// ctxWaiter returns at once while the queue has completions and
// otherwise sleeps until ctx is canceled.
type ctxWaiter struct {
	ctx context.Context
	q   *stallingRQ
}

func (w ctxWaiter) wait() error {
	if w.q.done < min(w.q.posted, w.q.limit) {
		return nil
	}
	<-w.ctx.Done()
	return w.ctx.Err()
}

// TestLoopsNoAllocs: a whole run of either loop, posting and polling
// thousands of times, allocates nothing.
func TestLoopsNoAllocs(t *testing.T) {
	f := &fakeSQ{perPoll: 4}
	l := newSendLoop(f, Read, 2000, 128, 100, false)
	l.setup(64)
	testkit.NoAllocs(t, 20, func() {
		*f = fakeSQ{perPoll: 4}
		l.setup(64)
		if err := l.run(); err != nil {
			t.Fatal(err)
		}
	})
	r := &fakeRQ{perPoll: 16}
	rl := &recvLoop{qps: []recvQP{{qp: r, rxAddr: 0x20000}}, cq: r, iters: 2000, depth: 512, cycle: 4096, line: 64, tm: newTiming(1, true)}
	testkit.NoAllocs(t, 20, func() {
		*r = fakeRQ{perPoll: 16}
		if err := rl.prepost(64); err != nil {
			t.Fatal(err)
		}
		if err := rl.run(); err != nil {
			t.Fatal(err)
		}
	})
}

// stoppingSQ stops a run without end after limit posts.
type stoppingSQ struct {
	*fakeSQ
	d     *duration
	limit int
}

func (s stoppingSQ) PostSend(wrs []uverbs.SendWR) error {
	if s.posts+len(wrs) >= s.limit {
		s.d.stop()
	}
	return s.fakeSQ.PostSend(wrs)
}

// stoppingRQ stops a run without end after limit receives are posted.
type stoppingRQ struct {
	*fakeRQ
	d     *duration
	limit int
}

func (s stoppingRQ) PostRecv(wrs []uverbs.RecvWR) error {
	if s.posted+1 >= s.limit {
		s.d.stop()
	}
	return s.fakeRQ.PostRecv(wrs)
}

// TestLoopsForever: a run without end (--run_infinitely) keeps posting
// past any count, counts every completion and publishes the count,
// until its clock is stopped (the completions of the batch being read
// then count, but not in the sample); a stop before the run holds.
func TestLoopsForever(t *testing.T) {
	f := &fakeSQ{perPoll: 4}
	d := newForever()
	l := newSendLoop(f, Write, 100, 32, 4, true) // -n does not bound the run
	l.qps[0].qp = stoppingSQ{f, d, 5000}
	l.dur = d
	l.setup(64)
	if err := l.run(); err != nil {
		t.Fatal(err)
	}
	if l.scnt < 5000 || l.ccnt > l.scnt || l.ccnt < l.scnt-32 || l.sampled > l.ccnt || l.sampled+4*4 < l.ccnt || l.progress.Load() != l.ccnt {
		t.Errorf("send: scnt %d ccnt %d sampled %d progress %d", l.scnt, l.ccnt, l.sampled, l.progress.Load())
	}
	if err := l.run(); err != nil || l.scnt != 0 {
		t.Errorf("a stopped clock: %v, %d posted", err, l.scnt)
	}
	r := &fakeRQ{perPoll: 5}
	rd := newForever()
	rl := &recvLoop{qps: []recvQP{{qp: stoppingRQ{r, rd, 3000}, rxAddr: 0x20000}}, cq: r, dur: rd, iters: 100, depth: 64,
		cycle: 4096, line: 64, tm: newTiming(1, true)}
	if err := rl.prepost(128); err != nil {
		t.Fatal(err)
	}
	if err := rl.run(); err != nil {
		t.Fatal(err)
	}
	// (The rest of the batch after the stop is not in the sample.)
	if rl.rcnt < 3000-64 || rl.sampled > rl.rcnt || rl.sampled+5 < rl.rcnt || rl.progress.Load() != rl.rcnt {
		t.Errorf("receive: rcnt %d sampled %d progress %d", rl.rcnt, rl.sampled, rl.progress.Load())
	}
}

// lineWriter hands each line written to it to lines.
type lineWriter struct{ lines chan string }

func (w lineWriter) Write(b []byte) (int, error) {
	w.lines <- string(b)
	return len(b), nil
}

// TestForeverReports: a run without end prints a result line every
// period (PUREVERBS_BW_PERIOD here) with the messages of that period and
// no peak, and ends when Run's context does, with the context's error
// and no goroutine left.
func TestForeverReports(t *testing.T) {
	testkit.LeakCheck(t) // the printer's goroutine ends with the run
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := lineWriter{make(chan string)}
	o, err := ParseArgs(Write, []string{"--run_infinitely", "-s", "64", "-Q", "4", "h"})
	if err != nil {
		t.Fatal(err)
	}
	tt := &test{ctx: ctx, v: Write, o: o, stdout: w}
	f := &fakeSQ{perPoll: 4}
	tt.send = sendLoop{qps: []sendQP{{qp: f, myAddr: 0x10000, remAddr: 0x90000}}, cq: f, verb: Write, iters: o.Iters,
		txDepth: 32, cqMod: 4, noPeak: true, cycle: 4096, line: 64, base: 0x10000, tm: newTiming(1, true), dur: newForever()}
	tt.send.dur.wait = afterProgress(3*pollBatch, &tt.send.progress) // a line per 48 messages or more
	tt.send.setup(64)
	done := make(chan error)
	go func() {
		done <- tt.forever(64, tt.send.dur, &tt.send.progress, tt.send.run, " Error occurred while running infinitely! aborting ...")
	}()
	var total uint64
	for i := range 3 {
		rs := ParseReports(<-w.lines)
		if len(rs) != 1 || rs[0].Size != 64 || rs[0].Iters < 3*pollBatch || rs[0].Iters%4 != 0 || rs[0].Avg <= 0 || rs[0].Peak != 0 {
			t.Errorf("line %d: %+v", i, rs)
		}
		if len(rs) == 1 {
			total += rs[0].Iters
		}
	}
	cancel()
	for {
		select {
		case <-w.lines: // a line printed before the stop
			continue
		case err := <-done:
			if !errors.Is(err, context.Canceled) || total > tt.send.ccnt {
				t.Errorf("%v; %d messages in the lines, %d completed", err, total, tt.send.ccnt)
			}
		}
		break
	}
}

// lateRQ is a fakeRQ whose first polls find nothing (the peer has not
// started), and which records the poll that first found a completion.
type lateRQ struct {
	*fakeRQ
	empty, polls, first int
}

func (q *lateRQ) Poll(wcs []uverbs.WC) (int, error) {
	q.polls++
	if q.polls <= q.empty {
		return 0, nil
	}
	n, err := q.fakeRQ.Poll(wcs)
	if n > 0 && q.first == 0 {
		q.first = q.polls
	}
	return n, err
}

// watchedSQ is a fakeSQ that records the receive poll of its first post.
type watchedSQ struct {
	*fakeSQ
	rq     *lateRQ
	first  int
	posted bool
}

func (s *watchedSQ) PostSend(wrs []uverbs.SendWR) error {
	if !s.posted {
		s.first, s.posted = s.rq.polls, true
	}
	return s.fakeSQ.PostSend(wrs)
}

// TestBiLoop: ib_send_bw -b's loop sends and receives iters messages per
// QP on both QPs; the server sends only after its first receive, the
// client at once; a turn reads every receive that has come; with -D
// both directions count in the sample.
func TestBiLoop(t *testing.T) {
	for _, c := range []struct {
		server  bool
		perPoll int // receives one poll reads: 16 fills a batch, so a turn polls again
	}{{false, 5}, {true, 5}, {true, 16}} {
		server := c.server
		const nqp, iters = 2, 300
		f := &fakeSQ{perPoll: 3}
		rq := &lateRQ{fakeRQ: &fakeRQ{perPoll: c.perPoll}, empty: 4}
		sq := &watchedSQ{fakeSQ: f, rq: rq}
		s := newSendLoop(f, Send, iters, 16, 4, false)
		s.qps = []sendQP{{qp: sq, myAddr: 0x10000}, {qp: sq, myAddr: 0x11000}}
		s.tm = newTiming(iters*nqp, false)
		r := &recvLoop{cq: rq, iters: iters, depth: 32, cycle: 4096, line: 64, tm: newTiming(1, true)}
		r.qps = []recvQP{{qp: rq.fakeRQ, rxAddr: 0x20000}, {qp: rq.fakeRQ, rxAddr: 0x21000}}
		runBi(t, s, r, server)
		if f.posts != iters*nqp || s.ccnt < iters*nqp || r.rcnt != iters*nqp || rq.posted != iters*nqp {
			t.Errorf("server %v: %d sends, %d completed, %d received, %d receives posted", server, f.posts, s.ccnt, r.rcnt, rq.posted)
		}
		if server && (rq.first == 0 || sq.first < rq.first) || !server && sq.first != 0 {
			t.Errorf("server %v: first send at receive poll %d, first receive at %d", server, sq.first, rq.first)
		}
		if rep := computeReport(64, iters*nqp, &s.tm, 4, 1, false, false); rep.Avg <= 0 || rep.Peak <= 0 {
			t.Errorf("report %+v", rep)
		}
	}
	// -D: until the time is up, both directions in the sample.
	f := &fakeSQ{perPoll: 3}
	rq := &fakeRQ{perPoll: 5}
	d := newDuration(200*time.Millisecond, 50*time.Millisecond)
	s := newSendLoop(f, Send, 0, 16, 4, true)
	s.dur = d
	r := &recvLoop{qps: []recvQP{{qp: rq, rxAddr: 0x20000}}, cq: rq, dur: d, depth: 32, cycle: 4096, line: 64, tm: newTiming(1, true)}
	// Each phase lasts until both directions completed more than a poll's
	// batch, so the measured stretch holds sends and receives.
	d.wait = afterProgress(3*pollBatch, &s.progress, &r.progress)
	b := runBi(t, s, r, true)
	if s.sampled == 0 || r.sampled == 0 || b.sampled() != s.sampled+r.sampled || s.tm.completed[0] <= s.tm.posted[0] {
		t.Errorf("-D: %d sends and %d receives in the sample, timing %+v", s.sampled, r.sampled, s.tm)
	}
}

// runBi runs s and r as one side of a bidirectional test of 64-byte
// messages (after posting r's first receives).
func runBi(t *testing.T, s *sendLoop, r *recvLoop, server bool) *biLoop {
	t.Helper()
	s.setup(64)
	if err := r.prepost(64); err != nil {
		t.Fatal(err)
	}
	b := &biLoop{s: s, r: r, server: server}
	if err := b.run(); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestYielder: an interval is well under sysmon's 10 ms; the yielder
// passes a scheduling point once the interval is over, and only then.
func TestYielder(t *testing.T) {
	n := 0
	y := yielder{yield: func() { n++ }}
	y.reset()
	if y.every <= 0 || 4*y.every > stampsPer(10*time.Millisecond) {
		t.Fatalf("interval %d stamps, 10 ms is %d", y.every, stampsPer(10*time.Millisecond))
	}
	start := y.next - y.every
	if y.at(start) || y.at(y.next-1) || n != 0 {
		t.Fatalf("yielded %d times within the interval", n)
	}
	end := y.next
	if !y.at(end+5) || n != 1 || y.next != end+5+y.every {
		t.Fatalf("at the end: %d yields, next %d (end %d, every %d)", n, y.next, end, y.every)
	}
}

// TestYielderCheck: check reads the clock once every yieldCheck calls,
// and yields then if the interval has ended.
func TestYielderCheck(t *testing.T) {
	n := 0
	y := yielder{every: 1, yield: func() { n++ }}
	y.reset()
	for i := 1; i <= 3*yieldCheck; i++ {
		if got, want := y.check(), i%yieldCheck == 0; got != want {
			t.Fatalf("call %d: yielded %v, want %v", i, got, want)
		}
	}
	if n != 3 {
		t.Fatalf("%d yields in %d calls", n, 3*yieldCheck)
	}
	y = yielder{every: math.MaxInt64 / 2, yield: func() { n++ }}
	y.reset()
	for range 4 * yieldCheck {
		if y.check() {
			t.Fatal("yielded within the interval")
		}
	}
}

// TestLoopsYield: every loop passes the scheduling points its yielder
// asks for, and none when its interval never ends.
func TestLoopsYield(t *testing.T) {
	for _, every := range []int64{1, math.MaxInt64 / 2} {
		var sends, recvs, bis int
		f := &fakeSQ{perPoll: 4}
		l := newSendLoop(f, Write, 500, 32, 4, false)
		l.y = yielder{every: every, yield: func() { sends++ }}
		l.setup(64)
		if err := l.run(); err != nil {
			t.Fatal(err)
		}
		r := &fakeRQ{perPoll: 5}
		rl := &recvLoop{qps: []recvQP{{qp: r, rxAddr: 0x20000}}, cq: r, iters: 500, depth: 64, cycle: 4096, line: 64, tm: newTiming(1, true)}
		rl.y = yielder{every: every, yield: func() { recvs++ }}
		if err := rl.prepost(64); err != nil {
			t.Fatal(err)
		}
		if err := rl.run(); err != nil {
			t.Fatal(err)
		}
		bf := &fakeSQ{perPoll: 3}
		brq := &fakeRQ{perPoll: 5}
		s := newSendLoop(bf, Send, 300, 16, 4, false)
		s.y = yielder{every: every, yield: func() { bis++ }}
		br := &recvLoop{qps: []recvQP{{qp: brq, rxAddr: 0x20000}}, cq: brq, iters: 300, depth: 32, cycle: 4096, line: 64, tm: newTiming(1, true)}
		runBi(t, s, br, false)
		// The send loops yield at every post; the receive loop, which
		// reads the clock every yieldCheck polls (100 that find 5), once
		// per yieldCheck.
		if every == 1 && (sends < 500 || recvs < 500/5/yieldCheck || bis < 300) {
			t.Errorf("every stamp: %d yields in the send loop, %d in the receive loop, %d in the bidirectional loop", sends, recvs, bis)
		}
		if every > 1 && sends+recvs+bis != 0 {
			t.Errorf("no interval ends: %d, %d, %d yields", sends, recvs, bis)
		}
	}
}

// TestWarmUp: --perform_warm_up posts a window of tx depth requests on
// each QP, each signaled whatever the moderation, and returns once all
// completed (perftest would wait for ever with -Q above 1); the
// moderation of the run after it is untouched, and the run completes.
// With a post list, one list, and the completions it asks for.
func TestWarmUp(t *testing.T) {
	f := &fakeSQ{perPoll: 3}
	l := newSendLoop(f, Read, 200, 16, 4, false)
	l.qps = append(l.qps, sendQP{qp: f, myAddr: 0x20000, remAddr: 0xa0000, rkey: 3})
	l.tm = newTiming(400, false)
	l.setup(64)
	f.pending = 2 // completions left from an earlier size
	f.queue.push(0)
	f.queue.push(1)
	if err := l.warmUp(); err != nil {
		t.Fatal(err)
	}
	if f.posts != 32 || f.nsig != 32 || f.pending != 0 {
		t.Errorf("warm-up: %d posted, %d signaled, %d completions left", f.posts, f.nsig, f.pending)
	}
	posts, sig := f.posts, f.nsig
	if err := l.run(); err != nil {
		t.Fatal(err)
	}
	if f.posts-posts != 400 || f.nsig-sig != 2*(200/4) {
		t.Errorf("run after the warm-up: %d posted, %d signaled", f.posts-posts, f.nsig-sig)
	}
	f = &fakeSQ{perPoll: 1}
	l = newSendLoop(f, Read, 64, 16, 4, false)
	l.postList = 8
	l.setup(64)
	if err := l.warmUp(); err != nil {
		t.Fatal(err)
	}
	if f.calls != 1 || f.posts != 8 || f.nsig != 2 || f.pending != 0 {
		t.Errorf("warm-up with a post list: %d calls, %d posted, %d signaled, %d left", f.calls, f.posts, f.nsig, f.pending)
	}
}

// TestSWRateLimit: the SW rate limiter posts in bursts of burst
// messages, a burst's start gap after the last one's: 100 messages of
// 64 B at 10000 per second, 10 at a time, take at least 9 gaps of 1 ms;
// every message completes, and between bursts nothing is in flight and
// the loop sleeps on no event (there is none to come).
func TestSWRateLimit(t *testing.T) {
	r := &swRate{limit: 10000, units: unitPps, burst: 10}
	if g := r.gapNanos(64); g != 1e6 {
		t.Errorf("gap %v ns, want 1 ms", g)
	}
	ev := &fakeEvents{armed: true}
	f := &fakeSQ{perPoll: 16, ev: ev}
	l := newSendLoop(f, Write, 100, 128, 1, false)
	l.events = ev
	l.rate = &swRate{limit: 10000, units: unitPps, burst: 10}
	l.setup(64)
	start := time.Now()
	if err := l.run(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 9*time.Millisecond {
		t.Errorf("100 messages in bursts of 10 at 10000/s took %v, want at least 9 ms", took)
	}
	if f.posts != 100 || l.ccnt != 100 {
		t.Errorf("%d posted, %d completed", f.posts, l.ccnt)
	}
	// The gap from perftest's integer arithmetic: 1 GB/s of 1 MiB
	// messages is 119 per second, 7 bursts of 16 (not 7.45).
	g := &swRate{limit: 1, units: unitGbps, burst: 16}
	if got := g.gapNanos(1 << 20); got != 1e9/float64(7) {
		t.Errorf("1 Gb/s of 1 MiB in bursts of 16: gap %v ns, want 1/7 s", got)
	}
	// Below a burst a second: the burst's share of the rate.
	sr := &swRate{limit: 1, units: unitMBps, burst: 4}
	if got := sr.gapNanos(1 << 20); got != 4e9 {
		t.Errorf("1 MiB/s of 1 MiB in bursts of 4: gap %v ns, want 4 s", got)
	}
}

// TestSendLoopEventsRateLimited: -e with the SW rate limiter and the
// default moderation of 100. A burst of 128 ends with the 28 requests
// after the signaled one at index 99 in flight, all unsignaled: no event
// comes until the next burst posts the next signaled one, so the loop
// must not sleep on the channel between bursts (it did, for ever: readbw
// -e --rate_limit=1).
func TestSendLoopEventsRateLimited(t *testing.T) {
	ev := &fakeEvents{armed: true}
	f := &fakeSQ{perPoll: 16, ev: ev}
	l := newSendLoop(f, Read, 1000, 128, 100, true)
	l.events = ev
	l.rate = &swRate{limit: 100000, units: unitPps, burst: 128}
	l.setup(64)
	if err := l.run(); err != nil {
		t.Fatalf("scnt %d ccnt %d: %v", l.scnt, l.ccnt, err)
	}
	if f.posts != 1000 || l.ccnt < 1000 || ev.waits == 0 {
		t.Fatalf("%d posts, ccnt %d, %d waits on the channel", f.posts, l.ccnt, ev.waits)
	}
}
