package sys

import (
	"context"
	"errors"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// RecordReader reads one-record-per-read(2) event fds on the hot path: a
// completion channel, where every ping-pong iteration waits for one
// record. It is lighter than EventFile: the waiting goroutine itself parks
// on the runtime poller through RawConn.Read (no watcher goroutine, no
// channel per wake-up, no poll(2)), and reads one at a time.
//
// RawConn.Read calls the read first and waits for readiness only after it
// saw EAGAIN, so a record that arrived before the wait is never slept
// through, although the runtime poller is edge-triggered (unless a hint,
// SetHint, proves that none can be queued: then it parks at once); and it keeps
// reading until one read succeeds, so a wake-up without a record (another
// reader took it) just waits again.
//
// A Read's context ends the wait: the reader registers context.AfterFunc
// once per distinct context (and keeps it while the same context is used
// again, which makes a loop over one context allocation-free), which moves
// the file's read deadline into the past to wake the parked read.
type RecordReader struct {
	file *os.File
	rc   interface {
		Read(func(uintptr) bool) error
		Control(func(uintptr)) error
	}
	raw int
	op  func(fd int, buf []byte) (int, error) // SetOp's; nil: read(2)

	sem chan struct{} // one reader at a time; cap 1

	// Guarded by sem.
	buf    []byte
	n      int
	err    error
	readFn func(uintptr) bool // r.read as a method value, made once
	hint   func() bool        // SetHint's; nil: always read first
	hinted bool               // this Read has yet to ask hint
	woke   bool               // read ran before in this RawConn.Read: a wait came between
	tryFn  func(uintptr) bool // r.try, likewise
	stop   func() bool

	// ReadThread's state (record_thread.go).
	threadFn func(uintptr) bool
	tctx     context.Context
	tStop    func() bool
	wake     int // eventfd, -1 until first used (0 is a valid fd); guarded by mu for signal

	mu      sync.Mutex      // guards ctx, expired, kicked, tWatch and wake against the AfterFuncs
	ctx     context.Context // the context whose AfterFunc is registered
	expired bool            // the AfterFunc moved the deadline into the past
	kicked  bool            // Kick moved the deadline into the past
	tWatch  context.Context // ReadThread's watched context

	lastYield time.Time // ReadThread's last runtime.Gosched; guarded by sem

	closeOnce sync.Once
	closed    chan struct{}
}

// NewRecordReader takes ownership of fd (O_CLOEXEC), makes it non-blocking
// and registers it with the runtime poller.
func NewRecordReader(fd *FD) (*RecordReader, error) {
	raw := fd.Int()
	if raw < 0 {
		return nil, ErrClosedFD
	}
	if err := unix.SetNonblock(raw, true); err != nil {
		return nil, err
	}
	name := fd.Name()
	fd.Disown()
	f := os.NewFile(uintptr(raw), name)
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	r := &RecordReader{file: f, rc: rc, raw: raw, sem: make(chan struct{}, 1), closed: make(chan struct{}), wake: -1}
	r.readFn = r.read
	r.tryFn = r.try
	r.threadFn = r.thread
	traceOpenRR(r, name)
	return r, nil
}

// Fd returns the descriptor (non-blocking) for the caller's own epoll.
func (r *RecordReader) Fd() int { return r.raw }

// SetHint gives Read a test it makes before its first read: when
// mayHave returns false, Read parks on the poller at once instead of
// making a read that would fail with EAGAIN. mayHave must return false
// only when no record can be queued: it runs after the poller forgot any
// readiness it saw before (the poller is edge-triggered), so a record
// queued before it and not read would be slept through; a record queued
// after it wakes the reader. Set it before the first Read.
func (r *RecordReader) SetHint(mayHave func() bool) { r.hint = mayHave }

// read is the RawConn callback: one non-blocking read; false asks the
// poller to wait for readiness. RawConn.Read calls it after resetting the
// poller's readiness, so the hint (first call only) is asked after that.
func (r *RecordReader) read(fd uintptr) bool {
	woke := r.woke
	r.woke = true
	if r.hinted {
		r.hinted = false
		if !r.hint() {
			return false
		}
	}
	if r.op != nil {
		r.n, r.err = r.op(int(fd), r.buf)
	} else {
		r.n, r.err = rwQuick(unix.SYS_READ, int(fd), r.buf) // non-blocking fd
	}
	if r.err != unix.EAGAIN {
		return true
	}
	if woke && queueEnded(int(fd)) {
		// Woken, and nothing to read: the kernel ended the queue.
		r.n, r.err = 0, unix.EIO
		return true
	}
	return false
}

// SetOp replaces the read(2) of Read and TryRead with op, which gets the
// descriptor and the caller's buffer and must not block: it returns
// EAGAIN when nothing is queued. The rdma_cm fd hands out its events
// through a write(2) of GET_EVENT. Set it before the first Read.
func (r *RecordReader) SetOp(op func(fd int, buf []byte) (int, error)) { r.op = op }

// Control runs fn with the descriptor, which stays open while fn runs
// (a concurrent Close waits); ErrFileClosed after Close.
func (r *RecordReader) Control(fn func(fd int)) error {
	err := r.rc.Control(func(fd uintptr) { fn(int(fd)) })
	if err != nil {
		return r.mapErr(err)
	}
	return nil
}

// ControlRaw is Control with the RawConn's own callback type: a method
// value made once passes through without a wrapper (which allocates).
func (r *RecordReader) ControlRaw(fn func(fd uintptr)) error {
	if err := r.rc.Control(fn); err != nil {
		return r.mapErr(err)
	}
	return nil
}

// try is the RawConn callback of TryRead: one read, never a wait.
func (r *RecordReader) try(fd uintptr) bool {
	if r.op != nil {
		r.n, r.err = r.op(int(fd), r.buf)
		return true
	}
	r.n, r.err = rwQuick(unix.SYS_READ, int(fd), r.buf) // non-blocking fd
	return true
}

// TryRead reads one record without waiting: unix.EAGAIN when none is
// queued, ErrFileClosed after Close, unix.EIO once the runtime poller has
// seen the kernel end the queue (see Read). It never waits for a concurrent Read
// (or ReadThread): while one holds the reader, TryRead returns
// unix.EAGAIN at once, and that reader takes the next record. It
// allocates nothing.
func (r *RecordReader) TryRead(buf []byte) (int, error) {
	select {
	case r.sem <- struct{}{}:
		if r.isClosed() { // select picks at random when Close has run too
			<-r.sem
			return 0, ErrFileClosed
		}
	case <-r.closed:
		return 0, ErrFileClosed
	default:
		return 0, unix.EAGAIN
	}
	defer func() { <-r.sem }()
	r.forgetEnded()
	r.buf = buf
	cerr := r.rawRead(context.Background(), r.tryFn)
	r.buf = nil
	if cerr != nil {
		if !errors.Is(cerr, os.ErrDeadlineExceeded) && r.ended() {
			return 0, unix.EIO // "not pollable": see Read
		}
		return 0, r.mapErr(cerr)
	}
	return r.n, r.err
}

// Read waits, parked on the runtime poller, until one record is read into
// buf, ctx ends (ctx.Err()), the reader is closed (ErrFileClosed), or the
// kernel ended the queue (unix.EIO, as a blocking read(2) reports it; see
// queueEnded). A nil ctx fails with unix.EINVAL.
func (r *RecordReader) Read(ctx context.Context, buf []byte) (int, error) {
	if err := r.acquire(ctx); err != nil {
		return 0, err
	}
	defer func() { <-r.sem }()
	if err := r.watch(ctx); err != nil {
		return 0, err
	}
	r.buf = buf
	r.hinted = r.hint != nil
	err := r.rawRead(ctx, r.readFn)
	r.buf = nil
	r.hinted = false
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			if cerr := ctx.Err(); cerr != nil {
				return 0, cerr
			}
		} else if r.ended() {
			// The runtime poller reports a bare EPOLLERR (a uverbs
			// queue the kernel closed) as "not pollable".
			return 0, unix.EIO
		}
		return 0, r.mapErr(err)
	}
	return r.n, r.err
}

