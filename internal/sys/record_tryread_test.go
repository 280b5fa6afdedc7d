package sys

import (
	"context"
	"os"
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
