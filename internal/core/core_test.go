package core

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/testkit"
)

type obj struct{ name string }

func TestCountsBadKind(t *testing.T) {
	var e Counts
	e.Delivered(CountKind(7), 0) // ignored, no panic
	if err := e.Ack(CountKind(-1), 0, 1); !errors.Is(err, ErrOverAck) {
		t.Fatalf("Ack(bad kind) = %v", err)
	}
	if d, a := e.Counts(CountKind(2)); d != 0 || a != 0 {
		t.Fatalf("Counts(bad kind) = %d %d", d, a)
	}
	// The counter still works afterwards (no lock left held).
	e.Delivered(AsyncEvents, 0)
	e.Delivered(AsyncEvents, 0)
	if err := e.Ack(AsyncEvents, 0, 3); !errors.Is(err, ErrOverAck) {
		t.Fatalf("over-ack = %v", err)
	}
	if err := e.Ack(AsyncEvents, 0, 2); err != nil {
		t.Fatal(err)
	}
	if d, a := e.Counts(AsyncEvents); d != 2 || a != 2 {
		t.Fatalf("counts %d/%d", d, a)
	}
}

// TestWaitAckedEndsAfterLastAck: a destroy that the kernel says saw N
// events is still blocked after N-1 acknowledgements, and returns only
// after the last one. (A wait that returned after N-1 of N passed the
// whole suite before this test.)
func TestWaitAckedEndsAfterLastAck(t *testing.T) {
	for _, kind := range []CountKind{AsyncEvents, CompEvents} {
		const n = 5
		var e Counts
		for i := 0; i < n; i++ {
			e.Delivered(kind, uint32(i))
		}
		asyncRep, compRep := uint32(0), uint32(0)
		if kind == AsyncEvents {
			asyncRep = n
		} else {
			compRep = n
		}
		returned := make(chan time.Time, 1)
		go func() {
			if _, err := e.WaitAcked(context.Background(), asyncRep, compRep); err != nil {
				t.Error(err)
			}
			returned <- time.Now()
		}()
		for i := 0; i < n-1; i++ {
			if err := e.Ack(kind, uint32(i), 1); err != nil {
				t.Fatal(err)
			}
		}
		select {
		case <-returned:
			t.Fatalf("kind %d: wait returned after %d of %d acks", kind, n-1, n)
		case <-time.After(200 * time.Millisecond):
		}
		lastAck := time.Now()
		if err := e.Ack(kind, n-1, 1); err != nil {
			t.Fatal(err)
		}
		select {
		case at := <-returned:
			if at.Before(lastAck) {
				t.Fatalf("wait returned %v before the last ack", lastAck.Sub(at))
			}
		case <-time.After(10 * time.Second):
			t.Fatal("wait did not return after the last ack")
		}
	}
}

