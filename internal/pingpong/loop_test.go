package pingpong

import (
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/uverbs"
)

// wire is a fake pair of devices: a send on one side completes at once on
// its own CQ and consumes a posted receive of the peer, whose CQ gets the
// receive completion, on the QP of the same index.
type wire struct {
	mu    sync.Mutex
	sides [2]*fakeSide
	err   string
}

type fakeSide struct {
	w       *wire
	id      int
	cq      []uverbs.WC
	posted  int // receives posted and not consumed
	maxPost int // the receive queue's depth
	qpns    []uint32
	sends   int
	polls   int
}

func (s *fakeSide) Poll(wcs []uverbs.WC) (int, error) {
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	s.polls++
	n := copy(wcs, s.cq)
	s.cq = s.cq[n:]
	return n, nil
}

func (s *fakeSide) postRecv(n int) int {
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	n = min(n, s.maxPost-s.posted)
	s.posted += n
	return n
}

func (s *fakeSide) postSend(qi int) error {
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	peer := s.w.sides[1-s.id]
	if peer.posted == 0 {
		s.w.err = "send with no receive posted at the peer (RNR)"
		s.cq = append(s.cq, uverbs.WC{ID: sendWRID, Status: uverbs.WCRNRRetryExcErr, QPNum: s.qpns[qi]})
		return nil
	}
	peer.posted--
	s.sends++
	s.cq = append(s.cq, uverbs.WC{ID: sendWRID, QPNum: s.qpns[qi]})
	peer.cq = append(peer.cq, uverbs.WC{ID: recvWRID, QPNum: peer.qpns[qi], ByteLen: 64})
	return nil
}

func newWire(nqp, rxDepth int) *wire {
	w := &wire{}
	for i := range w.sides {
		s := &fakeSide{w: w, id: i, maxPost: rxDepth}
		for q := range nqp {
			s.qpns = append(s.qpns, uint32(0x100*(i+1)+q))
		}
		w.sides[i] = s
	}
	return w
}

// waitEvent is a fake -e wait: it returns once the side's CQ holds a
// completion (the event the device would raise for it).
func (s *fakeSide) waitEvent() error {
	for {
		s.w.mu.Lock()
		n := len(s.cq)
		s.w.mu.Unlock()
		if n > 0 {
			return nil
		}
		runtime.Gosched()
	}
}

func (w *wire) loop(i int, iters uint32, rxDepth int, srq bool) *loop {
	s := w.sides[i]
	nqp := len(s.qpns)
	l := &loop{cq: s, iters: iters, rxDepth: rxDepth, refillAt: 1, pending: make([]int, nqp),
		postRecv: s.postRecv, postSend: s.postSend, wc: make([]uverbs.WC, 2)}
	if srq {
		l.refillAt = nqp
		l.wc = make([]uverbs.WC, nqp+rxDepth)
		l.qpIndex = func(qpn uint32) int {
			for k, q := range s.qpns {
				if q == qpn {
					return k
				}
			}
			return -1
		}
	}
	l.routs = s.postRecv(rxDepth)
	for q := range l.pending {
		l.pending[q] = recvWRID
	}
	return l
}

// runPair runs a server and a client loop against each other on a wire,
// starting as the tools do: the client posts the first send on every QP.
func runPair(t *testing.T, nqp, rxDepth int, iters uint32, srq, events bool) (*wire, [2]*loop) {
	t.Helper()
	w := newWire(nqp, rxDepth)
	ls := [2]*loop{w.loop(0, iters, rxDepth, srq), w.loop(1, iters, rxDepth, srq)}
	if events {
		for i, l := range ls {
			l.waitEvent = w.sides[i].waitEvent
		}
	}
	client := ls[1]
	for q := range nqp {
		if err := client.postSend(q); err != nil {
			t.Fatal(err)
		}
		client.pending[q] |= sendWRID
	}
	errs := make(chan error, 2)
	for _, l := range ls {
		go func() { errs <- l.run() }()
	}
	for range ls {
		if err := <-errs; err != nil {
			t.Fatalf("loop: %v (wire: %s)", err, w.err)
		}
	}
	if w.err != "" {
		t.Fatal(w.err)
	}
	return w, ls
}

