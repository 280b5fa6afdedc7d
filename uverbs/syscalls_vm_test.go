package uverbs_test

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/uverbs"
)

// threadIO returns this thread's read and write system call counts
// (/proc/thread-self/io syscr, syscw). The caller is locked to its thread.
func threadIO(t testing.TB) (reads, writes int) {
	t.Helper()
	b, err := os.ReadFile("/proc/thread-self/io")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(l, ": ")
		if !ok {
			continue
		}
		n, _ := strconv.Atoi(v)
		switch k {
		case "syscr":
			reads = n
		case "syscw":
			writes = n
		}
	}
	return reads, writes
}

// TestVMSyscallsPerOp proves librxe's system call budget: one write(2)
// per PostSend call (the doorbell, however many requests the list has),
// none for PostRecv and Poll. The kernel counts this thread's read and
// write calls; reading the counter itself is one read.
func TestVMSyscallsPerOp(t *testing.T) {
	c := openRxe(t)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	qp, cq := loopQP(t, c, pd, 16384, 4096, 4096)
	defer func() { qp.Destroy(bg(t)); cq.Destroy(bg(t)); pd.Dealloc() }()

	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const calls, perList = 1000, 4
	rwrs := make([]uverbs.RecvWR, perList)
	swrs := make([]uverbs.SendWR, perList)
	for i := range swrs {
		swrs[i] = uverbs.SendWR{ID: uint64(i), Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled}
	}
	wcs := make([]uverbs.WC, 2*perList)

	ra, wa := threadIO(t)
	rb, wb := threadIO(t)
	costR, costW := rb-ra, wb-wa // of threadIO itself (2 reads: data, EOF)
	// The Go runtime may write on this thread now and then (an eventfd
	// wake-up of the netpoller when a timer changes): allow that much
	// noise over the whole section, never one per call.
	const noise = 2
	r0, w0 := threadIO(t)
	for i := 0; i < calls; i++ {
		if err := qp.PostRecv(rwrs); err != nil {
			t.Fatal(err)
		}
	}
	r1, w1 := threadIO(t)
	if dr, dw := r1-r0-costR, w1-w0-costW; dr != 0 || dw > noise {
		t.Errorf("%d PostRecv calls made %d reads and %d writes (want none)", calls, dr, dw)
	}
	for i := 0; i < calls; i++ {
		if err := qp.PostSend(swrs); err != nil {
			t.Fatal(err)
		}
	}
	r2, w2 := threadIO(t)
	sendWrites := w2 - w1 - costW
	if dr := r2 - r1 - costR; dr != 0 || sendWrites < calls || sendWrites > calls+noise {
		t.Errorf("%d PostSend calls of %d requests made %d writes (want %d) and %d reads (want 0)", calls, perList, sendWrites, calls, dr)
	}
	got := 0
	polls := 0
	for got < 2*calls*perList && polls < 1e7 {
		n, err := cq.Poll(wcs)
		if err != nil {
			t.Fatal(err)
		}
		for _, wc := range wcs[:n] {
			if wc.Status != uverbs.WCSuccess {
				t.Fatalf("completion %+v", wc)
			}
		}
		got += n
		polls++
	}
	r3, w3 := threadIO(t)
	if got != 2*calls*perList {
		t.Fatalf("%d of %d completions", got, 2*calls*perList)
	}
	if dr, dw := r3-r2-costR, w3-w2-costW; dr != 0 || dw > noise {
		t.Errorf("%d Poll calls made %d reads and %d writes (want none)", polls, dr, dw)
	}
	t.Logf("%d PostRecv calls: %d writes; %d PostSend calls: %d writes; %d Poll calls: %d writes",
		calls, w1-w0-costW, calls, sendWrites, polls, w3-w2-costW)
}

// TestVMDataPathNoAllocs: PostRecv, PostSend and Poll through the real
// rings and doorbell allocate nothing when the caller reuses its values.
func TestVMDataPathNoAllocs(t *testing.T) {
	c := openRxe(t)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	qp, cq := loopQP(t, c, pd, 64, 16, 16)
	defer func() { qp.Destroy(bg(t)); cq.Destroy(bg(t)); pd.Dealloc() }()
	rwr := []uverbs.RecvWR{{ID: 1}}
	swr := []uverbs.SendWR{{ID: 2, Opcode: uverbs.WRSendWithImm, Flags: uverbs.SendSignaled, ImmData: 5}}
	wcs := make([]uverbs.WC, 4)
	testkit.NoAllocs(t, 500, func() {
		if err := qp.PostRecv(rwr); err != nil {
			t.Fatal(err)
		}
		if err := qp.PostSend(swr); err != nil {
			t.Fatal(err)
		}
		for got := 0; got < 2; {
			n, err := cq.Poll(wcs)
			if err != nil {
				t.Fatal(err)
			}
			got += n
		}
	})
}

// BenchmarkVMSendRecvPoll: one signaled zero-length send and its receive
// through a looped-back RC QP per iteration, polled to completion.
func BenchmarkVMSendRecvPoll(b *testing.B) {
	testkit.RequireVM(b)
	c, err := uverbs.OpenByName(testkit.RxeDev)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	pd, _ := c.AllocPD()
	cq, _ := c.CreateCQ(64, nil)
	qp, err := pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq,
		Cap: uverbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		b.Fatal(err)
	}
	loopbackRTS(b, c, qp)
	rwr := []uverbs.RecvWR{{ID: 1}}
	swr := []uverbs.SendWR{{ID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled}}
	wcs := make([]uverbs.WC, 4)
	b.ReportAllocs()
	for b.Loop() {
		if err := qp.PostRecv(rwr); err != nil {
			b.Fatal(err)
		}
		if err := qp.PostSend(swr); err != nil {
			b.Fatal(err)
		}
		for got := 0; got < 2; {
			n, _ := cq.Poll(wcs)
			got += n
		}
	}
}
