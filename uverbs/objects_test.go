package uverbs

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"testing"

	"github.com/pureverbs/pureverbs/abi"
	"github.com/pureverbs/pureverbs/internal/sys"
)

func TestQPAttrMaskValues(t *testing.T) {
	// enum ibv_qp_attr_mask (= IB_QP_*).
	want := map[QPAttrMask]uint32{
		QPAttrState: 1 << 0, QPAttrCurState: 1 << 1, QPAttrEnSQDAsyncNotify: 1 << 2,
		QPAttrAccessFlags: 1 << 3, QPAttrPKeyIndex: 1 << 4, QPAttrPort: 1 << 5,
		QPAttrQKey: 1 << 6, QPAttrAV: 1 << 7, QPAttrPathMTU: 1 << 8, QPAttrTimeout: 1 << 9,
		QPAttrRetryCnt: 1 << 10, QPAttrRNRRetry: 1 << 11, QPAttrRQPSN: 1 << 12,
		QPAttrMaxQPRdAtomic: 1 << 13, QPAttrAltPath: 1 << 14, QPAttrMinRNRTimer: 1 << 15,
		QPAttrSQPSN: 1 << 16, QPAttrMaxDestRdAtomic: 1 << 17, QPAttrPathMigState: 1 << 18,
		QPAttrCap: 1 << 19, QPAttrDestQPN: 1 << 20, QPAttrRateLimit: 1 << 25,
	}
	for m, v := range want {
		if uint32(m) != v {
			t.Errorf("mask %#x, want %#x", uint32(m), v)
		}
	}
	if qpAttrMaskWrite != 0x1fffff {
		t.Errorf("qpAttrMaskWrite = %#x", uint32(qpAttrMaskWrite))
	}
	if QPTypeRC != 2 || QPTypeUC != 3 || QPTypeUD != 4 {
		t.Error("QP type values")
	}
	if QPStateSQD != 4 || QPStateErr != 6 || QPStateRTS.String() != "RTS" || QPState(9).String() != "QPState(9)" {
		t.Error("QP state values/names")
	}
}

// TestModifyQPEncodingRTR checks the 112-byte MODIFY_QP image of an
// INIT→RTR transition with a global address vector, byte by byte at the
// offsets of struct ib_uverbs_modify_qp.
func TestModifyQPEncodingRTR(t *testing.T) {
	var dgid GID
	copy(dgid[:], net.ParseIP("::ffff:10.99.0.1").To16())
	attr := &QPAttr{
		State:           QPStateRTR,
		PathMTU:         3,
		DestQPN:         0x123456,
		RQPSN:           0xabcdef,
		MaxDestRdAtomic: 4,
		MinRNRTimer:     12,
		AH: AHAttr{
			DGID: dgid, FlowLabel: 0x12345, SGIDIndex: 1, HopLimit: 64, TrafficClass: 0x20,
			IsGlobal: true, SL: 3, PortNum: 1,
		},
		// Not in the mask: must not be sent.
		SQPSN: 77, Timeout: 14, AccessFlags: 6, QKey: 0x11111111,
	}
	mask := QPAttrState | QPAttrAV | QPAttrPathMTU | QPAttrDestQPN | QPAttrRQPSN | QPAttrMaxDestRdAtomic | QPAttrMinRNRTimer
	req := attr.encode(0x42, mask)
	b := sys.AsBytes(&req)
	if len(b) != 112 {
		t.Fatalf("MODIFY_QP request is %d bytes, want 112", len(b))
	}
	want := make([]byte, 112)
	le := binary.LittleEndian
	copy(want[0:16], dgid[:])
	le.PutUint32(want[16:], 0x12345) // flow_label
	want[24] = 1                     // sgid_index
	want[25] = 64                    // hop_limit
	want[26] = 0x20                  // traffic_class
	want[27] = 3                     // sl
	want[30] = 1                     // is_global
	want[31] = 1                     // port_num (of the AV)
	le.PutUint32(want[64:], 0x42)    // qp_handle
	le.PutUint32(want[68:], uint32(mask))
	le.PutUint32(want[76:], 0xabcdef) // rq_psn
	le.PutUint32(want[84:], 0x123456) // dest_qp_num
	want[96] = 2                      // qp_state RTR
	want[98] = 3                      // path_mtu 1024
	want[102] = 4                     // max_dest_rd_atomic
	want[103] = 12                    // min_rnr_timer
	if uint32(mask) != 0x129181 {
		t.Errorf("RTR mask = %#x, want 0x129181", uint32(mask))
	}
	for i := range want {
		if b[i] != want[i] {
			t.Errorf("byte %d = %#x, want %#x", i, b[i], want[i])
		}
	}
}

