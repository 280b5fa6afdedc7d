package getopt

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
)

// rcShort and rcLongs are ibv_rc_pingpong's option table (as
// internal/pingpong has it), in the C table's order.
const rcShort = "p:d:i:s:m:r:n:l:eg:oOPtcjN"

var rcLongs = []Long{
	{"port", true, 'p'}, {"ib-dev", true, 'd'}, {"ib-port", true, 'i'}, {"size", true, 's'}, {"mtu", true, 'm'},
	{"rx-depth", true, 'r'}, {"iters", true, 'n'}, {"sl", true, 'l'}, {"events", false, 'e'}, {"gid-idx", true, 'g'},
	{"odp", false, 'o'}, {"iodp", false, 'O'}, {"prefetch", false, 'P'}, {"ts", false, 't'}, {"chk", false, 'c'},
	{"dm", false, 'j'}, {"new_send", false, 'N'},
}

// bwShort and bwLongs are a part of perftest's table (internal/bw): long
// options that are a prefix of others, and long-only options (Val 0).
const bwShort = "s:n:aF"

var bwLongs = []Long{
	{"size", true, 's'}, {"iters", true, 'n'}, {"all", false, 'a'}, {"CPU-freq", false, 'F'},
	{"mmap", true, 0}, {"mmap-offset", true, 0}, {"report_gbits", false, 0}, {"report-both", false, 0},
}

