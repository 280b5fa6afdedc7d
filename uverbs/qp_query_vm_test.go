package uverbs_test

import (
	"errors"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/uverbs"
)

// qpStep is one Modify of a QP state walk.
type qpStep struct {
	attr uverbs.QPAttr
	mask uverbs.QPAttrMask
}

// walk returns the transitions RESET→INIT→RTR→RTS→SQD→RTS→ERR→RESET→INIT
// for a QP of type typ connected to QP number dest through rxe0's GID 1.
func walk(typ uverbs.QPType, dest uint32, dgid uverbs.GID) []qpStep {
	const s = uverbs.QPAttrState
	av := uverbs.AHAttr{DGID: dgid, SGIDIndex: 1, HopLimit: 64, TrafficClass: 0x20, FlowLabel: 0x1234, IsGlobal: true, PortNum: 1}
	var init, rtr, rts qpStep
	switch typ {
	case uverbs.QPTypeUD:
		init = qpStep{uverbs.QPAttr{State: uverbs.QPStateInit, PKeyIndex: 0, PortNum: 1, QKey: 0x11111111},
			s | uverbs.QPAttrPKeyIndex | uverbs.QPAttrPort | uverbs.QPAttrQKey}
		rtr = qpStep{uverbs.QPAttr{State: uverbs.QPStateRTR}, s}
		rts = qpStep{uverbs.QPAttr{State: uverbs.QPStateRTS, SQPSN: 0x321}, s | uverbs.QPAttrSQPSN}
	case uverbs.QPTypeUC:
		init = qpStep{uverbs.QPAttr{State: uverbs.QPStateInit, PortNum: 1, AccessFlags: uverbs.AccessRemoteWrite},
			s | uverbs.QPAttrPKeyIndex | uverbs.QPAttrPort | uverbs.QPAttrAccessFlags}
		rtr = qpStep{uverbs.QPAttr{State: uverbs.QPStateRTR, PathMTU: 3, DestQPN: dest, RQPSN: 0x123, AH: av},
			s | uverbs.QPAttrAV | uverbs.QPAttrPathMTU | uverbs.QPAttrDestQPN | uverbs.QPAttrRQPSN}
		rts = qpStep{uverbs.QPAttr{State: uverbs.QPStateRTS, SQPSN: 0x321}, s | uverbs.QPAttrSQPSN}
	default: // RC
		init = qpStep{uverbs.QPAttr{State: uverbs.QPStateInit, PortNum: 1,
			AccessFlags: uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead | uverbs.AccessRemoteAtomic},
			s | uverbs.QPAttrPKeyIndex | uverbs.QPAttrPort | uverbs.QPAttrAccessFlags}
		rtr = qpStep{uverbs.QPAttr{State: uverbs.QPStateRTR, PathMTU: 3, DestQPN: dest, RQPSN: 0x123,
			MaxDestRdAtomic: 2, MinRNRTimer: 12, AH: av},
			s | uverbs.QPAttrAV | uverbs.QPAttrPathMTU | uverbs.QPAttrDestQPN | uverbs.QPAttrRQPSN |
				uverbs.QPAttrMaxDestRdAtomic | uverbs.QPAttrMinRNRTimer}
		rts = qpStep{uverbs.QPAttr{State: uverbs.QPStateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 6, SQPSN: 0x321, MaxRdAtomic: 2},
			s | uverbs.QPAttrTimeout | uverbs.QPAttrRetryCnt | uverbs.QPAttrRNRRetry | uverbs.QPAttrSQPSN | uverbs.QPAttrMaxQPRdAtomic}
	}
	return []qpStep{
		init, rtr, rts,
		{uverbs.QPAttr{State: uverbs.QPStateSQD}, s},
		{uverbs.QPAttr{State: uverbs.QPStateRTS}, s},
		{uverbs.QPAttr{State: uverbs.QPStateErr}, s},
		{uverbs.QPAttr{State: uverbs.QPStateReset}, s},
		init,
	}
}

