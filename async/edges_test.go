package async

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/uverbs"
)

// TestNonPortEventPort: for device-level and unknown events Port is the
// kernel's element, as libibverbs fills element.port_num.
func TestNonPortEventPort(t *testing.T) {
	h := newHarness(t)
	h.send(t, DeviceFatal, 3)
	h.send(t, EventType(4242), 77)
	for _, want := range []struct {
		typ  EventType
		port int
	}{{DeviceFatal, 3}, {EventType(4242), 77}} {
		ev, err := h.r.Get(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type != want.typ || ev.Port != want.port || ev.Element != nil {
			t.Errorf("event %+v, want type %v port %d", ev, want.typ, want.port)
		}
		h.r.Ack(ev)
	}
}

// TestAllEndsQuietly: when the caller's context ends, All stops without
// yielding an error; Get with a context that times out returns the
// context's error itself.
func TestAllEndsQuietly(t *testing.T) {
	h := newHarness(t)
	h.send(t, PortActive, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	for ev, err := range h.r.All(ctx) {
		if err != nil {
			t.Fatalf("All yielded %v after the caller cancelled", err)
		}
		h.r.Ack(ev)
		n++
		cancel()
	}
	if n != 1 {
		t.Errorf("All yielded %d events, want 1", n)
	}
	dctx, dcancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer dcancel()
	if _, err := h.r.Get(dctx); err != context.DeadlineExceeded {
		t.Errorf("Get past its deadline = %v (%T), want context.DeadlineExceeded itself", err, err)
	}
}

// TestAllYieldsClosed: while the caller's context lives, All ends on a
// closed event file by yielding the error (ErrClosed).
func TestAllYieldsClosed(t *testing.T) {
	h := newHarness(t)
	h.r.file.Close()
	var errs []error
	for _, err := range h.r.All(ctxT(t)) {
		errs = append(errs, err)
	}
	if len(errs) != 1 || !errors.Is(errs[0], uverbs.ErrClosed) {
		t.Errorf("All on a closed file yielded %v, want one ErrClosed", errs)
	}
}
