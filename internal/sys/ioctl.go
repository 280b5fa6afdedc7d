package sys

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Wire layout of the RDMA_VERBS_IOCTL header and attribute, mirroring
// struct ib_uverbs_ioctl_hdr and struct ib_uverbs_attr
// (rdma/rdma_user_ioctl_cmds.h). layout_test.go proves they match the
// generated abi types byte for byte.
type ioctlHdr struct {
	Length    uint16
	ObjectID  uint16
	MethodID  uint16
	NumAttrs  uint16
	Reserved1 uint64
	DriverID  uint32
	Reserved2 uint32
}

type ioctlAttr struct {
	AttrID   uint16
	Len      uint16
	Flags    uint16
	AttrData uint16 // enum_data.elem_id in the low byte for ENUM_IN
	Data     uint64
}

const (
	// RDMA_VERBS_IOCTL: _IOWR(0x1b, 1, struct ib_uverbs_ioctl_hdr).
	rdmaVerbsIoctl = 0xC0181B01

	attrFMandatory   = 1 // UVERBS_ATTR_F_MANDATORY
	attrFValidOutput = 2 // UVERBS_ATTR_F_VALID_OUTPUT

	// MaxAttrs bounds the attributes of one command. The largest method
	// the library sends (QP create) uses 15 plus the two UHW attrs.
	MaxAttrs = 24

	hdrSize  = 24
	attrSize = 16
)

// Ioctl is one RDMA_VERBS_IOCTL command: the header followed directly by
// its attribute array, exactly as the kernel reads it, plus the Go
// references that keep every pointed-to buffer reachable and pinned in
// the heap for the duration of the call.
//
// An Ioctl must live in the heap (use NewIoctl or a pool): the kernel
// writes results back into it. It is not safe for concurrent use; reuse it
// with Reset. Building and executing a command allocates nothing.
type Ioctl struct {
	hdr   ioctlHdr
	attrs [MaxAttrs]ioctlAttr
	// refs holds the unsafe.Pointer of every buffer whose address is
	// stored (as an integer) in attrs[i].Data, so the GC keeps it alive
	// and any buffer handed to us escapes to the (non-moving) heap.
	refs [MaxAttrs]unsafe.Pointer
	err  error // first building error, reported by Exec

	overflow ioctlAttr // absorbs writes once a command overflows; Exec then fails

	// Scratch for the write() fallback, allocated on first use. It is a
	// separate heap object because the response buffer's address travels
	// as an integer inside the request image: it must never be on a stack
	// (which may move), whatever the Ioctl itself lives in.
	scratch *writeScratch

	// out is a small response buffer inside the (heap) Ioctl, handed out
	// by Scratch: a command's output needs no buffer of its own.
	out [scratchWords]uint64
}

const scratchWords = 32 // 256 bytes, 8-byte aligned

// Scratch returns a zeroed *T inside c, for a command's response (PtrOut):
// it lives as long as c and is reused by the next command, so read it
// before returning c to its pool. T must be plain data of at most 256
// bytes (a larger T is a bug: Scratch panics).
func Scratch[T any](c *Ioctl) *T {
	var zero T
	if unsafe.Sizeof(zero) > unsafe.Sizeof(c.out) {
		panic("sys: Scratch type larger than the command's scratch")
	}
	clear(c.out[:(unsafe.Sizeof(zero)+7)/8])
	return (*T)(unsafe.Pointer(&c.out))
}

// NewIoctl returns a reset command buffer.
func NewIoctl() *Ioctl { return new(Ioctl) }

// Reset starts a new command for object/method on a device whose provider
// has the given driver id (RDMA_DRIVER_*).
func (c *Ioctl) Reset(object, method uint16, driverID uint32) {
	n := c.hdr.NumAttrs
	for i := range c.refs[:n] {
		c.refs[i] = nil
	}
	c.hdr = ioctlHdr{ObjectID: object, MethodID: method, DriverID: driverID}
	c.err = nil
}

// Clear drops every reference the command holds to caller buffers (as
// Reset does) without starting a new command; pools call it on return.
func (c *Ioctl) Clear() {
	clear(c.refs[:])
	c.hdr.NumAttrs = 0
	c.err = nil
}

