package uverbs_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/async"
	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/uverbs"
)

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

// waitResources polls the kernel's resource counts until want holds for
// pd, cq and qp (the kernel may finish releasing a file a moment after the
// last reference is dropped).
func waitResources(t *testing.T, want map[string]int) {
	t.Helper()
	var got map[string]int
	for i := 0; i < 50; i++ {
		got = testkit.Resources(t, testkit.RxeDev)
		if got["pd"] == want["pd"] && got["cq"] == want["cq"] && got["qp"] == want["qp"] && got["ctx"] == want["ctx"] {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Errorf("resources: got pd=%d cq=%d qp=%d ctx=%d, want pd=%d cq=%d qp=%d ctx=%d",
		got["pd"], got["cq"], got["qp"], got["ctx"], want["pd"], want["cq"], want["qp"], want["ctx"])
}

func bg(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestVMPDCQ(t *testing.T) {
	c := openRxe(t)
	base := testkit.Resources(t, testkit.RxeDev)

	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	var cqs []*uverbs.CQ
	for _, tc := range []struct{ req, want int }{{1, 1}, {2, 3}, {4, 7}, {64, 127}} {
		cq, err := c.CreateCQ(tc.req, nil)
		if err != nil {
			t.Fatalf("CreateCQ(%d): %v", tc.req, err)
		}
		if cq.CQE() != tc.want {
			t.Errorf("CreateCQ(%d).CQE() = %d, want %d", tc.req, cq.CQE(), tc.want)
		}
		if cq.UserHandle() == 0 || cq.Kind() != uverbs.ElementCQ {
			t.Errorf("cq user handle %d kind %v", cq.UserHandle(), cq.Kind())
		}
		if o, ok := c.LookupForTest(cq.UserHandle()); !ok || o != uverbs.Affiliated(cq) {
			t.Errorf("Lookup(%d) = %v, %v", cq.UserHandle(), o, ok)
		}
		cqs = append(cqs, cq)
	}
	during := testkit.Resources(t, testkit.RxeDev)
	if during["pd"] != base["pd"]+1 || during["cq"] != base["cq"]+len(cqs) {
		t.Errorf("during: pd %d cq %d, base pd %d cq %d", during["pd"], during["cq"], base["pd"], base["cq"])
	}
	if _, err := c.CreateCQ(0, nil); !errors.Is(err, uverbs.ErrInvalid) {
		t.Errorf("CreateCQ(0) = %v, want ErrInvalid", err)
	}
	if _, err := c.CreateCQ(1, &uverbs.CQOptions{CompVector: 1 << 20}); !errors.Is(err, uverbs.ErrInvalid) {
		t.Errorf("CreateCQ with comp vector 1<<20 = %v, want ErrInvalid", err)
	}
	if _, err := c.CreateCQ(1<<30, nil); !errors.Is(err, sys.EINVAL) {
		t.Errorf("CreateCQ(1<<30) = %v, want EINVAL from the kernel", err)
	}
	for _, cq := range cqs {
		if err := cq.Destroy(bg(t)); err != nil {
			t.Fatal(err)
		}
		if _, ok := c.LookupForTest(cq.UserHandle()); ok {
			t.Error("CQ still registered after Destroy")
		}
		if err := cq.Destroy(bg(t)); !errors.Is(err, uverbs.ErrClosed) {
			t.Errorf("second Destroy = %v, want ErrClosed", err)
		}
	}
	if err := pd.Dealloc(); err != nil {
		t.Fatal(err)
	}
	if err := pd.Dealloc(); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("second Dealloc = %v, want ErrClosed", err)
	}
	waitResources(t, base)
}

func rcQP(t *testing.T, pd *uverbs.PD, cq *uverbs.CQ) *uverbs.QP {
	t.Helper()
	qp, err := pd.CreateQP(uverbs.QPInitAttr{
		Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq,
		Cap: uverbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1},
	})
	if err != nil {
		t.Fatalf("CreateQP: %v", err)
	}
	return qp
}

// loopbackRTS drives an RC QP connected to itself through rxe0's GID 1
// (::ffff:10.99.0.1) from RESET to RTS.
func loopbackRTS(t testing.TB, c *uverbs.Context, qp *uverbs.QP) {
	t.Helper()
	g, err := c.QueryGID(1, 1)
	if err != nil {
		t.Fatalf("QueryGID(1, 1): %v", err)
	}
	if want := net.ParseIP(testkit.RxeAddr); !g.GID.IP().Equal(want) {
		t.Fatalf("GID 1 is %v, want %v", g.GID, want)
	}
	steps := []struct {
		attr uverbs.QPAttr
		mask uverbs.QPAttrMask
	}{
		{uverbs.QPAttr{State: uverbs.QPStateInit, PKeyIndex: 0, PortNum: 1, AccessFlags: 2 | 4},
			uverbs.QPAttrState | uverbs.QPAttrPKeyIndex | uverbs.QPAttrPort | uverbs.QPAttrAccessFlags},
		{uverbs.QPAttr{State: uverbs.QPStateRTR, PathMTU: 3, DestQPN: qp.QPN(), RQPSN: 0, MaxDestRdAtomic: 1, MinRNRTimer: 12,
			AH: uverbs.AHAttr{DGID: g.GID, SGIDIndex: 1, HopLimit: 1, IsGlobal: true, PortNum: 1}},
			uverbs.QPAttrState | uverbs.QPAttrAV | uverbs.QPAttrPathMTU | uverbs.QPAttrDestQPN | uverbs.QPAttrRQPSN |
				uverbs.QPAttrMaxDestRdAtomic | uverbs.QPAttrMinRNRTimer},
		{uverbs.QPAttr{State: uverbs.QPStateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, SQPSN: 0, MaxRdAtomic: 1},
			uverbs.QPAttrState | uverbs.QPAttrTimeout | uverbs.QPAttrRetryCnt | uverbs.QPAttrRNRRetry |
				uverbs.QPAttrSQPSN | uverbs.QPAttrMaxQPRdAtomic},
	}
	for _, s := range steps {
		if err := qp.Modify(&s.attr, s.mask); err != nil {
			t.Fatalf("Modify to %v: %v", s.attr.State, err)
		}
	}
}

// drainEvent moves qp from RTS to SQD and returns the SQ_DRAINED event,
// acknowledging any unrelated event read meanwhile.
func drainEvent(t *testing.T, r *async.Reader, qp *uverbs.QP) async.Event {
	t.Helper()
	if err := qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateSQD, EnSQDAsyncNotify: true},
		uverbs.QPAttrState|uverbs.QPAttrEnSQDAsyncNotify); err != nil {
		t.Fatalf("Modify to SQD: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		ev, err := r.Get(ctx)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		if ev.Type == async.SQDrained && ev.Element == uverbs.Affiliated(qp) {
			return ev
		}
		t.Logf("other event: %v (element %v)", ev, ev.Element)
		if err := r.Ack(ev); err != nil {
			t.Fatal(err)
		}
	}
}

