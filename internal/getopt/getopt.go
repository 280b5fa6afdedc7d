// Package getopt parses command lines as glibc's getopt_long(3) does, for
// the tools that copy a C tool's options, output and error messages
// (internal/pingpong for rdma-core's ibv_*_pingpong, internal/bw for
// perftest's ib_*_bw).
package getopt

import (
	"fmt"
	"os"
	"strings"
)

// Long is one entry of a getopt_long option table: Val is the short
// letter it stands for, or 0 for a long-only option (one a C tool keeps in
// a flag variable), which is then known by Name.
type Long struct {
	Name   string
	HasArg bool
	Val    byte
}

// Opt is one option found on the command line, in order: a short letter
// (Val), and for an option given by its long name, that name (the full
// name, also when the command line abbreviated it); Val is 0 for a
// long-only option. Arg is the option's argument, "" for none.
type Opt struct {
	Val  byte
	Name string
	Arg  string
}

// Error is a command-line error, worded as glibc's getopt_long words it
// on stderr, without the program name and the newline.
type Error struct{ Msg string }

func (e *Error) Error() string { return e.Msg }

// Parse parses args (without the program name) as glibc's getopt_long
// does in its default (GNU, permuting) mode with the short option string
// short and the long option table longs: options and operands may be
// mixed, "--" ends the options, short options cluster ("-ec"), an option
// argument may be attached ("-s64", "--size=64") or be the next word, and
// a long option may be abbreviated to any prefix that is unique or an
// exact name. It returns the options in order and the operands; an error
// is an *Error, returned with the options and operands before the word
// that caused it: a C tool acts on each option as getopt_long hands it
// over, so one of those may end the program before the complaint. A nil
// longs is plain getopt(3): "--" still ends the options, and "--name" is
// refused as glibc refuses it ("invalid option -- '-'"). With
// POSIXLY_CORRECT in the environment, or short starting with '+', the
// first operand ends the options, as in glibc's REQUIRE_ORDER mode.
func Parse(args []string, short string, longs []Long) ([]Opt, []string, error) {
	var opts []Opt
	var operands []string
	_, posix := os.LookupEnv("POSIXLY_CORRECT") // set at all, as glibc reads it
	inOrder := strings.HasPrefix(short, "+") || posix
	short = strings.TrimPrefix(short, "+")
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return opts, append(operands, args[i+1:]...), nil
		case strings.HasPrefix(a, "--") && longs != nil:
			// Without a long option table (plain getopt(3)) "--name" is a
			// cluster of short options whose first, '-', is invalid.
			name, arg, hasEq := strings.Cut(a[2:], "=")
			lo, err := findLong(name, a[2:], longs)
			if err != nil {
				return opts, operands, err
			}
			switch {
			case !lo.HasArg && hasEq:
				return opts, operands, &Error{fmt.Sprintf("option '--%s' doesn't allow an argument", lo.Name)}
			case lo.HasArg && !hasEq:
				if i+1 >= len(args) {
					return opts, operands, &Error{fmt.Sprintf("option '--%s' requires an argument", lo.Name)}
				}
				i++
				arg = args[i]
			}
			opts = append(opts, Opt{Val: lo.Val, Name: lo.Name, Arg: arg})
		case len(a) > 1 && a[0] == '-':
			for j := 1; j < len(a); j++ {
				c := a[j]
				k := strings.IndexByte(short, c)
				if c == ':' || k < 0 {
					return opts, operands, &Error{fmt.Sprintf("invalid option -- '%c'", c)}
				}
				if k+1 < len(short) && short[k+1] == ':' {
					arg := a[j+1:]
					if arg == "" {
						if i+1 >= len(args) {
							return opts, operands, &Error{fmt.Sprintf("option requires an argument -- '%c'", c)}
						}
						i++
						arg = args[i]
					}
					opts = append(opts, Opt{Val: c, Arg: arg})
					break
				}
				opts = append(opts, Opt{Val: c})
			}
		case inOrder:
			return opts, append(operands, args[i:]...), nil
		default:
			operands = append(operands, a)
		}
	}
	return opts, operands, nil
}

// findLong looks name up in longs: an exact name wins, otherwise a prefix
// must match one entry, or several that glibc cannot tell apart (the same
// letter and argument; a long-only option sets its own flag, so it always
// differs). Complaints quote word, what followed "--" (argument
// included), and the ambiguity message lists the matches in the table's
// order, as glibc does.
func findLong(name, word string, longs []Long) (Long, error) {
	var matches []Long
	ambiguous := false
	for _, lo := range longs {
		if lo.Name == name {
			return lo, nil
		}
		if strings.HasPrefix(lo.Name, name) {
			if len(matches) > 0 && (lo.Val == 0 || lo.Val != matches[0].Val || lo.HasArg != matches[0].HasArg) {
				ambiguous = true
			}
			matches = append(matches, lo)
		}
	}
	switch {
	case len(matches) == 0:
		return Long{}, &Error{fmt.Sprintf("unrecognized option '--%s'", word)}
	case !ambiguous:
		return matches[0], nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "option '--%s' is ambiguous; possibilities:", word)
	for _, m := range matches {
		b.WriteString(" '--" + m.Name + "'")
	}
	return Long{}, &Error{b.String()}
}