// Object and Method return the ids set by Reset.
func (c *Ioctl) Object() uint16 { return c.hdr.ObjectID }
func (c *Ioctl) Method() uint16 { return c.hdr.MethodID }

// NumAttrs returns the number of attributes added so far.
func (c *Ioctl) NumAttrs() int { return int(c.hdr.NumAttrs) }

// Attr is the index of an attribute within a command, used to read back
// outputs after Exec.
type Attr int

func (c *Ioctl) next(id uint16, mandatory bool) (Attr, *ioctlAttr) {
	n := c.hdr.NumAttrs
	if int(n) >= MaxAttrs {
		if c.err == nil {
			c.err = errTooManyAttrs
		}
		return -1, &c.overflow
	}
	a := &c.attrs[n]
	*a = ioctlAttr{AttrID: id}
	if mandatory {
		a.Flags = attrFMandatory
	}
	c.refs[n] = nil
	c.hdr.NumAttrs = n + 1
	return Attr(n), a
}

// InlineIn adds a PTR_IN attribute of size bytes (1..8) whose value is
// carried inline in the data field (little-endian, as a memcpy would).
func (c *Ioctl) InlineIn(id uint16, v uint64, size int, mandatory bool) Attr {
	if size <= 0 || size > 8 {
		if c.err == nil {
			c.err = errBadInline
		}
		size = 8
	}
	i, a := c.next(id, mandatory)
	a.Len = uint16(size)
	a.Data = v // little-endian host: the low size bytes are the value
	return i
}

// ConstIn adds a CONST_IN attribute (always 8 bytes inline).
func (c *Ioctl) ConstIn(id uint16, v uint64, mandatory bool) Attr {
	return c.InlineIn(id, v, 8, mandatory)
}

// FlagsIn adds a FLAGS_IN attribute as a u64.
func (c *Ioctl) FlagsIn(id uint16, v uint64, mandatory bool) Attr {
	return c.InlineIn(id, v, 8, mandatory)
}

// EnumIn adds an ENUM_IN attribute selecting elem, with an optional
// payload (nil for none).
func (c *Ioctl) EnumIn(id uint16, elem uint8, payload []byte, mandatory bool) Attr {
	i := c.BytesIn(id, payload, mandatory)
	if i >= 0 {
		c.attrs[i].AttrData = uint16(elem)
	}
	return i
}

// BytesIn adds a PTR_IN attribute holding b: inline when len(b) <= 8,
// otherwise by pointer.
func (c *Ioctl) BytesIn(id uint16, b []byte, mandatory bool) Attr {
	i, a, b := c.bytesAttr(id, b, mandatory)
	if len(b) > 0 && len(b) <= 8 {
		var v uint64
		copy((*[8]byte)(unsafe.Pointer(&v))[:], b)
		a.Data = v
		return i
	}
	c.attach(i, a, b)
	return i
}

// BytesOut adds a PTR_OUT attribute; the kernel writes up to len(b) bytes
// into b. Outputs always travel by pointer.
func (c *Ioctl) BytesOut(id uint16, b []byte, mandatory bool) Attr {
	i, a, b := c.bytesAttr(id, b, mandatory)
	c.attach(i, a, b)
	return i
}

// bytesAttr adds a pointer-type attribute of len(b) bytes (an over-long b
// fails the command at Exec and is treated as empty).
func (c *Ioctl) bytesAttr(id uint16, b []byte, mandatory bool) (Attr, *ioctlAttr, []byte) {
	if len(b) > 0xffff {
		if c.err == nil {
			c.err = errTooLong
		}
		b = b[:0]
	}
	i, a := c.next(id, mandatory)
	a.Len = uint16(len(b))
	return i, a, b
}

