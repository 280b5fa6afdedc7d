package pingpong

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/pureverbs/pureverbs/uverbs"
)

// cGolden is the output of testdata/cgolden/golden.c: rdma-core v44's own
// gid_to_wire_gid and wire_gid_to_gid, glibc's inet_ntop, and the
// sprintf of the address message for LID i, QPN 0x11+i, PSN 0xabcdef-i.
var cGolden = []struct {
	text, wire, msg string
	roundTrip       int
}{
	{"::ffff:10.99.0.1", "00000000000000000000ffff0a630001", "0000:000011:abcdef:00000000000000000000ffff0a630001", 1},
	{"fe80::200:ff:fe00:0", "fe80000000000000020000fffe000000", "0001:000012:abcdee:fe80000000000000020000fffe000000", 1},
	{"::ffff:127.0.0.1", "00000000000000000000ffff7f000001", "0002:000013:abcded:00000000000000000000ffff7f000001", 1},
	{"::1", "00000000000000000000000000000001", "0003:000014:abcdec:00000000000000000000000000000001", 1},
	{"::", "00000000000000000000000000000000", "0004:000015:abcdeb:00000000000000000000000000000000", 1},
	{"fe80::ff:fe99:1", "fe80000000000000000000fffe990001", "0005:000016:abcdea:fe80000000000000000000fffe990001", 1},
	{"2001:db8::1:0:0:1", "20010db8000000000001000000000001", "0006:000017:abcde9:20010db8000000000001000000000001", 1},
	{"fd00:98::5", "fd000098000000000000000000000005", "0007:000018:abcde8:fd000098000000000000000000000005", 1},
	{"::10.1.2.3", "0000000000000000000000000a010203", "0008:000019:abcde7:0000000000000000000000000a010203", 1},
	{"1:0:0:2::3", "00010000000000020000000000000003", "0009:00001a:abcde6:00010000000000020000000000000003", 1},
	{"1:2:3:4:5:6:7:8", "00010002000300040005000600070008", "000a:00001b:abcde5:00010002000300040005000600070008", 1},
	{"0:0:1::", "00000000000100000000000000000000", "000b:00001c:abcde4:00000000000100000000000000000000", 1},
}

func gidOf(t *testing.T, s string) uverbs.GID {
	t.Helper()
	a, err := netip.ParseAddr(s)
	if err != nil {
		t.Fatal(err)
	}
	return uverbs.GID(a.As16())
}

func TestWireAgainstC(t *testing.T) {
	for i, c := range cGolden {
		g := gidOf(t, c.text)
		if got := WireGID(g); got != c.wire {
			t.Errorf("WireGID(%s) = %s, C wrote %s", c.text, got, c.wire)
		}
		back, err := ParseWireGID(c.wire)
		if err != nil || back != g {
			t.Errorf("ParseWireGID(%s) = %v, %v; want %v", c.wire, back, err, g)
		}
		if got := g.InetNtop(); got != c.text {
			t.Errorf("%s.InetNtop() = %q, inet_ntop says %q", c.wire, got, c.text)
		}
		d := Dest{LID: uint16(i), QPN: 0x11 + uint32(i), PSN: 0xabcdef - uint32(i), GID: g}
		m, err := d.Encode()
		if err != nil {
			t.Fatal(err)
		}
		want := append([]byte(c.msg), 0)
		if len(want) != MsgSize || string(m[:]) != string(want) {
			t.Errorf("Encode(%+v) = %q, C sent %q", d, m[:], want)
		}
		got, err := ParseDest(m[:])
		if err != nil || got != d {
			t.Errorf("ParseDest(%q) = %+v, %v; want %+v", m[:], got, err, d)
		}
	}
}

func TestParseDestErrors(t *testing.T) {
	good := "0000:000011:abcdef:00000000000000000000ffff0a630001"
	for _, s := range []string{
		"", "done", good[:len(good)-1], good + "0", "zzzz:000011:abcdef:00000000000000000000ffff0a630001",
		"0000:000011:abcdef:0000000000000000000gffff0a630001", "0000:000011:abcdef", "0000:1:2:3:" + good[19:],
		"10000:000011:abcdef:00000000000000000000ffff0a630001",
	} {
		if d, err := ParseDest([]byte(s)); err == nil {
			t.Errorf("ParseDest(%q) = %+v, want an error", s, d)
		}
	}
	// Text after the NUL is ignored, as sscanf ignores it.
	if _, err := ParseDest([]byte(good + "\x00garbage")); err != nil {
		t.Errorf("ParseDest with trailing bytes after NUL: %v", err)
	}
	// Upper-case hex parses (sscanf's %x takes it).
	if d, err := ParseDest([]byte(strings.ToUpper(good))); err != nil || d.PSN != 0xabcdef {
		t.Errorf("upper case: %+v, %v", d, err)
	}
}

func TestEncodeTooWide(t *testing.T) {
	if _, err := (Dest{QPN: 1 << 24}).Encode(); err == nil {
		t.Error("a 25-bit QPN encoded into the 52-byte message")
	}
	if _, err := (Dest{LID: 0xffff, QPN: 0xffffff, PSN: 0xffffff}).Encode(); err != nil {
		t.Errorf("widest valid address: %v", err)
	}
}

func TestHasInterfaceID(t *testing.T) {
	for s, want := range map[string]bool{"::": false, "fe80::": false, "::1": true, "::ffff:10.99.0.1": true, "fe80::200:ff:fe00:0": true} {
		if got := hasInterfaceID(gidOf(t, s)); got != want {
			t.Errorf("hasInterfaceID(%s) = %v", s, got)
		}
	}
}

func FuzzParseDest(f *testing.F) {
	for _, c := range cGolden {
		f.Add([]byte(c.msg))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := ParseDest(b)
		if err != nil {
			return
		}
		if d.QPN > 0xffffff || d.PSN > 0xffffff {
			return // parses, but cannot be encoded back into 52 bytes
		}
		m, err := d.Encode()
		if err != nil {
			t.Fatalf("re-encode %+v: %v", d, err)
		}
		d2, err := ParseDest(m[:])
		if err != nil || d2 != d {
			t.Fatalf("round trip %+v -> %q -> %+v, %v", d, m[:], d2, err)
		}
	})
}