// ended is queueEnded on the descriptor, while it stays open.
func (r *RecordReader) ended() bool {
	ended := false
	r.rc.Control(func(fd uintptr) { ended = queueEnded(int(fd)) })
	return ended
}

// acquire takes the one-reader semaphore, unless ctx ends or the reader
// closes first; a nil ctx is unix.EINVAL.
func (r *RecordReader) acquire(ctx context.Context) error {
	if ctx == nil {
		return unix.EINVAL
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case r.sem <- struct{}{}:
		// select picks at random when Close has run too: a read after
		// Close must not go on (ReadThread would make a new wake-up
		// eventfd that nothing closes).
		if r.isClosed() {
			<-r.sem
			return ErrFileClosed
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-r.closed:
		return ErrFileClosed
	}
}

// watch makes sure ctx's end wakes a parked read (under sem).
func (r *RecordReader) watch(ctx context.Context) error {
	r.mu.Lock()
	if ctx == r.ctx {
		r.mu.Unlock()
		return ctx.Err()
	}
	r.ctx = nil // an AfterFunc of the old context that runs now does nothing
	expired := r.expired
	r.expired = false
	if expired {
		r.file.SetReadDeadline(time.Time{})
	}
	r.mu.Unlock()
	if r.stop != nil {
		r.stop()
		r.stop = nil
	}
	if ctx.Done() == nil {
		return nil // never ends: nothing to register
	}
	r.mu.Lock()
	r.ctx = ctx
	r.mu.Unlock()
	r.stop = context.AfterFunc(ctx, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.ctx != ctx {
			return
		}
		r.expired = true
		r.file.SetReadDeadline(time.Unix(1, 0))
	})
	return ctx.Err()
}

