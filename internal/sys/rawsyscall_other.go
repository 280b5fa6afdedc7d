//go:build !amd64

package sys

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// rawSyscallPtr is rawSyscall3 with its second argument a pointer: the
// conversion to uintptr happens in the call of unix.RawSyscall, an
// assembly function, so the object p points to (on the stack, say) stays
// alive and unmoved until the call returns (unsafe.Pointer rule 4). A Go
// wrapper taking the uintptr would not give that: with inlining off its
// stack check may move the caller's stack under the converted address.
func rawSyscallPtr(trap, a1 uintptr, p unsafe.Pointer, a3 uintptr) (r1, errno uintptr) {
	r1, _, e := unix.RawSyscall(trap, a1, uintptr(p), a3)
	return r1, uintptr(e)
}