func TestVMQPLifecycle(t *testing.T) {
	c := openRxe(t)
	base := testkit.Resources(t, testkit.RxeDev)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := c.CreateCQ(8, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []uverbs.QPType{uverbs.QPTypeRC, uverbs.QPTypeUC, uverbs.QPTypeUD} {
		want := uverbs.QPCap{MaxSendWR: 5, MaxRecvWR: 3, MaxSendSGE: 2, MaxRecvSGE: 2, MaxInlineData: 64}
		qp, err := pd.CreateQP(uverbs.QPInitAttr{Type: typ, SendCQ: cq, RecvCQ: cq, Cap: want, SigAll: typ == uverbs.QPTypeUD})
		if err != nil {
			t.Fatalf("CreateQP(%v): %v", typ, err)
		}
		got := qp.Cap()
		t.Logf("%v QPN %d granted %+v", typ, qp.QPN(), got)
		if got.MaxSendWR < want.MaxSendWR || got.MaxRecvWR < want.MaxRecvWR || got.MaxSendSGE < want.MaxSendSGE ||
			got.MaxRecvSGE < want.MaxRecvSGE || got.MaxInlineData < want.MaxInlineData {
			t.Errorf("%v: granted %+v < requested %+v", typ, got, want)
		}
		if qp.QPN() < 16 || qp.Type() != typ || qp.Kind() != uverbs.ElementQP {
			t.Errorf("%v: QPN %d type %v kind %v", typ, qp.QPN(), qp.Type(), qp.Kind())
		}
		if o, ok := c.LookupForTest(qp.UserHandle()); !ok || o != uverbs.Affiliated(qp) {
			t.Errorf("Lookup(%d) = %v, %v", qp.UserHandle(), o, ok)
		}
		during := testkit.Resources(t, testkit.RxeDev)
		if during["qp"] != base["qp"]+1 {
			t.Errorf("qp count %d, base %d", during["qp"], base["qp"])
		}
		// Objects in use refuse to go.
		if err := pd.Dealloc(); !errors.Is(err, sys.EBUSY) {
			t.Errorf("Dealloc of PD with a QP = %v, want EBUSY", err)
		}
		if err := cq.Destroy(bg(t)); !errors.Is(err, sys.EBUSY) {
			t.Errorf("Destroy of CQ with a QP = %v, want EBUSY", err)
		}
		// A bad transition is the kernel's EINVAL.
		if err := qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateRTS}, uverbs.QPAttrState); !errors.Is(err, sys.EINVAL) {
			t.Errorf("RESET->RTS = %v, want EINVAL", err)
		}
		if err := qp.Destroy(bg(t)); err != nil {
			t.Fatal(err)
		}
		if err := qp.Destroy(bg(t)); !errors.Is(err, uverbs.ErrClosed) {
			t.Errorf("second Destroy = %v, want ErrClosed", err)
		}
		if err := qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateInit}, uverbs.QPAttrState); !errors.Is(err, uverbs.ErrClosed) {
			t.Errorf("Modify after Destroy = %v, want ErrClosed", err)
		}
		if _, ok := c.LookupForTest(qp.UserHandle()); ok {
			t.Error("QP still registered after Destroy")
		}
	}
	if err := cq.Destroy(bg(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq}); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("CreateQP with destroyed CQ = %v, want ErrClosed", err)
	}
	if err := pd.Dealloc(); err != nil {
		t.Fatal(err)
	}
	waitResources(t, base)
}

