package sys

// rawSyscall3 is a system call of up to three arguments without the
// runtime's entersyscall/exitsyscall, for calls that return after bounded
// kernel work (rwQuick, WriteHeldValue). Pointer arguments converted to
// uintptr in the call expression stay alive and unmoved until it returns
// (unsafe.Pointer rule 4: the function is implemented in assembly).
//
//go:noescape
func rawSyscall3(trap, a1, a2, a3 uintptr) (r1, errno uintptr)
