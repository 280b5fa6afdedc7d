package sys

import (
	"context"
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
