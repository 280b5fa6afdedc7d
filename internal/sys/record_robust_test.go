package sys

import (
	"context"
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestRecordReaderTryReadBesideParkedRead: TryRead never waits for a Read
// parked with nothing queued (it used to wait for it to finish, so a
// "try" blocked without bound); it returns EAGAIN at once, and the parked
// Read still gets the next record.
func TestRecordReaderTryReadBesideParkedRead(t *testing.T) {
	for _, thread := range []bool{false, true} {
		r, w, err := NewRecordReaderPipe("rr")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		type result struct {
			n   int
			err error
		}
		got := make(chan result, 1)
		go func() {
			b := make([]byte, 8)
			var n int
			var err error
			if thread {
				n, err = r.ReadThread(ctx, b)
			} else {
				n, err = r.Read(ctx, b)
			}
			got <- result{n, err}
		}()
		// Whether or not the Read holds the reader yet, nothing is queued:
		// every TryRead must come back with EAGAIN, never wait.
		buf := make([]byte, 8)
		for i := 0; i < 1000; i++ {
			done := make(chan error, 1)
			go func() { _, err := r.TryRead(buf); done <- err }()
			select {
			case err := <-done:
				if err != unix.EAGAIN {
					t.Fatalf("thread=%v: TryRead beside a parked Read = %v, want EAGAIN", thread, err)
				}
			case <-ctx.Done():
				t.Fatalf("thread=%v: TryRead waited for the parked Read", thread)
			}
		}
		// Wait until the Read holds the reader, then once more.
		for len(r.sem) == 0 && ctx.Err() == nil {
			time.Sleep(time.Millisecond)
		}
		start := time.Now()
		if _, err := r.TryRead(buf); err != unix.EAGAIN {
			t.Fatalf("thread=%v: TryRead beside the parked Read = %v", thread, err)
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("thread=%v: TryRead took %v", thread, d)
		}
		Write(w, []byte("abcdefgh"))
		if res := <-got; res.n != 8 || res.err != nil {
			t.Fatalf("thread=%v: parked Read = %d %v", thread, res.n, res.err)
		}
		cancel()
		r.Close()
		if _, err := r.TryRead(buf); err != ErrFileClosed {
			t.Fatalf("TryRead after Close = %v", err)
		}
		w.Close()
	}
}

// TestRecordReaderNilContext: a nil context is EINVAL, not a panic.
func TestRecordReaderNilContext(t *testing.T) {
	r, w, err := NewRecordReaderPipe("rr")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	defer r.Close()
	buf := make([]byte, 8)
	var nilCtx context.Context
	if _, err := r.Read(nilCtx, buf); !errors.Is(err, unix.EINVAL) {
		t.Errorf("Read(nil ctx) = %v", err)
	}
	if _, err := r.ReadThread(nilCtx, buf); !errors.Is(err, unix.EINVAL) {
		t.Errorf("ReadThread(nil ctx) = %v", err)
	}
	Write(w, []byte("abcdefgh"))
	if n, err := r.Read(context.Background(), buf); n != 8 || err != nil {
		t.Errorf("Read after the nil-context calls = %d %v", n, err)
	}
}

// TestRecordReaderWakeFDZero: a wake-up eventfd that gets descriptor 0
// (stdin closed) is used, signalled and closed like any other (the reader
// took 0 to mean "none yet": a cancelled ReadThread slept on in ppoll).
// fd 0 is made an eventfd with dup3 (no moment without a descriptor 0
// for another open to take) and restored at the end.
func TestRecordReaderWakeFDZero(t *testing.T) {
	save, err := unix.FcntlInt(0, unix.F_DUPFD_CLOEXEC, 3)
	if err != nil && err != unix.EBADF {
		t.Fatal(err)
	}
	hadStdin := err == nil
	e, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Dup3(e, 0, unix.O_CLOEXEC); err != nil {
		unix.Close(e)
		t.Fatal(err)
	}
	unix.Close(e)
	zeroOpen := true
	defer func() {
		if hadStdin {
			unix.Dup3(save, 0, 0)
			unix.Close(save)
		} else if zeroOpen {
			unix.Close(0)
		}
	}()
	old := newWakeFD
	newWakeFD = func() (int, error) { return 0, nil }
	defer func() { newWakeFD = old }()

	r, w, err := NewRecordReaderPipe("rr")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if r.wake != -1 {
		t.Errorf("a new reader's wake = %d, want -1", r.wake)
	}
	buf := make([]byte, 8)
	// A ReadThread parked in ppoll (no deadline: only the eventfd wakes
	// it) ends when its context is cancelled.
	parked := func(ctx context.Context) chan error {
		errc := make(chan error, 1)
		go func() { _, err := r.ReadThread(ctx, buf); errc <- err }()
		deadline := time.Now().Add(10 * time.Second)
		for {
			r.mu.Lock()
			ok := r.tWatch == ctx && r.wake == 0
			r.mu.Unlock()
			if ok || time.Now().After(deadline) {
				break
			}
			time.Sleep(time.Millisecond)
		}
		return errc
	}
	wait := func(what string, errc chan error, want error) {
		t.Helper()
		select {
		case err := <-errc:
			if err != want {
				t.Fatalf("%s: ReadThread = %v, want %v", what, err, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: ReadThread on wake fd 0 was not woken", what)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := parked(ctx)
	cancel()
	wait("cancel", errc, context.Canceled)
	ctx2, cancel2 := context.WithCancel(context.Background()) // never cancelled before Close
	defer cancel2()
	errc = parked(ctx2)
	r.mu.Lock()
	wake := r.wake
	r.mu.Unlock()
	if wake != 0 {
		t.Errorf("wake = %d, want 0 (the eventfd made)", wake)
	}
	r.Close()
	wait("Close", errc, ErrFileClosed)
	if _, err := unix.FcntlInt(0, unix.F_GETFD, 0); err != unix.EBADF {
		t.Errorf("Close left the wake-up eventfd 0 open (%v)", err)
	} else {
		zeroOpen = false
	}
}

// TestRecordReaderCloseBeforeFirstWakeFD: a Close that marks the reader
// closed and signals before the first ReadThread has made its wake-up
// eventfd (the signal then has nothing to write) does not leave that
// ReadThread asleep in ppoll: it ends with ErrFileClosed, and Close,
// which waits for it, returns. The ReadThread used to go on to ppoll on an
// eventfd nobody would write, and Close waited for it for ever.
func TestRecordReaderCloseBeforeFirstWakeFD(t *testing.T) {
	r, w, err := NewRecordReaderPipe("rr")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	readDone := make(chan error, 1)
	closeDone := make(chan error, 1)
	old := newWakeFD
	defer func() { newWakeFD = old }()
	newWakeFD = func() (int, error) {
		// Close runs up to its signal (no eventfd yet) and waits in the
		// hook below, before the file's close.
		go func() { closeDone <- r.Close() }()
		<-r.closed
		return old()
	}
	testCloseSignalled = func() {
		// Let the ReadThread reach its ppoll (the old code) or return (the
		// fixed one) before the file's close, which waits for it.
		select {
		case <-readDone:
			readDone <- nil // for the check below, which reads it again
		case <-time.After(2 * time.Second):
		}
	}
	defer func() { testCloseSignalled = nil }()
	var readErr error
	go func() {
		_, err := r.ReadThread(context.Background(), make([]byte, 8))
		readErr = err
		readDone <- err
	}()
	select {
	case err := <-closeDone:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("Close did not return: the ReadThread sleeps in ppoll")
		r.signal() // let both end
		<-closeDone
	}
	<-readDone
	if !errors.Is(readErr, ErrFileClosed) {
		t.Errorf("ReadThread = %v, want ErrFileClosed", readErr)
	}
}
