package uverbs

import (
	"math/rand/v2"
	"testing"

	"github.com/pureverbs/pureverbs/internal/testkit"
)

// TestRxeMovedModel drives a 4-slot CQ ring (3 usable) through random
// kernel writes and polls, and checks moved against the truth: a snapshot
// taken at any point reports movement exactly when a completion was
// written since, across the index's laps (a full lap leaves the producer
// index where it was). Some snapshots read the consumer count early, as a
// poll racing the snapshot would leave it: those must still report every
// later completion.
func TestRxeMovedModel(t *testing.T) {
	const slots = 4
	m := memRing(t, slots, 7)
	r, err := newRxeRing(m, false)
	if err != nil {
		t.Fatal(err)
	}
	d := testCQ(t, r)
	rng := rand.New(rand.NewPCG(1, 2))
	var produced, polled uint64 // unwrapped truth
	type snapAt struct {
		s        ringSnap
		produced uint64 // completions written before the producer index was read
		stale    bool   // consumer count read before some later polls
	}
	var snaps []snapAt
	wcs := make([]WC, slots)
	produce := func() bool {
		if produced-polled == slots-1 {
			return false // full: rxe drops it (CQ_ERR), the index stays
		}
		produced++
		m.Store32(rxeProdOff, uint32(produced)&(slots-1))
		return true
	}
	for step := 0; step < 20000; step++ {
		switch rng.IntN(6) {
		case 0, 1, 2:
			produce()
		case 3, 4:
			polled += uint64(d.poll1(wcs[:1+rng.IntN(slots)]))
		case 5:
			if rng.IntN(3) > 0 {
				s, ok := d.snap()
				if !ok {
					t.Fatal("rxe ring not watchable")
				}
				snaps = append(snaps, snapAt{s: s, produced: produced})
				break
			}
			// A snapshot whose consumer count is older than its producer
			// index: polls and writes came between the two loads.
			cons := d.consumed.Load()
			for i := rng.IntN(4); i > 0; i-- {
				if rng.IntN(2) == 0 {
					produce()
				} else {
					polled += uint64(d.poll1(wcs[:1]))
				}
			}
			prod := m.Load32(rxeProdOff) & (slots - 1)
			snaps = append(snaps, snapAt{s: ringSnap{polled: cons, prod: prod, waiting: (prod - uint32(cons)) & (slots - 1)}, produced: produced, stale: true})
		}
		if polled != d.consumed.Load() || uint32(polled)&(slots-1) != d.ring.own {
			t.Fatalf("step %d: consumed %d, own %d, truth %d", step, d.consumed.Load(), d.ring.own, polled)
		}
		for _, sa := range snaps {
			since := produced - sa.produced
			got := d.moved(sa.s)
			if since > 0 && !got {
				t.Fatalf("step %d: %d completions since snapshot %+v (stale %v), moved says no", step, since, sa.s, sa.stale)
			}
			if since == 0 && got && !sa.stale {
				t.Fatalf("step %d: nothing written since snapshot %+v, moved says yes", step, sa.s)
			}
		}
		if len(snaps) > 32 {
			snaps = snaps[len(snaps)-8:]
		}
	}
	testkit.NoAllocs(t, 1000, func() { d.moved(d.ring0Snap()) })
}

// ring0Snap is snap without its second result, for NoAllocs.
func (d *rxeCQ) ring0Snap() ringSnap { s, _ := d.snap(); return s }

// fakeRing is a cqDriver whose ring is a counter of written completions.
type fakeRing struct {
	cqDriver // unused methods
	written  uint64
	blind    bool // cannot be watched (snap false)
}

func (f *fakeRing) snap() (ringSnap, bool) {
	return ringSnap{polled: f.written}, !f.blind
}
func (f *fakeRing) moved(s ringSnap) bool { return f.written != s.polled }

func fakeChannelCQ(ch *CompChannel, blind bool) (*CQ, *fakeRing) {
	f := &fakeRing{blind: blind}
	return &CQ{drv: f, ch: ch, arm: cqArm{at: -1}}, f
}