// TestVMQPQueryTransitions walks RC, UC and UD QPs on rxe0 through every
// state (RESET→INIT→RTR→RTS→SQD→RTS→ERR→RESET→INIT), checking with Query
// (QUERY_QP) the state after each Modify and the attributes set so far,
// and the creation attributes Query reports.
func TestVMQPQueryTransitions(t *testing.T) {
	c := openRxe(t)
	base := testkit.Resources(t, testkit.RxeDev)
	g, err := c.QueryGID(1, 1)
	if err != nil {
		t.Fatal(err)
	}
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	scq, err := c.CreateCQ(8, nil)
	if err != nil {
		t.Fatal(err)
	}
	rcq, err := c.CreateCQ(8, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []uverbs.QPType{uverbs.QPTypeRC, uverbs.QPTypeUC, uverbs.QPTypeUD} {
		t.Run(typ.String(), func(t *testing.T) {
			want := uverbs.QPCap{MaxSendWR: 5, MaxRecvWR: 3, MaxSendSGE: 2, MaxRecvSGE: 2, MaxInlineData: 64}
			qp, err := pd.CreateQP(uverbs.QPInitAttr{Type: typ, SendCQ: scq, RecvCQ: rcq, Cap: want, SigAll: typ != uverbs.QPTypeUC})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := qp.Destroy(bg(t)); err != nil {
					t.Error(err)
				}
			}()
			attr, init, err := qp.Query(uverbs.QPAttrState | uverbs.QPAttrCap)
			if err != nil {
				t.Fatalf("Query: %v", err)
			}
			if attr.State != uverbs.QPStateReset {
				t.Errorf("new QP in %v, want RESET", attr.State)
			}
			// 6.12's rxe answers the create with the sizes of the rings it
			// made; 6.1's echoes the request there and reports the rings'
			// (larger) sizes only to QUERY_QP.
			if attr.Cap != init.Cap || !capAtLeast(attr.Cap, qp.Cap()) || testkit.KernelAtLeast(6, 12) && attr.Cap != qp.Cap() {
				t.Errorf("Query caps %+v / %+v, CreateQP granted %+v", attr.Cap, init.Cap, qp.Cap())
			}
			t.Logf("%v: requested %+v, CreateQP granted %+v, Query %+v", typ, want, qp.Cap(), attr.Cap)
			caps := attr.Cap
			if init.Type != typ || init.SendCQ != scq || init.RecvCQ != rcq || init.SRQ != nil || init.SigAll != (typ != uverbs.QPTypeUC) {
				t.Errorf("Query init = %+v", init)
			}
			for i, st := range walk(typ, qp.QPN(), g.GID) {
				if err := qp.Modify(&st.attr, st.mask); err != nil {
					t.Fatalf("step %d: Modify to %v: %v", i, st.attr.State, err)
				}
				attr, _, err := qp.Query(uverbs.QPAttrState)
				if err != nil {
					t.Fatalf("step %d: Query: %v", i, err)
				}
				if st.attr.State == uverbs.QPStateSQD {
					// The drain completes at once (nothing posted).
					for end := time.Now().Add(5 * time.Second); attr.SQDraining && time.Now().Before(end); {
						time.Sleep(10 * time.Millisecond)
						if attr, _, err = qp.Query(uverbs.QPAttrState); err != nil {
							t.Fatal(err)
						}
					}
					if attr.SQDraining {
						t.Errorf("SQD: still draining")
					}
				}
				t.Logf("step %d: -> %v: state %v cur %v", i, st.attr.State, attr.State, attr.CurState)
				if attr.State != st.attr.State {
					t.Errorf("step %d: Query state %v after Modify to %v", i, attr.State, st.attr.State)
				}
				if attr.Cap != caps {
					t.Errorf("step %d: caps changed to %+v", i, attr.Cap)
				}
				if attr.State == uverbs.QPStateRTS {
					checkRTS(t, typ, qp, attr, g.GID)
				}
			}
		})
	}
	qp, err := pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: scq, RecvCQ: scq,
		Cap: uverbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := qp.Query(uverbs.QPAttrRateLimit); !errors.Is(err, uverbs.ErrNotSupported) {
		t.Errorf("Query(RATE_LIMIT) = %v, want ErrNotSupported", err)
	}
	if err := qp.Destroy(bg(t)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := qp.Query(uverbs.QPAttrState); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("Query after Destroy = %v, want ErrClosed", err)
	}
	for _, cq := range []*uverbs.CQ{scq, rcq} {
		if err := cq.Destroy(bg(t)); err != nil {
			t.Fatal(err)
		}
	}
	if err := pd.Dealloc(); err != nil {
		t.Fatal(err)
	}
	waitCounts(t, base)
}

// checkRTS compares what Query reports in RTS with what the walk set.
func checkRTS(t *testing.T, typ uverbs.QPType, qp *uverbs.QP, a uverbs.QPAttr, dgid uverbs.GID) {
	t.Helper()
	if a.SQPSN != 0x321 || a.PortNum != 1 {
		t.Errorf("RTS: sq_psn %#x port %d", a.SQPSN, a.PortNum)
	}
	switch typ {
	case uverbs.QPTypeUD:
		if a.QKey != 0x11111111 {
			t.Errorf("UD RTS: qkey %#x", a.QKey)
		}
	default:
		if a.DestQPN != qp.QPN() || a.RQPSN != 0x123 || a.PathMTU != 3 {
			t.Errorf("%v RTS: dest_qpn %d rq_psn %#x mtu %v", typ, a.DestQPN, a.RQPSN, a.PathMTU)
		}
		if !a.AH.IsGlobal || a.AH.DGID != dgid || a.AH.SGIDIndex != 1 || a.AH.HopLimit != 64 ||
			a.AH.TrafficClass != 0x20 || a.AH.FlowLabel != 0x1234 || a.AH.PortNum != 1 {
			t.Errorf("%v RTS: address %+v", typ, a.AH)
		}
	}
	switch typ {
	case uverbs.QPTypeRC:
		if a.Timeout != 14 || a.RetryCnt != 7 || a.RNRRetry != 6 || a.MaxRdAtomic != 2 || a.MaxDestRdAtomic != 2 ||
			a.MinRNRTimer != 12 || a.AccessFlags != uverbs.AccessRemoteWrite|uverbs.AccessRemoteRead|uverbs.AccessRemoteAtomic {
			t.Errorf("RC RTS: %+v", a)
		}
	case uverbs.QPTypeUC:
		if a.AccessFlags != uverbs.AccessRemoteWrite {
			t.Errorf("UC RTS: access %v", a.AccessFlags)
		}
	}
}

func capAtLeast(a, b uverbs.QPCap) bool {
	return a.MaxSendWR >= b.MaxSendWR && a.MaxRecvWR >= b.MaxRecvWR && a.MaxSendSGE >= b.MaxSendSGE &&
		a.MaxRecvSGE >= b.MaxRecvSGE && a.MaxInlineData >= b.MaxInlineData
}
