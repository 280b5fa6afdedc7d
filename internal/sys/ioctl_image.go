package sys

import (
	"encoding/binary"
	"unsafe"
)

// Read-only views of a built command, for golden tests and for the kernel
// validation model (internal/testkit/ioctlmodel). They are not used on the
// command path.

// IoctlHeaderSize and IoctlAttrSize are the sizes of struct
// ib_uverbs_ioctl_hdr and struct ib_uverbs_attr.
const (
	IoctlHeaderSize = hdrSize
	IoctlAttrSize   = attrSize
)

// Image returns a copy of the header and attribute array exactly as Exec
// hands them to the kernel: the length field computed and both reserved
// fields zero (Exec sets them the same way). Pointer attributes carry the
// address of the caller's buffer in their data field (see AttrBuf).
func (c *Ioctl) Image() []byte {
	n := int(c.hdr.NumAttrs)
	out := make([]byte, hdrSize+attrSize*n)
	binary.LittleEndian.PutUint16(out[0:], uint16(hdrSize+attrSize*n))
	binary.LittleEndian.PutUint16(out[2:], c.hdr.ObjectID)
	binary.LittleEndian.PutUint16(out[4:], c.hdr.MethodID)
	binary.LittleEndian.PutUint16(out[6:], c.hdr.NumAttrs)
	binary.LittleEndian.PutUint32(out[16:], c.hdr.DriverID)
	for i := range n {
		a := &c.attrs[i]
		p := out[hdrSize+attrSize*i:]
		binary.LittleEndian.PutUint16(p[0:], a.AttrID)
		binary.LittleEndian.PutUint16(p[2:], a.Len)
		binary.LittleEndian.PutUint16(p[4:], a.Flags)
		binary.LittleEndian.PutUint16(p[6:], a.AttrData)
		binary.LittleEndian.PutUint64(p[8:], a.Data)
	}
	return out
}

// AttrBuf returns the caller's buffer that attribute i points to (its
// address is the attribute's data), or nil when the attribute carries its
// value inline or is not a pointer. The slice aliases the caller's memory.
func (c *Ioctl) AttrBuf(i int) []byte {
	if i < 0 || i >= int(c.hdr.NumAttrs) || c.refs[i] == nil {
		return nil
	}
	return unsafe.Slice((*byte)(c.refs[i]), int(c.attrs[i].Len))
}

// BuildErr returns the first building error the command recorded (which
// Exec would return without calling the kernel), or nil.
func (c *Ioctl) BuildErr() error { return c.err }

// DriverID returns the driver id set by Reset.
func (c *Ioctl) DriverID() uint32 { return c.hdr.DriverID }
