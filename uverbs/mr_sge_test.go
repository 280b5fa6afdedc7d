package uverbs

import (
	"errors"
	"math"
	"testing"
)

// TestMRSGERange: MR.SGE turns arguments no SGE can express into one of
// Length math.MaxUint32, which the posts refuse, instead of truncating
// them into a valid-looking SGE.
func TestMRSGERange(t *testing.T) {
	buf := make([]byte, 4096)
	mr := &MR{first: mrState{buf: buf, lkey: 0x77}}
	if s := mr.SGE(16, 100); s.Addr != mr.IOVA()+16 || s.Length != 100 || s.LKey != 0x77 {
		t.Fatalf("SGE(16, 100) = %+v", s)
	}
	if s := mr.SGE(0, math.MaxUint32); s.Length != math.MaxUint32 || s.Addr != mr.IOVA() {
		t.Fatalf("SGE(0, MaxUint32) = %+v", s)
	}
	high := &MR{first: mrState{buf: buf, iova: math.MaxUint64 - 4095, iovaSet: true, lkey: 1}}
	bad := []struct {
		name string
		mr   *MR
		off  int
		n    int
	}{
		{"length 1<<32+4", mr, 0, 1<<32 + 4},
		{"length -1", mr, 0, -1},
		{"off -1", mr, -1, 8},
		{"off MaxInt", mr, math.MaxInt, 8},
		{"address past 2^64", high, 4096, 8},
		{"end past 2^64", high, 0, 8192},
		{"nil MR", nil, 0, 8},
	}
	qp, d := testQP(t, QPTypeRC, 8)
	for _, c := range bad {
		s := c.mr.SGE(c.off, c.n)
		if s.Length != math.MaxUint32 {
			t.Errorf("%s: SGE = %+v, want Length MaxUint32", c.name, s)
			continue
		}
		wr := SendWR{Opcode: WRSend, SGL: []SGE{s}}
		if err := d.writeSend(qp, d.sqRing, 0, &wr, 0); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: send of %+v: %v, want ErrInvalid", c.name, s, err)
		}
		if _, err := postRecvRing(d.rqRing, 5, []RecvWR{{SGL: []SGE{s}}}, "post_recv"); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: receive into %+v: %v, want ErrInvalid", c.name, s, err)
		}
	}
}
