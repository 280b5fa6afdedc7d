package sys

import (
	"context"
	"errors"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// ErrFileClosed is returned by EventFile reads after Close.
var ErrFileClosed = errors.New("sys: event file closed")

// EventFile is a kernel event fd (the uverbs async event fd, a completion
// channel, a DEVX event channel) that yields one record per read(2).
//
// The descriptor is switched to O_NONBLOCK and registered with the Go
// runtime poller. Any number of goroutines may call Read concurrently:
// each record goes to exactly one of them, and a waiting goroutine is
// parked on a channel (never on an OS thread) until the poller reports the
// fd readable, its context ends, or the file is closed.
type EventFile struct {
	file *os.File
	rc   interface {
		Read(func(uintptr) bool) error
	}
	raw int

	inUse   sync.RWMutex // held shared by raw reads, exclusively by Close
	closing atomic.Bool
	closed  chan struct{}
	closeMu sync.Mutex

	// testAfterEAGAIN, when set by a test, runs between a waiter's EAGAIN
	// and its wait: the window in which a wakeup could be lost.
	testAfterEAGAIN func()
	// testRead, when set by a test, replaces TryRead's read(2).
	testRead func(fd int, b []byte) (int, error)

	mu       sync.Mutex
	ready    chan struct{} // closed (and replaced) when the fd may be readable
	waiters  int
	watching bool
	watchErr error
}

// NewEventFile takes ownership of fd (which must be O_CLOEXEC).
func NewEventFile(fd *FD) (*EventFile, error) {
	raw := fd.Int()
	if raw < 0 {
		return nil, ErrClosedFD
	}
	if err := unix.SetNonblock(raw, true); err != nil {
		return nil, err
	}
	fd.Disown()
	f := os.NewFile(uintptr(raw), fd.Name())
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	ef := &EventFile{file: f, rc: rc, raw: raw, closed: make(chan struct{}), ready: make(chan struct{})}
	traceOpenEF(ef, fd.Name())
	return ef, nil
}

// Fd returns the descriptor for use in the caller's own poll/epoll loop.
// It is non-blocking. It stays valid until Close; -1 after (the number
// may name another file by then).
func (e *EventFile) Fd() int {
	if e.closing.Load() {
		return -1
	}
	return e.raw
}

// TryRead reads one record into buf without blocking. It returns
// unix.EAGAIN when nothing is queued and ErrFileClosed after Close.
// It allocates nothing.
func (e *EventFile) TryRead(buf []byte) (int, error) {
	if !e.acquire() {
		return 0, ErrFileClosed
	}
	var n int
	var err error
	if e.testRead != nil {
		n, err = e.testRead(e.raw, buf)
	} else {
		n, err = readRaw(e.raw, buf)
	}
	e.inUse.RUnlock()
	return n, err
}

// ended is queueEnded on the file, while it stays open.
func (e *EventFile) ended() bool {
	if !e.acquire() {
		return false // the next TryRead reports ErrFileClosed
	}
	defer e.inUse.RUnlock()
	return queueEnded(e.raw)
}

func (e *EventFile) acquire() bool {
	e.inUse.RLock()
	if e.closing.Load() {
		e.inUse.RUnlock()
		return false
	}
	return true
}

// Read blocks until one record is read into buf, ctx ends (ctx.Err()),
// the file is closed (ErrFileClosed), or the kernel ended the queue
// (unix.EIO, as a blocking read(2) reports it; see queueEnded).
func (e *EventFile) Read(ctx context.Context, buf []byte) (int, error) {
	for woken := false; ; woken = true {
		// Take the current readiness generation before trying, so that a
		// record arriving after our EAGAIN wakes us.
		e.mu.Lock()
		ready := e.ready
		e.waiters++
		e.mu.Unlock()

		n, err := e.TryRead(buf)
		if err != unix.EAGAIN {
			e.leave()
			return n, err
		}
		if woken && e.ended() {
			e.leave()
			return 0, unix.EIO
		}
		if e.testAfterEAGAIN != nil {
			e.testAfterEAGAIN()
		}
		e.watch()
		select {
		case <-ready:
			e.leave()
			if err := e.pollErr(); err != nil {
				if e.ended() {
					// The runtime poller reports a bare EPOLLERR (a
					// uverbs queue the kernel closed) as "not pollable".
					return 0, unix.EIO
				}
				return 0, err
			}
		case <-ctx.Done():
			e.leave()
			return 0, ctx.Err()
		case <-e.closed:
			e.leave()
			return 0, ErrFileClosed
		}
	}
}

// pollErr returns the watcher's error when the runtime poller cannot wait
// on this fd (and the file is not simply closing).
func (e *EventFile) pollErr() error {
	if e.closing.Load() {
		return nil // the next TryRead reports ErrFileClosed
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.watchErr
}

func (e *EventFile) leave() {
	e.mu.Lock()
	e.waiters--
	e.mu.Unlock()
}

// watch starts the single poller-parked watcher goroutine if none runs.
func (e *EventFile) watch() {
	e.mu.Lock()
	if e.watching || e.closing.Load() {
		e.mu.Unlock()
		return
	}
	e.watching = true
	e.mu.Unlock()
	go e.watchLoop()
}

// watchLoop waits on the runtime poller for readability and wakes every
// waiter; it exits when, at a wake-up, no goroutine waits any more, or when
// the file closes (or cannot be polled: waiters then get that error).
//
// The callback checks the level with poll(2) before parking: RawConn.Read
// clears the poller's latched readiness when it starts, so a record that
// arrived between a waiter's EAGAIN and this watcher starting to wait would
// otherwise go unnoticed (the runtime poller is edge-triggered).
func (e *EventFile) watchLoop() {
	for {
		immediate := true
		calls := 0
		err := e.rc.Read(func(fd uintptr) bool {
			calls++
			if calls > 1 {
				immediate = false
			}
			return pollReadable(int(fd))
		})
		e.mu.Lock()
		close(e.ready)
		e.ready = make(chan struct{})
		if err != nil {
			e.watchErr = err
		}
		if err != nil || e.waiters == 0 {
			e.watching = false
			e.mu.Unlock()
			return
		}
		e.mu.Unlock()
		if immediate {
			// Records are still queued for the waiters just woken: let
			// them run before looking again.
			runtime.Gosched()
		}
	}
}

// pollReadable reports whether fd has input now (or an error condition, so
// that the reader finds out), without blocking.
func pollReadable(fd int) bool {
	pfd := [1]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(pfd[:], 0)
		if err == unix.EINTR {
			continue
		}
		return err != nil || n > 0
	}
}

// queueEnded reports whether fd, whose read just failed with EAGAIN,
// polls as a queue that will never have input again: the uverbs event
// files (async events, completion channels) report EPOLLERR once their
// queue is closed and empty (ib_uverbs_event_poll; the kernel closes it
// when the device is disassociated or the context destroyed), a DEVX
// event channel EPOLLIN|EPOLLRDHUP once destroyed (devx_async_event_poll).
// Their non-blocking read keeps failing with EAGAIN there, where a
// blocking read would fail with EIO; a waiter that went by readiness
// alone would wake and read for ever. Waiters ask this only after a
// wake-up found nothing, which on a live queue is rare.
func queueEnded(fd int) bool {
	pfd := [1]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN | unix.POLLRDHUP}}
	for {
		n, err := unix.Poll(pfd[:], 0)
		if err == unix.EINTR {
			continue
		}
		return err == nil && n > 0 && pfd[0].Revents&(unix.POLLERR|unix.POLLHUP|unix.POLLRDHUP) != 0
	}
}

