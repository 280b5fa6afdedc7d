package uverbs_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/uverbs"
)

func TestVMSRQ(t *testing.T) {
	c := openRxe(t)
	base := testkit.Resources(t, testkit.RxeDev)
	maps0 := len(sys.OpenMappings())
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := c.CreateCQ(16, nil)
	if err != nil {
		t.Fatal(err)
	}
	srq, err := pd.CreateSRQ(uverbs.SRQAttr{MaxWR: 10, MaxSGE: 2})
	if err != nil {
		t.Fatalf("CreateSRQ: %v", err)
	}
	got := srq.Attr()
	t.Logf("SRQ %d (handle %d, user handle %d): granted %+v", srq.SRQN(), srq.Handle(), srq.UserHandle(), got)
	if got.MaxWR < 10 || got.MaxSGE < 2 || got.Limit != 0 {
		t.Errorf("granted %+v for MaxWR 10 MaxSGE 2", got)
	}
	if srq.SRQN() == 0 || srq.Kind() != uverbs.ElementSRQ || srq.PD() != pd || srq.Context() != c {
		t.Errorf("SRQN %d kind %v", srq.SRQN(), srq.Kind())
	}
	if o, ok := c.LookupForTest(srq.UserHandle()); !ok || o != uverbs.Affiliated(srq) {
		t.Errorf("Lookup(%d) = %v, %v", srq.UserHandle(), o, ok)
	}
	mapped, size := srq.SRQRingForTest()
	if !mapped || size == 0 || len(sys.OpenMappings()) != maps0+2 {
		t.Errorf("SRQ ring mapped %v (%d bytes); %d mappings, want %d", mapped, size, len(sys.OpenMappings()), maps0+2)
	}
	waitCounts(t, plus(base, "pd", 1, "cq", 1, "srq", 1))

	// Query, arm the limit, resize.
	q, err := srq.Query()
	if err != nil {
		t.Fatalf("Query: %v", err)
	}
	// 6.12's rxe answers the create with the ring's size; 6.1's echoes
	// the request and reports the (larger) ring size only to QUERY_SRQ.
	if q.MaxWR < got.MaxWR || q.MaxSGE != got.MaxSGE || q.Limit != 0 || testkit.KernelAtLeast(6, 12) && q.MaxWR != got.MaxWR {
		t.Errorf("Query = %+v, granted %+v", q, got)
	}
	if err := srq.Modify(uverbs.SRQAttr{Limit: 5}, uverbs.SRQAttrLimit); err != nil {
		t.Fatalf("Modify(limit 5): %v", err)
	}
	if q, err = srq.Query(); err != nil || q.Limit != 5 {
		t.Errorf("Query after arming = %+v, %v; want limit 5", q, err)
	}
	if err := srq.Modify(uverbs.SRQAttr{Limit: q.MaxWR + 1}, uverbs.SRQAttrLimit); !errors.Is(err, sys.EINVAL) {
		t.Errorf("limit above the size = %v, want EINVAL", err)
	}
	if err := srq.Modify(uverbs.SRQAttr{MaxWR: 40}, uverbs.SRQAttrMaxWR); err != nil {
		t.Fatalf("Modify(max_wr 40): %v", err)
	}
	q, err = srq.Query()
	if err != nil || q.MaxWR < 40 || q.MaxSGE != got.MaxSGE || q.Limit != 5 {
		t.Errorf("Query after resize = %+v, %v; want MaxWR >= 40, limit 5", q, err)
	}
	mapped, size2 := srq.SRQRingForTest()
	if !mapped || size2 <= size || len(sys.OpenMappings()) != maps0+2 {
		t.Errorf("after resize: ring mapped %v, %d bytes (was %d); %d mappings, want %d", mapped, size2, size, len(sys.OpenMappings()), maps0+2)
	}
	t.Logf("resized: %+v, ring %d -> %d bytes", q, size, size2)
	if err := srq.Modify(uverbs.SRQAttr{MaxWR: 3}, uverbs.SRQAttrMaxWR); !errors.Is(err, sys.EINVAL) {
		t.Errorf("resize below the armed limit = %v, want EINVAL", err)
	}
	if err := srq.Modify(uverbs.SRQAttr{MaxWR: 64, Limit: 0}, uverbs.SRQAttrMaxWR|uverbs.SRQAttrLimit); err != nil {
		t.Errorf("resize and disarm: %v", err)
	}
	if q, err = srq.Query(); err != nil || q.MaxWR < 64 || q.Limit != 0 {
		t.Errorf("Query = %+v, %v; want MaxWR >= 64, limit 0", q, err)
	}
	if _, err := pd.CreateSRQ(uverbs.SRQAttr{MaxWR: 1 << 30, MaxSGE: 1}); !errors.Is(err, sys.EINVAL) {
		t.Errorf("CreateSRQ beyond the device's max_srq_wr = %v, want EINVAL", err)
	}

	// QPs of each type on the SRQ: no receive queue of their own.
	var qps []*uverbs.QP
	for _, typ := range []uverbs.QPType{uverbs.QPTypeRC, uverbs.QPTypeUC, uverbs.QPTypeUD} {
		before := len(sys.OpenMappings())
		qp, err := pd.CreateQP(uverbs.QPInitAttr{Type: typ, SendCQ: cq, RecvCQ: cq, SRQ: srq,
			Cap: uverbs.QPCap{MaxSendWR: 4, MaxSendSGE: 1}})
		if err != nil {
			t.Fatalf("CreateQP(%v, SRQ): %v", typ, err)
		}
		if qp.SRQ() != srq {
			t.Errorf("%v: SRQ() = %p", typ, qp.SRQ())
		}
		if n := len(sys.OpenMappings()) - before; n != 1 {
			t.Errorf("%v QP on an SRQ mapped %d rings, want 1 (send queue only)", typ, n)
		}
		_, init, err := qp.Query(uverbs.QPAttrCap)
		if err != nil {
			t.Fatalf("Query: %v", err)
		}
		if init.SRQ != srq || init.Type != typ {
			t.Errorf("%v: Query init SRQ %p type %v", typ, init.SRQ, init.Type)
		}
		t.Logf("%v QP %d on SRQ: caps %+v", typ, qp.QPN(), qp.Cap())
		qps = append(qps, qp)
	}
	waitCounts(t, plus(base, "pd", 1, "cq", 1, "srq", 1, "qp", 3))

	// Parents in use refuse to go, say why and stay usable.
	err = srq.Destroy(bg(t))
	if !errors.Is(err, sys.EBUSY) || !strings.Contains(err.Error(), "3 QPs") {
		t.Errorf("Destroy of an SRQ with QPs = %v, want EBUSY naming 3 QPs", err)
	}
	t.Logf("SRQ Destroy: %v", err)
	if _, err := srq.Query(); err != nil {
		t.Errorf("SRQ unusable after a refused Destroy: %v", err)
	}
	if o, ok := c.LookupForTest(srq.UserHandle()); !ok || o != uverbs.Affiliated(srq) {
		t.Error("SRQ unregistered by a refused Destroy")
	}
	err = pd.Dealloc()
	if !errors.Is(err, sys.EBUSY) || !strings.Contains(err.Error(), "3 QPs, 1 SRQ") {
		t.Errorf("Dealloc of a PD with QPs and an SRQ = %v, want EBUSY naming 3 QPs, 1 SRQ", err)
	}
	t.Logf("PD Dealloc: %v", err)

	for _, qp := range qps {
		if err := qp.Destroy(bg(t)); err != nil {
			t.Fatal(err)
		}
	}
	if d, a := uverbs.AsyncCountsForTest(srq); d != 0 || a != 0 {
		t.Errorf("SRQ event counts %d/%d", d, a)
	}
	if err := srq.Destroy(bg(t)); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	if mapped, _ := srq.SRQRingForTest(); mapped {
		t.Error("SRQ ring still mapped after Destroy")
	}
	if _, ok := c.LookupForTest(srq.UserHandle()); ok {
		t.Error("SRQ still registered after Destroy")
	}
	if err := srq.Destroy(bg(t)); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("second Destroy = %v, want ErrClosed", err)
	}
	if _, err := srq.Query(); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("Query after Destroy = %v, want ErrClosed", err)
	}
	if err := srq.Modify(uverbs.SRQAttr{Limit: 1}, uverbs.SRQAttrLimit); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("Modify after Destroy = %v, want ErrClosed", err)
	}
	if _, err := pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq, SRQ: srq,
		Cap: uverbs.QPCap{MaxSendWR: 1, MaxSendSGE: 1}}); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("CreateQP on a destroyed SRQ = %v, want ErrClosed", err)
	}
	if err := cq.Destroy(bg(t)); err != nil {
		t.Fatal(err)
	}
	if err := pd.Dealloc(); err != nil {
		t.Fatal(err)
	}
	waitCounts(t, base)
	if n := len(sys.OpenMappings()); n != maps0 {
		t.Errorf("%d mappings left, want %d", n, maps0)
	}
}