func TestWaitAckedBoundedAndAbandon(t *testing.T) {
	var e Counts
	e.Delivered(AsyncEvents, 5)
	e.Delivered(AsyncEvents, 1)
	e.Delivered(CompEvents, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	u, err := e.WaitAcked(ctx, 2, 1)
	if !errors.Is(err, context.DeadlineExceeded) || u.Async != 2 || u.Comp != 1 || len(u.Pending) != 2 || u.Pending[0] != 5 || u.Pending[1] != 1 {
		t.Fatalf("bounded wait = %+v, %v", u, err)
	}
	// Acknowledging one type removes that type from Pending.
	if err := e.Ack(AsyncEvents, 1, 1); err != nil {
		t.Fatal(err)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel2()
	if u, _ := e.WaitAcked(ctx2, 2, 0); u.Async != 1 || len(u.Pending) != 1 || u.Pending[0] != 5 {
		t.Fatalf("after one ack: %+v", u)
	}
	done := make(chan error)
	go func() { _, err := e.WaitAcked(context.Background(), 2, 1); done <- err }()
	e.Abandon()
	if err := <-done; err != nil {
		t.Fatalf("abandoned wait = %v", err)
	}
}

// TestCountsWrap: the counts are u32 modulo 2^32, as the kernel's
// events_reported. Across the wrap acks still count, an over-ack is still
// refused, and a destroy waits for the events the kernel reported past the
// wrap. (Compared as plain integers, the ack after the wrap was refused
// and the wait returned with 14 events unacked.)
func TestCountsWrap(t *testing.T) {
	const top = ^uint32(0)
	var e Counts
	e.delivered[CompEvents], e.acked[CompEvents] = top-1, top-1
	for range 3 { // delivered: top, 0, 1
		e.Delivered(CompEvents, 0)
	}
	if err := e.Ack(CompEvents, 0, 4); !errors.Is(err, ErrOverAck) {
		t.Fatalf("acking 4 of 3 across the wrap = %v", err)
	}
	if err := e.Ack(CompEvents, 0, 2); err != nil { // acked: 0
		t.Fatalf("ack across the wrap = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	u, err := e.WaitAcked(ctx, 0, 1) // the kernel reported one more than acked
	if !errors.Is(err, context.Canceled) || u.Comp != 1 {
		t.Fatalf("wait with one event unacked past the wrap = %+v, %v", u, err)
	}
	if err := e.Ack(CompEvents, 0, 1); err != nil {
		t.Fatal(err)
	}
	if u, err := e.WaitAcked(ctx, 0, 1); err != nil || u.Comp != 0 {
		t.Fatalf("wait with every event acked = %+v, %v", u, err)
	}
	if d, a := e.Counts(CompEvents); d != 1 || a != 1 {
		t.Fatalf("counts %d/%d", d, a)
	}
	// Reported far behind the wrapped acked count (not a real count):
	// not waited for.
	e.delivered[AsyncEvents], e.acked[AsyncEvents] = 3, 3
	if u, err := e.WaitAcked(ctx, top-10, 1); err != nil || u.Async != 0 {
		t.Fatalf("wait for a count behind acked = %+v, %v", u, err)
	}
}

func TestCountsNoAllocs(t *testing.T) {
	var e Counts
	testkit.NoAllocs(t, 5000, func() {
		e.Delivered(AsyncEvents, 3)
		e.Ack(AsyncEvents, 3, 1)
		e.Delivered(CompEvents, 0)
		e.Ack(CompEvents, 0, 1)
	})
}

// TestRegistryLookupWaitsForPublish is defect 3 of the lifetime issue: an
// object was findable (through an event's element) before its handle and
// hooks were set. Now a reserved handle is not handed out until its
// creator publishes it, and a Lookup in that window waits.
func TestRegistryLookupWaitsForPublish(t *testing.T) {
	var r Registry[*obj]
	var c Counts
	uh, err := r.Reserve(&c)
	if err != nil || uh == 0 {
		t.Fatalf("Reserve = %d, %v", uh, err)
	}
	o := &obj{}
	got := make(chan *obj)
	go func() {
		v, cnt, ok := r.Lookup(uh)
		if !ok || cnt != &c {
			t.Error("lookup after publish failed")
		}
		if v != nil && v.name != "complete" {
			t.Errorf("lookup saw a half-made object: %q", v.name)
		}
		got <- v
	}()
	select {
	case v := <-got:
		t.Fatalf("Lookup returned %v before Publish", v)
	case <-time.After(50 * time.Millisecond):
	}
	o.name = "complete"
	if err := r.Publish(uh, o); err != nil {
		t.Fatal(err)
	}
	if v := <-got; v != o {
		t.Fatalf("Lookup = %v", v)
	}

	// An aborted create: the waiter gets nothing.
	uh2, _ := r.Reserve(&c)
	res := make(chan bool)
	go func() { _, _, ok := r.Lookup(uh2); res <- ok }()
	r.Abort(uh2)
	if <-res {
		t.Fatal("Lookup of an aborted handle succeeded")
	}
	if _, _, ok := r.Lookup(12345); ok {
		t.Fatal("Lookup of an unknown handle succeeded")
	}
	r.Remove(uh, &obj{}) // not the registered object: no effect
	if _, _, ok := r.Lookup(uh); !ok {
		t.Fatal("Remove of a foreign object removed the entry")
	}
	r.Remove(uh, o)
	if _, _, ok := r.Lookup(uh); ok || r.Len() != 0 {
		t.Fatal("Remove left the entry")
	}
}

// TestRegistryPublishAfterClose is defect 4: a create that finishes after
// Close must learn that the context is gone.
func TestRegistryPublishAfterClose(t *testing.T) {
	var r Registry[*obj]
	var c Counts
	live := &obj{name: "live"}
	uh1, _ := r.Reserve(&c)
	if err := r.Publish(uh1, live); err != nil {
		t.Fatal(err)
	}
	uh2, _ := r.Reserve(&c)
	waiter := make(chan bool)
	go func() { _, _, ok := r.Lookup(uh2); waiter <- ok }()
	objs := r.Close()
	if len(objs) != 1 || objs[0] != live {
		t.Fatalf("Close returned %v", objs)
	}
	if err := r.Publish(uh2, &obj{}); !errors.Is(err, ErrRegistryClosed) {
		t.Fatalf("Publish after Close = %v", err)
	}
	if <-waiter {
		t.Fatal("Lookup of a create that lost to Close succeeded")
	}
	if _, err := r.Reserve(&c); !errors.Is(err, ErrRegistryClosed) {
		t.Fatalf("Reserve after Close = %v", err)
	}
	if r.Close() != nil || r.Len() != 0 {
		t.Fatal("second Close")
	}
}

func TestRegistryConcurrent(t *testing.T) {
	var r Registry[*obj]
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				var c Counts
				o := &obj{}
				uh, err := r.Reserve(&c)
				if err != nil {
					t.Error(err)
					return
				}
				if i%3 == 0 {
					r.Abort(uh)
					continue
				}
				if err := r.Publish(uh, o); err != nil {
					t.Error(err)
					return
				}
				if v, _, ok := r.Lookup(uh); !ok || v != o {
					t.Error("lookup of own object failed")
				}
				r.Remove(uh, o)
			}
		}()
	}
	wg.Wait()
	if r.Len() != 0 {
		t.Fatalf("%d entries left", r.Len())
	}
}

// TestRegistryNoAllocs: the create and destroy of an object (Reserve,
// Publish, Remove) allocate nothing once the map has grown; only a Lookup
// that must wait makes a channel.
func TestRegistryNoAllocs(t *testing.T) {
	var r Registry[*int]
	var c Counts
	obj := new(int)
	cycle := func() {
		uh, err := r.Reserve(&c)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Publish(uh, obj); err != nil {
			t.Fatal(err)
		}
		if v, _, ok := r.Lookup(uh); !ok || v != obj {
			t.Fatalf("Lookup(%d) = %v, %v", uh, v, ok)
		}
		r.Remove(uh, obj)
	}
	for range 1000 {
		cycle()
	}
	testkit.NoAllocs(t, 1000, cycle)
}

// TestRegistryHandlesNotReused: a freed slot is reused, but under a new
// handle, so an event of a destroyed object (its old handle) finds
// nothing, never the slot's next occupant; handles are never zero, and a
// handle with a foreign index or generation finds nothing.
func TestRegistryHandlesNotReused(t *testing.T) {
	var r Registry[*obj]
	var c Counts
	seen := map[uint64]bool{}
	a, b := &obj{}, &obj{}
	uhA, _ := r.Reserve(&c)
	if err := r.Publish(uhA, a); err != nil {
		t.Fatal(err)
	}
	seen[uhA] = true
	prev := uhA
	for i := range 100 {
		uh, err := r.Reserve(&c)
		if err != nil || uh == 0 || seen[uh] {
			t.Fatalf("round %d: Reserve = %#x, %v (seen before: %v)", i, uh, err, seen[uh])
		}
		seen[uh] = true
		if i%2 == 0 {
			r.Abort(uh)
		} else {
			if err := r.Publish(uh, b); err != nil {
				t.Fatal(err)
			}
			r.Remove(uh, b)
		}
		if _, _, ok := r.Lookup(uh); ok {
			t.Fatalf("round %d: Lookup of forgotten handle %#x succeeded", i, uh)
		}
		if i > 0 && uint32(uh) != uint32(prev) {
			t.Fatalf("round %d: handle %#x does not reuse the freed slot of %#x", i, uh, prev)
		}
		prev = uh
	}
	if v, _, ok := r.Lookup(uhA); !ok || v != a {
		t.Fatal("the object that stayed is lost")
	}
	for _, uh := range []uint64{0, uhA + 1<<32, uhA - 1<<32, uhA + 1000, 1 << 63, ^uint64(0)} {
		if _, _, ok := r.Lookup(uh); ok {
			t.Errorf("Lookup(%#x) succeeded", uh)
		}
		r.Remove(uh, a) // a handle that names nothing removes nothing
	}
	if r.Len() != 1 {
		t.Fatalf("Len = %d, want 1", r.Len())
	}
	// Close returns the published object and frees its slot; a reserved
	// one stays until its creator's Publish fails.
	uhR, _ := r.Reserve(&c)
	if got := r.Close(); len(got) != 1 || got[0] != a || r.Len() != 1 {
		t.Fatalf("Close = %v, Len %d", got, r.Len())
	}
	if err := r.Publish(uhR, b); !errors.Is(err, ErrRegistryClosed) || r.Len() != 0 {
		t.Fatalf("Publish after Close = %v, Len %d", err, r.Len())
	}
}

// BenchmarkRegistryCycle: what a CQ's create and destroy cost the
// registry (Reserve, Publish, Remove), with 100 other objects registered.
func BenchmarkRegistryCycle(b *testing.B) {
	var r Registry[*int]
	var c Counts
	obj := new(int)
	for range 100 {
		uh, _ := r.Reserve(&c)
		r.Publish(uh, new(int))
	}
	b.ReportAllocs()
	for b.Loop() {
		uh, _ := r.Reserve(&c)
		r.Publish(uh, obj)
		r.Remove(uh, obj)
	}
}
