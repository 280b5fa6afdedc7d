package uverbs

import (
	"encoding/hex"
	"errors"
	"testing"

	"github.com/pureverbs/pureverbs/internal/sys"
)

// TestGRHDecode: the header checksum of a textbook IPv4 header, and which
// family parseGRH takes 40 bytes for (TestVMAHAttrFromWCAgainstC compares
// the whole decode with libibverbs in the VM).
func TestGRHDecode(t *testing.T) {
	h, _ := hex.DecodeString("450000730000400040110000c0a80001c0a800c7")
	if got := ipv4Checksum(h); got != 0xb861 {
		t.Fatalf("checksum %#x, want 0xb861", got)
	}
	grh := make([]byte, GRHSize)
	copy(grh[20:], h)
	grh[30], grh[31] = 0xb8, 0x61
	wc := &WC{Flags: WCGRH, SLID: 3}
	attr, want, err := parseGRH(1, wc, grh)
	if err != nil || !attr.IsGlobal || attr.HopLimit != 64 || attr.DLID != 3 ||
		want.typ != GIDTypeRoCEv2 || want.gid != (GID{10: 0xff, 11: 0xff, 12: 192, 13: 168, 15: 0xc7}) ||
		attr.DGID != (GID{10: 0xff, 11: 0xff, 12: 192, 13: 168, 15: 1}) {
		t.Fatalf("ipv4: %+v %+v %v", attr, want, err)
	}
	// An IPv6 version nibble in front: the checksum decides.
	grh[0] = 0x60
	if _, want, _ := parseGRH(1, wc, grh); want.typ != GIDTypeRoCEv2 || want.gid[10] != 0xff {
		t.Fatalf("ipv4 with a right checksum behind an IPv6 nibble read as IPv6: %+v", want)
	}
	grh[31]++
	grh[6] = ibNextHdr
	if _, want, err := parseGRH(1, wc, grh); err != nil || want.typ != GIDTypeIB || want.gid[10] == 0xff {
		t.Fatalf("bad checksum: not read as IPv6 with an IB next header: %+v %v", want, err)
	}
	grh[6] = 6
	if _, _, err := parseGRH(1, wc, grh); !errors.Is(err, ErrInvalid) || !errors.Is(err, sys.EPROTONOSUPPORT) {
		t.Fatalf("IPv6 with a TCP next header: %v", err)
	}
	grh[0], grh[20] = 0x50, 0x55
	if _, _, err := parseGRH(1, wc, grh); !errors.Is(err, sys.EPROTONOSUPPORT) {
		t.Fatalf("versions 5 and 5: %v", err)
	}
	if _, _, err := parseGRH(1, wc, grh[:39]); !errors.Is(err, ErrInvalid) {
		t.Fatalf("39 bytes: %v", err)
	}
}
