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
