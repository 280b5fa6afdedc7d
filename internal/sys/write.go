package sys

import (
	"encoding/binary"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Ids of the INVOKE_WRITE bridge (object DEVICE, method INVOKE_WRITE) from
// rdma/ib_user_ioctl_cmds.h.
const (
	objectDevice      = 0 // UVERBS_OBJECT_DEVICE
	methodInvokeWrite = 0 // UVERBS_METHOD_INVOKE_WRITE
	attrCoreIn        = 0 // UVERBS_ATTR_CORE_IN
	attrCoreOut       = 1 // UVERBS_ATTR_CORE_OUT
	attrWriteCmd      = 2 // UVERBS_ATTR_WRITE_CMD
	attrUHWIn         = 0x1000
	attrUHWOut        = 0x1001

	// CmdFlagExtended marks an extended write command
	// (IB_USER_VERBS_CMD_FLAG_EXTENDED).
	CmdFlagExtended = 0x80000000

	maxWriteBytes = 1024
)

// writeScratch holds the request and response images of a write() command.
type writeScratch struct {
	w [maxWriteBytes]byte
	r [maxWriteBytes]byte
}

// WriteCmd describes one command of the write() ABI, independent of how it
// is sent.
//
// Req is the core request. For non-extended commands that return data it
// begins with the u64 "response" field (its content is ignored; the
// executor fills it when it uses write()). Extended commands carry no
// response field in Req. UdataIn and UdataOut are the provider's private
// request and response (the bytes after the core structs).
type WriteCmd struct {
	Cmd      uint32
	Req      []byte
	Resp     []byte
	UdataIn  []byte
	UdataOut []byte
}

// Extended reports whether the command uses the extended header.
func (w *WriteCmd) Extended() bool { return w.Cmd&CmdFlagExtended != 0 }

// InvokeWrite sends w through the RDMA_VERBS_IOCTL INVOKE_WRITE bridge, as
// rdma-core does on kernels that support it. c is used as scratch.
func (c *Ioctl) InvokeWrite(fd *FD, driverID uint32, w *WriteCmd) error {
	c.Reset(objectDevice, methodInvokeWrite, driverID)
	c.BytesIn(attrCoreIn, w.Req, true)
	if len(w.Resp) > 0 {
		c.BytesOut(attrCoreOut, w.Resp, true)
	}
	c.ConstIn(attrWriteCmd, uint64(w.Cmd), true)
	if len(w.UdataIn) > 0 {
		c.BytesIn(attrUHWIn, w.UdataIn, true)
	}
	if len(w.UdataOut) > 0 {
		c.BytesOut(attrUHWOut, w.UdataOut, true)
	}
	return c.Exec(fd)
}

// ProbeInvokeWrite reports whether the kernel implements INVOKE_WRITE:
// it sends QUERY_DEVICE with no core buffers, which a capable kernel
// rejects with ENOSPC; ENOTTY or EPROTONOSUPPORT mean no bridge.
func (c *Ioctl) ProbeInvokeWrite(fd *FD, driverID uint32, queryDeviceCmd uint32) bool {
	c.Reset(objectDevice, methodInvokeWrite, driverID)
	c.ConstIn(attrWriteCmd, uint64(queryDeviceCmd), true)
	err := c.Exec(fd)
	return err != unix.ENOTTY && err != unix.EPROTONOSUPPORT
}

// LegacyWrite sends w with write(2) on the command fd, laying out the
// 8-byte header (and for extended commands the 16-byte extended header)
// as the kernel's write ABI expects. The response travels through a
// scratch buffer and is copied back to w.Resp and w.UdataOut.
func (c *Ioctl) LegacyWrite(fd *FD, w *WriteCmd) error {
	if fd.Int() < 0 {
		return ErrClosedFD
	}
	var in, out []byte
	ext := w.Extended()
	hdrLen := 8
	if ext {
		hdrLen = 24
	}
	inLen := hdrLen + len(w.Req) + len(w.UdataIn)
	outLen := len(w.Resp) + len(w.UdataOut)
	if inLen > maxWriteBytes || outLen > maxWriteBytes {
		return errTooLong
	}
	if c.scratch == nil {
		c.scratch = new(writeScratch)
	}
	sc := c.scratch
	in = sc.w[:inLen]
	out = sc.r[:outLen]
	clear(in)
	// The reply starts as the caller's buffers: what the kernel does not
	// write stays as the caller had it (a sentinel the caller checks), as
	// with an ioctl's output attributes.
	copy(out, w.Resp)
	copy(out[len(w.Resp):], w.UdataOut)
	le := binary.LittleEndian
	le.PutUint32(in[0:], w.Cmd)
	copy(in[hdrLen:], w.Req)
	copy(in[hdrLen+len(w.Req):], w.UdataIn)
	var respAddr uint64
	if outLen > 0 {
		respAddr = uint64(uintptr(unsafe.Pointer(&sc.r[0])))
	}
	if ext {
		if len(w.Req)%8 != 0 || len(w.UdataIn)%8 != 0 || len(w.Resp)%8 != 0 || len(w.UdataOut)%8 != 0 {
			return errBadInline
		}
		le.PutUint16(in[4:], uint16(len(w.Req)/8))
		le.PutUint16(in[6:], uint16(len(w.Resp)/8))
		le.PutUint64(in[8:], respAddr)
		le.PutUint16(in[16:], uint16(len(w.UdataIn)/8))
		le.PutUint16(in[18:], uint16(len(w.UdataOut)/8))
	} else {
		if inLen%4 != 0 || outLen%4 != 0 {
			return errBadInline
		}
		le.PutUint16(in[4:], uint16(inLen/4))
		le.PutUint16(in[6:], uint16(outLen/4))
		if outLen > 0 {
			if len(w.Req) < 8 {
				return errBadInline
			}
			le.PutUint64(in[hdrLen:], respAddr)
		}
	}
	raw, ok := fd.acquire()
	if !ok {
		return ErrClosedFD
	}
	n, err := writeRaw(raw, in)
	fd.release()
	runtime.KeepAlive(sc)
	if err != nil {
		return err
	}
	if n != len(in) {
		return unix.EIO // the kernel takes a command whole or not at all
	}
	copy(w.Resp, out)
	copy(w.UdataOut, out[len(w.Resp):])
	return nil
}

// IsCharDevice reports whether fd is a character device (fstat(2)), as a
// uverbs device node is: the write() command fallback checks it before
// writing a command to a descriptor an ioctl refused (a regular file
// answers ENOTTY too, and would take the command as data).
func IsCharDevice(fd *FD) (bool, error) {
	raw, ok := fd.acquire()
	if !ok {
		return false, ErrClosedFD
	}
	var st unix.Stat_t
	err := unix.Fstat(raw, &st)
	fd.release()
	if err != nil {
		return false, err
	}
	return st.Mode&unix.S_IFMT == unix.S_IFCHR, nil
}

// Write issues one write(2) of b on fd (EINTR retried) while holding the
// fd's in-use lock. It allocates nothing. (rxe's send doorbell goes
// through WriteHeldValue instead.)
func Write(fd *FD, b []byte) (int, error) {
	raw, ok := fd.acquire()
	if !ok {
		return 0, ErrClosedFD
	}
	n, err := writeRaw(raw, b)
	fd.release()
	return n, err
}

func writeRaw(fd int, b []byte) (int, error) { return rwRaw(unix.SYS_WRITE, fd, b) }

// rwRaw issues read(2) or write(2) (trap) on fd with b, retrying EINTR;
// the errno comes back unwrapped. It allocates nothing.
func rwRaw(trap uintptr, fd int, b []byte) (int, error) { return rw(unix.Syscall, trap, fd, b) }

// rwQuick is rwRaw for calls that never block: reads of non-blocking
// event fds and the rdma_cm GET_EVENT write, which return after bounded
// kernel work (the rxe doorbell and REQ_NOTIFY writes make the same raw
// call through WriteHeldValue). It uses RawSyscall, skipping the runtime's
// entersyscall/exitsyscall: with those, a doorbell that takes a while (on
// 6.1 rxe does the whole send inside it) let the scheduler hand the P to
// another thread and cost the ping-pong tools hundreds of context switches
// per run that librxe does not make. On amd64 it makes the system call
// directly (rawSyscall3): the doorbell is on every post's path, and the
// generic route through x/sys and syscall cost about 80 instructions, a
// tenth of a post's user time.
func rwQuick(trap uintptr, fd int, b []byte) (int, error) {
	var p unsafe.Pointer
	if len(b) > 0 {
		p = unsafe.Pointer(&b[0])
	}
	for {
		n, e := rawSyscallPtr(trap, uintptr(fd), p, uintptr(len(b)))
		runtime.KeepAlive(b)
		switch unix.Errno(e) {
		case 0:
			return int(n), nil
		case unix.EINTR:
			continue
		default:
			return 0, unix.Errno(e)
		}
	}
}

func rw(call func(trap, a1, a2, a3 uintptr) (uintptr, uintptr, unix.Errno), trap uintptr, fd int, b []byte) (int, error) {
	var p unsafe.Pointer
	if len(b) > 0 {
		p = unsafe.Pointer(&b[0])
	}
	for {
		n, _, e := call(trap, uintptr(fd), uintptr(p), uintptr(len(b)))
		// Called through a function value, the compiler's keep-alive of
		// pointer-to-uintptr call arguments does not apply: keep b.
		runtime.KeepAlive(b)
		switch e {
		case 0:
			return int(n), nil
		case unix.EINTR:
			continue
		default:
			return 0, e
		}
	}
}
