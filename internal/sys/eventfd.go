package sys

import (
	"encoding/binary"

	"golang.org/x/sys/unix"
)

// EventFDSize is the size of an eventfd(2) read or write: one u64 counter.
const EventFDSize = 8

// NewEventFD creates an eventfd(2) counter (EFD_CLOEXEC|EFD_NONBLOCK,
// initial value 0) wrapped as a RecordReader: each Read returns the 8-byte
// counter and resets it, and a blocked Read parks on the runtime poller.
// mlx5 DEVX event subscriptions can signal such a counter instead of
// queueing a record (MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_FD_NUM).
func NewEventFD(name string) (*RecordReader, error) {
	var raw int
	var err error
	for {
		raw, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	fd, err := NewFD(raw, name)
	if err != nil {
		unix.Close(raw)
		return nil, err
	}
	r, err := NewRecordReader(fd)
	if err != nil {
		fd.Close()
		return nil, err
	}
	return r, nil
}

// SignalEventFD adds n to the eventfd counter r reads (eventfd_write(3)).
// It fails with ErrFileClosed after Close and with EAGAIN when the counter
// would overflow.
func (r *RecordReader) SignalEventFD(n uint64) error {
	var b [EventFDSize]byte
	binary.LittleEndian.PutUint64(b[:], n)
	select {
	case <-r.closed:
		return ErrFileClosed
	default:
	}
	rc, err := r.file.SyscallConn()
	if err != nil {
		return r.mapErr(err)
	}
	var werr error
	err = rc.Write(func(fd uintptr) bool {
		_, werr = rwRaw(unix.SYS_WRITE, int(fd), b[:])
		return true
	})
	if err != nil {
		return r.mapErr(err)
	}
	return werr
}

// NewRecordReaderStream returns a RecordReader on one end of a connected
// SOCK_STREAM pair and the other end as an FD. Unlike NewRecordReaderPipe,
// a stream keeps no record boundaries: writes made before a read come back
// from it together, and a read may end inside a record. Tests use it to
// feed decoders several records, or parts of one, per read(2).
func NewRecordReaderStream(name string) (*RecordReader, *FD, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	rd, _ := NewFD(fds[0], name+" (read end)")
	w, _ := NewFD(fds[1], name+" (write end)")
	r, err := NewRecordReader(rd)
	if err != nil {
		rd.Close()
		w.Close()
		return nil, nil, err
	}
	return r, w, nil
}
