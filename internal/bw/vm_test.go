package bw

// VM tests of the hot loops on a real device (make vmtest VMPKGS=./internal/bw).

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/uverbs"
)

// selfQP is an RC QP on rxelo connected to itself (GID 1,
// ::ffff:127.0.0.1), with a buffer registered for every access and the
// CQs of a test; with events, each CQ reports to a completion channel of
// its own.
func selfQP(t *testing.T, txDepth, rxDepth int, events bool) (*uverbs.QP, *uverbs.CQ, *uverbs.CQ, *uverbs.MR) {
	t.Helper()
	c, err := uverbs.OpenByName(testkit.LoopDev)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	buf, err := uverbs.AllocBuffer(1 << 18)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { buf.Close() })
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	mr, err := pd.RegMR(buf.Bytes(), uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite|uverbs.AccessRemoteRead)
	if err != nil {
		t.Fatal(err)
	}
	var sopts, ropts uverbs.CQOptions
	if events {
		for _, o := range []*uverbs.CQOptions{&sopts, &ropts} {
			if o.Channel, err = c.CreateCompChannel(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { o.Channel.Close() })
		}
	}
	scq, err := c.CreateCQ(txDepth, &sopts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { scq.Destroy(context.Background()) })
	rcq, err := c.CreateCQ(rxDepth, &ropts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rcq.Destroy(context.Background()) })
	qp, err := pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: scq, RecvCQ: rcq,
		Cap: uverbs.QPCap{MaxSendWR: txDepth, MaxRecvWR: rxDepth, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	gid, err := c.QueryGID(1, 1)
	if err != nil {
		t.Fatal(err)
	}
	attr := uverbs.QPAttr{State: uverbs.QPStateInit, PortNum: 1, AccessFlags: uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead | uverbs.AccessLocalWrite}
	if err := qp.Modify(&attr, uverbs.QPAttrState|uverbs.QPAttrPKeyIndex|uverbs.QPAttrPort|uverbs.QPAttrAccessFlags); err != nil {
		t.Fatal(err)
	}
	attr = uverbs.QPAttr{State: uverbs.QPStateRTR, PathMTU: 3, DestQPN: qp.QPN(), RQPSN: 7, MaxDestRdAtomic: 16, MinRNRTimer: 12,
		AH: uverbs.AHAttr{IsGlobal: true, DGID: gid.GID, SGIDIndex: 1, HopLimit: 0xff, PortNum: 1}}
	if err := qp.Modify(&attr, uverbs.QPAttrState|uverbs.QPAttrAV|uverbs.QPAttrPathMTU|uverbs.QPAttrDestQPN|uverbs.QPAttrRQPSN|
		uverbs.QPAttrMinRNRTimer|uverbs.QPAttrMaxDestRdAtomic); err != nil {
		t.Fatal(err)
	}
	attr.State, attr.SQPSN, attr.Timeout, attr.RetryCnt, attr.RNRRetry, attr.MaxRdAtomic = uverbs.QPStateRTS, 7, 14, 7, 7, 16
	if err := qp.Modify(&attr, uverbs.QPAttrState|uverbs.QPAttrSQPSN|uverbs.QPAttrTimeout|uverbs.QPAttrRetryCnt|
		uverbs.QPAttrRNRRetry|uverbs.QPAttrMaxQPRdAtomic); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		qp.Destroy(ctx)
	})
	return qp, scq, rcq, mr
}

// TestVMLoopsNoAllocs runs the tools' loops on a real QP (rxelo, looped
// back to itself): whole runs of RDMA writes, RDMA reads, and SENDs
// received by the server loop, thousands of posts and polls, allocate
// nothing, and every message completes.
func TestVMLoopsNoAllocs(t *testing.T) {
	testkit.RequireVM(t)
	qp, scq, rcq, mr := selfQP(t, 128, 512, false)
	half := mr.Addr() + 1<<17
	for _, v := range []Verb{Write, Read} {
		l := &sendLoop{qps: []sendQP{{qp: qp, myAddr: mr.Addr(), remAddr: half, rkey: mr.RKey(), lkey: mr.LKey()}}, cq: scq, verb: v, iters: 1000,
			txDepth: 128, cqMod: 100, cycle: 4096, line: 64, base: mr.Addr(), tm: newTiming(1000, false)}
		testkit.NoAllocs(t, 3, func() {
			l.setup(4096)
			if err := l.run(); err != nil {
				t.Fatal(err)
			}
		})
		r := computeReport(4096, 1000, &l.tm, 100, 1, false, false)
		t.Logf("%v through a looped-back QP: %.2f MB/s (peak %.2f)", v, r.Avg, r.Peak)
		if l.scnt != 1000 || r.Avg <= 0 {
			t.Errorf("%v: scnt %d, report %+v", v, l.scnt, r)
		}
	}
	// SEND: the receive loop first preposts, then the send loop sends
	// and the receive loop collects (one goroutine after the other: the
	// receives are all posted before the sends start).
	s := &sendLoop{qps: []sendQP{{qp: qp, myAddr: mr.Addr(), lkey: mr.LKey()}}, cq: scq, verb: Send, iters: 400, txDepth: 128, cqMod: 100,
		cycle: 4096, line: 64, base: mr.Addr(), tm: newTiming(400, false)}
	r := &recvLoop{qps: []recvQP{{qp: qp, rxAddr: half, lkey: mr.LKey()}}, cq: rcq, iters: 400, depth: 400, cycle: 4096, line: 64, tm: newTiming(1, true)}
	sendReceive(t, s, r)
	if r.rcnt != 400 {
		t.Errorf("received %d", r.rcnt)
	}
}