func TestModifyQPEncodingOthers(t *testing.T) {
	attr := &QPAttr{
		State: QPStateRTS, CurState: QPStateRTR, EnSQDAsyncNotify: true, AccessFlags: 0xe,
		PKeyIndex: 5, PortNum: 1, QKey: 0x11111111, Timeout: 14, RetryCnt: 7, RNRRetry: 6,
		SQPSN: 0x99, MaxRdAtomic: 2, PathMigState: 1, AltPKeyIndex: 9, AltPortNum: 2, AltTimeout: 3,
		AltAH: AHAttr{DLID: 0x77, PortNum: 2},
	}
	mask := QPAttrState | QPAttrCurState | QPAttrEnSQDAsyncNotify | QPAttrAccessFlags | QPAttrPKeyIndex |
		QPAttrPort | QPAttrQKey | QPAttrTimeout | QPAttrRetryCnt | QPAttrRNRRetry | QPAttrSQPSN |
		QPAttrMaxQPRdAtomic | QPAttrPathMigState | QPAttrAltPath
	r := attr.encode(7, mask)
	want := abi.IbUverbsModifyQp{
		QpHandle: 7, AttrMask: uint32(mask), Qkey: 0x11111111, SqPsn: 0x99, QpAccessFlags: 0xe,
		PkeyIndex: 5, AltPkeyIndex: 9, QpState: 3, CurQpState: 2, PathMigState: 1, EnSqdAsyncNotify: 1,
		MaxRdAtomic: 2, PortNum: 1, Timeout: 14, RetryCnt: 7, RnrRetry: 6, AltPortNum: 2, AltTimeout: 3,
	}
	want.AltDest.Dlid = 0x77
	want.AltDest.PortNum = 2
	if r != want {
		t.Errorf("encode =\n%+v\nwant\n%+v", r, want)
	}
	b := sys.AsBytes(&r)
	if b[100] != 1 || b[92] != 5 || b[105] != 14 || binary.LittleEndian.Uint32(b[88:]) != 0xe {
		t.Errorf("offsets: en_sqd %d pkey %d timeout %d access %#x", b[100], b[92], b[105], binary.LittleEndian.Uint32(b[88:]))
	}
}

