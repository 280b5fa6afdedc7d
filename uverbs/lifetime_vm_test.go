package uverbs_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/async"
	"github.com/pureverbs/pureverbs/internal/core"
	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/uverbs"
)

// eventQP opens rxe0 (closed by the test's cleanup) with an async reader
// and makes an RC QP in RTS, looped back to itself, that SQ_DRAINED
// events can be raised on; base is the kernel's resource count before.
func eventQP(t *testing.T) (map[string]int, *async.Reader, *uverbs.PD, *uverbs.CQ, *uverbs.QP) {
	t.Helper()
	c := openRxe(t)
	base := testkit.Resources(t, testkit.RxeDev)
	r, err := async.NewReader(c)
	if err != nil {
		t.Fatal(err)
	}
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := c.CreateCQ(16, nil)
	if err != nil {
		t.Fatal(err)
	}
	qp := rcQP(t, pd, cq)
	loopbackRTS(t, c, qp)
	return base, r, pd, cq, qp
}

// TestVMDestroyWaitsForLastAck: a QP with three SQ_DRAINED events read
// and unacknowledged; Destroy is still blocked after two Acks (well after
// the kernel destroy returned) and returns only after the third. A wait
// that returned after N-1 of N acks passed the suite before this test.
func TestVMDestroyWaitsForLastAck(t *testing.T) {
	base, r, pd, cq, qp := eventQP(t)
	const n = 3
	var evs []async.Event
	for i := 0; i < n; i++ {
		evs = append(evs, drainEvent(t, r, qp))
		if i < n-1 {
			if err := qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateRTS}, uverbs.QPAttrState); err != nil {
				t.Fatalf("SQD -> RTS: %v", err)
			}
		}
	}
	if d, a := uverbs.AsyncCountsForTest(qp); d != n || a != 0 {
		t.Fatalf("delivered %d acked %d, want %d/0", d, a, n)
	}

	returned := make(chan time.Time, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := qp.Destroy(ctx); err != nil {
			t.Errorf("Destroy: %v", err)
		}
		returned <- time.Now()
	}()
	// The kernel's QP count back at base: the destroy command returned and
	// Destroy is waiting for acknowledgements.
	want := testkit.Resources(t, testkit.RxeDev)
	want["qp"] = base["qp"]
	waitResources(t, want)
	for _, ev := range evs[:n-1] {
		if err := r.Ack(ev); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-returned:
		t.Fatalf("Destroy returned after %d of %d acks", n-1, n)
	case <-time.After(500 * time.Millisecond):
	}
	lastAck := time.Now()
	if err := r.Ack(evs[n-1]); err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-returned:
		if at.Before(lastAck) {
			t.Fatalf("Destroy returned %v before the last Ack", lastAck.Sub(at))
		}
		t.Logf("Destroy returned %v after the last of %d Acks", at.Sub(lastAck).Round(time.Microsecond), n)
	case <-time.After(10 * time.Second):
		t.Fatal("Destroy did not return after the last Ack")
	}
	if err := cq.Destroy(bg(t)); err != nil {
		t.Fatal(err)
	}
	if err := pd.Dealloc(); err != nil {
		t.Fatal(err)
	}
	waitResources(t, base)
}

// TestVMDestroyNilContext: Destroy(nil) is a typed error and leaves the
// object intact and destroyable (it used to panic half-way, after marking
// the object dead).
func TestVMDestroyNilContext(t *testing.T) {
	c := openRxe(t)
	base := testkit.Resources(t, testkit.RxeDev)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := c.CreateCQ(4, nil)
	if err != nil {
		t.Fatal(err)
	}
	qp := rcQP(t, pd, cq)
	//lint:ignore SA1012 a nil context is the case under test
	if err := qp.Destroy(nil); !errors.Is(err, uverbs.ErrInvalid) {
		t.Fatalf("QP Destroy(nil) = %v, want ErrInvalid", err)
	}
	//lint:ignore SA1012 a nil context is the case under test
	if err := cq.Destroy(nil); !errors.Is(err, uverbs.ErrInvalid) {
		t.Fatalf("CQ Destroy(nil) = %v, want ErrInvalid", err)
	}
	if c, err := c.LookupForTest(qp.UserHandle()); !err || c != uverbs.Affiliated(qp) {
		t.Fatal("QP unregistered by Destroy(nil)")
	}
	if err := qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateInit, PortNum: 1}, uverbs.QPAttrState|uverbs.QPAttrPort|uverbs.QPAttrPKeyIndex|uverbs.QPAttrAccessFlags); err != nil {
		t.Fatalf("QP unusable after Destroy(nil): %v", err)
	}
	if err := qp.Destroy(bg(t)); err != nil {
		t.Fatal(err)
	}
	if err := cq.Destroy(bg(t)); err != nil {
		t.Fatal(err)
	}
	if err := pd.Dealloc(); err != nil {
		t.Fatal(err)
	}
	waitResources(t, base)
}

