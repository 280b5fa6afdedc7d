package uverbs_test

import (
	"bytes"
	"errors"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/uverbs"
)

// waitCounts polls the kernel's resource counts of rxe0 until every key
// of want (pd, cq, qp, mr, srq, ctx, ...) has its value.
func waitCounts(t *testing.T, want map[string]int) {
	t.Helper()
	var got map[string]int
	for i := 0; i < 50; i++ {
		got = testkit.Resources(t, testkit.RxeDev)
		ok := true
		for k, v := range want {
			if got[k] != v {
				ok = false
			}
		}
		if ok {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Errorf("resources: got %v, want %v", got, want)
}

// plus returns base with the given deltas applied.
func plus(base map[string]int, kv ...any) map[string]int {
	m := map[string]int{}
	for k, v := range base {
		m[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(string)] += kv[i+1].(int)
	}
	return m
}

// noLeaks fails when fds, mappings or buffers are left open.
func noLeaks(t *testing.T) {
	t.Helper()
	if f := sys.OpenFDs(); len(f) != 0 {
		t.Errorf("fds left open: %v", f)
	}
	if m := sys.OpenMappings(); len(m) != 0 {
		t.Errorf("mappings left: %v", m)
	}
	if b := sys.OpenBuffers(); len(b) != 0 {
		t.Errorf("buffers left: %v", b)
	}
}

const allRemote = uverbs.AccessLocalWrite | uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead | uverbs.AccessRemoteAtomic

func TestVMMR(t *testing.T) {
	c := openRxe(t)
	base := testkit.Resources(t, testkit.RxeDev)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}

	// Go memory, every access flag combination the kernel accepts.
	heap := make([]byte, 3*4096+17)
	var mrs []*uverbs.MR
	for _, a := range []uverbs.Access{
		0, uverbs.AccessLocalWrite, uverbs.AccessRemoteRead, allRemote,
		uverbs.AccessLocalWrite | uverbs.AccessMWBind, uverbs.AccessLocalWrite | uverbs.AccessRelaxedOrdering,
	} {
		mr, err := pd.RegMR(heap[5:], a)
		if err != nil {
			t.Fatalf("RegMR(%v): %v", a, err)
		}
		t.Logf("MR %v: handle %d lkey %#x rkey %#x", a, mr.Handle(), mr.LKey(), mr.RKey())
		if mr.Addr() != sys.SliceAddr(heap)+5 || mr.Len() != len(heap)-5 || &mr.Bytes()[0] != &heap[5] ||
			mr.Access() != a || mr.PD() != pd || mr.Context() != c {
			t.Errorf("MR %v: addr %#x len %d access %v", a, mr.Addr(), mr.Len(), mr.Access())
		}
		if mr.LKey() == 0 {
			t.Errorf("MR %v: lkey 0", a)
		}
		for _, o := range mrs {
			if o.LKey() == mr.LKey() || o.Handle() == mr.Handle() {
				t.Errorf("MR %v shares lkey %#x or handle %d with another", a, mr.LKey(), mr.Handle())
			}
		}
		mrs = append(mrs, mr)
	}
	waitCounts(t, plus(base, "pd", 1, "mr", len(mrs)))

	// Memory outside the Go heap.
	buf, err := uverbs.AllocBuffer(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	bmr, err := pd.RegMR(buf.Bytes(), allRemote)
	if err != nil {
		t.Fatalf("RegMR(buffer): %v", err)
	}
	if bmr.Addr()%4096 != 0 || bmr.Len() != 1<<20 {
		t.Errorf("buffer MR at %#x, %d bytes", bmr.Addr(), bmr.Len())
	}
	mrs = append(mrs, bmr)

	// What the kernel refuses.
	for _, a := range []uverbs.Access{uverbs.AccessRemoteWrite, uverbs.AccessRemoteAtomic, uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead} {
		if _, err := pd.RegMR(heap, a); !errors.Is(err, sys.EINVAL) {
			t.Errorf("RegMR(%v) without LOCAL_WRITE = %v, want EINVAL", a, err)
		}
	}
	// rxe has no ODP on our kernels: 6.12 says EOPNOTSUPP, 6.1 EINVAL.
	_, err = pd.RegMR(heap, uverbs.AccessLocalWrite|uverbs.AccessOnDemand)
	if testkit.KernelAtLeast(6, 12) && !errors.Is(err, uverbs.ErrNotSupported) ||
		!testkit.KernelAtLeast(6, 12) && !errors.Is(err, sys.EINVAL) {
		t.Errorf("RegMR(ON_DEMAND) on rxe, kernel %s = %v, want ErrNotSupported (6.12) or EINVAL (6.1)", testkit.KernelRelease(), err)
	}
	t.Logf("ON_DEMAND: %v", err)
	// What never reaches it.
	if _, err := pd.RegMR(nil, 0); !errors.Is(err, uverbs.ErrInvalid) {
		t.Errorf("RegMR(nil) = %v", err)
	}
	if _, err := pd.RegMR(heap, 1<<12); !errors.Is(err, uverbs.ErrInvalid) {
		t.Errorf("RegMR(unknown flag) = %v", err)
	}

	// A PD with MRs refuses to go, says why, and stays usable.
	err = pd.Dealloc()
	if !errors.Is(err, sys.EBUSY) || !strings.Contains(err.Error(), "7 MRs") {
		t.Errorf("Dealloc of a PD with MRs = %v, want EBUSY naming 7 MRs", err)
	}
	t.Logf("Dealloc: %v", err)
	extra, err := pd.RegMR(heap[:1], uverbs.AccessLocalWrite)
	if err != nil {
		t.Fatalf("RegMR after refused Dealloc: %v", err)
	}
	mrs = append(mrs, extra)

	for _, mr := range mrs {
		if err := mr.Dereg(); err != nil {
			t.Fatalf("Dereg: %v", err)
		}
		if err := mr.Dereg(); !errors.Is(err, uverbs.ErrClosed) {
			t.Errorf("second Dereg = %v, want ErrClosed", err)
		}
	}
	waitCounts(t, plus(base, "pd", 1))
	if err := buf.Close(); err != nil {
		t.Fatal(err)
	}
	if err := pd.Dealloc(); err != nil {
		t.Fatal(err)
	}
	if _, err := pd.RegMR(heap, 0); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("RegMR on a deallocated PD = %v, want ErrClosed", err)
	}
	waitCounts(t, base)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	noLeaks(t)
}

// TestVMMRKeepsMemory: the MR is what keeps registered Go memory alive.
// With no other reference, the memory survives collections until Dereg
// and the MR are gone, and is collected after that.
func TestVMMRKeepsMemory(t *testing.T) {
	c := openRxe(t)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	var freed atomic.Bool
	reg := func() *uverbs.MR {
		mem := new([64 << 10]byte)
		runtime.AddCleanup(mem, func(*atomic.Bool) { freed.Store(true) }, &freed)
		mr, err := pd.RegMR(mem[:], uverbs.AccessLocalWrite)
		if err != nil {
			t.Fatal(err)
		}
		return mr
	}
	func() {
		mr := reg()
		for i := 0; i < 5; i++ {
			runtime.GC()
			time.Sleep(10 * time.Millisecond)
		}
		if freed.Load() {
			t.Fatal("registered memory was collected while the MR lives")
		}
		mr.Bytes()[0] = 1
		if err := mr.Dereg(); err != nil {
			t.Fatal(err)
		}
	}()
	deadline := time.Now().Add(5 * time.Second)
	for !freed.Load() && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if !freed.Load() {
		t.Error("memory not collected after Dereg and the MR are gone")
	}
	if err := pd.Dealloc(); err != nil {
		t.Fatal(err)
	}
}

// TestVMMRClose: closing the Context releases live MRs in the kernel (the
// MR count goes back), after which Dereg reports ErrClosed, as do a
// window's Dealloc and AllocMW.
func TestVMMRClose(t *testing.T) {
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
	buf, err := uverbs.AllocBuffer(8192)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Close()
	mr, err := pd.RegMR(buf.Bytes(), allRemote|uverbs.AccessMWBind)
	if err != nil {
		t.Fatal(err)
	}
	mw, err := pd.AllocMW(uverbs.MWType2)
	if err != nil {
		t.Fatal(err)
	}
	waitCounts(t, plus(base, "ctx", 1, "pd", 1, "mr", 1))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	waitCounts(t, base)
	if err := mr.Dereg(); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("Dereg after Close = %v, want ErrClosed", err)
	}
	if err := mw.Dealloc(); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("MW Dealloc after Close = %v, want ErrClosed", err)
	}
	if _, err := pd.AllocMW(uverbs.MWType1); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("AllocMW after Close = %v, want ErrClosed", err)
	}
	if err := mr.Dereg(); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("second Dereg after Close = %v, want ErrClosed", err)
	}
	if _, err := pd.RegMR(buf.Bytes(), 0); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("RegMR after Close = %v, want ErrClosed", err)
	}
	// The buffer is the application's: still readable after Close.
	buf.Bytes()[0] = 1
}

