// Package memlocktest checks where a tool prints libibverbs'
// RLIMIT_MEMLOCK warning (package memlock), for the tools' host tests.
package memlocktest

import (
	"bytes"
	"strings"
	"testing"

	"github.com/pureverbs/pureverbs/internal/memlock"
)

// Low is libibverbs' warning for a non-root user whose RLIMIT_MEMLOCK is
// 16 KiB.
const Low = "libibverbs: Warning: RLIMIT_MEMLOCK is 16384 bytes.\n    This will severely limit memory registrations.\n"

// Case is a command line and whether the warning is due on it. Before is
// what the tool prints on stderr ahead of it (a parser's own warnings,
// which come before the C tool's first ibv_get_device_list).
type Case struct {
	Args   []string
	Warn   bool
	Before string
}

// Run is a tool's run: its command line in, its exit status out.
type Run func(args []string, stdout, stderr *bytes.Buffer) int

// Check runs each case through run twice, as it is and with the warning
// forced (memlock.Force), and fails t unless the forced run printed the
// same stdout with the same status, and on stderr the warning after
// Before and then the rest (the same stderr for a case without it).
func Check(t testing.TB, name string, run Run, cases ...Case) {
	t.Helper()
	for _, c := range cases {
		var out0, err0 bytes.Buffer
		restore := memlock.Force("") // the baseline without it, whoever runs the test
		st0 := run(c.Args, &out0, &err0)
		restore()
		var out, errb bytes.Buffer
		restore = memlock.Force(Low)
		st := run(c.Args, &out, &errb)
		restore()
		want := err0.String()
		if c.Warn {
			if !strings.HasPrefix(want, c.Before) {
				t.Fatalf("%s %q: stderr %q does not start with %q", name, c.Args, want, c.Before)
			}
			want = c.Before + Low + want[len(c.Before):]
		}
		if st != st0 || out.String() != out0.String() || errb.String() != want {
			t.Errorf("%s %q with the warning due: status %d, stdout %q, stderr %q\nwant %d, %q, %q",
				name, c.Args, st, out.String(), errb.String(), st0, out0.String(), want)
		}
	}
}
