//go:build !amd64

package sys

import "golang.org/x/sys/unix"

func rawSyscall3(trap, a1, a2, a3 uintptr) (r1, errno uintptr) {
	r1, _, e := unix.RawSyscall(trap, a1, a2, a3)
	return r1, uintptr(e)
}
