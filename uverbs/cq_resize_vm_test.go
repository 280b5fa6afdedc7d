package uverbs_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/uverbs"
)

// exchange posts n receives (ids 1000+first...) and n signalled
// zero-length sends (ids first...) on qp.
func exchange(t *testing.T, qp *uverbs.QP, first, n int) {
	t.Helper()
	rwrs := make([]uverbs.RecvWR, n)
	swrs := make([]uverbs.SendWR, n)
	for i := range n {
		rwrs[i] = uverbs.RecvWR{ID: uint64(1000000 + first + i)}
		swrs[i] = uverbs.SendWR{ID: uint64(first + i), Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled}
	}
	if err := qp.PostRecv(rwrs); err != nil {
		t.Fatal(err)
	}
	if err := qp.PostSend(swrs); err != nil {
		t.Fatal(err)
	}
}

// completions checks wcs: successful, each send and receive id once and in
// order, continuing from *sends and *recvs.
func completions(t *testing.T, wcs []uverbs.WC, sends, recvs *int) {
	t.Helper()
	for _, wc := range wcs {
		if wc.Status != uverbs.WCSuccess {
			t.Fatalf("completion %+v (%v)", wc, wc.Status)
		}
		switch wc.Opcode {
		case uverbs.WCSend:
			if wc.ID != uint64(*sends) {
				t.Fatalf("send completion %d has id %d", *sends, wc.ID)
			}
			*sends++
		case uverbs.WCRecv:
			if wc.ID != uint64(1000000+*recvs) {
				t.Fatalf("receive completion %d has id %d", *recvs, wc.ID)
			}
			*recvs++
		default:
			t.Fatalf("unexpected completion %+v", wc)
		}
	}
}

