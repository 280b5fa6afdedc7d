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

// FuzzParseGRH: any completion flags and any bytes in the GRH area give
// attributes or an ErrInvalid error, never a panic, and what parseGRH
// returns comes from the header it read: the destination GID is the IPv6
// source GID or the IPv4-mapped source address, the local GID to look up
// the IPv6 destination or the IPv4-mapped destination address.
func FuzzParseGRH(f *testing.F) {
	v4, _ := hex.DecodeString("000000000000000000000000000000000000000045200074b2674000401100000a6300010a630001")
	v6, _ := hex.DecodeString("6680000000601140fe80000000000000000000fffe990001fe80000000000000000000fffe990001")
	f.Add(uint32(WCGRH), v4)
	f.Add(uint32(WCGRH), v6)
	f.Add(uint32(0), v6)
	f.Add(uint32(WCGRH), v4[:39])
	f.Fuzz(func(t *testing.T, flags uint32, grh []byte) {
		wc := &WC{Flags: WCFlags(flags), SLID: 5, SL: 2, DLIDPathBits: 1}
		attr, want, err := parseGRH(1, wc, grh)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error without ErrInvalid: %v", err)
			}
			return
		}
		if attr.DLID != 5 || attr.SL != 2 || attr.SrcPathBits != 1 || attr.PortNum != 1 {
			t.Fatalf("generic fields %+v", attr)
		}
		if WCFlags(flags)&WCGRH == 0 {
			if attr.IsGlobal || want != (gidWant{}) {
				t.Fatalf("global without WCGRH: %+v %+v", attr, want)
			}
			return
		}
		if len(grh) < GRHSize || !attr.IsGlobal {
			t.Fatalf("%d bytes accepted as a GRH: %+v", len(grh), attr)
		}
		var src6, dst6, src4, dst4 GID
		copy(src6[:], grh[8:24])
		copy(dst6[:], grh[24:40])
		mapIPv4(&src4, grh[32:36])
		mapIPv4(&dst4, grh[36:40])
		switch {
		case attr.DGID == src6 && want.gid == dst6 && attr.HopLimit == grh[7]:
		case attr.DGID == src4 && want.gid == dst4 && attr.HopLimit == grh[28] && want.typ == GIDTypeRoCEv2:
		default:
			t.Fatalf("attributes %+v, lookup %+v, from GRH %x", attr, want, grh)
		}
	})
}