// TestVMSQDrainedAndDestroyWaits is the proof that async events map back
// to our objects and that Destroy waits for their acknowledgement: an RC
// QP connected to itself is moved RTS -> SQD, the SQ_DRAINED event names
// exactly that *QP, and destroying it with the event unacknowledged
// blocks until the Ack (or reports the unacked event when ctx ends).
func TestVMSQDrainedAndDestroyWaits(t *testing.T) {
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

	// 1: Destroy gives up after its context with an *UnackedError.
	qp1 := rcQP(t, pd, cq)
	loopbackRTS(t, c, qp1)
	ev1 := drainEvent(t, r, qp1)
	t.Logf("event: %v", ev1)
	if d, a := uverbs.AsyncCountsForTest(qp1); d != 1 || a != 0 {
		t.Errorf("qp1 counts delivered %d acked %d", d, a)
	}
	short, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	start := time.Now()
	err = qp1.Destroy(short)
	cancel()
	var ue *uverbs.UnackedError
	if !errors.As(err, &ue) {
		t.Fatalf("Destroy with the event unacked = %v, want *UnackedError", err)
	}
	t.Logf("after %v: %v", time.Since(start).Round(time.Millisecond), err)
	if ue.Async != 1 || ue.Comp != 0 || ue.Object != "qp" || len(ue.Pending) != 1 || ue.Pending[0] != async.SQDrained {
		t.Errorf("UnackedError = %+v", ue)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("UnackedError does not wrap DeadlineExceeded: %v", err)
	}
	if el := time.Since(start); el < 250*time.Millisecond {
		t.Errorf("Destroy returned after %v, before its context ended", el)
	}
	if err := r.Ack(ev1); err != nil {
		t.Errorf("Ack after Destroy: %v", err)
	}

	// 2: Destroy blocks until the Ack, then returns nil.
	qp2 := rcQP(t, pd, cq)
	loopbackRTS(t, c, qp2)
	ev2 := drainEvent(t, r, qp2)
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		done <- qp2.Destroy(ctx)
	}()
	// Once the kernel's QP count is back to base, the destroy command has
	// returned, so Destroy is (or is about to be) waiting for the Ack.
	want := testkit.Resources(t, testkit.RxeDev)
	want["qp"] = base["qp"]
	waitResources(t, want)
	select {
	case err := <-done:
		t.Fatalf("Destroy returned before the Ack: %v", err)
	default:
	}
	acked := time.Now()
	if err := r.Ack(ev2); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Destroy after Ack = %v", err)
		}
		t.Logf("Destroy returned %v after the Ack", time.Since(acked).Round(time.Microsecond))
	case <-time.After(10 * time.Second):
		t.Fatal("Destroy did not return after the Ack")
	}
	if r.Unacked() != 0 {
		t.Errorf("reader has %d unacked events", r.Unacked())
	}
	if err := cq.Destroy(bg(t)); err != nil {
		t.Fatal(err)
	}
	if err := pd.Dealloc(); err != nil {
		t.Fatal(err)
	}
	waitResources(t, base)
}