// TestArmBookkeeping: the channel's hint says "nothing queued" only when
// no arm can have fired, follows events read, re-arms and destroys, and
// errs towards "maybe" where it cannot tell.
func TestArmBookkeeping(t *testing.T) {
	ch := &CompChannel{}
	a, fa := fakeChannelCQ(ch, false)
	b, fb := fakeChannelCQ(ch, false)
	check := func(step string, want bool, queued int) {
		t.Helper()
		if got := ch.mayHaveEvent(); got != want {
			t.Fatalf("%s: mayHaveEvent = %v, want %v", step, got, want)
		}
		if ch.queued != queued {
			t.Fatalf("%s: queued = %d, want %d", step, ch.queued, queued)
		}
		n := 0
		for _, cq := range []*CQ{a, b} {
			n += cq.arm.queued
			if cq.arm.at >= 0 && ch.armed[cq.arm.at] != cq {
				t.Fatalf("%s: armed list out of step", step)
			}
		}
		if n != ch.queued {
			t.Fatalf("%s: the CQs' shares %d do not add up to %d", step, n, ch.queued)
		}
	}
	check("no arm", false, 0)
	fa.written++ // a completion without an arm queues nothing
	check("completion before any arm", false, 0)

	ch.arming(a)
	check("armed, ring still", false, 0)
	fa.written++
	check("armed, completion written", true, 1)
	check("asked again", true, 1)
	ch.delivered(a)
	check("event read", false, 0)

	// An event read before the hint saw the ring move.
	ch.arming(a)
	fa.written++
	ch.delivered(a)
	check("event read before the hint looked", false, 0)

	// Two CQs: only the one that moved counts.
	ch.arming(a)
	ch.arming(b)
	check("both armed", false, 0)
	fb.written++
	check("b fired", true, 1)
	ch.delivered(b)
	check("b's event read, a still armed", false, 0)
	fa.written++
	check("a fired", true, 1)
	ch.delivered(a)
	check("a's event read", false, 0)

	// Re-arming after the ring moved keeps the earlier arm's event.
	ch.arming(a)
	fa.written++
	ch.arming(a)
	check("re-armed after a completion", true, 1)
	ch.delivered(a)
	check("the first arm's event read, the second arm's ring still", false, 0)
	fa.written++
	check("the second arm fired", true, 1)
	ch.delivered(a)
	check("its event read", false, 0)

	// Re-arming an armed CQ whose ring moves between the snapshot and the
	// command: the old arm fires on that completion (one event) and the
	// new one on the next (a second). Both are counted.
	ch.arming(a)
	check("armed", false, 0)
	s, again := ch.arming(a)
	if !again {
		t.Fatal("arming an armed CQ: again = false")
	}
	fa.written++ // fires the old arm, before the command
	ch.rearmed(a, s)
	fa.written++ // fires the new arm
	// (the armed list is not scanned while queued is above 0)
	check("re-armed across a completion", true, 1)
	ch.delivered(a)
	check("the old arm's event read", true, 1)
	ch.delivered(a)
	check("the new arm's event read", false, 0)
	// Re-armed with no completion in the window: nothing more.
	ch.arming(a)
	s, _ = ch.arming(a)
	ch.rearmed(a, s)
	check("re-armed, ring still", false, 0)
	fa.written++
	check("re-armed, fired", true, 1)
	ch.delivered(a)
	check("its event read", false, 0)

	// A resize of an armed CQ: its snapshot describes the ring being
	// replaced, so the arm counts as a possible event until one is read.
	ch.arming(a)
	check("armed before a resize", false, 0)
	ch.resizing(a)
	check("resized while armed", true, 1)
	ch.delivered(a)
	check("the arm's event read", false, 0)
	ch.resizing(b)
	check("resized unarmed", false, 0)

	// Destroying a CQ drops its unread events (the kernel does).
	ch.arming(b)
	fb.written++
	check("b fired again", true, 1)
	ch.forget(b)
	check("b destroyed", false, 0)
	ch.arming(a)
	ch.forget(a)
	check("a destroyed while armed", false, 0)
	if len(ch.armed) != 0 {
		t.Fatalf("%d CQs left in the armed list", len(ch.armed))
	}

	// A ring the driver cannot watch: maybe until its event is read.
	c, _ := fakeChannelCQ(ch, true)
	ch.arming(c)
	if !ch.mayHaveEvent() {
		t.Fatal("unwatchable arm: mayHaveEvent = false")
	}
	ch.delivered(c)
	if ch.mayHaveEvent() || ch.queued != 0 {
		t.Fatalf("unwatchable arm's event read: queued %d", ch.queued)
	}

	// Too many armed CQs to scan: maybe, without looking.
	var many []*CQ
	for i := 0; i <= armScan; i++ {
		cq, _ := fakeChannelCQ(ch, false)
		ch.arming(cq)
		many = append(many, cq)
	}
	if !ch.mayHaveEvent() {
		t.Fatalf("%d armed CQs: mayHaveEvent = false", len(many))
	}
	ch.forget(many[0])
	if ch.mayHaveEvent() {
		t.Fatalf("%d armed CQs, none moved: mayHaveEvent = true", len(ch.armed))
	}
	for _, cq := range many[1:] {
		ch.forget(cq)
	}

	// The steady state of a ping-pong allocates nothing.
	testkit.NoAllocs(t, 1000, func() {
		ch.arming(a)
		ch.mayHaveEvent()
		fa.written++
		ch.mayHaveEvent()
		ch.delivered(a)
	})
}
