package twohost

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/internal/testkit/rcstream"
	"github.com/pureverbs/pureverbs/uverbs"
)

const (
	powerOffRole   = "poweroff"
	powerOffQPNEnv = "PV_POWEROFF_QPNS" // host A's QPNs: "SENDER,RECEIVER"
	powerOffGIDEnv = "PV_POWEROFF_GID"  // host A's GID, hex
	streamDepth    = 64
	streamWindow   = 32
	// Receives each survivor must have had before the power-off.
	streamMilestone = 200
)

var powerOffQPNs = regexp.MustCompile(`(?m)^qpns (\d+) (\d+)`)

// TestTwoHostPowerOffMidTransfer streams RC traffic across the wire
// between host A and this test in the peer role on host B, and powers
// host B off mid-transfer (testkit.Host.PowerOff: the runner kills B's
// QEMU, a power loss; docs/testing.md). Nothing on B says goodbye: no
// NAK, no close; its packets just stop. Two survivors on A, on the same
// device, at the same moment:
//
//   - sending: 32 sends in flight and 64 receives posted when B goes.
//     Its RC QP retries (rcstream.QuickTimers: about a second) and fails
//     the send with IBV_WC_RETRY_EXC_ERR; every other request, receives
//     included, completes flushed (IBV_WC_WR_FLUSH_ERR), and the QP is in
//     ERR.
//   - receiving: it only receives (B streams to it). Nothing tells it
//     that B is gone: its wait ends when its context does, 2 s after the
//     sending survivor's failure proved B silent, with the context's
//     error; no receive completed after that failure, nothing failed, and
//     its QP is still RTS.
//
// Both clean up, and the leak check finds nothing held on A: fds,
// mappings, goroutines (the connection to B's agent, given up), the
// kernel's RDMA resource counts. The test must run alone in its boot:
// host B is gone after it (the runner sees to that: TestTwoHostPowerOff*).
func TestTwoHostPowerOffMidTransfer(t *testing.T) {
	if testkit.PeerRole() == powerOffRole {
		powerOffPeer(t)
		return
	}
	b := testkit.PeerHost(t)
	testkit.LeakCheck(t) // before anything is opened; checked after every cleanup
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	c, err := uverbs.OpenByName(testkit.WireDev)
	if err != nil {
		t.Fatalf("OpenByName(%s): %v", testkit.WireDev, err)
	}
	defer c.Close()
	g, err := c.QueryGID(1, 1)
	if err != nil {
		t.Fatal(err)
	}
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Dealloc()
	snd, err := newStreamEnd("sending survivor", c, pd, streamDepth, streamMilestone)
	if err != nil {
		t.Fatal(err)
	}
	defer closeEnd(ctx, t, snd)
	rcv, err := newStreamEnd("receiving survivor", c, pd, streamDepth, streamMilestone)
	if err != nil {
		t.Fatal(err)
	}
	defer closeEnd(ctx, t, rcv)
	rcv.MaxSends = 1 // one message to start B's sender

	// The peer: this test on B, streaming on two QPs towards ours. Its
	// context ends at the power-off: the connection to B's agent is then
	// given up (the agent will never answer).
	pctx, pcancel := context.WithCancel(ctx)
	defer pcancel()
	peer := b.StartTest(pctx, t, powerOffRole,
		fmt.Sprintf("%s=%d,%d", powerOffQPNEnv, snd.QP.QPN(), rcv.QP.QPN()), powerOffGIDEnv+"="+hex.EncodeToString(g.GID[:]))
	wctx, wcancel := context.WithTimeout(ctx, time.Minute)
	err = peer.WaitForOutput(wctx, "qpns ")
	wcancel()
	if err != nil {
		t.Fatal(err)
	}
	m := powerOffQPNs.FindStringSubmatch(peer.Output())
	if m == nil {
		t.Fatalf("no QPNs in the peer's output %q", peer.Output())
	}
	bgid, err := parseGID(b.GID())
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range []*rcstream.End{snd, rcv} {
		qpn, _ := strconv.ParseUint(m[1+i], 10, 32)
		if err := connectStream(e.QP, uint32(qpn), bgid, rcstream.QuickTimers); err != nil {
			t.Fatal(err)
		}
	}

	sres, rres := make(chan error, 1), make(chan error, 1)
	rctx, rcancel := context.WithCancel(ctx)
	defer rcancel()
	go func() { sres <- snd.Stream(ctx, -1, streamWindow, false) }()
	go func() { rres <- rcv.Stream(rctx, -1, 1, false) }()
	// Both streams flow before the power-off. (A stream returning now
	// failed: its state is safe to read.)
	for _, e := range []*rcstream.End{snd, rcv} {
		select {
		case <-e.Reached:
		case err := <-sres:
			t.Fatalf("the sending stream ended before the power-off: %v; %s", err, snd.State())
		case err := <-rres:
			t.Fatalf("the receiving stream ended before the power-off: %v; %s", err, rcv.State())
		case <-ctx.Done():
			t.Fatalf("%s: no traffic: %d sends, %d receives so far", e.Name, snd.Progress.Load(), rcv.Progress.Load())
		}
	}

	b.PowerOff(t)
	off := time.Now()
	pcancel()

	// The sending survivor: the transport ends its stream.
	var serr error
	select {
	case serr = <-sres:
	case <-ctx.Done():
		t.Fatalf("the sending survivor hangs %v after the power-off (%d receives)", time.Since(off), snd.Progress.Load())
	}
	failedAfter := time.Since(off)
	frozen := rcv.Progress.Load()
	// The receiving survivor: nothing ends its wait but its context.
	stop := time.AfterFunc(2*time.Second, rcancel)
	defer stop.Stop()
	var rerr error
	select {
	case rerr = <-rres:
	case <-ctx.Done():
		t.Fatalf("the receiving survivor's wait outlived its context")
	}
	waited := time.Since(off) - failedAfter
	// A power loss behind a switch: A's link stays up (the runner's
	// wire goes silent, it does not drop A's carrier).
	carrier, _ := os.ReadFile("/sys/class/net/" + testkit.WireNetdev + "/carrier")
	t.Logf("%s carrier after the power-off: %s", testkit.WireNetdev, strings.TrimSpace(string(carrier)))
	t.Logf("%s; stream returned %v, %v after the power-off", snd.State(), serr, failedAfter.Round(time.Millisecond))
	t.Logf("%s; stream returned %v, %v after the sending survivor's failure", rcv.State(), errors.Unwrap(rerr), waited.Round(time.Millisecond))

	t.Run("sending", func(t *testing.T) {
		if serr != nil {
			t.Fatalf("stream: %v", serr)
		}
		if len(snd.Bad) == 0 || snd.Bad[0].Status != uverbs.WCRetryExcErr || rcstream.Kind(snd.Bad[0].ID) != rcstream.KindSend {
			t.Fatalf("first failure %s, want a send with %v (a powered-off host answers nothing)", snd.Statuses(), uverbs.WCRetryExcErr)
		}
		recvs := 0
		for _, wc := range snd.Bad[1:] {
			if wc.Status != uverbs.WCWRFlushErr {
				t.Fatalf("after the first failure a completion with %v, want flushes only", wc.Status)
			}
			if rcstream.Kind(wc.ID) == rcstream.KindRecv {
				recvs++
			}
		}
		if recvs == 0 {
			t.Errorf("no receive flushed (%s)", snd.Statuses())
		}
		if snd.Outstanding() != 0 {
			t.Fatalf("%d requests never completed", snd.Outstanding())
		}
		if failedAfter > 30*time.Second {
			t.Errorf("the send failed %v after the power-off; quickTimers give up within about a second", failedAfter)
		}
		attr, _, err := snd.QP.Query(uverbs.QPAttrState)
		if err != nil {
			t.Fatalf("Query: %v", err)
		}
		if snd.Forced {
			t.Logf("%s: moved the QP to ERR, which flushed them", snd.Stall())
			attr.State = snd.StalledState
		}
		if attr.State != uverbs.QPStateErr {
			t.Fatalf("QP state %v, want ERR", attr.State)
		}
	})
	t.Run("receiving", func(t *testing.T) {
		if !errors.Is(rerr, context.Canceled) {
			t.Fatalf("stream: %v, want the context's end", rerr)
		}
		if waited < 2*time.Second {
			t.Errorf("the wait ended %v after the sending survivor's failure, its context 2s after", waited)
		}
		if n := rcv.Progress.Load(); n != frozen {
			t.Errorf("%d receives completed after the sending survivor knew host B was silent", n-frozen)
		}
		if len(rcv.Bad) != 0 {
			t.Errorf("failed completions: %s", rcv.Statuses())
		}
		attr, _, err := rcv.QP.Query(uverbs.QPAttrState)
		if err != nil {
			t.Fatalf("Query: %v", err)
		}
		if attr.State != uverbs.QPStateRTS {
			t.Errorf("QP state %v, want RTS (nothing failed on this side)", attr.State)
		}
	})
}

