package testkit

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestOutputWaitFor(t *testing.T) {
	var o Output
	done := make(chan struct{})
	got := make(chan error, 1)
	go func() { got <- o.WaitFor(context.Background(), "ready\n", done) }()
	o.Write([]byte("rea"))
	o.Write([]byte("dy\n"))
	if err := <-got; err != nil {
		t.Fatalf("WaitFor = %v", err)
	}
	if o.Writes() != 2 || o.String() != "ready\n" {
		t.Fatalf("writes %d, %q", o.Writes(), o.String())
	}
	close(done)
	if err := o.WaitFor(context.Background(), "never", done); !errors.Is(err, errOutputEnded) {
		t.Fatalf("after done: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := o.WaitFor(ctx, "never", nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ctx end: %v", err)
	}
}
