package sys

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Errno values of failed opens and fd allocations, which uverbs explains.
const (
	EACCES = unix.EACCES
	EMFILE = unix.EMFILE
	ENFILE = unix.ENFILE
)

// MemlockLimit returns the process's soft RLIMIT_MEMLOCK in bytes: how
// much memory it may pin (register) without CAP_IPC_LOCK. ok is false
// when there is no limit or it cannot be read.
func MemlockLimit() (limit uint64, ok bool) { return softLimit(unix.RLIMIT_MEMLOCK) }

// NofileLimit returns the process's soft RLIMIT_NOFILE: one more than the
// highest file descriptor it may open. ok is false when there is no
// limit or it cannot be read.
func NofileLimit() (limit uint64, ok bool) { return softLimit(unix.RLIMIT_NOFILE) }

func softLimit(resource int) (uint64, bool) {
	var r unix.Rlimit
	if err := unix.Getrlimit(resource, &r); err != nil || r.Cur == unix.RLIM_INFINITY {
		return 0, false
	}
	return r.Cur, true
}

// memlockWarnLimit is libibverbs' threshold: at or below it a non-root
// process is warned that its RLIMIT_MEMLOCK is too low.
const memlockWarnLimit = 32768

// MemlockWarning is what libibverbs' check_memlock_limit (rdma-core v44,
// libibverbs/init.c) prints on stderr for this process, the first time
// ibv_get_device_list runs (ibverbs_init): "" for root (effective uid 0)
// or a soft RLIMIT_MEMLOCK above 32768 bytes (RLIM_INFINITY included),
// its two-line warning with the limit otherwise, and its line without a
// newline when getrlimit fails. The tools print it where their C tools'
// first libibverbs call is.
func MemlockWarning() string {
	var r unix.Rlimit
	err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &r)
	return MemlockWarningFor(unix.Geteuid(), r.Cur, err)
}

// MemlockWarningFor is MemlockWarning's text for a process of effective
// uid euid whose getrlimit(RLIMIT_MEMLOCK) gave soft limit cur, or failed
// with err.
func MemlockWarningFor(euid int, cur uint64, err error) string {
	switch {
	case euid == 0:
		return ""
	case err != nil:
		return "libibverbs: Warning: getrlimit(RLIMIT_MEMLOCK) failed."
	case cur <= memlockWarnLimit:
		return fmt.Sprintf("libibverbs: Warning: RLIMIT_MEMLOCK is %d bytes.\n"+
			"    This will severely limit memory registrations.\n", cur)
	}
	return ""
}
