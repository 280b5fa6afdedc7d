package uverbs

import (
	"errors"
	"testing"
)

func TestIncRKey(t *testing.T) {
	for _, c := range []struct{ in, want uint32 }{
		{0x12345600, 0x12345601}, {0x123456fe, 0x123456ff}, {0x123456ff, 0x12345600}, {0xffffffff, 0xffffff00},
	} {
		if got := IncRKey(c.in); got != c.want {
			t.Errorf("IncRKey(%#x) = %#x, want %#x", c.in, got, c.want)
		}
	}
}

// TestMWBindInfoCheck: the checks librxe makes before it writes a bind,
// at the edges of the MR's range.
func TestMWBindInfoCheck(t *testing.T) {
	pd, other := &PD{}, &PD{}
	buf := make([]byte, 4096)
	mr := &MR{first: mrState{pd: pd, buf: buf, access: AccessLocalWrite | AccessMWBind}}
	start := mr.Addr()
	for _, c := range []struct {
		name string
		b    MWBindInfo
		ok   bool
	}{
		{"whole MR", MWBindInfo{MR: mr, Addr: start, Length: 4096, Access: AccessRemoteWrite}, true},
		{"last byte", MWBindInfo{MR: mr, Addr: start + 4095, Length: 1, Access: AccessRemoteRead}, true},
		{"unbind", MWBindInfo{}, true},
		{"one byte past", MWBindInfo{MR: mr, Addr: start + 4095, Length: 2}, false},
		{"before", MWBindInfo{MR: mr, Addr: start - 1, Length: 1}, false},
		{"longer than the MR", MWBindInfo{MR: mr, Addr: start, Length: 4097}, false},
		{"huge length wrapping", MWBindInfo{MR: mr, Addr: start + 1, Length: ^uint64(0)}, false},
		{"address without MR", MWBindInfo{Addr: start}, false},
		{"zero based", MWBindInfo{MR: mr, Addr: start, Length: 1, Access: AccessZeroBased}, false},
		{"MW bind access on a window", MWBindInfo{MR: mr, Addr: start, Length: 1, Access: AccessMWBind}, false},
		{"MR without MW_BIND", MWBindInfo{MR: &MR{first: mrState{pd: pd, buf: buf, access: AccessLocalWrite}}, Addr: start, Length: 1}, false},
		{"MR of another PD", MWBindInfo{MR: &MR{first: mrState{pd: other, buf: buf, access: AccessMWBind}}, Addr: start, Length: 1}, false},
	} {
		err := c.b.check(pd)
		if c.ok != (err == nil) || err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}
