package faults_test

import (
	"context"
	"errors"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/internal/testkit/rcstream"
	"github.com/pureverbs/pureverbs/uverbs"
)

var peerQPN = regexp.MustCompile(`(?m)^qpn (\d+)`)

// peerGone are the statuses of the first failed send to a peer that died:
// the retries ran out, or its QP, in error before it was destroyed,
// answered with a NAK.
var peerGone = map[uverbs.WCStatus]bool{uverbs.WCRetryExcErr: true, uverbs.WCRemOpErr: true,
	uverbs.WCRemInvReqErr: true, uverbs.WCRemAbortErr: true}

// startPeer starts this test binary as a fault-peer process streaming to
// e's QP (window sends in flight, from its first receive on) and connects
// e to it. Ending ctx kills the peer (SIGKILL).
func startPeer(ctx context.Context, t *testing.T, c *uverbs.Context, e *rcstream.End, window int) *testkit.Peer {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := testkit.StartPeer(ctx, t, exe, peerArg, strconv.FormatUint(uint64(e.QP.QPN()), 10), strconv.Itoa(window))
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := p.WaitForOutput(wctx, "qpn "); err != nil {
		t.Fatal(err)
	}
	m := peerQPN.FindStringSubmatch(p.Output())
	if m == nil {
		t.Fatalf("no QPN in the peer's output %q", p.Output())
	}
	qpn, _ := strconv.ParseUint(m[1], 10, 32)
	if err := connectRC(c, e.QP, uint32(qpn), 1, rcstream.QuickTimers); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestVMPeerKilledMidTransfer streams between this process and a peer
// process (this binary as fault-peer, on rxe0 too) and kills the peer
// with SIGKILL mid-transfer. The survivor gets errors, not a hang, and
// cleans up: the leak check then finds the kernel's objects (the peer's,
// released by its death, and ours) back at their counts before.
//
//   - sending: the survivor has 32 sends in flight when the peer dies.
//     Its RC QP retries (rcstream.QuickTimers: about a second) and fails
//     the send with IBV_WC_RETRY_EXC_ERR, or, when its packets reach the
//     peer's QP while the dying process's QP is in error but not yet
//     destroyed (seen on 6.1 under -race), with that QP's NAK
//     (IBV_WC_REM_OP_ERR);
//     every other request, receives included, completes flushed, and the
//     QP is in ERR.
//   - receiving: the survivor only receives. Nothing tells it that the
//     sender died: its wait ends when its context does, with the
//     context's error, and its QP is still RTS.
//
// A peer host powering off needs two hosts: internal/testkit/twohost's
// TestTwoHostPowerOffMidTransfer (make vmtest2, in a boot of its own) has
// the runner cut host B's power mid-transfer. There nothing tears the
// peer's QP down, so the sending survivor's first failure is always
// IBV_WC_RETRY_EXC_ERR (no NAK), and the receive-only survivor's wait
// ends with its context, as here.
func TestVMPeerKilledMidTransfer(t *testing.T) {
	t.Run("sending", func(t *testing.T) { peerKilled(t, true) })
	t.Run("receiving", func(t *testing.T) { peerKilled(t, false) })
}

func peerKilled(t *testing.T, sending bool) {
	c := openRxe(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Dealloc()
	e, err := rcstream.New("survivor", c, pd, 64)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := e.Close(ctx); err != nil {
			t.Errorf("survivor cleanup: %v", err)
		}
	}()
	window := 32
	if !sending {
		e.MaxSends, window = 1, 1 // one message to start the peer
	}
	pctx, kill := context.WithCancel(ctx)
	defer kill()
	p := startPeer(pctx, t, c, e, 32)

	// The survivor's own bound: its whole context when sending (the
	// transport must end the stream), 3 s after the kill when receiving.
	sctx, scancel := context.WithCancel(ctx)
	defer scancel()
	res := make(chan error, 1)
	go func() { res <- e.Stream(sctx, -1, window, false) }()
	for deadline := time.Now().Add(time.Minute); e.Progress.Load() < 200; {
		select {
		case err := <-res:
			t.Fatalf("the stream ended before the peer was killed: %v; %s", err, e.State())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no traffic: %s", e.State())
		}
	}
	kill()
	killed := time.Now()
	<-p.Done()
	if !sending {
		time.AfterFunc(3*time.Second, scancel)
	}
	var serr error
	select {
	case serr = <-res:
	case <-ctx.Done():
		t.Fatalf("the survivor hangs: %s", e.State())
	}
	took := time.Since(killed).Round(time.Millisecond)
	t.Logf("%s; stream returned %v, %v after the kill", e.State(), errors.Unwrap(serr), took)
	attr, _, err := e.QP.Query(uverbs.QPAttrState)
	if err != nil {
		t.Fatalf("Query: %v", err)
	}
	if sending {
		if serr != nil {
			t.Fatalf("stream: %v", serr)
		}
		if len(e.Bad) == 0 || !peerGone[e.Bad[0].Status] {
			t.Fatalf("first failure %s, want %v (or a NAK of the dying QP: %v, %v, %v)", e.Statuses(),
				uverbs.WCRetryExcErr, uverbs.WCRemOpErr, uverbs.WCRemInvReqErr, uverbs.WCRemAbortErr)
		}
		for _, wc := range e.Bad[1:] {
			if wc.Status != uverbs.WCWRFlushErr {
				t.Fatalf("after the first failure a completion with %v, want flushes only", wc.Status)
			}
		}
		if e.Outstanding() != 0 {
			t.Fatalf("%d requests never completed", e.Outstanding())
		}
		if e.Forced {
			t.Logf("%s: moved the QP to ERR, which flushed them", e.Stall())
			attr.State = e.StalledState
		}
		if attr.State != uverbs.QPStateErr {
			t.Fatalf("QP state %v, want ERR", attr.State)
		}
		return
	}
	if !errors.Is(serr, context.Canceled) {
		t.Fatalf("stream: %v, want the context's end", serr)
	}
	if took < 3*time.Second || took > 20*time.Second {
		t.Errorf("the wait ended %v after the kill, its context 3s after", took)
	}
	if len(e.Bad) != 0 {
		t.Errorf("failed completions: %s", e.Statuses())
	}
	if attr.State != uverbs.QPStateRTS {
		t.Errorf("QP state %v, want RTS (nothing failed on this side)", attr.State)
	}
}