func TestParse(t *testing.T) {
	cases := []struct {
		short    string
		longs    []Long
		args     []string
		opts     []Opt
		operands []string
		err      string
	}{
		{args: []string{"-g", "1", "-s64", "10.99.0.1", "-n", "5"},
			opts:     []Opt{{Val: 'g', Arg: "1"}, {Val: 's', Arg: "64"}, {Val: 'n', Arg: "5"}},
			operands: []string{"10.99.0.1"}},
		{args: []string{"--size=64", "--gid-idx", "1", "--chk", "host"},
			opts:     []Opt{{Val: 's', Name: "size", Arg: "64"}, {Val: 'g', Name: "gid-idx", Arg: "1"}, {Val: 'c', Name: "chk"}},
			operands: []string{"host"}},
		{args: []string{"-ec", "-d", "rxe0"}, opts: []Opt{{Val: 'e'}, {Val: 'c'}, {Val: 'd', Arg: "rxe0"}}},
		{args: []string{"-cs", "8"}, opts: []Opt{{Val: 'c'}, {Val: 's', Arg: "8"}}},
		{args: []string{"-cs8"}, opts: []Opt{{Val: 'c'}, {Val: 's', Arg: "8"}}},
		{args: []string{"--it=7"}, opts: []Opt{{Val: 'n', Name: "iters", Arg: "7"}}},
		{args: []string{"--", "-s", "x"}, operands: []string{"-s", "x"}},
		{args: []string{"-"}, operands: []string{"-"}},
		{args: []string{"-x"}, err: "invalid option -- 'x'"},
		{args: []string{"-h"}, err: "invalid option -- 'h'"},
		{args: []string{"-s"}, err: "option requires an argument -- 's'"},
		{args: []string{"--size"}, err: "option '--size' requires an argument"},
		{args: []string{"--chk=1"}, err: "option '--chk' doesn't allow an argument"},
		{args: []string{"--nope"}, err: "unrecognized option '--nope'"},
		{args: []string{"--i"}, err: "option '--i' is ambiguous; possibilities: '--ib-dev' '--ib-port' '--iters' '--iodp'"},
		// glibc quotes what followed "--", an argument included, when it
		// does not know the option or cannot tell which one.
		{args: []string{"--nope=3"}, err: "unrecognized option '--nope=3'"},
		{args: []string{"--ib=rxe0"}, err: "option '--ib=rxe0' is ambiguous; possibilities: '--ib-dev' '--ib-port'"},
		// Prefix matches glibc cannot tell apart (same letter and
		// argument) are not ambiguous: the first wins.
		{short: "a", longs: []Long{{Name: "alpha", Val: 'a'}, {Name: "alphabet", Val: 'a'}}, args: []string{"--alp"},
			opts: []Opt{{Val: 'a', Name: "alpha"}}},
		{short: "a", longs: []Long{{Name: "alpha", Val: 'a'}, {Name: "alphabet"}}, args: []string{"--alp"},
			err: "option '--alp' is ambiguous; possibilities: '--alpha' '--alphabet'"},
		// Options before the bad word come back with the error (the C
		// tools act on them first).
		{args: []string{"-e", "h", "-x", "-c"}, opts: []Opt{{Val: 'e'}}, operands: []string{"h"}, err: "invalid option -- 'x'"},
		{args: []string{"--ib-p", "2"}, opts: []Opt{{Val: 'i', Name: "ib-port", Arg: "2"}}},
		// The colons of the short option string are not options.
		{args: []string{"-:"}, err: "invalid option -- ':'"},
		// Operands before, between and after options (permuting).
		{args: []string{"a", "-e", "b", "--", "-c"}, opts: []Opt{{Val: 'e'}}, operands: []string{"a", "b", "-c"}},

		// perftest's: an exact name wins over the longer names it is a
		// prefix of; long-only options are known by name.
		{short: bwShort, longs: bwLongs, args: []string{"--mmap", "f", "--report_gbits", "-aFs", "2K"},
			opts: []Opt{{Name: "mmap", Arg: "f"}, {Name: "report_gbits"}, {Val: 'a'}, {Val: 'F'}, {Val: 's', Arg: "2K"}}},
		{short: bwShort, longs: bwLongs, args: []string{"h", "--iters=100", "--size", "2K"},
			opts: []Opt{{Val: 'n', Name: "iters", Arg: "100"}, {Val: 's', Name: "size", Arg: "2K"}}, operands: []string{"h"}},
		{short: bwShort, longs: bwLongs, args: []string{"--mmap-o=4"}, opts: []Opt{{Name: "mmap-offset", Arg: "4"}}},
		{short: bwShort, longs: bwLongs, args: []string{"--report_gbits=1"}, err: "option '--report_gbits' doesn't allow an argument"},
		{short: bwShort, longs: bwLongs, args: []string{"--mmap"}, err: "option '--mmap' requires an argument"},
		{short: bwShort, longs: bwLongs, args: []string{"--re"}, err: "option '--re' is ambiguous; possibilities: '--report_gbits' '--report-both'"},
		{short: bwShort, longs: bwLongs, args: []string{"-n"}, err: "option requires an argument -- 'n'"},
	}
	for _, c := range cases {
		short, longs := c.short, c.longs
		if longs == nil {
			short, longs = rcShort, rcLongs
		}
		opts, operands, err := Parse(c.args, short, longs)
		if c.err != "" {
			var ge *Error
			if !errors.As(err, &ge) || err.Error() != c.err || ge.Msg != c.err {
				t.Errorf("Parse(%q) error = %v, want *Error %q", c.args, err, c.err)
			}
			if !reflect.DeepEqual(opts, c.opts) || !reflect.DeepEqual(operands, c.operands) {
				t.Errorf("Parse(%q) before the error: %v %q, want %v %q", c.args, opts, operands, c.opts, c.operands)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(opts, c.opts) || !reflect.DeepEqual(operands, c.operands) {
			t.Errorf("Parse(%q) = %v %q %v, want %v %q", c.args, opts, operands, err, c.opts, c.operands)
		}
	}
}

// TestParsePlainGetopt: with no long option table, as the tools whose C
// uses getopt(3) (rping, rdma_client, cmatose, udaddy, mckey), "--name"
// is a cluster of short options and glibc refuses its '-'; "--" still
// ends the options.
func TestParsePlainGetopt(t *testing.T) {
	for _, c := range []struct {
		args     []string
		opts     []Opt
		operands []string
		err      string
	}{
		{args: []string{"--help"}, err: "invalid option -- '-'"},
		{args: []string{"-s", "h", "--port=1"}, opts: []Opt{{Val: 's', Arg: "h"}}, err: "invalid option -- '-'"},
		{args: []string{"-s", "h", "--", "-p"}, opts: []Opt{{Val: 's', Arg: "h"}}, operands: []string{"-p"}},
	} {
		opts, operands, err := Parse(c.args, "s:p:", nil)
		if c.err != "" && (err == nil || err.Error() != c.err) || c.err == "" && err != nil {
			t.Errorf("Parse(%q) error = %v, want %q", c.args, err, c.err)
		}
		if !reflect.DeepEqual(opts, c.opts) || !reflect.DeepEqual(operands, c.operands) {
			t.Errorf("Parse(%q) = %v %q, want %v %q", c.args, opts, operands, c.opts, c.operands)
		}
	}
}

// TestParseRequireOrder: with POSIXLY_CORRECT set (or a '+' before the
// short options) the first operand ends the options, as glibc's getopt
// does: `POSIXLY_CORRECT=1 ibv_devinfo foo -i 0` takes "-i" and "0" as
// operands.
func TestParseRequireOrder(t *testing.T) {
	check := func(name, short string) {
		t.Helper()
		opts, operands, err := Parse([]string{"-v", "foo", "-i", "0"}, short, nil)
		if err != nil || len(opts) != 1 || opts[0].Val != 'v' || strings.Join(operands, " ") != "foo -i 0" {
			t.Errorf("%s: %+v %q %v", name, opts, operands, err)
		}
	}
	check("'+'", "+vi:")
	t.Setenv("POSIXLY_CORRECT", "1")
	check("POSIXLY_CORRECT", "vi:")
	t.Setenv("POSIXLY_CORRECT", "") // set, if empty: glibc only asks whether it is there
	check("POSIXLY_CORRECT empty", "vi:")
	// Without either, operands are permuted past the options.
	os.Unsetenv("POSIXLY_CORRECT") // t.Setenv restores it after the test
	opts, operands, err := Parse([]string{"-v", "foo", "-i", "0"}, "vi:", nil)
	if err != nil || len(opts) != 2 || strings.Join(operands, " ") != "foo" {
		t.Errorf("permuting: %+v %q %v", opts, operands, err)
	}
}
