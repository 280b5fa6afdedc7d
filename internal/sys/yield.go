package sys

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// Yield is the scheduling point of a goroutine that spins without
// blocking (busy-polling a CQ, posting with the raw doorbell): it makes
// one system call through the runtime's system-call path, then calls
// runtime.Gosched.
//
// runtime.Gosched alone does not let goroutines parked on the runtime
// poller run (an async event reader, an rdma_cm event channel, a
// completion channel, a socket): the yielding goroutine goes to the
// global run queue, and the scheduler takes it from there before it
// would poll the network. With every P busy (GOMAXPROCS=1 and one
// spinning goroutine) only sysmon polls the network, every 10 ms, and
// sysmon sleeps for up to a minute (forcegcperiod/2) once it has seen
// every P idle. What ends that sleep is a goroutine entering or leaving a
// system call through the runtime (entersyscall) or a timer; a P woken by
// the poller does not, and the library's data path makes its system calls
// raw (WriteHeldValue, rwQuick: no entersyscall, which is what keeps a
// doorbell cheap).
// So a loop that starts spinning after an idle wait could keep a poller
// goroutine from running for up to 60 s: a perftest port's watch of its
// rdma_cm peer (docs/testing.md, "Faults") saw the disconnect 59 s late
// in 6 of 12 runs. The system call here (getppid, which never blocks)
// wakes a sleeping sysmon, which then polls the network every 10 ms for
// as long as a P stays busy. It costs one system call per yield; yield
// every few milliseconds, not at every spin.
func Yield() {
	unix.Syscall(unix.SYS_GETPPID, 0, 0, 0) // through entersyscall, unlike rwQuick
	runtime.Gosched()
}