func TestObjectArgumentErrors(t *testing.T) {
	var nilCtx *Context
	if _, err := nilCtx.AllocPD(); !errors.Is(err, ErrInvalid) {
		t.Errorf("nil AllocPD = %v", err)
	}
	if _, err := nilCtx.CreateCQ(1, nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("nil CreateCQ = %v", err)
	}
	var nilPD *PD
	if err := nilPD.Dealloc(); !errors.Is(err, ErrInvalid) {
		t.Errorf("nil Dealloc = %v", err)
	}
	if _, err := nilPD.CreateQP(QPInitAttr{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("nil CreateQP = %v", err)
	}
	var nilCQ *CQ
	if err := nilCQ.Destroy(context.Background()); !errors.Is(err, ErrInvalid) {
		t.Errorf("nil CQ Destroy = %v", err)
	}
	var nilQP *QP
	if err := nilQP.Destroy(context.Background()); !errors.Is(err, ErrInvalid) {
		t.Errorf("nil QP Destroy = %v", err)
	}
	if err := nilQP.Modify(&QPAttr{}, QPAttrState); !errors.Is(err, ErrInvalid) {
		t.Errorf("nil QP Modify = %v", err)
	}

	// A context of a driver without a provider; nothing here reaches the
	// kernel.
	c := &Context{driverID: abi.RDMA_DRIVER_UNKNOWN, numCompVectors: 1}
	for _, n := range []int{0, -1} {
		if _, err := c.CreateCQ(n, nil); !errors.Is(err, ErrInvalid) {
			t.Errorf("CreateCQ(%d) = %v", n, err)
		}
	}
	if _, err := c.CreateCQ(1, &CQOptions{CompVector: 1}); !errors.Is(err, ErrInvalid) {
		t.Errorf("CreateCQ comp vector 1 of 1 = %v", err)
	}
	if _, err := c.CreateCQ(1, nil); !errors.Is(err, ErrNotSupported) {
		t.Errorf("CreateCQ on unknown driver = %v, want ErrNotSupported", err)
	}
	pd := &PD{ctx: c}
	cq := &CQ{ctx: c}
	good := QPInitAttr{Type: QPTypeRC, SendCQ: cq, RecvCQ: cq, Cap: QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}}
	if _, err := pd.CreateQP(good); !errors.Is(err, ErrNotSupported) {
		t.Errorf("CreateQP on unknown driver = %v, want ErrNotSupported", err)
	}
	bad := []func(a *QPInitAttr){
		func(a *QPInitAttr) { a.Type = 8 },
		func(a *QPInitAttr) { a.Type = 0 },
		func(a *QPInitAttr) { a.SendCQ = nil },
		func(a *QPInitAttr) { a.RecvCQ = nil },
		func(a *QPInitAttr) { a.Cap.MaxSendWR = -1 },
		func(a *QPInitAttr) { a.Cap.MaxInlineData = 1 << 40 },
		func(a *QPInitAttr) { a.RecvCQ = &CQ{ctx: &Context{}} },
	}
	for i, f := range bad {
		a := good
		f(&a)
		if _, err := pd.CreateQP(a); !errors.Is(err, ErrInvalid) {
			t.Errorf("bad QPInitAttr %d: %v, want ErrInvalid", i, err)
		}
	}
	dead := &CQ{ctx: c, life: life{dead: true}}
	a := good
	a.SendCQ = dead
	if _, err := pd.CreateQP(a); !errors.Is(err, ErrClosed) {
		t.Errorf("CreateQP with destroyed CQ = %v, want ErrClosed", err)
	}
	if err := dead.Destroy(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Destroy of destroyed CQ = %v", err)
	}
	pd.dead = true
	if _, err := pd.CreateQP(good); !errors.Is(err, ErrClosed) {
		t.Errorf("CreateQP on deallocated PD = %v, want ErrClosed", err)
	}
	if err := pd.Dealloc(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Dealloc = %v", err)
	}

	qp := &QP{ctx: c}
	if err := qp.Modify(nil, QPAttrState); !errors.Is(err, ErrInvalid) {
		t.Errorf("Modify(nil) = %v", err)
	}
	// EOPNOTSUPP for every bit past IBV_QP_DEST_QPN, as libibverbs.
	for _, m := range []QPAttrMask{QPAttrRateLimit, 1 << 21, 1 << 30, QPAttrState | 1<<24} {
		if err := qp.Modify(&QPAttr{}, m); !errors.Is(err, ErrNotSupported) || !errors.Is(err, sys.EOPNOTSUPP) {
			t.Errorf("Modify(%#x) = %v, want ErrNotSupported and EOPNOTSUPP", uint32(m), err)
		}
	}
	qp.dead = true
	if err := qp.Modify(&QPAttr{}, QPAttrState); !errors.Is(err, ErrClosed) {
		t.Errorf("Modify destroyed QP = %v, want ErrClosed", err)
	}
	if err := qp.Destroy(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Destroy destroyed QP = %v, want ErrClosed", err)
	}
}

func TestProviderFor(t *testing.T) {
	if p, ok := providerFor(abi.RDMA_DRIVER_RXE); !ok || p.name() != "rxe" {
		t.Errorf("rxe provider: %v %v", p, ok)
	}
	if p, ok := providerFor(abi.RDMA_DRIVER_MLX5); !ok || p.name() != "mlx5" {
		t.Errorf("mlx5 provider: %v %v (its refusals: mlx5_test.go)", p, ok)
	}
	cqObj, cq := rxeProvider{}.newCQ()
	if cqObj == nil || cq == nil {
		t.Fatal("rxe newCQ returned nil")
	}
	if n := len(cq.udataOut()); n != 16 || cq.udataIn() != nil {
		t.Errorf("rxe CQ udata out %d bytes", n)
	}
	qpObj, qp := rxeProvider{}.newQP()
	if qpObj == nil || qp == nil {
		t.Fatal("rxe newQP returned nil")
	}
	if n := len(qp.udataOut()); n != 32 || len(qp.udataIn()) != 0 {
		t.Errorf("rxe QP udata out %d bytes, in %d", n, len(qp.udataIn()))
	}
}
