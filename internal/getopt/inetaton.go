package getopt

import (
	"math"
	"net/netip"
)

// InetAton reads an IPv4 address as glibc's inet_aton(3) does, with
// nothing after it (its __inet_aton_exact, which getaddrinfo uses): one
// to four parts separated by dots, each a C number (0x hex, 0 octal,
// else decimal) that starts with a digit, the last filling the bytes
// left ("10.1" is 10.0.0.1, "167772161" is 10.0.0.1).
func InetAton(s string) (netip.Addr, bool) {
	var parts []uint64
	for {
		if s == "" || s[0] < '0' || s[0] > '9' {
			return netip.Addr{}, false
		}
		v, rest, ok := strtoulC(s)
		if !ok {
			return netip.Addr{}, false
		}
		parts = append(parts, v)
		s = rest
		if s == "" {
			break
		}
		if s[0] != '.' || len(parts) == 4 || v > 0xff {
			return netip.Addr{}, false
		}
		s = s[1:]
	}
	last := parts[len(parts)-1]
	if last > math.MaxUint32>>(8*(len(parts)-1)) {
		return netip.Addr{}, false
	}
	var w uint32
	for i, p := range parts[:len(parts)-1] {
		w |= uint32(p) << (24 - 8*i)
	}
	w |= uint32(last)
	return netip.AddrFrom4([4]byte{byte(w >> 24), byte(w >> 16), byte(w >> 8), byte(w)}), true
}

// strtoulC reads a number as strtoul(s, &end, 0) does from a leading
// digit: "0x" and a hex digit start hex, "0" octal, else decimal. ok is
// false past 32 bits (inet_aton's limit).
func strtoulC(s string) (v uint64, rest string, ok bool) {
	base := uint64(10)
	i := 0
	switch {
	case len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') && HexDigit(s[2]) >= 0:
		base, i = 16, 2
	case s[0] == '0':
		base = 8
	}
	for ; i < len(s); i++ {
		d := HexDigit(s[i])
		if d < 0 || uint64(d) >= base {
			break
		}
		v = v*base + uint64(d)
		if v > math.MaxUint32 {
			return 0, "", false
		}
	}
	return v, s[i:], true
}