func TestLoopPingPong(t *testing.T) {
	for _, c := range []struct {
		name    string
		nqp     int
		rxDepth int
		iters   uint32
		srq     bool
		events  bool
	}{
		{"rc default depth", 1, 500, 300, false, false},
		{"rc depth 1", 1, 1, 50, false, false},
		{"rc depth 2", 1, 2, 50, false, false},
		{"srq 16 QPs", 16, 500, 300, true, false},
		{"srq 4 QPs depth 4", 4, 4, 100, true, false},
		{"zero iters", 1, 10, 0, false, false},
		{"rc events", 1, 500, 300, false, true},
		{"srq events", 16, 500, 300, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, ls := runPair(t, c.nqp, c.rxDepth, c.iters, c.srq, c.events)
			for i, l := range ls {
				if l.scnt < c.iters || l.rcnt < c.iters {
					t.Errorf("side %d: %d sends, %d receives, want %d", i, l.scnt, l.rcnt, c.iters)
				}
				if c.nqp == 1 && (l.scnt != c.iters || l.rcnt != c.iters) {
					t.Errorf("side %d: %d sends, %d receives, want exactly %d", i, l.scnt, l.rcnt, c.iters)
				}
				// Receives the loop did not reap (the tools stop polling
				// once they are done; the client's first send and srq's
				// extra sends may still arrive) plus those still posted
				// are what the loop counts as posted.
				unreaped := 0
				for _, wc := range w.sides[i].cq {
					if wc.ID == recvWRID {
						unreaped++
					}
				}
				if got := w.sides[i].posted + unreaped; got != l.routs {
					t.Errorf("side %d: loop counts %d receives posted, the device has %d and %d unreaped", i, l.routs, w.sides[i].posted, unreaped)
				}
			}
		})
	}
}

func TestLoopErrors(t *testing.T) {
	mk := func(wcs ...uverbs.WC) (*loop, *fakeSide) {
		w := newWire(2, 8)
		s := w.sides[0]
		s.cq = wcs
		l := w.loop(0, 10, 8, true)
		return l, s
	}
	l, _ := mk(uverbs.WC{ID: sendWRID, Status: uverbs.WCRetryExcErr, QPNum: 0x100})
	l.parseFailed = true
	if err := l.run(); err == nil || err.Error() != "Failed status transport retry counter exceeded (12) for wr_id 2\nparse WC failed 1" {
		t.Errorf("error status: %v", err)
	}
	l, _ = mk(uverbs.WC{ID: 7, QPNum: 0x100})
	if err := l.run(); err == nil || err.Error() != "Completion for unknown wr_id 7" {
		t.Errorf("unknown wr_id: %v", err)
	}
	l, _ = mk(uverbs.WC{ID: recvWRID, QPNum: 0x999})
	if err := l.run(); err == nil || err.Error() != "Couldn't find QPN 000999" {
		t.Errorf("unknown QPN: %v", err)
	}
	// A refill that posts too few receives.
	l, s := mk()
	l.routs, l.refillAt = 2, 2
	s.maxPost = 3
	s.cq = []uverbs.WC{{ID: recvWRID, QPNum: 0x100}}
	if err := l.run(); err == nil || !strings.HasPrefix(err.Error(), "Couldn't post receive (") {
		t.Errorf("short refill: %v", err)
	}
}

// The hot path allocates nothing: a whole loop of 1000 iterations on fake
// completions costs no allocation per iteration.
func TestLoopAllocs(t *testing.T) {
	w := newWire(1, 16)
	s := w.sides[0]
	l := w.loop(0, 1<<30, 16, false)
	wcs := []uverbs.WC{{ID: recvWRID, QPNum: 0x100}, {ID: sendWRID, QPNum: 0x100}}
	l.postSend = func(int) error { return nil }
	l.postRecv = func(n int) int { return n }
	testkit.NoAllocs(t, 1000, func() {
		s.cq = append(s.cq[:0], wcs...)
		for i := range s.cq {
			if err := l.complete(&s.cq[i]); err != nil {
				t.Fatal(err)
			}
		}
	})
}
