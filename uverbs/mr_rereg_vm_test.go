package uverbs_test

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/uverbs"
)

// reregBed is a looped-back RC QP with its own source buffer, whose QP a
// remote access error can replace.
type reregBed struct {
	t   *testing.T
	c   *uverbs.Context
	pd  *uverbs.PD
	src *uverbs.MR
	qp  *uverbs.QP
	cq  *uverbs.CQ
}

func newReregBed(t *testing.T, c *uverbs.Context, pd *uverbs.PD) *reregBed {
	t.Helper()
	src, err := pd.RegMR(make([]byte, 4096), uverbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	b := &reregBed{t: t, c: c, pd: pd, src: src}
	b.fresh()
	return b
}

// fresh replaces the QP (after an error moved it to ERR), destroying the
// old one so that the PD's only users are the bed's QP and MR.
func (b *reregBed) fresh() {
	b.t.Helper()
	b.close()
	b.qp, b.cq = loopQP(b.t, b.c, b.pd, 16, 4, 4)
}

func (b *reregBed) close() {
	b.t.Helper()
	if b.qp == nil {
		return
	}
	if err := b.qp.Destroy(context.Background()); err != nil {
		b.t.Fatal(err)
	}
	if err := b.cq.Destroy(context.Background()); err != nil {
		b.t.Fatal(err)
	}
	b.qp, b.cq = nil, nil
}

// write RDMA-writes 64 bytes of a fresh pattern into dst through its rkey
// and reports whether the write landed. A refusal must be a remote access
// error (or the flush of one: on 6.12 the looped-back responder may move
// the QP to ERR before the requester takes the NAK), must leave dst as it
// was, and costs the bed its QP.
func (b *reregBed) write(dst *uverbs.MR, seed byte) bool {
	b.t.Helper()
	fill(b.src.Bytes()[:64], seed)
	target := dst.Bytes()[:64]
	for i := range target {
		target[i] = 0xee
	}
	wc := one(b.t, b.qp, b.cq, uverbs.SendWR{ID: uint64(seed), Opcode: uverbs.WRRDMAWrite,
		SGL: []uverbs.SGE{b.src.SGE(0, 64)}, RemoteAddr: dst.IOVA(), RKey: dst.RKey()})
	switch wc.Status {
	case uverbs.WCSuccess:
		if !bytes.Equal(target, b.src.Bytes()[:64]) {
			b.t.Fatalf("an RDMA write completed but did not land")
		}
		return true
	case uverbs.WCRemAccessErr, uverbs.WCWRFlushErr:
		if !bytes.Equal(target, bytes.Repeat([]byte{0xee}, 64)) {
			b.t.Fatalf("a refused RDMA write (%v) changed the target", wc.Status)
		}
		b.fresh()
		return false
	default:
		b.t.Fatalf("RDMA write: %v", wc.Status)
		return false
	}
}

// sendFrom sends 32 bytes from the start of mr to a receive the bed posts
// into its source buffer and returns the send's status (the receive's
// when the send succeeded); an error costs the bed its QP.
func (b *reregBed) sendFrom(mr *uverbs.MR, seed byte) uverbs.WCStatus {
	b.t.Helper()
	fill(mr.Bytes()[:32], seed)
	if err := b.qp.PostRecv([]uverbs.RecvWR{{ID: 100, SGL: []uverbs.SGE{b.src.SGE(1024, 32)}}}); err != nil {
		b.t.Fatal(err)
	}
	if err := b.qp.PostSend([]uverbs.SendWR{{ID: uint64(seed), Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{mr.SGE(0, 32)}}}); err != nil {
		b.t.Fatal(err)
	}
	var send, recv *uverbs.WC
	for _, wc := range pollN(b.t, b.cq, 2) {
		if wc.ID == 100 {
			recv = &wc
		} else {
			send = &wc
		}
	}
	if send == nil || recv == nil {
		b.t.Fatal("a send and its receive did not both complete")
	}
	if send.Status != uverbs.WCSuccess {
		b.fresh()
		return send.Status
	}
	if recv.Status == uverbs.WCSuccess && !bytes.Equal(b.src.Bytes()[1024:1024+32], mr.Bytes()[:32]) {
		b.t.Fatal("a send completed but its bytes did not land")
	}
	return recv.Status
}

// reregSupported reports whether the kernel's rxe changes an MR in place
// (rxe_rereg_user_mr: PD and access flags), probing with a change of
// access to the same flags, and checks what the kernel says when it
// cannot.
func reregSupported(t *testing.T, pd *uverbs.PD) bool {
	t.Helper()
	mr, err := pd.RegMR(make([]byte, 4096), uverbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Dereg()
	err = mr.Rereg(uverbs.ReregAccess, nil, nil, uverbs.AccessLocalWrite)
	switch {
	case err == nil:
		return true
	case errors.Is(err, uverbs.ErrNotSupported) && errors.Is(err, sys.EOPNOTSUPP):
		return false
	default:
		t.Fatalf("Rereg(ReregAccess) probe: %v, want nil or ErrNotSupported (EOPNOTSUPP)", err)
		return false
	}
}

// TestVMReregMR: ibv_rereg_mr on rxe. The kernel of Debian 12's 6.1 has
// no rereg for rxe: every change is ErrNotSupported (EOPNOTSUPP) and the
// MR goes on working with what it had. 6.12's rxe changes the access flags
// and the PD in place and refuses a new translation: the responder then
// grants exactly what the new flags grant, only QPs of the new PD reach the
// MR, the old PD can be deallocated and the new one cannot, and the keys
// the MR reports are the kernel's.
func TestVMReregMR(t *testing.T) {
	c := openRxe(t)
	pd1, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	supported := reregSupported(t, pd1)
	t.Logf("kernel %s: rxe rereg supported: %v", testkit.KernelRelease(), supported)
	switch {
	case testkit.KernelAtLeast(6, 12) && !supported:
		t.Fatal("6.12's rxe has rereg_user_mr, but the probe says no")
	case !testkit.KernelAtLeast(6, 2) && supported:
		t.Fatal("6.1's rxe has no rereg_user_mr, but the probe says yes")
	}

	bed1 := newReregBed(t, c, pd1)
	dst, err := pd1.RegMR(make([]byte, 4096), uverbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	lkey, rkey := dst.LKey(), dst.RKey()
	if bed1.write(dst, 1) {
		t.Fatal("an RDMA write into an MR without AccessRemoteWrite landed")
	}

	grant := uverbs.AccessLocalWrite | uverbs.AccessRemoteWrite
	err = dst.Rereg(uverbs.ReregAccess, nil, nil, grant)
	if !supported {
		if !errors.Is(err, uverbs.ErrNotSupported) || !errors.Is(err, sys.EOPNOTSUPP) {
			t.Fatalf("Rereg(ReregAccess) on a kernel without rxe rereg: %v, want ErrNotSupported", err)
		}
		if err := dst.Rereg(uverbs.ReregPD, pd1, nil, 0); !errors.Is(err, uverbs.ErrNotSupported) {
			t.Fatalf("Rereg(ReregPD): %v, want ErrNotSupported", err)
		}
		// Nothing changed: the same keys and flags, still no remote write,
		// and local use goes on.
		if dst.Access() != uverbs.AccessLocalWrite || dst.LKey() != lkey || dst.RKey() != rkey || dst.PD() != pd1 {
			t.Fatalf("a refused Rereg changed the MR: access %v lkey %#x rkey %#x", dst.Access(), dst.LKey(), dst.RKey())
		}
		if bed1.write(dst, 2) {
			t.Fatal("after a refused Rereg an RDMA write into the MR landed")
		}
		if st := bed1.sendFrom(dst, 3); st != uverbs.WCSuccess {
			t.Fatalf("a send from the MR after a refused Rereg: %v", st)
		}
		return
	}
	if err != nil {
		t.Fatalf("Rereg(ReregAccess, %v): %v", grant, err)
	}
	if dst.Access() != grant {
		t.Fatalf("Access() = %v after Rereg, want %v", dst.Access(), grant)
	}
	t.Logf("keys before %#x/%#x, after %#x/%#x", lkey, rkey, dst.LKey(), dst.RKey())
	if !bed1.write(dst, 4) {
		t.Fatal("after Rereg granted AccessRemoteWrite, an RDMA write was refused")
	}
	// And taken away again.
	if err := dst.Rereg(uverbs.ReregAccess, nil, nil, uverbs.AccessLocalWrite); err != nil {
		t.Fatal(err)
	}
	if bed1.write(dst, 5) {
		t.Fatal("after Rereg took AccessRemoteWrite away, an RDMA write landed")
	}

	// Move the MR, with remote write, to a second PD.
	pd2, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	bed2 := newReregBed(t, c, pd2)
	if err := dst.Rereg(uverbs.ReregPD|uverbs.ReregAccess, pd2, nil, grant); err != nil {
		t.Fatalf("Rereg(ReregPD|ReregAccess): %v", err)
	}
	if dst.PD() != pd2 || dst.Access() != grant {
		t.Fatalf("PD %p access %v after the move, want %p %v", dst.PD(), dst.Access(), pd2, grant)
	}
	if !bed2.write(dst, 6) {
		t.Fatal("a QP of the new PD cannot write into the moved MR")
	}
	if bed1.write(dst, 7) {
		t.Fatal("a QP of the old PD still writes into the moved MR")
	}
	// A local SGE of the moved MR is foreign to the old PD's QP, and
	// belongs to the new PD's.
	if st := bed2.sendFrom(dst, 8); st != uverbs.WCSuccess {
		t.Fatalf("a send from the moved MR on the new PD's QP: %v", st)
	}
	if st := bed1.sendFrom(dst, 9); st != uverbs.WCLocProtErr && st != uverbs.WCWRFlushErr {
		t.Fatalf("a send from the moved MR on the old PD's QP: %v, want a local protection error", st)
	}

	// A new translation: not on rxe. The MR keeps its memory and works.
	err = dst.Rereg(uverbs.ReregTranslation, nil, make([]byte, 8192), 0)
	if !errors.Is(err, uverbs.ErrNotSupported) {
		t.Fatalf("Rereg(ReregTranslation) on rxe: %v, want ErrNotSupported", err)
	}
	if dst.Len() != 4096 || !bed2.write(dst, 10) {
		t.Fatalf("after a refused translation the MR has %d bytes or refuses writes", dst.Len())
	}

	// The PDs' users moved in the kernel and here: the new PD is busy with
	// the MR (and its bed), the old one only with its bed.
	if err := pd2.Dealloc(); !errors.Is(err, sys.EBUSY) || !strings.Contains(err.Error(), "2 MRs") {
		t.Fatalf("Dealloc of the MR's new PD: %v, want EBUSY naming 2 MRs", err)
	}
	bed1.close()
	if err := bed1.src.Dereg(); err != nil {
		t.Fatal(err)
	}
	if err := pd1.Dealloc(); err != nil {
		t.Fatalf("Dealloc of the MR's old PD: %v", err)
	}
	if err := dst.Dereg(); err != nil {
		t.Fatal(err)
	}
	if err := dst.Rereg(uverbs.ReregAccess, nil, nil, grant); !errors.Is(err, uverbs.ErrClosed) {
		t.Fatalf("Rereg after Dereg: %v, want ErrClosed", err)
	}
}

// TestVMReregMRBadInput: what Rereg refuses before the kernel sees it,
// leaving the MR as it was.
func TestVMReregMRBadInput(t *testing.T) {
	c := openRxe(t)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	mr, err := pd.RegMR(make([]byte, 4096), uverbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	other := openRxe(t)
	opd, err := other.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	deadPD, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	if err := deadPD.Dealloc(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		flags  uverbs.ReregFlags
		pd     *uverbs.PD
		buf    []byte
		access uverbs.Access
		want   error
	}{
		{"no flags", 0, nil, nil, 0, uverbs.ErrInvalid},
		{"unknown flags", 1 << 5, nil, nil, 0, uverbs.ErrInvalid},
		{"PD nil", uverbs.ReregPD, nil, nil, 0, uverbs.ErrInvalid},
		{"PD of another context", uverbs.ReregPD, opd, nil, 0, uverbs.ErrInvalid},
		{"PD deallocated", uverbs.ReregPD, deadPD, nil, 0, uverbs.ErrClosed},
		{"empty translation", uverbs.ReregTranslation, nil, []byte{}, 0, uverbs.ErrInvalid},
		{"access without the flag", uverbs.ReregPD, pd, nil, uverbs.AccessRemoteRead, uverbs.ErrInvalid},
		{"unknown access", uverbs.ReregAccess, nil, nil, 1 << 12, uverbs.ErrInvalid},
	} {
		err := mr.Rereg(tc.flags, tc.pd, tc.buf, tc.access)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
		if mr.PD() != pd || mr.Access() != uverbs.AccessLocalWrite || mr.Len() != 4096 {
			t.Errorf("%s: the refused Rereg changed the MR", tc.name)
		}
	}
	var nilMR *uverbs.MR
	if err := nilMR.Rereg(uverbs.ReregAccess, nil, nil, 0); !errors.Is(err, uverbs.ErrInvalid) {
		t.Errorf("nil MR: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := mr.Rereg(uverbs.ReregAccess, nil, nil, uverbs.AccessLocalWrite); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("after Context.Close: %v, want ErrClosed", err)
	}
}

// TestVMReregMRConcurrent: readers of the MR's keys and range race with
// Rereg (run under -race in make vmtest-race): each read sees one
// registration whole.
func TestVMReregMRConcurrent(t *testing.T) {
	c := openRxe(t)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	if !reregSupported(t, pd) {
		t.Skipf("kernel %s: rxe has no rereg (TestVMReregMR checks the refusal)", testkit.KernelRelease())
	}
	mr, err := pd.RegMR(make([]byte, 4096), uverbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if s := mr.SGE(8, 16); s.Addr != mr.IOVA()+8 || mr.Len() != 4096 {
					t.Errorf("SGE %+v of an MR at %#x", s, mr.IOVA())
					return
				}
				_ = mr.Access()
				_ = mr.PD()
			}
		}()
	}
	for i := range 50 {
		a := uverbs.AccessLocalWrite
		if i%2 == 0 {
			a |= uverbs.AccessRemoteRead
		}
		if err := mr.Rereg(uverbs.ReregAccess, nil, nil, a); err != nil {
			t.Error(err)
			break
		}
		if mr.Access() != a {
			t.Errorf("Access %v after Rereg to %v", mr.Access(), a)
		}
	}
	close(stop)
	wg.Wait()
}

// TestVMReregMRAgainstC runs the same re-registrations through
// libibverbs' ibv_rereg_mr (pv_rereg) and MR.Rereg on one device. The
// input errors are the same in both (libibverbs' EINVAL is ErrInvalid
// here). The changes themselves differ by design: librxe has no rereg_mr,
// so libibverbs refuses each with EOPNOTSUPP before the kernel sees it,
// while this library asks the kernel, which refuses them too on 6.1 and
// does all but the translation on 6.12.
func TestVMReregMRAgainstC(t *testing.T) {
	c := openRxe(t)
	cmd := exec.Command("pv_rereg", testkit.RxeDev)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("pv_rereg: %v: %s", err, stderr.String())
	}
	cLines := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		name, rest, _ := strings.Cut(l, " ")
		cLines[name] = rest
	}
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	pd2, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	supported := reregSupported(t, pd)
	lw := uverbs.AccessLocalWrite
	for _, tc := range []struct {
		name   string
		flags  uverbs.ReregFlags
		pd     *uverbs.PD
		buf    []byte
		access uverbs.Access
		input  bool // an input error, in both
		kernel bool // rxe does it when it has rereg
	}{
		{"access", uverbs.ReregAccess, nil, nil, lw | uverbs.AccessRemoteWrite, false, true},
		{"pd", uverbs.ReregPD, pd2, nil, 0, false, true},
		{"pd+access", uverbs.ReregPD | uverbs.ReregAccess, pd2, nil, lw | uverbs.AccessRemoteRead, false, true},
		{"translation", uverbs.ReregTranslation, nil, make([]byte, 8192), 0, false, false},
		{"unknown-flags", 1 << 5, nil, nil, 0, true, false},
		{"empty-translation", uverbs.ReregTranslation, nil, []byte{}, 0, true, false},
		{"access-without-flag", uverbs.ReregPD, pd2, nil, uverbs.AccessRemoteRead, true, false},
	} {
		mr, err := pd.RegMR(make([]byte, 4096), lw)
		if err != nil {
			t.Fatal(err)
		}
		goErr := mr.Rereg(tc.flags, tc.pd, tc.buf, tc.access)
		t.Logf("%-20s C: %-22s Go: %v", tc.name, cLines[tc.name], goErr)
		// libibverbs' default rereg_mr fails with EOPNOTSUPP, which
		// ibv_rereg_mr reports as IBV_REREG_MR_ERR_CMD (-4).
		wantC := "ret -4 errno 95"
		if tc.input {
			wantC = "ret -1 errno 22" // IBV_REREG_MR_ERR_INPUT, EINVAL
		}
		if cLines[tc.name] != wantC {
			t.Errorf("%s: libibverbs says %q, want %q", tc.name, cLines[tc.name], wantC)
		}
		switch {
		case tc.input:
			if !errors.Is(goErr, uverbs.ErrInvalid) {
				t.Errorf("%s: Rereg: %v, want ErrInvalid as libibverbs' EINVAL", tc.name, goErr)
			}
		case tc.kernel && supported:
			if goErr != nil {
				t.Errorf("%s: Rereg: %v, want success (the kernel's rxe does it)", tc.name, goErr)
			}
		default:
			if !errors.Is(goErr, uverbs.ErrNotSupported) || !errors.Is(goErr, sys.EOPNOTSUPP) {
				t.Errorf("%s: Rereg: %v, want ErrNotSupported (EOPNOTSUPP) as libibverbs", tc.name, goErr)
			}
		}
		if err := mr.Dereg(); err != nil {
			t.Fatal(err)
		}
	}
	if len(cLines) != 7 {
		t.Errorf("pv_rereg printed %d cases:\n%s", len(cLines), out)
	}
}
