package sys

import "unsafe"

// rawSyscall3 is a system call of up to three arguments without the
// runtime's entersyscall/exitsyscall, for calls that return after bounded
// kernel work (rwQuick, WriteHeldValue). Pointer arguments converted to
// uintptr in the call expression stay alive and unmoved until it returns
// (unsafe.Pointer rule 4: the function is implemented in assembly).
//
//go:noescape
func rawSyscall3(trap, a1, a2, a3 uintptr) (r1, errno uintptr)

// rawSyscallPtr is rawSyscall3 with its second argument a pointer,
// converted in the call of the assembly function (rule 4), as on other
// targets, where that matters (rawsyscall_other.go); here it inlines.
func rawSyscallPtr(trap, a1 uintptr, p unsafe.Pointer, a3 uintptr) (r1, errno uintptr) {
	return rawSyscall3(trap, a1, uintptr(p), a3)
}