// waitReady waits until cq holds n completions (bounded by 10 s).
func waitReady(t *testing.T, cq *uverbs.CQ, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		k, err := cq.Ready()
		if err != nil {
			t.Fatal(err)
		}
		if k >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d completions arrived", k, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestVMCQResize: ibv_resize_cq on rxe. Completions waiting in the CQ
// survive a resize, in order, and are polled from the new ring; traffic
// then wraps the new ring many times, with nothing lost or repeated; a
// size below the waiting completions or above the device's limit is the
// kernel's EINVAL and leaves the CQ as it was; an arm made before a resize
// still raises its event on the completion channel; shrinking works; a
// destroyed CQ refuses. The old rings are released (the leak checks of
// TestMain and the device's resource counts).
func TestVMCQResize(t *testing.T) {
	c := openRxe(t)
	b := newChanBed(t, c, 1, 4)
	cq := b.cqs[0]
	qp := chanQP(t, c, b.pd, cq, cq)
	dev, err := c.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	small := cq.CQE()
	if small < 4 {
		t.Fatalf("CQE %d, asked for 4", small)
	}
	var sends, recvs int
	buf := make([]uverbs.WC, 64)

	// Two exchanges wait: four completions.
	exchange(t, qp, 0, 2)
	waitReady(t, cq, 4)
	for _, bad := range []int{3, dev.MaxCQE + 1} {
		if err := cq.Resize(bad); !errors.Is(err, sys.EINVAL) {
			t.Fatalf("Resize(%d) with 4 completions waiting, device MaxCQE %d: %v, want EINVAL", bad, dev.MaxCQE, err)
		}
	}
	for _, bad := range []int{0, -1} {
		if err := cq.Resize(bad); !errors.Is(err, uverbs.ErrInvalid) {
			t.Fatalf("Resize(%d): %v, want ErrInvalid", bad, err)
		}
	}
	if cq.CQE() != small {
		t.Fatalf("CQE %d after failed resizes, was %d", cq.CQE(), small)
	}

	// Armed, then resized: the four completions move to the new ring.
	if err := cq.ReqNotify(false); err != nil {
		t.Fatal(err)
	}
	if err := cq.Resize(200); err != nil {
		t.Fatalf("Resize(200): %v", err)
	}
	big := cq.CQE()
	if big < 200 {
		t.Fatalf("CQE %d after Resize(200)", big)
	}
	if n, _ := cq.Ready(); n != 4 {
		t.Fatalf("%d completions waiting after the resize, want 4", n)
	}
	completions(t, pollN(t, cq, 4), &sends, &recvs)
	if n, err := cq.Poll(buf); n != 0 || err != nil {
		t.Fatalf("Poll after the moved completions: %d, %v", n, err)
	}

	// The arm made before the resize fires on the new ring.
	exchange(t, qp, 2, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	got, err := b.ch.GetCQEvent(ctx)
	cancel()
	if err != nil || got != cq {
		t.Fatalf("GetCQEvent after a resize of the armed CQ: %v, %v", got, err)
	}
	if err := cq.AckEvents(1); err != nil {
		t.Fatal(err)
	}
	completions(t, pollN(t, cq, 2), &sends, &recvs)

	// Many laps of the new ring, 20 exchanges (40 completions) at a time.
	for first := 3; first < 3+400; first += 20 {
		exchange(t, qp, first, 20)
		completions(t, pollN(t, cq, 40), &sends, &recvs)
	}

	// Shrink while empty, then while some wait.
	if err := cq.Resize(16); err != nil {
		t.Fatalf("Resize(16): %v", err)
	}
	if n := cq.CQE(); n < 16 || n >= big {
		t.Fatalf("CQE %d after Resize(16) (was %d)", n, big)
	}
	exchange(t, qp, 403, 3)
	waitReady(t, cq, 6)
	if err := cq.Resize(8); err != nil {
		t.Fatalf("Resize(8) with 6 waiting: %v", err)
	}
	completions(t, pollN(t, cq, 6), &sends, &recvs)
	for first := 406; first < 406+60; first += 3 {
		exchange(t, qp, first, 3)
		completions(t, pollN(t, cq, 6), &sends, &recvs)
	}
	if sends != 466 || recvs != 466 {
		t.Fatalf("%d sends and %d receives completed, want 466 each", sends, recvs)
	}

	b.close(t, qp)
	if err := cq.Resize(64); !errors.Is(err, uverbs.ErrClosed) {
		t.Fatalf("Resize of a destroyed CQ: %v", err)
	}
}

// TestVMCQResizeWhilePolling: one goroutine busy-polls the CQ and another
// posts exchanges while the test resizes the CQ back and forth between 64
// and 512 entries: every completion arrives once and in order, and
// nothing fails. At most 8 exchanges (16 completions) are outstanding, so
// no size overflows.
func TestVMCQResizeWhilePolling(t *testing.T) {
	c := openRxe(t)
	b := newChanBed(t, c, 1, 64)
	cq := b.cqs[0]
	qp := chanQP(t, c, b.pd, cq, cq)
	const total = 3000
	var (
		wg      sync.WaitGroup
		done    atomic.Int64 // exchanges whose two completions were polled
		stop    atomic.Bool  // a goroutine failed
		pollErr error        // the goroutines' own, read after wg.Wait
		postErr error
		resizes int
	)
	wg.Add(2)
	go func() {
		defer wg.Done()
		defer func() { stop.Store(pollErr != nil || stop.Load()) }()
		var sends, recvs int
		buf := make([]uverbs.WC, 7)
		deadline := time.Now().Add(60 * time.Second)
		for sends < total || recvs < total {
			n, err := cq.Poll(buf)
			if err != nil {
				pollErr = err
				return
			}
			for _, wc := range buf[:n] {
				switch {
				case wc.Status != uverbs.WCSuccess:
					pollErr = errors.New("failed completion: " + wc.Status.String())
				case wc.Opcode == uverbs.WCSend && wc.ID == uint64(sends):
					sends++
				case wc.Opcode == uverbs.WCRecv && wc.ID == uint64(1000000+recvs):
					recvs++
				default:
					pollErr = errors.New("completion out of order or repeated")
				}
				if pollErr != nil {
					return
				}
			}
			done.Store(int64(min(sends, recvs)))
			if n == 0 && (stop.Load() || time.Now().After(deadline)) {
				pollErr = errors.New("stopped or timed out")
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		defer func() { stop.Store(postErr != nil || stop.Load()) }()
		deadline := time.Now().Add(60 * time.Second)
		for posted := 0; posted < total; {
			if int64(posted)-done.Load() >= 8 {
				if time.Now().After(deadline) || stop.Load() {
					postErr = errors.New("the poller stopped")
					return
				}
				time.Sleep(50 * time.Microsecond)
				continue
			}
			rwr := []uverbs.RecvWR{{ID: uint64(1000000 + posted)}}
			swr := []uverbs.SendWR{{ID: uint64(posted), Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled}}
			if err := qp.PostRecv(rwr); err != nil {
				postErr = err
				return
			}
			if err := qp.PostSend(swr); err != nil {
				postErr = err
				return
			}
			posted++
		}
	}()
	for done.Load() < total && !stop.Load() {
		size := 64
		if resizes%2 == 0 {
			size = 512
		}
		if err := cq.Resize(size); err != nil {
			t.Errorf("resize %d to %d: %v", resizes, size, err)
			stop.Store(true)
			break
		}
		resizes++
	}
	wg.Wait()
	if pollErr != nil || postErr != nil {
		t.Fatalf("poller: %v; poster: %v (after %d resizes, %d exchanges done)", pollErr, postErr, resizes, done.Load())
	}
	if resizes < 10 {
		t.Fatalf("only %d resizes ran beside the traffic", resizes)
	}
	t.Logf("%d exchanges, %d resizes", total, resizes)
	b.close(t, qp)
}
