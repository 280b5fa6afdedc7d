package uverbs_test

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/uverbs"
)

// TestVMConcurrentPosters: four goroutines post sends to one QP at once
// while another polls; every request completes exactly once.
func TestVMConcurrentPosters(t *testing.T) {
	c := openRxe(t)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	const posters, each = 4, 200
	qp, cq := loopQP(t, c, pd, 4096, 64, 2048)
	defer func() { qp.Destroy(bg(t)); cq.Destroy(bg(t)); pd.Dealloc() }()
	rwrs := make([]uverbs.RecvWR, posters*each)
	for i := range rwrs {
		rwrs[i].ID = uint64(1 << 32)
	}
	if err := qp.PostRecv(rwrs); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for p := 0; p < posters; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wr := []uverbs.SendWR{{Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled}}
			for i := 0; i < each; {
				wr[0].ID = uint64(p*each + i)
				err := qp.PostSend(wr)
				if errors.Is(err, uverbs.ErrQueueFull) {
					runtime.Gosched() // the poller frees slots
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				i++
			}
		}()
	}
	seen := make([]int, posters*each)
	recvs := 0
	wcs := make([]uverbs.WC, 32)
	deadline := time.Now().Add(60 * time.Second)
	for done := 0; done < 2*posters*each; {
		n, err := cq.Poll(wcs)
		if err != nil {
			t.Fatal(err)
		}
		for _, wc := range wcs[:n] {
			if wc.Status != uverbs.WCSuccess {
				t.Fatalf("completion %+v (%v)", wc, wc.Status)
			}
			if wc.Opcode == uverbs.WCRecv {
				recvs++
			} else {
				seen[wc.ID]++
			}
		}
		done += n
		if n == 0 && time.Now().After(deadline) {
			t.Fatalf("%d of %d completions", done, 2*posters*each)
		}
	}
	wg.Wait()
	for id, k := range seen {
		if k != 1 {
			t.Fatalf("send %d completed %d times", id, k)
		}
	}
	if recvs != posters*each {
		t.Fatalf("%d receives", recvs)
	}
}

// TestVMCloseUnderTraffic: goroutines post, poll and modify while the
// Context is closed under them. Every call either works or fails with
// ErrClosed; nothing faults, nothing is left mapped or open, and the
// kernel's counts return to where they were.
func TestVMCloseUnderTraffic(t *testing.T) {
	testkit.RequireVM(t)
	base := testkit.Resources(t, testkit.RxeDev)
	for round := 0; round < 5; round++ {
		c, err := uverbs.OpenByName(testkit.RxeDev)
		if err != nil {
			t.Fatal(err)
		}
		pd, err := c.AllocPD()
		if err != nil {
			t.Fatal(err)
		}
		qp, cq := loopQP(t, c, pd, 1024, 64, 64)
		var stop atomic.Bool
		var ops atomic.Int64
		var wg sync.WaitGroup
		check := func(err error) bool {
			if err == nil || errors.Is(err, uverbs.ErrQueueFull) {
				ops.Add(1)
				return true
			}
			if !errors.Is(err, uverbs.ErrClosed) {
				t.Errorf("unexpected error: %v", err)
			}
			return false
		}
		wg.Add(3)
		go func() {
			defer wg.Done()
			wr := []uverbs.SendWR{{Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled}}
			for !stop.Load() && check(qp.PostSend(wr)) {
			}
		}()
		go func() {
			defer wg.Done()
			wr := []uverbs.RecvWR{{}}
			for !stop.Load() && check(qp.PostRecv(wr)) {
			}
		}()
		go func() {
			defer wg.Done()
			wcs := make([]uverbs.WC, 16)
			for !stop.Load() {
				if _, err := cq.Poll(wcs); !check(err) {
					return
				}
			}
		}()
		for ops.Load() < 200 {
			time.Sleep(time.Millisecond)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		stop.Store(true)
		wg.Wait()
		if m := sys.OpenMappings(); len(m) != 0 {
			t.Fatalf("round %d: mappings left: %v", round, m)
		}
	}
	waitResources(t, base)
}
