package uverbs

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/sys"
)

// TestChannelSecondWaiter: while one GetCQEvent is parked on an empty
// channel, a second returns when its own ctx ends, TryGetCQEvent returns
// ErrNoEvent at once, and Close wakes the parked one with ErrClosed. (The
// record buffer's lock used to be held across the parked read, so both
// waited for the first reader, whatever their ctx said.)
func TestChannelSecondWaiter(t *testing.T) {
	r, w, err := sys.NewRecordReaderPipe("test channel")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ch := &CompChannel{ctx: &Context{dev: Device{Name: "fake0"}}, r: r, cqs: map[uint64]*CQ{}, recSem: make(chan struct{}, 1)}
	first := make(chan error, 1)
	go func() {
		_, err := ch.GetCQEvent(context.Background())
		first <- err
	}()
	// Wait until the first reader holds the record buffer (it then parks
	// on the empty channel and never lets go by itself).
	for len(ch.recSem) == 0 {
		select {
		case err := <-first:
			t.Fatalf("first GetCQEvent returned %v on an empty channel", err)
		default:
		}
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := ch.GetCQEvent(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second GetCQEvent = %v, want its ctx's DeadlineExceeded", err)
	}
	if _, err := ch.TryGetCQEvent(); !errors.Is(err, ErrNoEvent) {
		t.Fatalf("TryGetCQEvent = %v, want ErrNoEvent", err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-first:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("parked GetCQEvent after Close = %v, want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not wake the parked GetCQEvent")
	}
}
