package sys

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/testkit"
	"golang.org/x/sys/unix"
)

// endedPipe returns the write end of a pipe (as an *FD) and a function
// that closes the read end: after it, the write end polls as POLLERR, as
// a uverbs event queue the kernel closed does, and with full, as
// POLLERR alone (EPOLLOUT is gone), which the runtime poller reports as
// "not pollable". Reading it fails (EBADF): the tests' read returns
// EAGAIN in its place, as the uverbs files' non-blocking read does once
// their queue is closed.
func endedPipe(t *testing.T, full bool) (*FD, func()) {
	t.Helper()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		t.Fatal(err)
	}
	if full {
		chunk := make([]byte, 4096)
		for {
			if _, err := unix.Write(p[1], chunk); err == unix.EAGAIN {
				break
			} else if err != nil {
				t.Fatal(err)
			}
		}
	}
	w, err := NewFD(p[1], "ended pipe")
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	closeRead := func() {
		if !closed {
			closed = true
			unix.Close(p[0])
		}
	}
	t.Cleanup(closeRead)
	return w, closeRead
}

func eagain(int, []byte) (int, error) { return 0, unix.EAGAIN }

// TestReadersQueueEnded: a wait on a queue the kernel ends (POLLERR with
// nothing to read, which the uverbs event files show when their device is
// disassociated or their context destroyed) returns unix.EIO, as a
// blocking read(2) does there, in every wait mode, whether the queue ends
// while the reader waits or before, instead of waiting for its context
// (the poller) or spinning in ppoll (the thread mode).
func TestReadersQueueEnded(t *testing.T) {
	type reader struct {
		read  func(context.Context) error
		close func()
	}
	kinds := map[string]func(t *testing.T, fd *FD) reader{
		"RecordReader.Read": func(t *testing.T, fd *FD) reader {
			r, err := NewRecordReader(fd)
			if err != nil {
				t.Fatal(err)
			}
			r.SetOp(eagain)
			buf := make([]byte, 8)
			return reader{func(ctx context.Context) error { _, err := r.Read(ctx, buf); return err }, func() { r.Close() }}
		},
		"RecordReader.ReadThread": func(t *testing.T, fd *FD) reader {
			r, err := NewRecordReader(fd)
			if err != nil {
				t.Fatal(err)
			}
			r.SetOp(eagain)
			buf := make([]byte, 8)
			return reader{func(ctx context.Context) error { _, err := r.ReadThread(ctx, buf); return err }, func() { r.Close() }}
		},
		"EventFile.Read": func(t *testing.T, fd *FD) reader {
			e, err := NewEventFile(fd)
			if err != nil {
				t.Fatal(err)
			}
			e.testRead = eagain
			buf := make([]byte, 8)
			return reader{func(ctx context.Context) error { _, err := e.Read(ctx, buf); return err }, func() { e.Close() }}
		},
	}
	for name, mk := range kinds {
		for _, full := range []bool{false, true} {
			for _, before := range []bool{false, true} {
				sub := name + map[bool]string{false: "/POLLERR|POLLOUT", true: "/POLLERR"}[full] +
					map[bool]string{false: "/while-waiting", true: "/before"}[before]
				if name == "RecordReader.Read" && before && !full {
					// The poller is edge-triggered and Read does not
					// poll before it parks (a system call per wait on
					// the event path): a queue that ended before the
					// wait and polls as more than a bare POLLERR (a
					// destroyed DEVX channel: POLLIN|POLLRDHUP) is
					// found only at the context's end. The uverbs
					// files' bare POLLERR is found (the "before" case
					// with full).
					continue // not detected, by design: see the comment
				}
				t.Run(sub, func(t *testing.T) {
					fd, end := endedPipe(t, full)
					r := mk(t, fd)
					defer r.close()
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					if before {
						end()
					}
					done := make(chan error, 1)
					go func() { done <- r.read(ctx) }()
					if !before {
						testkit.MustBlock(t, "TestReadersQueueEnded.")
						end()
					}
					select {
					case err := <-done:
						if !errors.Is(err, unix.EIO) {
							t.Fatalf("read = %v, want EIO", err)
						}
					case <-ctx.Done():
						t.Fatal("the read still waits 10s after the queue ended")
					}
				})
			}
		}
	}
}
