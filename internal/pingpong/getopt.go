package pingpong

import (
	"fmt"
	"strings"
)

// longOpt is one entry of a getopt_long option table.
type longOpt struct {
	name   string
	hasArg bool
	val    byte
}

// parsedOpt is one option found on the command line, in order.
type parsedOpt struct {
	val byte
	arg string
}

// getoptError is a command-line error, worded as glibc's getopt_long
// words it (without the program name).
type getoptError struct{ msg string }

func (e *getoptError) Error() string { return e.msg }

// getopt parses args as glibc's getopt_long does in its default (GNU,
// permuting) mode with the given short option string and long option
// table: options and operands may be mixed, "--" ends the options, short
// options cluster ("-ec"), an option argument may be attached ("-s64",
// "--size=64") or be the next word, and a long option may be abbreviated
// to any prefix that is unique or an exact name. It returns the options
// in order and the operands.
func getopt(args []string, short string, longs []longOpt) ([]parsedOpt, []string, error) {
	var opts []parsedOpt
	var operands []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			operands = append(operands, args[i+1:]...)
			return opts, operands, nil
		case strings.HasPrefix(a, "--"):
			name, arg, hasEq := strings.Cut(a[2:], "=")
			lo, err := findLong(name, longs)
			if err != nil {
				return nil, nil, err
			}
			switch {
			case !lo.hasArg && hasEq:
				return nil, nil, &getoptError{fmt.Sprintf("option '--%s' doesn't allow an argument", lo.name)}
			case lo.hasArg && !hasEq:
				if i+1 >= len(args) {
					return nil, nil, &getoptError{fmt.Sprintf("option '--%s' requires an argument", lo.name)}
				}
				i++
				arg = args[i]
			}
			opts = append(opts, parsedOpt{val: lo.val, arg: arg})
		case len(a) > 1 && a[0] == '-':
			for j := 1; j < len(a); j++ {
				c := a[j]
				k := strings.IndexByte(short, c)
				if c == ':' || k < 0 {
					return nil, nil, &getoptError{fmt.Sprintf("invalid option -- '%c'", c)}
				}
				if k+1 < len(short) && short[k+1] == ':' {
					arg := a[j+1:]
					if arg == "" {
						if i+1 >= len(args) {
							return nil, nil, &getoptError{fmt.Sprintf("option requires an argument -- '%c'", c)}
						}
						i++
						arg = args[i]
					}
					opts = append(opts, parsedOpt{val: c, arg: arg})
					break
				}
				opts = append(opts, parsedOpt{val: c})
			}
		default:
			operands = append(operands, a)
		}
	}
	return opts, operands, nil
}

// findLong looks name up in longs: an exact name wins, otherwise a prefix
// must match exactly one entry.
func findLong(name string, longs []longOpt) (longOpt, error) {
	var matches []longOpt
	for _, lo := range longs {
		if lo.name == name {
			return lo, nil
		}
		if strings.HasPrefix(lo.name, name) {
			matches = append(matches, lo)
		}
	}
	switch len(matches) {
	case 0:
		return longOpt{}, &getoptError{fmt.Sprintf("unrecognized option '--%s'", name)}
	case 1:
		return matches[0], nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "option '--%s' is ambiguous; possibilities:", name)
	for _, m := range matches {
		b.WriteString(" '--" + m.name + "'")
	}
	return longOpt{}, &getoptError{b.String()}
}

// strtol converts s as C's strtol(s, NULL, 0) does: leading white space,
// an optional sign, then a hexadecimal ("0x"), octal ("0") or decimal
// number; conversion stops at the first character that does not belong to
// it (so "64k" is 64 and "abc" is 0), and out-of-range values saturate at
// the int64 limits.
func strtol(s string) int64 {
	v, neg, _ := strtoAbs(s)
	if neg {
		if v > 1<<63 {
			return -1 << 63
		}
		return -int64(v)
	}
	if v > 1<<63-1 {
		return 1<<63 - 1
	}
	return int64(v)
}

// strtoul converts s as C's strtoul(s, NULL, 0) does on a 64-bit system:
// like strtol, but a leading minus negates the unsigned value and
// out-of-range values give ULONG_MAX.
func strtoul(s string) uint64 {
	v, neg, over := strtoAbs(s)
	if over {
		return v
	}
	if neg {
		return -v
	}
	return v
}

// strtoAbs returns the magnitude of the number at the start of s
// (saturating at the uint64 maximum), whether it had a minus sign and
// whether it overflowed.
func strtoAbs(s string) (v uint64, neg, over bool) {
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
	case i+2 < len(s) && s[i] == '0' && (s[i+1] == 'x' || s[i+1] == 'X') && hexDigit(s[i+2]) >= 0:
		base = 16
		i += 2
	case i < len(s) && s[i] == '0':
		base = 8
	}
	for ; i < len(s); i++ {
		d := hexDigit(s[i])
		if d < 0 || uint64(d) >= base {
			break
		}
		if v > (^uint64(0)-uint64(d))/base {
			over = true
		}
		v = v*base + uint64(d)
	}
	if over {
		return ^uint64(0), neg, true
	}
	return v, neg, false
}

func hexDigit(c byte) int {
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
