package testkit

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
)

// Output collects what a program writes (a C peer, or an in-process tool
// writing to it as its stdout) and lets tests wait for text without
// sleeping: every Write wakes the waiters. The zero value is ready to use.
type Output struct {
	mu      sync.Mutex
	b       bytes.Buffer
	writes  int
	changed chan struct{} // closed and replaced on every write
}

// Write appends p; it never fails.
func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.b.Write(p)
	o.writes++
	if o.changed != nil {
		close(o.changed)
		o.changed = nil
	}
	return len(p), nil
}

// String returns everything written so far.
func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}

// Writes returns the number of Write calls so far.
func (o *Output) Writes() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.writes
}

// errOutputEnded is returned by WaitFor when done closes first.
var errOutputEnded = errors.New("writer finished")

// WaitFor blocks until the output contains substr, ctx ends (ctx.Err()),
// or done (which may be nil) is closed with substr still absent
// (errOutputEnded).
func (o *Output) WaitFor(ctx context.Context, substr string, done <-chan struct{}) error {
	return o.WaitUntil(ctx, func(s string) bool { return strings.Contains(s, substr) }, done)
}

// WaitUntil blocks until cond holds for the output, ctx ends
// (ctx.Err()), or done (which may be nil) is closed with cond still
// false (errOutputEnded). cond runs after every write.
func (o *Output) WaitUntil(ctx context.Context, cond func(string) bool, done <-chan struct{}) error {
	for {
		o.mu.Lock()
		found := cond(o.b.String())
		if o.changed == nil {
			o.changed = make(chan struct{})
		}
		changed := o.changed
		o.mu.Unlock()
		if found {
			return nil
		}
		select {
		case <-changed:
		case <-done:
			if cond(o.String()) {
				return nil
			}
			return errOutputEnded
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
