package devx

import (
	"context"
	"encoding/binary"
	"sync"

	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/uverbs"
)

// EventFD is an eventfd(2) counter for SubscribeFd: the kernel adds to it
// at each event, Wait returns the count and resets it. It is
// non-blocking and close-on-exec; waits park on the runtime poller.
type EventFD struct {
	r         *sys.RecordReader
	sem       chan struct{}
	closed    chan struct{}
	closeOnce sync.Once
	closeErr  error
	buf       [sys.EventFDSize]byte
}

var (
	errNilEventFD    = invalid("eventfd", "wait", "nil *devx.EventFD")
	errNilEventFDCtx = invalid("eventfd", "wait", "nil context.Context")
	errEventFDClosed = closed("eventfd", "wait")
)

// NewEventFD creates a counter at 0 (eventfd(2), with EFD_CLOEXEC).
func NewEventFD() (*EventFD, error) {
	r, err := sys.NewEventFD("devx eventfd")
	if err != nil {
		return nil, &uverbs.OpError{Object: "eventfd", Method: "create", Err: err}
	}
	return &EventFD{r: r, sem: make(chan struct{}, 1), closed: make(chan struct{})}, nil
}

// Fd returns the descriptor to pass to SubscribeFd (or to the caller's
// own poll loop). It returns -1 after Close and for a nil *EventFD: the
// old number may name another file by then.
func (e *EventFD) Fd() int {
	if e == nil || e.r == nil {
		return -1
	}
	select {
	case <-e.closed:
		return -1
	default:
		return e.r.Fd()
	}
}

// Wait waits until the counter is not zero, then returns it and resets it
// to zero. It returns ctx's error when ctx ends and an error matching
// uverbs.ErrClosed after Close; a nil ctx is refused with
// uverbs.ErrInvalid. With a context used again and again it allocates
// nothing.
func (e *EventFD) Wait(ctx context.Context) (uint64, error) {
	if e == nil || e.r == nil {
		return 0, errNilEventFD
	}
	if ctx == nil {
		return 0, errNilEventFDCtx
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	select {
	case e.sem <- struct{}{}:
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-e.closed:
		return 0, errEventFDClosed
	}
	n, err := e.r.Read(ctx, e.buf[:])
	v := binary.LittleEndian.Uint64(e.buf[:])
	<-e.sem
	return counter(n, v, err)
}

// TryWait is Wait without waiting: ErrNoEvent (matching unix.EAGAIN)
// while the counter is zero.
func (e *EventFD) TryWait() (uint64, error) {
	if e == nil || e.r == nil {
		return 0, errNilEventFD
	}
	select {
	case e.sem <- struct{}{}:
	case <-e.closed:
		return 0, errEventFDClosed
	default:
		return 0, ErrNoEvent
	}
	n, err := e.r.TryRead(e.buf[:])
	v := binary.LittleEndian.Uint64(e.buf[:])
	<-e.sem
	return counter(n, v, err)
}

func counter(n int, v uint64, err error) (uint64, error) {
	if err != nil {
		return 0, readErr("eventfd", err, errEventFDClosed)
	}
	if n != sys.EventFDSize {
		return 0, shortRecord("eventfd counter", n, sys.EventFDSize)
	}
	return v, nil
}

// Signal adds n to the counter (eventfd_write(3)), as the kernel does for
// a subscribed event.
func (e *EventFD) Signal(n uint64) error {
	if e == nil || e.r == nil {
		return invalid("eventfd", "signal", "nil *devx.EventFD")
	}
	if err := e.r.SignalEventFD(n); err != nil {
		if err == sys.ErrFileClosed {
			return closed("eventfd", "signal")
		}
		return &uverbs.OpError{Object: "eventfd", Method: "signal", Err: err}
	}
	return nil
}

// Close closes the eventfd, waking a blocked Wait with an error matching
// uverbs.ErrClosed. Subscriptions keep their own reference to it.
func (e *EventFD) Close() error {
	if e == nil || e.r == nil {
		return invalid("eventfd", "close", "nil *devx.EventFD")
	}
	e.closeOnce.Do(func() {
		close(e.closed)
		e.closeErr = e.r.Close()
	})
	return e.closeErr
}