// TestVMCloseWithLiveObjects: closing the context releases live PD, CQs
// and QPs (including their mapped rings, which pin the command fd), and
// their later Destroy reports ErrClosed.
func TestVMCloseWithLiveObjects(t *testing.T) {
	testkit.RequireVM(t)
	base := testkit.Resources(t, testkit.RxeDev)
	c, err := uverbs.OpenByName(testkit.RxeDev)
	if err != nil {
		t.Fatal(err)
	}
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := c.CreateCQ(8, nil)
	if err != nil {
		t.Fatal(err)
	}
	qp := rcQP(t, pd, cq)
	loopbackRTS(t, c, qp)
	during := testkit.Resources(t, testkit.RxeDev)
	if during["ctx"] != base["ctx"]+1 || during["qp"] != base["qp"]+1 || during["cq"] != base["cq"]+1 || during["pd"] != base["pd"]+1 {
		t.Errorf("during %v, base %v", during, base)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	waitResources(t, base)
	if err := qp.Destroy(bg(t)); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("QP Destroy after Close = %v, want ErrClosed", err)
	}
	if err := cq.Destroy(bg(t)); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("CQ Destroy after Close = %v, want ErrClosed", err)
	}
	if err := pd.Dealloc(); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("Dealloc after Close = %v, want ErrClosed", err)
	}
	if _, err := c.AllocPD(); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("AllocPD after Close = %v, want ErrClosed", err)
	}
	if _, err := c.CreateCQ(1, nil); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("CreateCQ after Close = %v, want ErrClosed", err)
	}
	if r := sys.OpenMappings(); len(r) != 0 {
		t.Errorf("mappings left after Close: %v", r)
	}
}

// TestVMZeroDepthQueues: a QP created with no receive entries (or no send
// entries) is valid, as rxe_queue_init allows: its empty queue has one
// slot (index mask 0). Posting to it fails with ErrQueueFull, and the QP
// works on its other queue.
func TestVMZeroDepthQueues(t *testing.T) {
	c := openRxe(t)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Dealloc()
	cq, err := c.CreateCQ(8, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cq.Destroy(bg(t))
	for _, caps := range []uverbs.QPCap{{MaxSendWR: 4, MaxSendSGE: 1}, {MaxRecvWR: 4, MaxRecvSGE: 1}} {
		qp, err := pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq, Cap: caps})
		if err != nil {
			t.Fatalf("CreateQP(%+v): %v", caps, err)
		}
		if err := qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateInit, PortNum: 1, AccessFlags: uverbs.AccessRemoteWrite}, uverbs.QPAttrState|uverbs.QPAttrPKeyIndex|uverbs.QPAttrPort|uverbs.QPAttrAccessFlags); err != nil {
			t.Fatal(err)
		}
		err = qp.PostRecv([]uverbs.RecvWR{{ID: 1}})
		if caps.MaxRecvWR == 0 && !errors.Is(err, uverbs.ErrQueueFull) {
			t.Errorf("%+v: PostRecv = %v, want ErrQueueFull", caps, err)
		}
		if caps.MaxRecvWR > 0 && err != nil {
			t.Errorf("%+v: PostRecv = %v", caps, err)
		}
		if err := qp.Destroy(bg(t)); err != nil {
			t.Fatal(err)
		}
	}
}
