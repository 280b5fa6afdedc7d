package ioctlmodel

import (
	"encoding/binary"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/pureverbs/pureverbs/internal/sys"
)

// rdmaVerbsIoctl is RDMA_VERBS_IOCTL: _IOWR(0x1b, 1, struct ib_uverbs_ioctl_hdr).
const rdmaVerbsIoctl = 0xC0181B01

// FromIoctl converts a command built with the library's builder into a
// Cmd: header and attributes as Exec would send them, each pointer
// attribute with the caller buffer it points to.
func FromIoctl(c *sys.Ioctl) Cmd {
	img := c.Image()
	cmd := Cmd{
		Length:    binary.LittleEndian.Uint16(img[0:]),
		Object:    binary.LittleEndian.Uint16(img[2:]),
		Method:    binary.LittleEndian.Uint16(img[4:]),
		NumAttrs:  binary.LittleEndian.Uint16(img[6:]),
		Reserved1: binary.LittleEndian.Uint64(img[8:]),
		DriverID:  binary.LittleEndian.Uint32(img[16:]),
		Reserved2: binary.LittleEndian.Uint32(img[20:]),
	}
	for i := range int(cmd.NumAttrs) {
		p := img[24+16*i:]
		a := Attr{
			ID:       binary.LittleEndian.Uint16(p[0:]),
			Len:      binary.LittleEndian.Uint16(p[2:]),
			Flags:    binary.LittleEndian.Uint16(p[4:]),
			AttrData: binary.LittleEndian.Uint16(p[6:]),
			Data:     binary.LittleEndian.Uint64(p[8:]),
		}
		if b := c.AttrBuf(i); b != nil {
			a.Buf = b
		}
		cmd.Attrs = append(cmd.Attrs, a)
	}
	return cmd
}

// Result is what the kernel answered and wrote back into the attribute
// array: each attribute's flags (VALID_OUTPUT) and data (new handles and
// fds).
type Result struct {
	Errno unix.Errno
	Flags []uint16
	Data  []uint64
}

// Exec sends c on the uverbs command fd raw as it is, broken or not: every
// attribute with a Buf gets the address of a heap copy of it (copied back
// after the call, so outputs land in Buf), and the kernel's answer is
// returned unchanged.
func Exec(fd int, c *Cmd) Result {
	n := len(c.Attrs)
	// growslice always allocates in the heap, which does not move: the
	// addresses travel as integers the garbage collector does not see.
	heap := make([][]byte, n)
	for i, a := range c.Attrs {
		if len(a.Buf) > 0 {
			heap[i] = append([]byte(nil), a.Buf...)
		}
	}
	img := make([]byte, 24+16*n)
	binary.LittleEndian.PutUint16(img[0:], uint16(c.length()))
	binary.LittleEndian.PutUint16(img[2:], c.Object)
	binary.LittleEndian.PutUint16(img[4:], c.Method)
	binary.LittleEndian.PutUint16(img[6:], uint16(c.numAttrs()))
	binary.LittleEndian.PutUint64(img[8:], c.Reserved1)
	binary.LittleEndian.PutUint32(img[16:], c.DriverID)
	binary.LittleEndian.PutUint32(img[20:], c.Reserved2)
	for i, a := range c.Attrs {
		p := img[24+16*i:]
		binary.LittleEndian.PutUint16(p[0:], a.ID)
		binary.LittleEndian.PutUint16(p[2:], a.Len)
		binary.LittleEndian.PutUint16(p[4:], a.Flags)
		binary.LittleEndian.PutUint16(p[6:], a.AttrData)
		d := a.Data
		if heap[i] != nil {
			d = uint64(uintptr(unsafe.Pointer(unsafe.SliceData(heap[i]))))
		}
		binary.LittleEndian.PutUint64(p[8:], d)
	}
	var e unix.Errno
	for {
		_, _, e = unix.Syscall(unix.SYS_IOCTL, uintptr(fd), rdmaVerbsIoctl, uintptr(unsafe.Pointer(unsafe.SliceData(img))))
		if e != unix.EINTR {
			break
		}
	}
	runtime.KeepAlive(heap)
	for i, a := range c.Attrs {
		copy(a.Buf, heap[i])
	}
	r := Result{Errno: e}
	for i := range n {
		p := img[24+16*i:]
		r.Flags = append(r.Flags, binary.LittleEndian.Uint16(p[4:]))
		r.Data = append(r.Data, binary.LittleEndian.Uint64(p[8:]))
	}
	return r
}
