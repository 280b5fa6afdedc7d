package sys

import (
	"strings"

	"golang.org/x/sys/unix"
)

// Errno is the kernel error number type (the same type as syscall.Errno),
// re-exported so that packages above sys can compare errors without
// importing golang.org/x/sys/unix themselves.
type Errno = unix.Errno

// The errno values the library reasons about.
const (
	EAGAIN          = unix.EAGAIN
	EBUSY           = unix.EBUSY
	ECONNREFUSED    = unix.ECONNREFUSED
	EEXIST          = unix.EEXIST
	EINVAL          = unix.EINVAL
	EIO             = unix.EIO
	EISDIR          = unix.EISDIR
	ENODATA         = unix.ENODATA
	ENODEV          = unix.ENODEV
	ENOMEM          = unix.ENOMEM
	ENOENT          = unix.ENOENT
	ENOSPC          = unix.ENOSPC
	ENOSYS          = unix.ENOSYS
	ENOTTY          = unix.ENOTTY
	EOPNOTSUPP      = unix.EOPNOTSUPP
	EOVERFLOW       = unix.EOVERFLOW
	EPERM           = unix.EPERM
	EPROTONOSUPPORT = unix.EPROTONOSUPPORT
	ETIMEDOUT       = unix.ETIMEDOUT
)

// Open flags.
const (
	O_RDONLY = unix.O_RDONLY
	O_RDWR   = unix.O_RDWR
)

// Strerror is glibc's strerror(3) text for n, as the C tools print it
// through perror: Go's text, capitalised as glibc's is, and "Unknown
// error N" for a number neither knows (the kernel's internal ENOTSUPP,
// 524).
func Strerror(n Errno) string {
	s := n.Error()
	if strings.HasPrefix(s, "errno ") {
		return "Unknown error " + s[len("errno "):]
	}
	if s != "" && s[0] >= 'a' && s[0] <= 'z' {
		s = strings.ToUpper(s[:1]) + s[1:]
	}
	return s
}
