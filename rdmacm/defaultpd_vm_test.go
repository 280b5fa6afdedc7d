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
// kernel's count is back, and a later channel gets a new one).
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
			qps[i], err = id.CreateQP(nil, uverbs.QPInitAttr{SendCQ: cq, RecvCQ: cq,
				Cap: uverbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
			if err != nil {
				t.Fatalf("round %d: CreateQP with no PD: %v", round, err)
			}
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
		if during["pd"] != before["pd"]+1 || during["qp"] != before["qp"]+2 || during["ctx"] != before["ctx"]+1 {
			t.Errorf("round %d: kernel counts %v with two QPs in the default PD, before %v (want one PD more)", round, during, before)
		}
		// Memory for the QPs is registered in their PD.
		mr, err := pd.RegMR(make([]byte, 64), uverbs.AccessLocalWrite)
		if err != nil {
			t.Errorf("RegMR in the default PD: %v", err)
		} else if err := mr.Dereg(); err != nil {
			t.Error(err)
		}
		for i := range qps {
			if err := qps[i].Destroy(ctx); err != nil {
				t.Error(err)
			}
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