// TestVMCreateHoldsParents is defect 2: CreateQP used to check its CQ,
// release it, then send the CQ's handle. A Destroy of that CQ and a new
// CreateCQ in between (the kernel hands out the lowest free handle) bound
// the QP to the new CQ. Now the CQ is held across the create: its Destroy
// waits, then fails with EBUSY because the QP uses it, and the new CQ gets
// another handle.
func TestVMCreateHoldsParents(t *testing.T) {
	c := openRxe(t)
	base := testkit.Resources(t, testkit.RxeDev)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cqA, err := c.CreateCQ(4, nil)
	if err != nil {
		t.Fatal(err)
	}
	paused := make(chan struct{})
	resume := make(chan struct{})
	var once sync.Once
	uverbs.SetHookForTest(func(point string) {
		if point == "qp:before-create" {
			once.Do(func() {
				close(paused)
				<-resume
			})
		}
	})
	defer uverbs.SetHookForTest(nil)

	type res struct {
		qp  *uverbs.QP
		err error
	}
	created := make(chan res, 1)
	go func() {
		qp, err := pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: cqA, RecvCQ: cqA,
			Cap: uverbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
		created <- res{qp, err}
	}()
	<-paused
	destroyed := make(chan error, 1)
	go func() { destroyed <- cqA.Destroy(bg(t)) }()
	deallocated := make(chan error, 1)
	go func() { deallocated <- pd.Dealloc() }()
	select {
	case err := <-destroyed:
		t.Fatalf("CQ Destroy completed while a QP create held it: %v", err)
	case err := <-deallocated:
		t.Fatalf("PD Dealloc completed while a QP create held it: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	close(resume)
	r := <-created
	if r.err != nil {
		t.Fatalf("CreateQP: %v", r.err)
	}
	if err := <-destroyed; !errors.Is(err, sys.EBUSY) {
		t.Fatalf("Destroy of a CQ in use = %v, want EBUSY", err)
	}
	if err := <-deallocated; !errors.Is(err, sys.EBUSY) {
		t.Fatalf("Dealloc of a PD in use = %v, want EBUSY", err)
	}
	// Both survived: the CQ is still the QP's and still usable.
	cqB, err := c.CreateCQ(4, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cqB.Handle() == cqA.Handle() {
		t.Fatalf("new CQ got the handle %d of a live CQ", cqB.Handle())
	}
	if err := r.qp.Destroy(bg(t)); err != nil {
		t.Fatal(err)
	}
	for _, cq := range []*uverbs.CQ{cqA, cqB} {
		if err := cq.Destroy(bg(t)); err != nil {
			t.Fatal(err)
		}
	}
	if err := pd.Dealloc(); err != nil {
		t.Fatal(err)
	}
	waitResources(t, base)
}

// TestVMCreateRacesClose is defect 4: Close between the create command and
// the moment the object is complete used to return a live-looking CQ or
// QP whose rings were already gone. Now the create returns ErrClosed and
// leaves no mapping, fd or kernel object behind.
func TestVMCreateRacesClose(t *testing.T) {
	testkit.RequireVM(t)
	base := testkit.Resources(t, testkit.RxeDev)
	for _, point := range []string{"cq:created", "qp:created", "cq:before-create", "qp:before-create"} {
		t.Run(point, func(t *testing.T) {
			c, err := uverbs.OpenByName(testkit.RxeDev)
			if err != nil {
				t.Fatal(err)
			}
			var pd *uverbs.PD
			var cq *uverbs.CQ
			if point[:2] == "qp" {
				if pd, err = c.AllocPD(); err != nil {
					t.Fatal(err)
				}
				if cq, err = c.CreateCQ(4, nil); err != nil {
					t.Fatal(err)
				}
			}
			closed := make(chan error, 1)
			uverbs.SetHookForTest(func(p string) {
				if p == point {
					// Close waits for uses of live objects in flight;
					// run it beside the create, as a real race would.
					go func() { closed <- c.Close() }()
					deadline := time.Now().Add(5 * time.Second)
					for !c.Closed() && time.Now().Before(deadline) {
						time.Sleep(time.Millisecond)
					}
				}
			})
			defer uverbs.SetHookForTest(nil)
			if point[:2] == "cq" {
				got, err := c.CreateCQ(4, nil)
				if !errors.Is(err, uverbs.ErrClosed) || got != nil {
					t.Fatalf("CreateCQ racing Close = %v, %v; want nil, ErrClosed", got, err)
				}
			} else {
				got, err := pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq,
					Cap: uverbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
				if !errors.Is(err, uverbs.ErrClosed) || got != nil {
					t.Fatalf("CreateQP racing Close = %v, %v; want nil, ErrClosed", got, err)
				}
			}
			if err := <-closed; err != nil {
				t.Fatalf("Close: %v", err)
			}
			if m := sys.OpenMappings(); len(m) != 0 {
				t.Fatalf("mappings left behind: %v", m)
			}
			if f := sys.OpenFDs(); len(f) != 0 {
				t.Fatalf("fds left behind: %v", f)
			}
			waitResources(t, base)
		})
	}
}

// TestVMCreateCQRacesCloseChannel: a CreateCQ on a completion channel
// whose ioctl comes while Close is half done. Close used to close the
// channels before the command fd: the create then passed the channel's
// closed fd number (free for any open to take; here /dev/null takes it)
// and failed with EBADF, or with another context's channel bound it to
// that one. Now the command fd goes first, and the create fails with
// ErrClosed.
func TestVMCreateCQRacesCloseChannel(t *testing.T) {
	testkit.RequireVM(t)
	base := testkit.Resources(t, testkit.RxeDev)
	c, err := uverbs.OpenByName(testkit.RxeDev)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := c.CreateCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	halfClosed := make(chan struct{})
	finish := make(chan struct{})
	closed := make(chan error, 1)
	var squat []*os.File
	uverbs.SetHookForTest(func(p string) {
		switch p {
		case "cq:before-create":
			go func() { closed <- c.Close() }()
			select {
			case <-halfClosed:
			case <-time.After(10 * time.Second):
				t.Error("Close did not reach the point between its fds")
			}
			for range 4 { // take the numbers Close freed, as another open would
				if f, err := os.Open("/dev/null"); err == nil {
					squat = append(squat, f)
				}
			}
		case "context:cmd-closed":
			close(halfClosed)
			<-finish
		}
	})
	defer uverbs.SetHookForTest(nil)
	got, err := c.CreateCQ(4, &uverbs.CQOptions{Channel: ch})
	close(finish)
	if !errors.Is(err, uverbs.ErrClosed) || got != nil {
		t.Errorf("CreateCQ racing Close = %v, %v; want nil, ErrClosed", got, err)
	}
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, f := range squat {
		f.Close()
	}
	if m := sys.OpenMappings(); len(m) != 0 {
		t.Fatalf("mappings left behind: %v", m)
	}
	if f := sys.OpenFDs(); len(f) != 0 {
		t.Fatalf("fds left behind: %v", f)
	}
	waitResources(t, base)
}

// TestVMDestroyRacesAsyncRead: the kernel counts an async event as
// reported when read(2) returns it, before the reader maps its handle to
// the object. A QP's Destroy that runs entirely between the two (kernel
// destroy and all) must still see that event delivered to the QP and wait
// for its Ack, and the Ack must release it. The destroy used to forget
// the handle first: the event came out with a nil Element, its Ack
// counted nowhere, and Destroy waited until its context ended (seen once
// in CI as TestVMCQOverflowEvent's "1 async ... still unacknowledged").
func TestVMDestroyRacesAsyncRead(t *testing.T) {
	base, r, pd, cq, qp := eventQP(t)

	// Pause the reader between its read and its lookup of the QP.
	inLookup := make(chan struct{})
	resume := make(chan struct{})
	var once sync.Once
	core.LookupHook = func(uh uint64) {
		if uh == qp.UserHandle() {
			once.Do(func() {
				close(inLookup)
				<-resume
			})
		}
	}
	waiting := make(chan struct{})
	var onceW sync.Once
	uverbs.SetHookForTest(func(p string) {
		if p == "qp:wait-acks" {
			onceW.Do(func() { close(waiting) })
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got := make(chan async.Event, 1)
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		for {
			ev, err := r.Get(ctx)
			if err != nil {
				return
			}
			if ev.Type == async.SQDrained {
				got <- ev
				return // the test acknowledges it
			}
			t.Logf("other event: %v", ev)
			r.Ack(ev)
		}
	}()
	release := sync.OnceFunc(func() { close(resume) })
	defer func() {
		release()
		cancel()
		<-readerDone
		core.LookupHook = nil
		uverbs.SetHookForTest(nil)
	}()

	if err := qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateSQD, EnSQDAsyncNotify: true},
		uverbs.QPAttrState|uverbs.QPAttrEnSQDAsyncNotify); err != nil {
		t.Fatalf("Modify to SQD: %v", err)
	}
	select {
	case <-inLookup:
	case <-ctx.Done():
		t.Fatal("no event of the QP was read")
	}
	destroyed := make(chan error, 1)
	go func() { destroyed <- qp.Destroy(ctx) }()
	select {
	case <-waiting: // the kernel destroy returned; Destroy waits for acks
	case err := <-destroyed:
		t.Fatalf("Destroy returned %v without waiting for the event read before it", err)
	}
	release()
	var ev async.Event
	select {
	case ev = <-got:
	case <-ctx.Done():
		t.Fatal("the reader did not deliver the event")
	}
	if ev.Element != uverbs.Affiliated(qp) {
		t.Fatalf("event read before the destroy has element %v, want the QP", ev.Element)
	}
	if want := fmt.Sprintf("QP %#x (qp handle ", qp.QPN()); !strings.Contains(ev.String(), want) {
		t.Errorf("event %q does not name the QP as %q", ev.String(), want)
	}
	select {
	case err := <-destroyed:
		t.Fatalf("Destroy returned (%v) before the Ack", err)
	default:
	}
	if err := r.Ack(ev); err != nil {
		t.Fatal(err)
	}
	if err := <-destroyed; err != nil {
		t.Fatalf("Destroy after the Ack: %v", err)
	}
	if err := cq.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if err := pd.Dealloc(); err != nil {
		t.Fatal(err)
	}
	waitResources(t, base)
}

// TestVMDestroyRacesChannelRead: the completion channel's counterpart. A
// CQ destroyed between the channel's read of its event and the lookup
// must still be returned to GetCQEvent (not "unknown CQ"), and its
// Destroy must return once that event is acknowledged.
func TestVMDestroyRacesChannelRead(t *testing.T) {
	c := openRxe(t)
	base := testkit.Resources(t, testkit.RxeDev)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	ch, err := c.CreateCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := c.CreateCQ(16, &uverbs.CQOptions{Channel: ch})
	if err != nil {
		t.Fatal(err)
	}
	qp := chanQP(t, c, pd, cq, cq)

	inLookup := make(chan struct{})
	resume := make(chan struct{})
	waiting := make(chan struct{})
	var onceR, onceW sync.Once
	uverbs.SetHookForTest(func(p string) {
		switch p {
		case "comp_channel:read":
			onceR.Do(func() {
				close(inLookup)
				<-resume
			})
		case "cq:wait-acks":
			onceW.Do(func() { close(waiting) })
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	type result struct {
		cq  *uverbs.CQ
		err error
	}
	got := make(chan result, 1)
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		cq, err := ch.GetCQEvent(ctx)
		got <- result{cq, err}
	}()
	release := sync.OnceFunc(func() { close(resume) })
	defer func() {
		release()
		cancel()
		<-readerDone
		uverbs.SetHookForTest(nil)
	}()

	if err := cq.ReqNotify(false); err != nil {
		t.Fatal(err)
	}
	if err := qp.PostRecv([]uverbs.RecvWR{{ID: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := qp.PostSend([]uverbs.SendWR{{ID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled}}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-inLookup:
	case res := <-got:
		t.Fatalf("GetCQEvent returned %v, %v without passing the hook", res.cq, res.err)
	case <-ctx.Done():
		t.Fatal("no completion event was read")
	}
	if err := qp.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	destroyed := make(chan error, 1)
	go func() { destroyed <- cq.Destroy(ctx) }()
	select {
	case <-waiting:
	case err := <-destroyed:
		t.Fatalf("CQ Destroy returned %v without waiting for the event read before it", err)
	}
	release()
	res := <-got
	if res.err != nil || res.cq != cq {
		t.Fatalf("GetCQEvent across the destroy = %v, %v; want the CQ", res.cq, res.err)
	}
	select {
	case err := <-destroyed:
		t.Fatalf("CQ Destroy returned (%v) before the ack", err)
	default:
	}
	if err := cq.AckEvents(1); err != nil {
		t.Fatal(err)
	}
	if err := <-destroyed; err != nil {
		t.Fatalf("CQ Destroy after the ack: %v", err)
	}
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	if err := pd.Dealloc(); err != nil {
		t.Fatal(err)
	}
	waitResources(t, base)
}

// TestVMDestroyGivesUpChannelRead: as TestVMDestroyRacesChannelRead, but
// the CQ's Destroy gives up at once (its context has ended: an
// UnackedError) and forgets the CQ while the reader holds its event. The
// reader, waiting on a channel another CQ shares, drops that event and
// returns the other CQ's next; it used to fail with ErrInvalid ("event
// for unknown CQ user handle"), an error for a CQ it never asked about.
func TestVMDestroyGivesUpChannelRead(t *testing.T) {
	c := openRxe(t)
	base := testkit.Resources(t, testkit.RxeDev)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	ch, err := c.CreateCompChannel()
	if err != nil {
		t.Fatal(err)
	}
	gone, err := c.CreateCQ(16, &uverbs.CQOptions{Channel: ch})
	if err != nil {
		t.Fatal(err)
	}
	other, err := c.CreateCQ(16, &uverbs.CQOptions{Channel: ch})
	if err != nil {
		t.Fatal(err)
	}
	qp := chanQP(t, c, pd, gone, gone)
	qp2 := chanQP(t, c, pd, other, other)

	inLookup := make(chan struct{})
	resume := make(chan struct{})
	var once sync.Once
	uverbs.SetHookForTest(func(p string) {
		if p == "comp_channel:read" {
			once.Do(func() {
				close(inLookup)
				<-resume
			})
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	type result struct {
		cq  *uverbs.CQ
		err error
	}
	got := make(chan result, 1)
	go func() {
		cq, err := ch.GetCQEvent(ctx)
		got <- result{cq, err}
	}()
	release := sync.OnceFunc(func() { close(resume) })
	defer func() {
		release()
		uverbs.SetHookForTest(nil)
	}()
	post := func(cq *uverbs.CQ, qp *uverbs.QP) {
		t.Helper()
		if err := cq.ReqNotify(false); err != nil {
			t.Fatal(err)
		}
		if err := qp.PostRecv([]uverbs.RecvWR{{ID: 1}}); err != nil {
			t.Fatal(err)
		}
		if err := qp.PostSend([]uverbs.SendWR{{ID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled}}); err != nil {
			t.Fatal(err)
		}
	}
	post(gone, qp)
	select {
	case <-inLookup:
	case res := <-got:
		t.Fatalf("GetCQEvent returned %v, %v without passing the hook", res.cq, res.err)
	case <-ctx.Done():
		t.Fatal("no completion event was read")
	}
	if err := qp.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	ended, end := context.WithCancel(context.Background())
	end()
	var ue *uverbs.UnackedError
	if err := gone.Destroy(ended); !errors.As(err, &ue) {
		t.Fatalf("Destroy with its context ended and an event read = %v, want an UnackedError", err)
	}
	release()
	post(other, qp2)
	res := <-got
	if res.err != nil || res.cq != other {
		t.Fatalf("GetCQEvent after the given-up CQ's event = %p, %v; want the other CQ (%p)", res.cq, res.err, other)
	}
	if err := other.AckEvents(1); err != nil {
		t.Fatal(err)
	}
	if err := qp2.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if err := other.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	if err := pd.Dealloc(); err != nil {
		t.Fatal(err)
	}
	waitResources(t, base)
}
