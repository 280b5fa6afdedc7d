package memlock

import (
	"bytes"
	"testing"

	"github.com/pureverbs/pureverbs/internal/sys"
)

const low = "libibverbs: Warning: RLIMIT_MEMLOCK is 16384 bytes.\n    This will severely limit memory registrations.\n"

// TestWarnForced: Warn writes Force's text exactly, nothing for a forced
// "", and the process's own (sys.MemlockWarning) once restored; the
// restores nest.
func TestWarnForced(t *testing.T) {
	warn := func() string {
		var b bytes.Buffer
		Warn(&b)
		return b.String()
	}
	restore := Force(low)
	if got := warn(); got != low {
		t.Errorf("forced: Warn wrote %q, want %q", got, low)
	}
	inner := Force("")
	if got := warn(); got != "" {
		t.Errorf("forced to none: Warn wrote %q", got)
	}
	inner()
	if got := warn(); got != low {
		t.Errorf("inner restored: Warn wrote %q, want %q", got, low)
	}
	restore()
	if got, want := warn(), sys.MemlockWarning(); got != want {
		t.Errorf("restored: Warn wrote %q, want the process's %q", got, want)
	}
}

// TestForcedTextIsLibibverbs: the text the tools' tests force is
// sys.MemlockWarningFor's for a non-root user with a 16 KiB limit.
func TestForcedTextIsLibibverbs(t *testing.T) {
	if got := sys.MemlockWarningFor(65534, 16384, nil); got != low {
		t.Errorf("MemlockWarningFor(65534, 16384) = %q, want %q", got, low)
	}
}
