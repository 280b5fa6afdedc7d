package sys

import (
	"context"
	"os"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestRecordReaderTryReadAfterEndedContext: a Read whose context ends
// afterwards (a timeout context cancelled once the read returned) must
// not make later TryReads fail with its expired deadline.
func TestRecordReaderTryReadAfterEndedContext(t *testing.T) {
	r, w, err := NewRecordReaderPipe("rr")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	defer r.Close()
	buf := make([]byte, 8)
	for i := range 50 {
		Write(w, []byte("abcdefgh"))
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if _, err := r.Read(ctx, buf); err != nil {
			t.Fatal(err)
		}
		cancel()
		if i%2 == 0 {
			time.Sleep(time.Millisecond) // let the AfterFunc run first
		}
		if _, err := r.TryRead(buf); err != unix.EAGAIN {
			t.Fatalf("round %d: TryRead after the Read's context ended = %v, want EAGAIN", i, err)
		}
		Write(w, []byte("ijklmnop"))
		if n, err := r.TryRead(buf); n != 8 || err != nil {
			t.Fatalf("round %d: TryRead of a queued record = %d %v", i, n, err)
		}
	}
}

// TestRecordReaderReadAfterClose: reads after Close fail with
// ErrFileClosed every time and open nothing (ReadThread once created its
// wake-up eventfd anew after Close, when acquire's select picked the
// free semaphore over the closed channel).
func TestRecordReaderReadAfterClose(t *testing.T) {
	r, w, err := NewRecordReaderPipe("rc")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	buf := make([]byte, 16)
	ctx := context.Background()
	// A thread-mode read that times out: the reader has its eventfd.
	tctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if _, err := r.ReadThread(tctx, buf); err != context.DeadlineExceeded {
		t.Fatalf("ReadThread with nothing to read: %v", err)
	}
	r.Close()
	before := countFDs(t)
	for i := 0; i < 50; i++ {
		if _, err := r.ReadThread(ctx, buf); err != ErrFileClosed {
			t.Fatalf("ReadThread after Close: %v", err)
		}
		if _, err := r.Read(ctx, buf); err != ErrFileClosed {
			t.Fatalf("Read after Close: %v", err)
		}
	}
	if after := countFDs(t); after != before {
		t.Fatalf("%d fds open after reads on a closed reader, %d before", after, before)
	}
}

func countFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestRecordReaderOldContextEndsDuringTry: the context of an earlier
// poller-mode Read that ends after TryRead (or ReadThread) has looked at
// it, just before the read, moves the read deadline into the past; the
// Try read and the thread-mode read must still report their own outcome
// (EAGAIN, the record, their own context's end), never the poller's
// timeout of a context that is not theirs.
func TestRecordReaderOldContextEndsDuringTry(t *testing.T) {
	r, w, err := NewRecordReaderPipe("rr")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	defer r.Close()
	buf := make([]byte, 8)
	// endOld arms the hook: at the next raw read, the earlier Read's
	// context ends and its AfterFunc runs to completion first.
	endOld := func(cancel context.CancelFunc) {
		testBeforeRawRead = func() {
			testBeforeRawRead = nil
			cancel()
			for {
				r.mu.Lock()
				done := r.expired
				r.mu.Unlock()
				if done {
					return
				}
				runtime.Gosched()
			}
		}
	}
	defer func() { testBeforeRawRead = nil }()
	read := func() context.CancelFunc {
		t.Helper()
		Write(w, []byte("abcdefgh"))
		ctx, cancel := context.WithCancel(context.Background())
		if _, err := r.Read(ctx, buf); err != nil {
			t.Fatal(err)
		}
		return cancel
	}

	endOld(read())
	if _, err := r.TryRead(buf); err != unix.EAGAIN {
		t.Fatalf("TryRead, nothing queued = %v, want EAGAIN", err)
	}

	cancel := read()
	Write(w, []byte("ijklmnop"))
	endOld(cancel)
	if n, err := r.TryRead(buf); n != 8 || err != nil || string(buf) != "ijklmnop" {
		t.Fatalf("TryRead of a queued record = %d %v %q", n, err, buf[:n])
	}

	endOld(read())
	tctx, tcancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer tcancel()
	if _, err := r.ReadThread(tctx, buf); err != context.DeadlineExceeded {
		t.Fatalf("ReadThread, nothing queued = %v, want its own context's DeadlineExceeded", err)
	}

	// The reader's own context ending is still reported as such.
	read()()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	testBeforeRawRead = func() { testBeforeRawRead = nil; cancel() }
	if n, err := r.Read(ctx, buf); err != context.Canceled {
		t.Fatalf("Read whose own context ends = %d %v, want context.Canceled", n, err)
	}
}