// TestVMLoopsEvents: the same loops sleeping on completion events (-e),
// moderated and with a completion per message, on a real QP: every
// message completes, the waits happened, and a run allocates nothing.
func TestVMLoopsEvents(t *testing.T) {
	testkit.RequireVM(t)
	qp, scq, rcq, mr := selfQP(t, 128, 512, true)
	half := mr.Addr() + 1<<17
	ctx := context.Background()
	arm := func(cq *uverbs.CQ) *countingWaiter {
		if err := cq.ReqNotify(false); err != nil {
			t.Fatal(err)
		}
		return &countingWaiter{w: channelWaiter{ch: cq.Channel(), ctx: ctx}}
	}
	sw := arm(scq)
	for _, cqMod := range []uint64{100, 1} {
		l := &sendLoop{qps: []sendQP{{qp: qp, myAddr: mr.Addr(), remAddr: half, rkey: mr.RKey(), lkey: mr.LKey()}}, cq: scq, events: sw, verb: Read,
			iters: 1000, txDepth: 128, cqMod: cqMod, cycle: 4096, line: 64, base: mr.Addr(), tm: newTiming(1000, false)}
		sw.n = 0
		testkit.NoAllocs(t, 3, func() {
			l.setup(4096)
			if err := l.run(); err != nil {
				t.Fatal(err)
			}
		})
		if l.scnt != 1000 || l.ccnt < 1000 || sw.n == 0 {
			t.Errorf("reads, cq_mod %d: scnt %d ccnt %d after %d waits", cqMod, l.scnt, l.ccnt, sw.n)
		}
		t.Logf("reads, cq_mod %d: %d waits in 4 runs", cqMod, sw.n)
	}
	rw := arm(rcq)
	s := &sendLoop{qps: []sendQP{{qp: qp, myAddr: mr.Addr(), lkey: mr.LKey()}}, cq: scq, events: sw, verb: Send, iters: 400, txDepth: 128,
		cqMod: 1, cycle: 4096, line: 64, base: mr.Addr(), tm: newTiming(400, false)}
	r := &recvLoop{qps: []recvQP{{qp: qp, rxAddr: half, lkey: mr.LKey()}}, cq: rcq, events: rw, iters: 400, depth: 400, cycle: 4096, line: 64, tm: newTiming(1, true)}
	sendReceive(t, s, r)
	if r.rcnt != 400 || rw.n == 0 {
		t.Errorf("received %d after %d waits", r.rcnt, rw.n)
	}
}

// countingWaiter counts a channelWaiter's waits.
type countingWaiter struct {
	w channelWaiter
	n int
}

func (c *countingWaiter) wait() error {
	c.n++
	return c.w.wait()
}

// sendReceive runs 1 KiB SENDs through s and receives them with r, three
// times and more, and checks that the runs allocate nothing: r preposts,
// s sends, then r collects (one after the other: the receives are all
// posted before the sends start).
func sendReceive(t *testing.T, s *sendLoop, r *recvLoop) {
	t.Helper()
	testkit.NoAllocs(t, 3, func() {
		if err := r.prepost(1024); err != nil {
			t.Fatal(err)
		}
		s.setup(1024)
		if err := s.run(); err != nil {
			t.Fatal(err)
		}
		if err := r.run(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestVMOptionsReachTheQP: --tclass and --pkey_index reach the kernel.
// The tools' own code opens rxelo, creates the resources (the QP at INIT
// with the P_Key index) and moves the QP to RTR and RTS towards itself
// (the path's GRH with the traffic class); QUERY_QP then reports both,
// the traffic class as perftest's cast leaves it (300 is 44).
func TestVMOptionsReachTheQP(t *testing.T) {
	testkit.RequireVM(t)
	o, err := ParseArgs(Write, []string{"-d", testkit.LoopDev, "--tclass", "300", "--pkey_index", "1", "-s", "64", "h"})
	if err != nil {
		t.Fatal(err)
	}
	tt := &test{ctx: context.Background(), v: Write, o: o, stdout: io.Discard, stderr: io.Discard, client: true,
		cycle: 4096, cacheLine: 64}
	if err := tt.open(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := tt.close(); err != nil {
			t.Error(err)
		}
	}()
	if err := tt.createResources(); err != nil {
		t.Fatal(err)
	}
	const gidIndex = 1 // rxelo's ::ffff:127.0.0.1
	gid, err := tt.dev.QueryGID(1, gidIndex)
	if err != nil {
		t.Fatal(err)
	}
	qp := tt.qps[0]
	tt.gidIndex, tt.mtu = gidIndex, tt.activeMTU
	self := Dest{QPN: qp.QPN(), PSN: 7, GID: gid.GID, OutReads: 1}
	tt.my, tt.rem = []Dest{self}, []Dest{self}
	if err := tt.modifyRTR(0); err != nil {
		t.Fatal(err)
	}
	attr, _, err := qp.Query(uverbs.QPAttrState | uverbs.QPAttrAV | uverbs.QPAttrPKeyIndex)
	if err != nil {
		t.Fatal(err)
	}
	if attr.State != uverbs.QPStateRTS || !attr.AH.IsGlobal || attr.AH.TrafficClass != 44 || attr.AH.SGIDIndex != gidIndex || attr.PKeyIndex != 1 {
		t.Errorf("QP after the tools' set-up: state %v, AH %+v, P_Key index %d; want RTS, traffic class 44 on GID %d, P_Key index 1",
			attr.State, attr.AH, attr.PKeyIndex, gidIndex)
	}
}
