package sys

import "golang.org/x/sys/unix"

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