func closeEnd(ctx context.Context, t *testing.T, e *rcstream.End) {
	if err := e.Close(ctx); err != nil {
		t.Errorf("%s: cleanup: %v", e.Name, err)
	}
}

// parseGID parses a GID in IPv6 notation (testkit.Host.GID).
func parseGID(s string) (uverbs.GID, error) {
	var g uverbs.GID
	ip := net.ParseIP(s).To16()
	if ip == nil || !strings.Contains(s, ":") {
		return g, fmt.Errorf("GID %q: not an IPv6 address", s)
	}
	copy(g[:], ip)
	return g, nil
}

// powerOffPeer is the peer role on host B: two RC QPs connected to host
// A's (their QPNs and GID in the environment), each streaming towards A
// (32 sends in flight once A's first message arrived) until the power
// goes.
func powerOffPeer(t *testing.T) {
	qpns := strings.Split(os.Getenv(powerOffQPNEnv), ",")
	graw, err := hex.DecodeString(os.Getenv(powerOffGIDEnv))
	if len(qpns) != 2 || err != nil || len(graw) != 16 {
		t.Fatalf("%s=%q %s=%q", powerOffQPNEnv, os.Getenv(powerOffQPNEnv), powerOffGIDEnv, os.Getenv(powerOffGIDEnv))
	}
	var agid uverbs.GID
	copy(agid[:], graw)
	c, err := uverbs.OpenByName(testkit.WireDev)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Dealloc()
	var ends []*rcstream.End
	for i, q := range qpns {
		dest, err := strconv.ParseUint(q, 10, 32)
		if err != nil {
			t.Fatal(err)
		}
		e, err := newStreamEnd(fmt.Sprintf("peer %d", i), c, pd, streamDepth, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close(context.Background())
		if err := connectStream(e.QP, uint32(dest), agid, rcstream.QuickTimers); err != nil {
			t.Fatal(err)
		}
		ends = append(ends, e)
	}
	fmt.Printf("qpns %d %d\n", ends[0].QP.QPN(), ends[1].QP.QPN())
	// Until the power goes (the agent kills us if host A's test ends
	// first); a stream that ends failed. Both have returned before the
	// deferred closes run.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res := make(chan error, len(ends))
	for _, e := range ends {
		go func() { res <- e.Stream(ctx, -1, streamWindow, true) }()
	}
	err = <-res
	cancel()
	err2 := <-res
	t.Fatalf("a stream ended while host B still had power: %v (the other: %v); %s; %s", err, err2, ends[0].State(), ends[1].State())
}
