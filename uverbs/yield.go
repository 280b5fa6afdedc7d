package uverbs

import "github.com/pureverbs/pureverbs/internal/sys"

// Yield is the scheduling point for a goroutine that busy-polls (Poll in
// a loop, PostSend and PostRecv, none of which blocks or enters the Go
// runtime's system-call path): call it every few milliseconds instead of
// runtime.Gosched.
//
// runtime.Gosched alone lets runnable goroutines run but not those parked
// on the runtime poller, which is where the library's waits park (an
// async event Get, a completion channel's Wait, an rdma_cm event), as do
// sockets. With every P busy only the runtime's monitor thread polls for
// them, every 10 ms, and after an idle spell it sleeps for up to a minute
// unless a goroutine makes a system call through the runtime. Yield makes
// one (getppid) before it calls runtime.Gosched, so those goroutines run
// within about 10 ms of their input. It allocates nothing.
func Yield() { sys.Yield() }