// Close wakes every waiter with ErrFileClosed and closes the descriptor
// once no raw read is in flight. It is idempotent.
func (e *EventFile) Close() error {
	e.closeMu.Lock()
	defer e.closeMu.Unlock()
	if e.closing.Swap(true) {
		return nil
	}
	close(e.closed)
	// A barrier, not a critical section: taking the write lock waits for
	// every raw read in flight (each holds inUse shared); reads that start
	// later see closing and never touch the fd, so it can be closed once
	// the lock was had.
	e.inUse.Lock()
	//lint:ignore SA2001 the empty critical section is the barrier described above
	e.inUse.Unlock()
	traceCloseEF(e)
	return e.file.Close()
}

func readRaw(fd int, b []byte) (int, error) { return rwRaw(unix.SYS_READ, fd, b) }

var efTraced sync.Map // *EventFile -> stack

func traceOpenEF(e *EventFile, name string) {
	if !tracing.Load() {
		return
	}
	fd := &FD{raw: int32(e.raw), name: name + " (event file)"}
	traceOpen(fd)
	efTraced.Store(e, fd)
}

func traceCloseEF(e *EventFile) {
	if v, ok := efTraced.LoadAndDelete(e); ok {
		traceClose(v.(*FD))
	}
}

// NewRecordPipe returns a connected SOCK_SEQPACKET pair wrapped as an
// EventFile (the read end) and an FD (the write end). Each write is read
// back as one record, as the kernel's event fds behave; tests feed real
// records through it.
func NewRecordPipe(name string) (*EventFile, *FD, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	r, _ := NewFD(fds[0], name+" (read end)")
	w, _ := NewFD(fds[1], name+" (write end)")
	ef, err := NewEventFile(r)
	if err != nil {
		r.Close()
		w.Close()
		return nil, nil, err
	}
	return ef, w, nil
}

// WaitReadable waits up to timeout, in poll(2) on the calling thread, for
// fd to have input (or an error condition); tests use it to see that a
// record is queued without reading it.
func WaitReadable(fd int, timeout time.Duration) (bool, error) {
	pfd := [1]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(pfd[:], int(timeout.Milliseconds()))
		if err == unix.EINTR {
			continue
		}
		return n > 0, err
	}
}
