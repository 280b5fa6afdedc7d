package sys

import (
	"context"
	"errors"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// ReadThread is Read's opt-in lowest-latency variant: instead of parking
// the goroutine on the runtime poller (a failed read, then a futex sleep
// that the netpoller's epoll wakes), it blocks the goroutine's OS thread in
// ppoll(2) on the fd and a private wake-up eventfd, then reads. A record
// already queued takes one read and no ppoll; one not yet queued takes
// that failed read, the ppoll and the read (no failed read when the hint,
// SetHint, says nothing can be queued). The thread is spent while it
// waits, so use it for a few latency-critical waiters, not thousands.
//
// A goroutine that only ever blocks in system calls never passes through
// the scheduler, and Go 1.26's sysmon preempts a goroutine that has not
// for 10 ms (forcePreemptNS); finding it in a system call, sysmon takes
// its P, and having taken one it drops back to polling every 20 us. A
// waiter of a ping-pong would meet that every 10 ms, and keep sysmon
// polling fast for good. So ReadThread yields (runtime.Gosched) when its
// last yield is threadYieldEvery old, before it waits.
//
// The context's end and Close write the eventfd, which wakes the ppoll;
// a context deadline also bounds the ppoll directly. A nil ctx fails with
// unix.EINVAL.
func (r *RecordReader) ReadThread(ctx context.Context, buf []byte) (int, error) {
	if err := r.acquire(ctx); err != nil {
		return 0, err
	}
	defer func() { <-r.sem }()
	// RawConn.Read fails at once on a past read deadline, which an ended
	// context of an earlier poller-mode Read may have left.
	r.forgetEnded()
	if err := r.wakeFD(); err != nil {
		return 0, err
	}
	if err := r.watchThread(ctx); err != nil {
		return 0, err
	}
	if now := time.Now(); now.Sub(r.lastYield) >= threadYieldEvery {
		r.lastYield = now
		runtime.Gosched()
	}
	r.buf = buf
	r.tctx = ctx
	r.hinted = r.hint != nil
	// Inside RawConn.Read the descriptor cannot be closed under the
	// ppoll: Close writes the eventfd, then waits for this to return.
	cerr := r.rawRead(ctx, r.threadFn)
	r.buf, r.tctx = nil, nil
	r.hinted = false
	if cerr != nil {
		if errors.Is(cerr, os.ErrDeadlineExceeded) {
			// An earlier poller-mode Read's context ended as this one
			// did (rawRead undoes that deadline while ctx lives).
			if err := ctx.Err(); err != nil {
				return 0, err
			}
		} else if r.ended() {
			return 0, unix.EIO // "not pollable": see Read
		}
		return 0, r.mapErr(cerr)
	}
	if r.err == errWoken {
		if r.isClosed() {
			return 0, ErrFileClosed
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		// The deadline passed in ppoll before the context's timer fired.
		return 0, context.DeadlineExceeded
	}
	return r.n, r.err
}

// errWoken marks a ReadThread that the eventfd ended.
var errWoken = unix.ECANCELED

// threadYieldEvery is how often ReadThread passes through the scheduler:
// inside sysmon's 10 ms, but rarely enough that the yield's cost (it
// wakes a spinning thread for the idle P, which finds nothing and sleeps
// again: two futex calls) stays small against the waits between.
const threadYieldEvery = 5 * time.Millisecond

// thread is ReadThread's RawConn callback: a read, and if nothing is
// queued, ppoll then read; it always returns true (the runtime poller is
// not used).
func (r *RecordReader) thread(fd uintptr) bool {
	// The non-blocking read first: a record already queued (the waiter
	// came late) needs no ppoll, and the read is not a blocking system
	// call for the runtime. When the hint (SetHint) says nothing can be
	// queued, read returns false without the call; ppoll, unlike the
	// runtime poller, reports a record queued before it too.
	if r.read(fd) {
		return true
	}
	fds := [2]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN | unix.POLLRDHUP}, {Fd: int32(r.wake), Events: unix.POLLIN}}
	var ts *unix.Timespec
	var tsv unix.Timespec
	for {
		if d, ok := r.tctx.Deadline(); ok {
			left := time.Until(d)
			if left <= 0 {
				r.n, r.err = 0, errWoken
				return true
			}
			tsv = unix.NsecToTimespec(int64(left))
			ts = &tsv
		}
		_, err := unix.Ppoll(fds[:], ts, nil)
		if err != nil && err != unix.EINTR {
			r.n, r.err = 0, err
			return true
		}
		if fds[1].Revents != 0 {
			var c [8]byte
			readRaw(r.wake, c[:]) // reset the counter
			if r.tctx.Err() != nil || r.isClosed() {
				r.n, r.err = 0, errWoken
				return true
			}
			fds[1].Revents = 0 // a Kick, or a stale wake-up from an earlier context
			if r.unkick(r.tctx) {
				// Kick: look again, whatever ppoll says of the fd.
				fds[0].Revents = unix.POLLIN
			}
		}
		if fds[0].Revents != 0 {
			if r.op != nil {
				r.n, r.err = r.op(int(fd), r.buf)
			} else {
				r.n, r.err = rwQuick(unix.SYS_READ, int(fd), r.buf)
			}
			if r.err != unix.EAGAIN {
				return true
			}
			if fds[0].Revents&(unix.POLLERR|unix.POLLHUP|unix.POLLRDHUP) != 0 {
				// The kernel ended the queue (see queueEnded): ppoll
				// would report it at once for ever.
				r.n, r.err = 0, unix.EIO
				return true
			}
			fds[0].Revents = 0 // another reader (a read(2) on Fd) took it
		}
		if r.tctx.Err() != nil {
			r.n, r.err = 0, errWoken
			return true
		}
	}
}

func (r *RecordReader) isClosed() bool {
	select {
	case <-r.closed:
		return true
	default:
		return false
	}
}

// wakeFD creates the wake-up eventfd on first use (under sem).
func (r *RecordReader) wakeFD() error {
	if r.wake >= 0 {
		return nil
	}
	for {
		fd, err := newWakeFD()
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		r.mu.Lock()
		r.wake = fd
		// Close marks the reader closed, then signals under mu: if its
		// signal came before this, it found no eventfd to write, and a
		// ppoll now would sleep through the Close (which then waits for
		// it). Close closes the eventfd once this returns.
		closed := r.isClosed()
		r.mu.Unlock()
		if closed {
			return ErrFileClosed
		}
		return nil
	}
}

// newWakeFD makes ReadThread's wake-up eventfd (a variable for tests).
var newWakeFD = func() (int, error) {
	return unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
}

// signal wakes a ReadThread in ppoll (any goroutine).
func (r *RecordReader) signal() {
	r.mu.Lock()
	if r.wake >= 0 {
		one := [8]byte{1}
		writeRaw(r.wake, one[:])
	}
	r.mu.Unlock()
}

// watchThread registers ctx's end to write the eventfd (under sem); like
// watch, once per distinct context.
func (r *RecordReader) watchThread(ctx context.Context) error {
	r.mu.Lock()
	same := ctx == r.tWatch
	r.mu.Unlock()
	if same {
		return ctx.Err()
	}
	if r.tStop != nil {
		r.tStop()
		r.tStop = nil
	}
	r.mu.Lock()
	r.tWatch = nil
	r.mu.Unlock()
	if ctx.Done() == nil {
		return nil
	}
	r.mu.Lock()
	r.tWatch = ctx
	r.mu.Unlock()
	r.tStop = context.AfterFunc(ctx, r.signal)
	return ctx.Err()
}
