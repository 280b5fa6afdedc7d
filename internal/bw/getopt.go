package bw

import (
	"fmt"
	"strings"
)

// longOpt is one entry of perftest's getopt_long table: val is the short
// letter it stands for, or 0 for the long-only options perftest keeps in
// flag variables (they are then known by name).
type longOpt struct {
	name   string
	hasArg bool
	val    byte
}

// parsedOpt is one option found on the command line, in order: a short
// letter, or (val 0) a long-only option's name.
type parsedOpt struct {
	val  byte
	name string
	arg  string
}

// usageError is a command-line error; msg is what perftest prints on
// stderr (without a newline), "" for none.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// getopt parses args as glibc's getopt_long does in its default
// (permuting) mode: options and operands may be mixed, "--" ends the
// options, short options cluster ("-aF"), an argument may be attached
// ("-s64", "--size=64") or be the next word, and a long option may be
// abbreviated to any unique prefix.
func getopt(args []string, short string, longs []longOpt) ([]parsedOpt, []string, error) {
	var opts []parsedOpt
	var operands []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return opts, append(operands, args[i+1:]...), nil
		case strings.HasPrefix(a, "--"):
			name, arg, hasEq := strings.Cut(a[2:], "=")
			lo, err := findLong(name, longs)
			if err != nil {
				return nil, nil, err
			}
			switch {
			case !lo.hasArg && hasEq:
				return nil, nil, &usageError{fmt.Sprintf("option '--%s' doesn't allow an argument", lo.name)}
			case lo.hasArg && !hasEq:
				if i+1 >= len(args) {
					return nil, nil, &usageError{fmt.Sprintf("option '--%s' requires an argument", lo.name)}
				}
				i++
				arg = args[i]
			}
			opts = append(opts, parsedOpt{val: lo.val, name: lo.name, arg: arg})
		case len(a) > 1 && a[0] == '-':
			for j := 1; j < len(a); j++ {
				c := a[j]
				k := strings.IndexByte(short, c)
				if c == ':' || k < 0 {
					return nil, nil, &usageError{fmt.Sprintf("invalid option -- '%c'", c)}
				}
				if k+1 < len(short) && short[k+1] == ':' {
					arg := a[j+1:]
					if arg == "" {
						if i+1 >= len(args) {
							return nil, nil, &usageError{fmt.Sprintf("option requires an argument -- '%c'", c)}
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

// findLong looks name up: an exact name wins, otherwise a prefix must
// match exactly one entry.
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
		return longOpt{}, &usageError{fmt.Sprintf("unrecognized option '--%s'", name)}
	case 1:
		return matches[0], nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "option '--%s' is ambiguous; possibilities:", name)
	for _, m := range matches {
		b.WriteString(" '--" + m.name + "'")
	}
	return longOpt{}, &usageError{b.String()}
}
