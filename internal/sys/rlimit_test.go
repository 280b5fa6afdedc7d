package sys

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestMemlockWarningFor: libibverbs' check_memlock_limit (init.c), case
// by case: root is never warned, a soft limit of 32768 bytes or less is
// (with the limit as %llu), RLIM_INFINITY and anything higher is not, and
// a failed getrlimit has its own line, without a newline as C prints it.
func TestMemlockWarningFor(t *testing.T) {
	const low = "libibverbs: Warning: RLIMIT_MEMLOCK is 16384 bytes.\n    This will severely limit memory registrations.\n"
	for _, c := range []struct {
		euid int
		cur  uint64
		err  error
		want string
	}{
		{1000, 16384, nil, low},
		{65534, 16384, nil, low},
		{1000, 0, nil, "libibverbs: Warning: RLIMIT_MEMLOCK is 0 bytes.\n    This will severely limit memory registrations.\n"},
		{1000, 32768, nil, "libibverbs: Warning: RLIMIT_MEMLOCK is 32768 bytes.\n    This will severely limit memory registrations.\n"},
		{1000, 32769, nil, ""},
		{1000, 64 << 10, nil, ""},
		{1000, 8 << 20, nil, ""},
		{1000, unix.RLIM_INFINITY, nil, ""},
		{0, 16384, nil, ""},
		{0, 0, nil, ""},
		{1000, 0, unix.EPERM, "libibverbs: Warning: getrlimit(RLIMIT_MEMLOCK) failed."},
		{0, 0, unix.EPERM, ""},
	} {
		if got := MemlockWarningFor(c.euid, c.cur, c.err); got != c.want {
			t.Errorf("MemlockWarningFor(%d, %d, %v) = %q, want %q", c.euid, c.cur, c.err, got, c.want)
		}
	}
}

// TestMemlockWarning reads this process's euid and limit: with the soft
// limit lowered to 16 KiB (the hard one kept, so it can be put back), a
// non-root process gets the warning and root none; with the limit it had,
// the text MemlockWarningFor gives for it.
func TestMemlockWarning(t *testing.T) {
	var r unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &r); err != nil {
		t.Fatal(err)
	}
	euid := unix.Geteuid()
	if got, want := MemlockWarning(), MemlockWarningFor(euid, r.Cur, nil); got != want {
		t.Errorf("euid %d, RLIMIT_MEMLOCK %d: MemlockWarning() = %q, want %q", euid, r.Cur, got, want)
	}
	if r.Max < 16384 {
		t.Skipf("hard RLIMIT_MEMLOCK %d: cannot set the soft one to 16384", r.Max)
	}
	low := unix.Rlimit{Cur: 16384, Max: r.Max}
	if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &low); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &r); err != nil {
			t.Errorf("putting RLIMIT_MEMLOCK back: %v", err)
		}
	}()
	want := "libibverbs: Warning: RLIMIT_MEMLOCK is 16384 bytes.\n    This will severely limit memory registrations.\n"
	if euid == 0 {
		want = ""
	}
	if got := MemlockWarning(); got != want {
		t.Errorf("euid %d, RLIMIT_MEMLOCK 16384: MemlockWarning() = %q, want %q", euid, got, want)
	}
}

// memlockChildEnv makes the test binary (TestMain) print MemlockWarning
// between markers and exit: the child TestMemlockWarningAsNobody runs.
const memlockChildEnv = "PUREVERBS_MEMLOCK_CHILD"

// TestMemlockWarningAsNobody runs this test binary (copied where nobody
// may run it) as uid 65534 with RLIMIT_MEMLOCK 16 and 32 KiB (warned,
// 32768 being libibverbs' bound) and 33 KiB (not), set by the shell's
// ulimit -l: the real geteuid and getrlimit path of a non-root process.
// It needs root to switch users, so it is skipped otherwise.
func TestMemlockWarningAsNobody(t *testing.T) {
	if unix.Geteuid() != 0 {
		t.Skip("needs root to run a child as nobody")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// Not t.TempDir: its parent is 0700.
	dir, err := os.MkdirTemp("", "memlock")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "sys.test")
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		kib  int
		want string
	}{
		{16, "libibverbs: Warning: RLIMIT_MEMLOCK is 16384 bytes.\n    This will severely limit memory registrations.\n"},
		{32, "libibverbs: Warning: RLIMIT_MEMLOCK is 32768 bytes.\n    This will severely limit memory registrations.\n"},
		{33, ""},
	} {
		cmd := exec.Command("/bin/sh", "-c", `ulimit -l "$0" && exec "$@"`, strconv.Itoa(c.kib),
			bin)
		cmd.Dir = "/"
		cmd.Env = append(os.Environ(), memlockChildEnv+"=1")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == 126 {
			// The shell could not exec the copy (a noexec /tmp).
			t.Skipf("nobody cannot run %s: %s", bin, out)
		}
		if err != nil {
			t.Fatalf("child with ulimit -l %d: %v\n%s", c.kib, err, out)
		}
		_, rest, ok := strings.Cut(string(out), "<<")
		got, _, ok2 := strings.Cut(rest, ">>")
		if !ok || !ok2 {
			t.Fatalf("child with ulimit -l %d printed no warning markers:\n%s", c.kib, out)
		}
		if got != c.want {
			t.Errorf("uid 65534, ulimit -l %d: MemlockWarning() = %q, want %q", c.kib, got, c.want)
		}
	}
}
