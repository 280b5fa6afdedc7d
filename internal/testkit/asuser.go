package testkit

import (
	"bytes"
	"context"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
)

// Nobody is the guest's unprivileged user (uid and gid 65534): no
// capabilities, so neither CAP_DAC_OVERRIDE nor CAP_IPC_LOCK, and
// libibverbs checks its RLIMIT_MEMLOCK.
const Nobody = 65534

// RunAsUser runs name (looked up in PATH) with args to completion in the
// guest as uid (gid the same, no supplementary groups), in /, with its
// RLIMIT_MEMLOCK (soft and hard) set to memlockKiB KiB by the shell's
// ulimit -l before the exec, and returns its stdout, its stderr (separate
// pipes) and its exit status (ExitStatus). The test is skipped on the
// host, and fails if the program cannot be run or ctx ends first.
func RunAsUser(ctx context.Context, tb testing.TB, uid uint32, memlockKiB int, name string, args ...string) (stdout, stderr string, status int) {
	tb.Helper()
	RequireVM(tb)
	// sh -c SCRIPT ARG0 ARGS...: $0 is the limit, "$@" the command. A
	// limit the shell cannot set ends it with a line of its own, so that
	// two programs that did not run do not compare equal.
	const noLimit = "testkit.RunAsUser: ulimit -l failed"
	script := `ulimit -l "$0" || { echo "` + noLimit + `" >&2; exit 125; }; exec "$@"`
	cmd := exec.CommandContext(ctx, "/bin/sh", append([]string{"-c", script, strconv.Itoa(memlockKiB), name}, args...)...)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		tb.Fatalf("%s %q as uid %d, RLIMIT_MEMLOCK %d KiB: %v (%v)\nstdout:\n%s\nstderr:\n%s", name, args, uid, memlockKiB, ctx.Err(), err, &out, &errb)
	}
	status = ExitStatus(err)
	if status == 125 && bytes.Contains(errb.Bytes(), []byte(noLimit)) {
		tb.Fatalf("%s %q as uid %d: the shell could not set RLIMIT_MEMLOCK to %d KiB:\n%s", name, args, uid, memlockKiB, &errb)
	}
	if status < 0 {
		tb.Fatalf("%s %q as uid %d: %v", name, args, uid, err)
	}
	return out.String(), errb.String(), status
}