// attach stores b's address in the attribute and keeps b reachable (and in
// the heap) through refs; an empty b carries no pointer.
func (c *Ioctl) attach(i Attr, a *ioctlAttr, b []byte) {
	if len(b) == 0 || i < 0 {
		return
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	c.refs[i] = p
	a.Data = uint64(uintptr(p))
}

// PtrIn adds a PTR_IN attribute holding *v (inline when it is 8 bytes or
// less). T must be a plain-data type (an abi struct or integer).
func PtrIn[T any](c *Ioctl, id uint16, v *T, mandatory bool) Attr {
	return c.BytesIn(id, asBytes(v), mandatory)
}

// PtrOut adds a PTR_OUT attribute the kernel fills into *v.
func PtrOut[T any](c *Ioctl, id uint16, v *T, mandatory bool) Attr {
	return c.BytesOut(id, asBytes(v), mandatory)
}

// SliceOut adds a PTR_OUT attribute over the elements of s.
func SliceOut[T any](c *Ioctl, id uint16, s []T, mandatory bool) Attr {
	var zero T
	n := len(s) * int(unsafe.Sizeof(zero))
	if n == 0 {
		return c.BytesOut(id, nil, mandatory)
	}
	return c.BytesOut(id, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), n), mandatory)
}

func asBytes[T any](v *T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(v)), unsafe.Sizeof(*v))
}

// AsBytes exposes a plain-data value as its bytes (for write() commands and
// record decoding). The slice aliases *v.
func AsBytes[T any](v *T) []byte { return asBytes(v) }

// IDRIn adds an IDR attribute naming an existing object handle.
func (c *Ioctl) IDRIn(id uint16, handle uint32, mandatory bool) Attr {
	i, a := c.next(id, mandatory)
	a.Data = uint64(handle)
	return i
}

// IDRNew adds an IDR attribute for a new object; read the handle with
// Handle after Exec.
func (c *Ioctl) IDRNew(id uint16) Attr {
	i, _ := c.next(id, true)
	return i
}

// FDIn adds an FD attribute naming an existing fd.
func (c *Ioctl) FDIn(id uint16, fd int, mandatory bool) Attr {
	i, a := c.next(id, mandatory)
	a.Data = uint64(int64(fd))
	return i
}

// FDNew adds an FD attribute for a new fd; read it with FD after Exec.
func (c *Ioctl) FDNew(id uint16) Attr {
	i, a := c.next(id, true)
	a.Data = ^uint64(0) // -1 until the kernel writes the new fd
	return i
}

// Handle returns the object handle the kernel wrote into attribute i.
func (c *Ioctl) Handle(i Attr) uint32 {
	if i < 0 || int(i) >= int(c.hdr.NumAttrs) {
		return 0
	}
	return uint32(c.attrs[i].Data)
}

// NewFDNum returns the fd number the kernel wrote into attribute i, or -1.
func (c *Ioctl) NewFDNum(i Attr) int {
	if i < 0 || int(i) >= int(c.hdr.NumAttrs) {
		return -1
	}
	return int(int64(c.attrs[i].Data))
}

// Valid reports whether the kernel marked output attribute i as written
// (UVERBS_ATTR_F_VALID_OUTPUT).
func (c *Ioctl) Valid(i Attr) bool {
	if i < 0 || int(i) >= int(c.hdr.NumAttrs) {
		return false
	}
	return c.attrs[i].Flags&attrFValidOutput != 0
}

// Exec issues the command on the uverbs command fd. It returns nil or a
// unix.Errno (never wrapped here; the caller names object and method).
func (c *Ioctl) Exec(fd *FD) error {
	if c.err != nil {
		return c.err
	}
	raw, ok := fd.acquire()
	if !ok {
		return ErrClosedFD
	}
	c.hdr.Length = uint16(hdrSize + attrSize*int(c.hdr.NumAttrs))
	c.hdr.Reserved1, c.hdr.Reserved2 = 0, 0
	err := ioctlPtr(raw, rdmaVerbsIoctl, unsafe.Pointer(&c.hdr))
	fd.release()
	runtime.KeepAlive(c)
	return err
}

// ioctlPtr is the single ioctl entry point: EINTR is retried, the errno is
// returned unwrapped.
func ioctlPtr(fd int, req uint, arg unsafe.Pointer) error {
	for {
		_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(req), uintptr(arg))
		switch e {
		case 0:
			return nil
		case unix.EINTR:
			continue
		default:
			return e
		}
	}
}

type buildError string

func (e buildError) Error() string { return string(e) }

// Is makes building errors match unix.EINVAL.
func (e buildError) Is(target error) bool { return target == unix.EINVAL }

const (
	errTooManyAttrs = buildError("sys: too many ioctl attributes")
	errBadInline    = buildError("sys: inline attribute size must be 1..8")
	errTooLong      = buildError("sys: attribute longer than 65535 bytes")
)
