package uverbs

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/pureverbs/pureverbs/abi"
	"github.com/pureverbs/pureverbs/internal/sys"
)

// Host tests of the SRQ encodings (MODIFY_SRQ and QUERY_SRQ, rxe's
// create response and modify payload) and argument errors.

// TestSRQEncodings: MODIFY_SRQ with rxe's payload, QUERY_SRQ, and the rxe
// create response.
func TestSRQEncodings(t *testing.T) {
	if SRQAttrMaxWR != 1 || SRQAttrLimit != 2 {
		t.Error("SRQ attr mask values (enum ibv_srq_attr_mask)")
	}
	req := SRQAttr{MaxWR: 100, MaxSGE: 9, Limit: 7}.encodeModify(0x33, SRQAttrLimit)
	b := sys.AsBytes(&req)
	le := binary.LittleEndian
	if len(b) != 16 || le.Uint32(b[0:]) != 0x33 || le.Uint32(b[4:]) != 2 || le.Uint32(b[8:]) != 0 || le.Uint32(b[12:]) != 7 {
		t.Errorf("MODIFY_SRQ limit = % x", b)
	}
	req = SRQAttr{MaxWR: 100, Limit: 7}.encodeModify(0x33, SRQAttrMaxWR)
	if le.Uint32(b[4:]) != 1 || le.Uint32(b[8:]) != 100 || le.Uint32(b[12:]) != 0 {
		t.Errorf("MODIFY_SRQ max_wr = % x", b)
	}

	d := rxeProvider{}.newSRQ().(*rxeSRQ)
	if n := len(d.udataOut()); n != 24 || d.udataIn() != nil {
		t.Errorf("rxe SRQ udata out %d bytes", n)
	}
	out := d.udataOut()
	le.PutUint64(out[0:], 0x5000)
	le.PutUint32(out[8:], 8192)
	le.PutUint32(out[16:], 0x20001)
	if d.resp.Mi.Offset != 0x5000 || d.resp.Mi.Size != 8192 || d.srqNum() != 0x20001 {
		t.Errorf("rxe SRQ response decoded as %+v", d.resp)
	}
	d.newMi = abi.Mminfo{Offset: 1, Size: 2}
	in := d.modifyIn(SRQAttrLimit)
	if len(in) != 8 || le.Uint64(in) != sys.PtrAddr(&d.newMi) || le.Uint64(in) == 0 {
		t.Errorf("rxe MODIFY_SRQ payload % x, want the address %#x", in, sys.PtrAddr(&d.newMi))
	}
	if d.newMi.Size != 2 {
		t.Error("a limit-only modify touched the resize buffer")
	}
	if in := d.modifyIn(SRQAttrMaxWR); le.Uint64(in) != sys.PtrAddr(&d.newMi) || d.newMi != (abi.Mminfo{}) {
		t.Errorf("resize payload % x, buffer %+v (want cleared)", in, d.newMi)
	}
	if err := d.modified(nil, SRQAttrLimit); err != nil {
		t.Errorf("limit-only modified = %v", err)
	}
	if err := d.release(); err != nil {
		t.Errorf("release of an unmapped ring = %v", err)
	}

	q := abi.IbUverbsQuerySrq{SrqHandle: 5}
	if b := sys.AsBytes(&q); len(b) != 16 || le.Uint32(b[8:]) != 5 {
		t.Errorf("QUERY_SRQ = % x", b)
	}
	var qr abi.IbUverbsQuerySrqResp
	if len(sys.AsBytes(&qr)) != 16 {
		t.Error("QUERY_SRQ response size")
	}
}