// Kick makes a Read parked on the poller (or a ReadThread in ppoll) read
// again, as if the descriptor had become readable, and parks it again if
// nothing is there. It is for records that a kernel queues without waking
// the file's waiters: rdma_cm's MIGRATE_ID moves an ID's queued events to
// the new file and wakes no one (ucma_migrate_id), so a reader parked on
// the new file before the move would sleep through them. A Kick with no
// Read waiting costs the next Read (or TryRead) one more try; it neither
// loses nor repeats a record. Any goroutine may call it.
func (r *RecordReader) Kick() {
	r.mu.Lock()
	r.kicked = true
	r.file.SetReadDeadline(time.Unix(1, 0))
	r.mu.Unlock()
	r.signal()
}

// rawRead is r.rc.Read(fn), again after a Kick woke it (under sem). ctx
// is the Read's (TryRead's: Background): a deadline its end set is
// returned.
func (r *RecordReader) rawRead(ctx context.Context, fn func(uintptr) bool) error {
	for {
		r.woke = false
		if testBeforeRawRead != nil {
			testBeforeRawRead()
		}
		err := r.rc.Read(fn)
		if err == nil || !errors.Is(err, os.ErrDeadlineExceeded) || ctx.Err() != nil || !r.unkick(ctx) {
			return err
		}
	}
}

// testBeforeRawRead, when a test sets it, runs in rawRead before each
// RawConn.Read.
var testBeforeRawRead func()

// unkick undoes a deadline that is not ctx's to report, reporting
// whether there was one: a Kick's, or the one an earlier Read's context
// set when it ended after forgetEnded looked (a TryRead or ReadThread
// would otherwise fail with a timeout of a context that is not theirs).
func (r *RecordReader) unkick(ctx context.Context) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	undone := r.kicked
	r.kicked = false
	if r.expired && r.ctx != ctx {
		// r.ctx is that earlier Read's, and it has ended: forget it as
		// forgetEnded would have.
		r.ctx = nil
		r.expired = false
		undone = true
	}
	if undone && !r.expired {
		r.file.SetReadDeadline(time.Time{})
	}
	return undone
}

// forgetEnded drops the context of an earlier Read that has ended since
// (under sem): its AfterFunc moved, or is about to move, the read deadline
// into the past, which would fail a TryRead with a timeout although it
// never waits.
func (r *RecordReader) forgetEnded() {
	r.mu.Lock()
	if r.ctx != nil && r.ctx.Err() != nil {
		r.ctx = nil // the AfterFunc, if it has yet to run, does nothing
		if r.expired {
			r.expired = false
			r.file.SetReadDeadline(time.Time{})
		}
	}
	r.mu.Unlock()
}

// testCloseSignalled, when a test sets it, runs in Close between the
// wake-up of a ReadThread and the file's close.
var testCloseSignalled func()

func (r *RecordReader) mapErr(err error) error {
	select {
	case <-r.closed:
		return ErrFileClosed // RawConn reports internal/poll's ErrFileClosing
	default:
	}
	if errors.Is(err, os.ErrClosed) {
		return ErrFileClosed
	}
	return err
}

// Close wakes a parked Read with ErrFileClosed and closes the descriptor
// (os.File waits for the read in flight). It is idempotent.
func (r *RecordReader) Close() error {
	var err error
	r.closeOnce.Do(func() {
		close(r.closed)
		r.signal() // wakes a ReadThread in ppoll
		if testCloseSignalled != nil {
			testCloseSignalled()
		}
		err = r.file.Close() // wakes a parked Read
		// Then, once no Read runs, unregister the context watch so the
		// reader does not stay reachable from a long-lived context.
		r.sem <- struct{}{}
		if r.stop != nil {
			r.stop()
			r.stop = nil
		}
		if r.tStop != nil {
			r.tStop()
			r.tStop = nil
		}
		r.mu.Lock()
		if r.wake >= 0 {
			unix.Close(r.wake)
			r.wake = -1
		}
		r.mu.Unlock()
		<-r.sem
		traceCloseRR(r)
	})
	return err
}

var rrTraced sync.Map // *RecordReader -> *FD

func traceOpenRR(r *RecordReader, name string) {
	if !tracing.Load() {
		return
	}
	fd := &FD{raw: int32(r.raw), name: name + " (record reader)"}
	traceOpen(fd)
	rrTraced.Store(r, fd)
}

func traceCloseRR(r *RecordReader) {
	if v, ok := rrTraced.LoadAndDelete(r); ok {
		traceClose(v.(*FD))
	}
}

// NewRecordReaderPipe is NewRecordPipe for a RecordReader: a connected
// SOCK_SEQPACKET pair whose writes are read back one record each.
func NewRecordReaderPipe(name string) (*RecordReader, *FD, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	rd, _ := NewFD(fds[0], name+" (read end)")
	w, _ := NewFD(fds[1], name+" (write end)")
	r, err := NewRecordReader(rd)
	if err != nil {
		rd.Close()
		w.Close()
		return nil, nil, err
	}
	return r, w, nil
}
