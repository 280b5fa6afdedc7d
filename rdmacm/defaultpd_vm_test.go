package rdmacm_test

import (
	"context"
	"maps"
	"net/netip"
	"testing"

	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/rdmacm"
	"github.com/pureverbs/pureverbs/uverbs"
)

// TestVMDefaultPD: CreateQP given no PD makes the QP in the device's
// default PD, as rdma_create_qp(3) does with a NULL pd: IDs on two
// channels share one PD (the kernel counts one more, not two), and it
// goes with the device's Context when the last channel closes (the
// kernel's count is back, and a later channel gets a new one). The second
// ID's QP is given no CQs either: CreateQP makes one per direction, each
// with a completion channel, and DestroyQP destroys them.
func TestVMDefaultPD(t *testing.T) {
	testkit.RequireVM(t)
	ctx := context.Background()
	const dev = "rxe0" // testkit.RxeAddr's
	before := testkit.Resources(t, dev)
	var firstPD *uverbs.PD
	for round := range 2 {
		var chs [2]*rdmacm.EventChannel
		var qps [2]*uverbs.QP
		var cq *uverbs.CQ
		var ids [2]*rdmacm.ID
		for i := range chs {
			ch, err := rdmacm.Open()
			if err != nil {
				t.Fatal(err)
			}
			chs[i] = ch
			id, err := ch.CreateID(rdmacm.PortSpaceTCP)
			if err != nil {
				t.Fatal(err)
			}
			if err := id.BindAddr(netip.AddrPortFrom(rxeAddr, 0)); err != nil {
				t.Fatal(err)
			}
			if name := id.Context().Device().Name; name != dev {
				t.Fatalf("%s is on %s, not %s", rxeAddr, name, dev)
			}
			if cq == nil {
				if cq, err = id.Context().CreateCQ(4, nil); err != nil {
					t.Fatal(err)
				}
			}
			attr := uverbs.QPInitAttr{SendCQ: cq, RecvCQ: cq,
				Cap: uverbs.QPCap{MaxSendWR: 3, MaxRecvWR: 5, MaxSendSGE: 1, MaxRecvSGE: 1}}
			if i == 1 {
				attr.SendCQ, attr.RecvCQ = nil, nil
			}
			qps[i], err = id.CreateQP(nil, attr)
			if err != nil {
				t.Fatalf("round %d: CreateQP with no PD: %v", round, err)
			}
			ids[i] = id
		}
		if s, r := qps[1].SendCQ(), qps[1].RecvCQ(); s == nil || r == nil || s == r || s == cq || r == cq ||
			s.Channel() == nil || r.Channel() == nil || s.Channel() == r.Channel() || s.CQE() < 3 || r.CQE() < 5 {
			t.Fatalf("round %d: CreateQP with no CQs gave send CQ %p (channel %p), receive CQ %p (channel %p)", round, s, s.Channel(), r, r.Channel())
		}
		pd := qps[0].PD()
		if pd == nil || qps[1].PD() != pd {
			t.Fatalf("round %d: the QPs' PDs %p and %p, want one default PD", round, qps[0].PD(), qps[1].PD())
		}
		if round == 0 {
			firstPD = pd
		} else if pd == firstPD {
			t.Errorf("the default PD outlived the Context it was made on")
		}
		during := testkit.Resources(t, dev)
		if during["pd"] != before["pd"]+1 || during["qp"] != before["qp"]+2 || during["ctx"] != before["ctx"]+1 || during["cq"] != before["cq"]+3 {
			t.Errorf("round %d: kernel counts %v with two QPs in the default PD, before %v (want one PD more)", round, during, before)
		}
		// Memory for the QPs is registered in their PD.
		mr, err := pd.RegMR(make([]byte, 64), uverbs.AccessLocalWrite)
		if err != nil {
			t.Errorf("RegMR in the default PD: %v", err)
		} else if err := mr.Dereg(); err != nil {
			t.Error(err)
		}
		for i := range ids {
			if err := ids[i].DestroyQP(ctx); err != nil {
				t.Error(err)
			}
		}
		if got := testkit.Resources(t, dev); got["cq"] != before["cq"]+1 || got["qp"] != before["qp"] {
			t.Errorf("round %d: after DestroyQP, kernel counts %v, before %v (want the caller's CQ only)", round, got, before)
		}
		if err := cq.Destroy(ctx); err != nil {
			t.Error(err)
		}
		for i := range chs {
			if err := chs[i].Close(); err != nil {
				t.Error(err)
			}
		}
		if after := testkit.Resources(t, dev); !maps.Equal(after, before) {
			t.Errorf("round %d: after the last channel closed, kernel counts %v, before %v", round, after, before)
		}
	}
}