func TestSRQArgumentErrors(t *testing.T) {
	bg := context.Background()
	var nilPD *PD
	if _, err := nilPD.CreateSRQ(SRQAttr{MaxWR: 1}); !errors.Is(err, ErrInvalid) {
		t.Errorf("nil CreateSRQ = %v", err)
	}
	var nilSRQ *SRQ
	if err := nilSRQ.Destroy(bg); !errors.Is(err, ErrInvalid) {
		t.Errorf("nil SRQ Destroy = %v", err)
	}
	if err := nilSRQ.Modify(SRQAttr{}, SRQAttrLimit); !errors.Is(err, ErrInvalid) {
		t.Errorf("nil SRQ Modify = %v", err)
	}
	if _, err := nilSRQ.Query(); !errors.Is(err, ErrInvalid) {
		t.Errorf("nil SRQ Query = %v", err)
	}

	// A context of a driver without a provider; nothing here reaches the
	// kernel.
	c := &Context{driverID: abi.RDMA_DRIVER_UNKNOWN, numCompVectors: 1}
	pd := &PD{ctx: c}
	for _, a := range []SRQAttr{{MaxWR: 0}, {MaxWR: -1}, {MaxWR: 1, MaxSGE: -1}, {MaxWR: 1, Limit: -1}, {MaxWR: 1 << 40}} {
		if _, err := pd.CreateSRQ(a); !errors.Is(err, ErrInvalid) {
			t.Errorf("CreateSRQ(%+v) = %v, want ErrInvalid", a, err)
		}
	}
	if _, err := pd.CreateSRQ(SRQAttr{MaxWR: 1}); !errors.Is(err, ErrNotSupported) {
		t.Errorf("CreateSRQ on unknown driver = %v, want ErrNotSupported", err)
	}
	srq := &SRQ{ctx: c, pd: pd}
	if err := srq.Modify(SRQAttr{}, 4); !errors.Is(err, ErrInvalid) {
		t.Errorf("SRQ Modify unknown mask = %v", err)
	}
	if err := srq.Modify(SRQAttr{MaxWR: 0}, SRQAttrMaxWR); !errors.Is(err, ErrInvalid) {
		t.Errorf("SRQ Modify MaxWR 0 = %v", err)
	}
	if err := srq.Modify(SRQAttr{Limit: -1}, SRQAttrLimit); !errors.Is(err, ErrInvalid) {
		t.Errorf("SRQ Modify limit -1 = %v", err)
	}
	//lint:ignore SA1012 a nil context is the case under test
	if err := srq.Destroy(nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("SRQ Destroy(nil) = %v", err)
	}
	srq.dead = true
	for name, err := range map[string]error{
		"limit":   srq.Modify(SRQAttr{Limit: 1}, SRQAttrLimit),
		"resize":  srq.Modify(SRQAttr{MaxWR: 4}, SRQAttrMaxWR),
		"destroy": srq.Destroy(bg),
	} {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s on destroyed SRQ = %v, want ErrClosed", name, err)
		}
	}
	if _, err := srq.Query(); !errors.Is(err, ErrClosed) {
		t.Errorf("Query on destroyed SRQ = %v, want ErrClosed", err)
	}

	// QPs on SRQs.
	cq := &CQ{ctx: c}
	good := QPInitAttr{Type: QPTypeRC, SendCQ: cq, RecvCQ: cq, SRQ: &SRQ{ctx: c}, Cap: QPCap{MaxSendWR: 1, MaxSendSGE: 1}}
	if _, err := pd.CreateQP(good); !errors.Is(err, ErrNotSupported) {
		t.Errorf("CreateQP with SRQ on unknown driver = %v, want ErrNotSupported", err)
	}
	a := good
	a.SRQ = &SRQ{ctx: &Context{}}
	if _, err := pd.CreateQP(a); !errors.Is(err, ErrInvalid) {
		t.Errorf("CreateQP with a foreign SRQ = %v, want ErrInvalid", err)
	}
	a.SRQ = srq // destroyed
	if _, err := pd.CreateQP(a); !errors.Is(err, ErrClosed) {
		t.Errorf("CreateQP with a destroyed SRQ = %v, want ErrClosed", err)
	}
	pd.dead = true
	if _, err := pd.CreateSRQ(SRQAttr{MaxWR: 1}); !errors.Is(err, ErrClosed) {
		t.Errorf("CreateSRQ on a deallocated PD = %v, want ErrClosed", err)
	}
}
