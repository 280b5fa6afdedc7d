package testkit

import (
	"time"

	"golang.org/x/sys/unix"
)

// EpollReadable waits with a private epoll instance, as a user's own
// event loop would, until fd is readable or timeout passes; it reports
// whether fd became readable.
func EpollReadable(fd int, timeout time.Duration) (bool, error) {
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return false, err
	}
	defer unix.Close(ep)
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
	if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		return false, err
	}
	var out [1]unix.EpollEvent
	deadline := time.Now().Add(timeout)
	for {
		ms := int(time.Until(deadline).Milliseconds())
		if ms < 0 {
			ms = 0
		}
		n, err := unix.EpollWait(ep, out[:], ms)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return false, err
		}
		return n == 1 && out[0].Events&unix.EPOLLIN != 0, nil
	}
}

// EdgeWatch is an edge-triggered epoll instance watching one fd for
// input, as the Go runtime's poller watches its fds: Wait reports only
// input that arrived since the last report.
type EdgeWatch struct{ ep int }

// NewEdgeWatch watches fd (EPOLLIN|EPOLLET).
func NewEdgeWatch(fd int) (*EdgeWatch, error) {
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLET, Fd: int32(fd)}); err != nil {
		unix.Close(ep)
		return nil, err
	}
	return &EdgeWatch{ep: ep}, nil
}

// Wait waits up to timeout for an edge.
func (w *EdgeWatch) Wait(timeout time.Duration) (bool, error) {
	var out [1]unix.EpollEvent
	for {
		n, err := unix.EpollWait(w.ep, out[:], int(timeout/time.Millisecond))
		if err == unix.EINTR {
			continue
		}
		return n > 0, err
	}
}

// Close closes the epoll instance.
func (w *EdgeWatch) Close() error { return unix.Close(w.ep) }

// Mkfifo makes a named pipe at path (mode 0600).
func Mkfifo(path string) error { return unix.Mkfifo(path, 0o600) }
