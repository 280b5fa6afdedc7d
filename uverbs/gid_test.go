package uverbs

import (
	"net/netip"
	"testing"
)

// TestInetNtop6 checks the glibc inet_ntop(AF_INET6) rules (ibv_devinfo
// prints RoCE v2 GIDs so).
func TestInetNtop6(t *testing.T) {
	for in, want := range map[string]string{
		"fe80::ff:fe99:1":                 "fe80::ff:fe99:1",
		"::ffff:10.99.0.1":                "::ffff:10.99.0.1",
		"::ffff:127.0.0.1":                "::ffff:127.0.0.1",
		"::1":                             "::1",
		"::":                              "::",
		"::10.1.2.3":                      "::10.1.2.3", // IPv4-compatible
		"::1:ffff:a01:203":                "::1:ffff:a01:203",
		"2001:db8::1":                     "2001:db8::1",
		"2001:db8:0:0:1:0:0:1":            "2001:db8::1:0:0:1", // first of equal runs
		"2001:0:0:1:0:0:0:1":              "2001:0:0:1::1",     // longest run
		"2001:db8:1:2:3:4:5:0":            "2001:db8:1:2:3:4:5:0",
		"2001:db8:0:2:3:4:5:6":            "2001:db8:0:2:3:4:5:6", // single zero group stays
		"fe80::":                          "fe80::",
		"1:2:3:4:5:6:7:8":                 "1:2:3:4:5:6:7:8",
		"0:0:0:0:0:ffff:0:0":              "::ffff:0.0.0.0",
		"abcd:ef01:2345:6789:abcd:ef01::": "abcd:ef01:2345:6789:abcd:ef01::",
	} {
		if got := GID(netip.MustParseAddr(in).As16()).InetNtop(); got != want {
			t.Errorf("GID(%s).InetNtop() = %q, want %q", in, got, want)
		}
	}
}
