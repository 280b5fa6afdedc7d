package bw

import (
	"testing"

	"github.com/pureverbs/pureverbs/uverbs"
)

// TestBestGID: get_best_gid_index's walk: an IPv4-mapped GID first (an
// IPv6 one with --ipv6), else the better RoCE version; empty slots lose
// on version but, as perftest reads them as the zero GID, count as IPv6.
func TestBestGID(t *testing.T) {
	v4 := uverbs.GID{10: 0xff, 11: 0xff, 12: 10, 15: 1}
	ll := uverbs.GID{0: 0xfe, 1: 0x80, 15: 1}
	e := func(i int, g uverbs.GID, typ uverbs.GIDType) uverbs.GIDEntry {
		return uverbs.GIDEntry{Index: i, GID: g, Type: typ, Port: 1}
	}
	v2, v1 := uverbs.GIDTypeRoCEv2, uverbs.GIDTypeRoCEv1
	for _, c := range []struct {
		n       int
		entries []uverbs.GIDEntry
		ipv6    bool
		want    int
	}{
		// rxe's table: the link-local GID, then the IPv4-mapped one.
		{1024, []uverbs.GIDEntry{e(0, ll, v2), e(1, v4, v2)}, false, 1},
		{1024, []uverbs.GIDEntry{e(0, ll, v2), e(1, v4, v2)}, true, 0},
		// v2 over v1 within a kind; a v4 GID over v6 whatever its version.
		{8, []uverbs.GIDEntry{e(0, ll, v1), e(1, ll, v2), e(2, v4, v1), e(3, v4, v2)}, false, 3},
		{8, []uverbs.GIDEntry{e(0, ll, v1), e(1, ll, v2), e(2, v4, v1), e(3, v4, v2)}, true, 1},
		// perftest's quirk: from a v4 v1 GID, a later v6 v2 one wins on
		// version.
		{8, []uverbs.GIDEntry{e(0, v4, v1), e(1, ll, v2)}, false, 1},
		// With --ipv6 an empty slot after a v4 GID wins: the zero GID.
		{8, []uverbs.GIDEntry{e(0, v4, v2)}, true, 1},
		{8, []uverbs.GIDEntry{e(0, v4, v2)}, false, 0},
		{0, nil, false, 0},
	} {
		m := map[int]uverbs.GIDEntry{}
		for _, x := range c.entries {
			m[x.Index] = x
		}
		if got := bestGID(c.n, m, c.ipv6); got != c.want {
			t.Errorf("%d slots %v ipv6=%v: %d, want %d", c.n, c.entries, c.ipv6, got, c.want)
		}
	}
}

// TestODPMissing: --odp's check of the device's capabilities, as
// perftest 4.5-0.17's check_odp_support: RC sends, then RC receives,
// paged on demand.
func TestODPMissing(t *testing.T) {
	for _, c := range []struct {
		rc   uint32
		want string
	}{
		{0, " Send is not supported for RC transport."},
		{uverbs.ODPRecv | uverbs.ODPWrite, " Send is not supported for RC transport."},
		{uverbs.ODPSend | uverbs.ODPSRQRecv, " Receive is not supported for RC transport."},
		{uverbs.ODPSend | uverbs.ODPRecv, ""},
	} {
		if got := odpMissing(&uverbs.DeviceAttr{ODPGeneralCaps: uverbs.ODPSupport, ODPRCCaps: c.rc}); got != c.want {
			t.Errorf("RC caps %#x: %q, want %q", c.rc, got, c.want)
		}
	}
}