// TestVMRegMRIOVA: a region registered at an I/O virtual address of its
// own (ibv_reg_mr_iova) is addressed by that IOVA everywhere: SGEs of
// sends and receives built with MR.SGE, peers' RDMA write and read, a
// memory window bound over it; the buffer's own address, outside the
// IOVA range, is refused.
func TestVMRegMRIOVA(t *testing.T) {
	c := openRxe(t)
	base := testkit.Resources(t, testkit.RxeDev)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 3*4096)
	iova := uint64(0x5500_0000_0000) + uverbs.SliceAddrForTest(buf)%4096
	mr, err := pd.RegMRIOVA(buf, iova, uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite|uverbs.AccessRemoteRead|uverbs.AccessMWBind)
	if err != nil {
		t.Fatalf("RegMRIOVA: %v", err)
	}
	if mr.IOVA() != iova || mr.Addr() == iova {
		t.Fatalf("IOVA %#x Addr %#x, want IOVA %#x", mr.IOVA(), mr.Addr(), iova)
	}
	qp, cq := loopQP(t, c, pd, 64, 16, 16)

	// A send from one SGE to another, both in IOVA terms.
	fill(buf[0:1000], 3)
	if err := qp.PostRecv([]uverbs.RecvWR{{ID: 1, SGL: []uverbs.SGE{mr.SGE(4096, 1000)}}}); err != nil {
		t.Fatal(err)
	}
	if err := qp.PostSend([]uverbs.SendWR{{ID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{mr.SGE(0, 1000)}}}); err != nil {
		t.Fatal(err)
	}
	for _, wc := range pollN(t, cq, 2) {
		if wc.Status != uverbs.WCSuccess {
			t.Fatalf("send between IOVA SGEs: %+v (%v)", wc, wc.Status)
		}
	}
	if !bytes.Equal(buf[4096:5096], buf[0:1000]) {
		t.Fatal("the send did not land where its SGE's IOVA points")
	}
	// RDMA write and read at IOVA addresses.
	fill(buf[0:512], 9)
	if wc := one(t, qp, cq, uverbs.SendWR{ID: 3, Opcode: uverbs.WRRDMAWrite, SGL: []uverbs.SGE{mr.SGE(0, 512)}, RemoteAddr: iova + 8192, RKey: mr.RKey()}); wc.Status != uverbs.WCSuccess || !bytes.Equal(buf[8192:8192+512], buf[:512]) {
		t.Fatalf("RDMA write to IOVA %#x: %v", iova+8192, wc.Status)
	}
	if wc := one(t, qp, cq, uverbs.SendWR{ID: 4, Opcode: uverbs.WRRDMARead, SGL: []uverbs.SGE{mr.SGE(2048, 256)}, RemoteAddr: iova + 8192, RKey: mr.RKey()}); wc.Status != uverbs.WCSuccess || !bytes.Equal(buf[2048:2048+256], buf[8192:8192+256]) {
		t.Fatalf("RDMA read from IOVA: %v", wc.Status)
	}
	// A window over the IOVA range.
	mw, err := pd.AllocMW(uverbs.MWType1)
	if err != nil {
		t.Fatal(err)
	}
	rk, err := qp.BindMW(mw, 5, uverbs.SendSignaled, uverbs.MWBindInfo{MR: mr, Addr: iova + 4096, Length: 4096, Access: uverbs.AccessRemoteWrite})
	if err != nil {
		t.Fatal(err)
	}
	if wc := pollN(t, cq, 1)[0]; wc.Status != uverbs.WCSuccess {
		t.Fatalf("bind over an IOVA MR: %v", wc.Status)
	}
	fill(buf[:64], 77)
	if wc := one(t, qp, cq, uverbs.SendWR{ID: 6, Opcode: uverbs.WRRDMAWrite, SGL: []uverbs.SGE{mr.SGE(0, 64)}, RemoteAddr: iova + 4096, RKey: rk}); wc.Status != uverbs.WCSuccess || !bytes.Equal(buf[4096:4096+64], buf[:64]) {
		t.Fatalf("RDMA write through the window: %v", wc.Status)
	}
	if _, err := qp.BindMW(mw, 7, 0, uverbs.MWBindInfo{MR: mr, Addr: mr.Addr(), Length: 64}); !errors.Is(err, uverbs.ErrInvalid) {
		t.Fatalf("a window at the buffer's address, outside the IOVA range: %v", err)
	}
	// The buffer's own address is not the device's.
	if wc := one(t, qp, cq, uverbs.SendWR{ID: 8, Opcode: uverbs.WRRDMAWrite, SGL: []uverbs.SGE{mr.SGE(0, 64)}, RemoteAddr: mr.Addr() + 8192, RKey: mr.RKey()}); wc.Status == uverbs.WCSuccess {
		t.Fatal("an RDMA write at the buffer's virtual address, outside the IOVA range, succeeded")
	}
	if _, err := pd.RegMRIOVA(buf, iova+1, uverbs.AccessLocalWrite); !errors.Is(err, uverbs.ErrInvalid) {
		t.Fatalf("RegMRIOVA with another page offset: %v", err)
	}
	if err := mw.Dealloc(); err != nil {
		t.Fatal(err)
	}
	if err := qp.Destroy(bg(t)); err != nil {
		t.Fatal(err)
	}
	if err := cq.Destroy(bg(t)); err != nil {
		t.Fatal(err)
	}
	if err := mr.Dereg(); err != nil {
		t.Fatal(err)
	}
	if err := pd.Dealloc(); err != nil {
		t.Fatal(err)
	}
	waitResources(t, base)
}
