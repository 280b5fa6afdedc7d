package getopt

import "testing"

// TestInetAton: the numeric IPv4 forms getaddrinfo takes (inet_aton's,
// with exactly nothing after them), and what it refuses.
func TestInetAton(t *testing.T) {
	for in, want := range map[string]string{
		"10.99.0.1": "10.99.0.1", "10.1": "10.0.0.1", "10.1.2": "10.1.0.2", "167772161": "10.0.0.1",
		"0x0a.1": "10.0.0.1", "012.0.0.1": "10.0.0.1", "0.0.0.0": "0.0.0.0", "1.2.65535": "1.2.255.255",
		"4294967295": "255.255.255.255",
	} {
		if a, ok := InetAton(in); !ok || a.String() != want {
			t.Errorf("InetAton(%q) = %v, %v; want %s", in, a, ok, want)
		}
	}
	for _, in := range []string{"08.1.2.3", "1.2.3.4.5", "1.2.3.256", "1.2.65536", "4294967296", "1.2.3.4 ", " 1.2.3.4",
		"1..2", "1.", "0x", "0xg.1.2.3", "-1.2.3.4", "", "::1"} {
		if a, ok := InetAton(in); ok {
			t.Errorf("InetAton(%q) = %v, want no address", in, a)
		}
	}
}
