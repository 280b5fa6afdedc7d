package uverbs

import (
	"encoding/binary"
	"errors"
	"net"
	"testing"

	"github.com/pureverbs/pureverbs/abi"
	"github.com/pureverbs/pureverbs/internal/sys"
)

// TestQueryQPDecode fills a 128-byte QUERY_QP response at the offsets of
// struct ib_uverbs_query_qp_resp and checks every decoded field.
func TestQueryQPDecode(t *testing.T) {
	var r abi.IbUverbsQueryQpResp
	b := sys.AsBytes(&r)
	if len(b) != 128 {
		t.Fatalf("QUERY_QP response %d bytes", len(b))
	}
	le := binary.LittleEndian
	var dgid GID
	copy(dgid[:], net.ParseIP("fe80::1").To16())
	copy(b[0:], dgid[:])
	le.PutUint32(b[16:], 0x12345) // dest.flow_label
	le.PutUint16(b[20:], 0x77)    // dest.dlid
	b[24], b[25], b[26], b[27], b[28], b[29], b[30], b[31] = 1, 64, 0x20, 3, 2, 4, 1, 1
	b[32+31] = 2 // alt_dest.port_num
	for i, v := range []uint32{5, 6, 2, 3, 64, 0x11111111, 0xabc, 0xdef, 0x123456, 0xe} {
		le.PutUint32(b[64+4*i:], v) // max_send_wr ... qp_access_flags
	}
	le.PutUint16(b[104:], 0)
	le.PutUint16(b[106:], 9)
	copy(b[108:], []byte{4, 3, 3, 1, 1, 2, 4, 12, 1, 14, 7, 6, 2, 3, 1})
	attr, caps, sigAll := decodeQueryQP(&r)
	want := QPAttr{
		State: QPStateSQD, CurState: QPStateRTS, PathMTU: 3, PathMigState: 1, QKey: 0x11111111,
		RQPSN: 0xabc, SQPSN: 0xdef, DestQPN: 0x123456, AccessFlags: 0xe,
		AH: AHAttr{DGID: dgid, FlowLabel: 0x12345, DLID: 0x77, SGIDIndex: 1, HopLimit: 64, TrafficClass: 0x20,
			SL: 3, SrcPathBits: 2, StaticRate: 4, IsGlobal: true, PortNum: 1},
		AltAH:        AHAttr{PortNum: 2},
		AltPKeyIndex: 9, MaxRdAtomic: 2, MaxDestRdAtomic: 4, MinRNRTimer: 12, PortNum: 1, Timeout: 14,
		RetryCnt: 7, RNRRetry: 6, AltPortNum: 2, AltTimeout: 3, SQDraining: true,
		Cap: QPCap{MaxSendWR: 5, MaxRecvWR: 6, MaxSendSGE: 2, MaxRecvSGE: 3, MaxInlineData: 64},
	}
	if attr != want {
		t.Errorf("decoded\n%+v\nwant\n%+v", attr, want)
	}
	if caps != want.Cap || !sigAll {
		t.Errorf("caps %+v sigAll %v", caps, sigAll)
	}
	var q abi.IbUverbsQueryQp
	if len(sys.AsBytes(&q)) != 16 {
		t.Error("QUERY_QP request size")
	}
}

func TestQueryQPArgumentErrors(t *testing.T) {
	var nilQP *QP
	if _, _, err := nilQP.Query(QPAttrState); !errors.Is(err, ErrInvalid) {
		t.Errorf("nil QP Query = %v", err)
	}
	qp := &QP{ctx: &Context{driverID: abi.RDMA_DRIVER_UNKNOWN}}
	// EOPNOTSUPP for every bit past IBV_QP_DEST_QPN, as libibverbs.
	for _, m := range []QPAttrMask{QPAttrRateLimit, 1 << 21, 1 << 30, QPAttrState | 1<<24} {
		if _, _, err := qp.Query(m); !errors.Is(err, ErrNotSupported) || !errors.Is(err, sys.EOPNOTSUPP) {
			t.Errorf("Query(%#x) = %v, want ErrNotSupported and EOPNOTSUPP", uint32(m), err)
		}
	}
	qp.dead = true
	if _, _, err := qp.Query(QPAttrState); !errors.Is(err, ErrClosed) {
		t.Errorf("Query destroyed QP = %v, want ErrClosed", err)
	}
}
