package getopt

import (
	"math"
	"strings"
)

// Strtol converts s as C's strtol(s, NULL, 0) does: leading white space,
// an optional sign, then a hexadecimal ("0x"), octal ("0") or decimal
// number; conversion stops at the first character that does not belong to
// it (so "64k" is 64 and "abc" is 0), and out-of-range values saturate at
// the int64 limits.
func Strtol(s string) int64 {
	v, _ := StrtolEnd(s)
	return v
}

// StrtolEnd is Strtol with strtol's end pointer: it also returns how many
// bytes of s the number took, 0 when s has no digits where one is due
// (then strtol leaves the end pointer at s, before any white space or
// sign it skipped). A caller that wants the whole of s to be a number, as
// perftest's CHECK_VALUE does, compares that count with len(s): "" passes
// (as 0), "5 " and "0x" do not.
func StrtolEnd(s string) (int64, int) {
	v, neg, _, n := strtoAbs(s)
	if neg {
		if v > 1<<63 {
			return -1 << 63, n
		}
		return -int64(v), n
	}
	if v > 1<<63-1 {
		return 1<<63 - 1, n
	}
	return int64(v), n
}

// Strtoul converts s as C's strtoul(s, NULL, 0) does on a 64-bit system:
// like Strtol, but a leading minus negates the unsigned value and
// out-of-range values give ULONG_MAX.
func Strtoul(s string) uint64 {
	v, neg, over, _ := strtoAbs(s)
	if over {
		return v
	}
	if neg {
		return -v
	}
	return v
}

// strtoAbs returns the magnitude of the number at the start of s
// (saturating at the uint64 maximum), whether it had a minus sign,
// whether it overflowed, and how many bytes it took (0 for no digits).
func strtoAbs(s string) (v uint64, neg, over bool, n int) {
	i := 0
	for i < len(s) && (s[i] == ' ' || s[i] >= '\t' && s[i] <= '\r') {
		i++
	}
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	base := uint64(10)
	switch {
	case i+2 < len(s) && s[i] == '0' && (s[i+1] == 'x' || s[i+1] == 'X') && HexDigit(s[i+2]) >= 0:
		base = 16
		i += 2
	case i < len(s) && s[i] == '0':
		base = 8
	}
	start := i
	for ; i < len(s); i++ {
		d := HexDigit(s[i])
		if d < 0 || uint64(d) >= base {
			break
		}
		if v > (^uint64(0)-uint64(d))/base {
			over = true
		}
		v = v*base + uint64(d)
	}
	if i > start {
		n = i
	}
	if over {
		return ^uint64(0), neg, true, n
	}
	return v, neg, false, n
}

// HexDigit is c's value as a hexadecimal digit, -1 if it is not one.
func HexDigit(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// Atoi is C's atoi: (int)strtol(s, NULL, 10): leading white space, a
// sign, decimal digits, the rest ignored; out of long's range it clamps,
// and the conversion to int keeps the low 32 bits.
func Atoi(s string) int32 {
	s = strings.TrimLeft(s, " \t\n\v\f\r")
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	var v uint64
	over := false
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			break
		}
		if v > (math.MaxUint64-9)/10 {
			over = true
			continue
		}
		v = v*10 + uint64(c-'0')
	}
	var n int64
	switch {
	case !neg && (over || v > math.MaxInt64):
		n = math.MaxInt64
	case neg && (over || v > 1<<63):
		n = math.MinInt64
	case neg:
		n = -int64(v)
	default:
		n = int64(v)
	}
	return int32(n)
}
