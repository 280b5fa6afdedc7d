package faults_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/async"
	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/internal/testkit/rcstream"
	"github.com/pureverbs/pureverbs/uverbs"
)

// openRxe opens rxe0 for the test; the Context closes at cleanup.
func openRxe(t *testing.T) *uverbs.Context {
	t.Helper()
	testkit.RequireVM(t)
	c, err := uverbs.OpenByName(testkit.RxeDev)
	if err != nil {
		t.Fatalf("OpenByName(%s): %v", testkit.RxeDev, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// events collects a Reader's events (acknowledging each) until the
// Context closes; wait finds one.
type events struct {
	mu   sync.Mutex
	seen []async.Event
	more chan struct{} // closed and replaced on every event
}

func watchEvents(ctx context.Context, t *testing.T, c *uverbs.Context) *events {
	t.Helper()
	r, err := async.NewReader(c)
	if err != nil {
		t.Fatal(err)
	}
	ev := &events{more: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e, err := range r.All(ctx) {
			if err != nil {
				return
			}
			r.Ack(e)
			ev.mu.Lock()
			ev.seen = append(ev.seen, e)
			close(ev.more)
			ev.more = make(chan struct{})
			ev.mu.Unlock()
		}
	}()
	// Registered after the Context's Close, so it runs first: close the
	// Context here to end All, and wait for the goroutine.
	t.Cleanup(func() { c.Close(); <-done })
	return ev
}

// wait returns the first event from index from on that matches, or fails
// the test after d.
func (ev *events) wait(t *testing.T, from int, d time.Duration, match func(async.Event) bool) (async.Event, int) {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		ev.mu.Lock()
		for i := from; i < len(ev.seen); i++ {
			if match(ev.seen[i]) {
				e := ev.seen[i]
				ev.mu.Unlock()
				return e, i
			}
		}
		from = len(ev.seen)
		more := ev.more
		ev.mu.Unlock()
		select {
		case <-more:
		case <-deadline.C:
			t.Fatalf("no matching async event within %v; seen: %v", d, ev.all())
		}
	}
}

func (ev *events) all() []async.Event {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return append([]async.Event(nil), ev.seen...)
}

func (ev *events) count() int {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return len(ev.seen)
}

func portEvent(typ async.EventType) func(async.Event) bool {
	return func(e async.Event) bool { return e.Type == typ && e.Port == 1 }
}

// pair is two ends on one Context connected to each other over rxe0's
// GID 1 (10.99.0.1 on d0), so their traffic depends on d0.
func pair(t *testing.T, c *uverbs.Context, pd *uverbs.PD) (a, b *rcstream.End) {
	t.Helper()
	var err error
	if a, err = rcstream.New("a", c, pd, 64); err != nil {
		t.Fatal(err)
	}
	if b, err = rcstream.New("b", c, pd, 64); err != nil {
		a.Close(context.Background())
		t.Fatal(err)
	}
	for _, x := range [][2]*rcstream.End{{a, b}, {b, a}} {
		if err := connectRC(c, x[0].QP, x[1].QP.QPN(), 1, rcstream.QuickTimers); err != nil {
			t.Fatal(err)
		}
	}
	return a, b
}

// streamBoth runs a two-way stream between a and b (n messages each way,
// n < 0 until a completion fails) and returns both ends' results.
func streamBoth(ctx context.Context, a, b *rcstream.End, n int) [2]error {
	var errs [2]error
	var wg sync.WaitGroup
	for i, e := range []*rcstream.End{a, b} {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = e.Stream(ctx, n, 32, false) }()
	}
	wg.Wait()
	return errs
}

// linkDownWatchdog is how long an end that has seen no failure waits for
// a completion after the link went down (rcstream.End.Watchdog): the
// retries of rcstream.QuickTimers end within about a second.
const linkDownWatchdog = 10 * time.Second

// TestVMLinkDownUnderTraffic takes d0 (rxe0's netdev) down while two RC
// QPs stream to each other over it, in both directions with 32 sends in
// flight each way, and checks what an application sees:
//
//   - every work request posted completes exactly once, with success or
//     an error status (the first failure, then flushes), receives
//     included; nothing is left hanging and nothing completes twice;
//   - the async reader reports IBV_EVENT_PORT_ERR for port 1;
//   - both QPs are in the ERR state (QP.Query);
//   - once d0 is up again and PORT_ACTIVE has arrived, destroying the
//     failed QPs and connecting new ones carries on: a stream of 2000
//     messages each way completes, in order.
//
// Everything is bounded by contexts: a hang fails the test with what is
// still outstanding.
func TestVMLinkDownUnderTraffic(t *testing.T) {
	c := openRxe(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	t.Cleanup(func() { testkit.SetLink(t, testkit.RxeNetdev, true) })
	ev := watchEvents(ctx, t, c)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Dealloc()

	a, b := pair(t, c, pd)
	sctx, scancel := context.WithTimeout(ctx, time.Minute)
	defer scancel()
	// 6.1's rxe sometimes leaves one end with its sends in flight and
	// nothing reported, for good, once the other end has failed (one run
	// in three to two; 6.12 never): the application's watchdog then
	// moves the QP to ERR, which must flush every request. (A wait that
	// has begun keeps its bound, so it is set before the stream starts;
	// the traffic never pauses that long before the link goes down.)
	for _, e := range []*rcstream.End{a, b} {
		e.Watchdog.Store(int64(linkDownWatchdog))
	}
	res := make(chan [2]error, 1)
	go func() { res <- streamBoth(sctx, a, b, -1) }()

	// Under traffic: both directions have delivered messages.
	for a.Progress.Load() < 200 || b.Progress.Load() < 200 {
		select {
		case errs := <-res:
			t.Fatalf("the stream ended before the link went down: %v; %s; %s", errs, a.State(), b.State())
		case <-sctx.Done():
			t.Fatalf("no traffic before the stream's bound: %v; %s; %s", sctx.Err(), a.State(), b.State())
		case <-time.After(10 * time.Millisecond):
		}
	}
	before := ev.count()
	down := time.Now()
	testkit.SetLink(t, testkit.RxeNetdev, false)

	var errs [2]error
	select {
	case errs = <-res:
	case <-ctx.Done():
		t.Fatal("the stream goroutines did not return")
	}
	took := time.Since(down)
	for i, e := range []*rcstream.End{a, b} {
		t.Logf("%s (%v after the link went down)", e.State(), took.Round(time.Millisecond))
		if errs[i] != nil {
			t.Errorf("%s: %v", e.Name, errs[i])
			continue
		}
		if len(e.Bad) == 0 {
			t.Errorf("%s: no completion failed", e.Name)
		}
		if e.Outstanding() != 0 {
			t.Errorf("%s: %d requests never completed", e.Name, e.Outstanding())
		}
		for _, wc := range e.Bad[min(1, len(e.Bad)):] {
			if wc.Status != uverbs.WCWRFlushErr {
				t.Errorf("%s: after the first failure, a completion with %v, want flushes only", e.Name, wc.Status)
				break
			}
		}
		state := e.StalledState
		if e.WatchdogFired {
			if testkit.KernelAtLeast(6, 12) {
				t.Errorf("%s: no completion for %v after the link went down (state %v, %d outstanding): the kernel never failed the QP",
					e.Name, linkDownWatchdog, e.StalledState, e.StalledOut)
			} else {
				t.Logf("%s: 6.1's rxe reported nothing for %v after the link went down (QP state %v, %d requests outstanding): moved the QP to ERR, which flushed them",
					e.Name, linkDownWatchdog, e.StalledState, e.StalledOut)
			}
			state = uverbs.QPStateErr // forceErr's Modify succeeded
		} else if e.Forced {
			// Receives the stream reposted after the kernel's flush
			// (it had not yet seen the failure) stay unflushed on
			// both kernels: rxe's receive posting makes no system
			// call (TestVMRecvPostedInErr). 6.1's rxe may also leave
			// receives posted before the failure; sends it never
			// leaves on 6.12, where a posted send rings the kernel.
			if testkit.KernelAtLeast(6, 12) && e.StalledSends > 0 {
				t.Errorf("%s: %s", e.Name, e.Stall())
			}
			t.Logf("%s: %s: moved the QP to ERR, which flushed them", e.Name, e.Stall())
		} else {
			attr, _, err := e.QP.Query(uverbs.QPAttrState)
			if err != nil {
				t.Errorf("%s: Query: %v", e.Name, err)
			}
			state = attr.State
		}
		if state != uverbs.QPStateErr {
			t.Errorf("%s: QP state %v after the link went down, want ERR", e.Name, state)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	ev.wait(t, before, 30*time.Second, portEvent(async.PortErr))

	// The link comes back: the application waits for PORT_ACTIVE,
	// replaces its QPs and carries on.
	before = ev.count()
	testkit.SetLink(t, testkit.RxeNetdev, true)
	ev.wait(t, before, 30*time.Second, portEvent(async.PortActive))
	if pa, err := c.QueryPort(1); err != nil || pa.State != uverbs.PortActive {
		t.Fatalf("port 1 after PORT_ACTIVE: %+v, %v", pa, err)
	}
	for _, e := range []*rcstream.End{a, b} {
		if err := e.Close(ctx); err != nil {
			t.Fatalf("%s: destroying the failed QP: %v", e.Name, err)
		}
	}
	a, b = pair(t, c, pd)
	defer a.Close(ctx)
	defer b.Close(ctx)
	sctx2, scancel2 := context.WithTimeout(ctx, 2*time.Minute)
	defer scancel2()
	start := time.Now()
	for i, err := range streamBoth(sctx2, a, b, 2000) {
		e := []*rcstream.End{a, b}[i]
		if err != nil || len(e.Bad) != 0 {
			t.Fatalf("after the link came back: %v; %s", err, e.State())
		}
	}
	t.Logf("after PORT_ACTIVE: new QPs streamed 2000 messages each way in %v; events %v", time.Since(start).Round(time.Millisecond), ev.all())
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatal("out of time")
	}
}
