package sys

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// WriteHeldValue writes the bytes of *v, a pointer-free command of a fixed
// size (the rxe send doorbell, REQ_NOTIFY_CQ), on fd with one raw
// write(2), EINTR retried, a short write reported as EIO, without taking
// the descriptor's in-use lock. The caller guarantees that fd cannot be
// closed meanwhile: uverbs writes while holding the QP or CQ, and the
// Context closes its command fd only after every object is released. This
// keeps the per-post doorbell free of any lock shared by all QPs. It
// builds no slice and goes through no generic read/write loop (the
// doorbell is on every post's path, where that was about 40 of its 80
// instructions), and allocates nothing.
func WriteHeldValue[T any](fd *FD, v *T) error {
	size := unsafe.Sizeof(*v)
	for {
		n, e := rawSyscallPtr(unix.SYS_WRITE, uintptr(fd.raw), unsafe.Pointer(v), size)
		runtime.KeepAlive(v)
		runtime.KeepAlive(fd)
		switch {
		case e == 0 && n == size:
			return nil
		case e == 0:
			return unix.EIO
		case unix.Errno(e) != unix.EINTR:
			return unix.Errno(e)
		}
	}
}

// AnonMapping returns a private anonymous read/write mapping of size bytes
// with the accessors of a queue mapping: the in-memory rings of unit tests,
// and rings of providers that allocate their queues in user space.
func AnonMapping(size int, name string) (*Mapping, error) {
	if size <= 0 {
		return nil, unix.EINVAL
	}
	p, err := unix.MmapPtr(-1, 0, nil, uintptr(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, err
	}
	return newMapping(p, size, nil, name), nil
}