// TestVMSRQCreateQPHoldsSRQ: a QP create holds its SRQ (as it holds its
// PD and CQs), so a Destroy of the SRQ racing the create waits and then
// fails with EBUSY, instead of freeing the handle the create names.
func TestVMSRQCreateQPHoldsSRQ(t *testing.T) {
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
	srq, err := pd.CreateSRQ(uverbs.SRQAttr{MaxWR: 4, MaxSGE: 1})
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
		qp, err := pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq, SRQ: srq,
			Cap: uverbs.QPCap{MaxSendWR: 1, MaxSendSGE: 1}})
		created <- res{qp, err}
	}()
	<-paused
	destroyed := make(chan error, 1)
	go func() { destroyed <- srq.Destroy(bg(t)) }()
	select {
	case err := <-destroyed:
		t.Fatalf("SRQ Destroy completed while a QP create held it: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	close(resume)
	r := <-created
	if r.err != nil {
		t.Fatalf("CreateQP: %v", r.err)
	}
	if err := <-destroyed; !errors.Is(err, sys.EBUSY) {
		t.Fatalf("Destroy of an SRQ in use = %v, want EBUSY", err)
	}
	if err := r.qp.Destroy(bg(t)); err != nil {
		t.Fatal(err)
	}
	if err := srq.Destroy(bg(t)); err != nil {
		t.Fatal(err)
	}
	if err := cq.Destroy(bg(t)); err != nil {
		t.Fatal(err)
	}
	if err := pd.Dealloc(); err != nil {
		t.Fatal(err)
	}
	waitCounts(t, base)
}

// TestVMSRQClose: closing the Context with a live SRQ (and a QP on it)
// unmaps the SRQ's ring, releases the kernel objects, and leaves Destroy
// reporting ErrClosed. A CreateSRQ racing Close returns ErrClosed and
// leaves nothing behind.
func TestVMSRQClose(t *testing.T) {
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
	cq, err := c.CreateCQ(4, nil)
	if err != nil {
		t.Fatal(err)
	}
	srq, err := pd.CreateSRQ(uverbs.SRQAttr{MaxWR: 8, MaxSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	qp, err := pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeUD, SendCQ: cq, RecvCQ: cq, SRQ: srq,
		Cap: uverbs.QPCap{MaxSendWR: 1, MaxSendSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	waitCounts(t, plus(base, "ctx", 1, "pd", 1, "cq", 1, "srq", 1, "qp", 1))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	waitCounts(t, base)
	if mapped, _ := srq.SRQRingForTest(); mapped {
		t.Error("SRQ ring mapped after Close")
	}
	if err := srq.Destroy(bg(t)); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("SRQ Destroy after Close = %v, want ErrClosed", err)
	}
	if err := qp.Destroy(bg(t)); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("QP Destroy after Close = %v, want ErrClosed", err)
	}
	if _, err := pd.CreateSRQ(uverbs.SRQAttr{MaxWR: 1}); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("CreateSRQ after Close = %v, want ErrClosed", err)
	}
	noLeaks(t)

	for _, point := range []string{"srq:before-create", "srq:created"} {
		t.Run(point, func(t *testing.T) {
			c, err := uverbs.OpenByName(testkit.RxeDev)
			if err != nil {
				t.Fatal(err)
			}
			pd, err := c.AllocPD()
			if err != nil {
				t.Fatal(err)
			}
			closed := make(chan error, 1)
			uverbs.SetHookForTest(func(p string) {
				if p == point {
					go func() { closed <- c.Close() }()
					deadline := time.Now().Add(5 * time.Second)
					for !c.Closed() && time.Now().Before(deadline) {
						time.Sleep(time.Millisecond)
					}
				}
			})
			defer uverbs.SetHookForTest(nil)
			got, err := pd.CreateSRQ(uverbs.SRQAttr{MaxWR: 4, MaxSGE: 1})
			if !errors.Is(err, uverbs.ErrClosed) || got != nil {
				t.Fatalf("CreateSRQ racing Close = %v, %v; want nil, ErrClosed", got, err)
			}
			if err := <-closed; err != nil {
				t.Fatalf("Close: %v", err)
			}
			noLeaks(t)
			waitCounts(t, base)
		})
	}
}
