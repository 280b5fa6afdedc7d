// Package rdmanl speaks the RDMA netlink protocol (NETLINK_RDMA, client
// RDMA_NL_NLDEV) well enough to add and delete soft-RoCE (rxe) links and to
// list RDMA devices, without cgo and without iproute2's rdma tool.
//
// Message layout (see docs/uverbs-abi-notes.md §6 in the shared notes): a
// 16-byte nlmsghdr followed directly by netlink attributes; there is no
// generic-netlink header. Requests that change state carry
// NLM_F_REQUEST|NLM_F_ACK and are answered by an NLMSG_ERROR message whose
// error field is 0 on success or -errno.
package rdmanl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Protocol constants from include/uapi/rdma/rdma_netlink.h.
const (
	NetlinkRDMA = 20 // NETLINK_RDMA
	ClientNLDev = 5  // RDMA_NL_NLDEV

	CmdGet     = 1 // RDMA_NLDEV_CMD_GET
	CmdNewLink = 3 // RDMA_NLDEV_CMD_NEWLINK
	CmdDelLink = 4 // RDMA_NLDEV_CMD_DELLINK

	AttrDevIndex  = 1  // u32
	AttrDevName   = 2  // string
	AttrPortIndex = 3  // u32; in a device GET: number of ports
	AttrNodeGUID  = 6  // u64
	AttrNdevName  = 51 // string
	AttrLinkType  = 65 // string
)

// MsgType returns the nlmsghdr type for an NLDEV command: (client<<10)|op.
func MsgType(op uint16) uint16 { return ClientNLDev<<10 | op }

const (
	nlmsgHdrLen = 16
	nlaHdrLen   = 4
)

func align4(n int) int { return (n + 3) &^ 3 }

// Attr is one netlink attribute.
type Attr struct {
	Type uint16
	Data []byte
}

// StringAttr returns a NUL-terminated string attribute, as iproute2's
// mnl_attr_put_strz writes it.
func StringAttr(typ uint16, s string) Attr {
	return Attr{Type: typ, Data: append([]byte(s), 0)}
}

// U32Attr returns a native-endian u32 attribute.
func U32Attr(typ uint16, v uint32) Attr {
	b := make([]byte, 4)
	binary.NativeEndian.PutUint32(b, v)
	return Attr{Type: typ, Data: b}
}

// Encode builds a netlink message: header, then the attributes, each padded
// to 4 bytes. pid is left 0 (the kernel fills in the sender).
func Encode(typ, flags uint16, seq uint32, attrs ...Attr) []byte {
	n := nlmsgHdrLen
	for _, a := range attrs {
		n += align4(nlaHdrLen + len(a.Data))
	}
	b := make([]byte, n)
	binary.NativeEndian.PutUint32(b[0:], uint32(n))
	binary.NativeEndian.PutUint16(b[4:], typ)
	binary.NativeEndian.PutUint16(b[6:], flags)
	binary.NativeEndian.PutUint32(b[8:], seq)
	off := nlmsgHdrLen
	for _, a := range attrs {
		binary.NativeEndian.PutUint16(b[off:], uint16(nlaHdrLen+len(a.Data)))
		binary.NativeEndian.PutUint16(b[off+2:], a.Type)
		copy(b[off+nlaHdrLen:], a.Data)
		off += align4(nlaHdrLen + len(a.Data))
	}
	return b
}

// NewLinkMsg encodes `rdma link add NAME type LINKTYPE netdev NETDEV`.
func NewLinkMsg(seq uint32, name, linkType, netdev string) []byte {
	return Encode(MsgType(CmdNewLink), unix.NLM_F_REQUEST|unix.NLM_F_ACK, seq,
		StringAttr(AttrDevName, name),
		StringAttr(AttrLinkType, linkType),
		StringAttr(AttrNdevName, netdev))
}

// DelLinkMsg encodes a DELLINK request for the device with the given index.
func DelLinkMsg(seq uint32, index uint32) []byte {
	return Encode(MsgType(CmdDelLink), unix.NLM_F_REQUEST|unix.NLM_F_ACK, seq,
		U32Attr(AttrDevIndex, index))
}

// GetDumpMsg encodes a dump of all RDMA devices.
func GetDumpMsg(seq uint32) []byte {
	return Encode(MsgType(CmdGet), unix.NLM_F_REQUEST|unix.NLM_F_DUMP, seq)
}

// Message is one parsed netlink message.
type Message struct {
	Type  uint16
	Flags uint16
	Seq   uint32
	Pid   uint32
	Body  []byte // everything after the 16-byte header
}

// ErrTruncated reports a malformed or short netlink message.
var ErrTruncated = errors.New("rdmanl: truncated netlink message")

// ParseMessages splits a datagram into netlink messages.
func ParseMessages(b []byte) ([]Message, error) {
	var out []Message
	for len(b) > 0 {
		if len(b) < nlmsgHdrLen {
			return out, ErrTruncated
		}
		n := int(binary.NativeEndian.Uint32(b))
		if n < nlmsgHdrLen || n > len(b) {
			return out, ErrTruncated
		}
		out = append(out, Message{
			Type:  binary.NativeEndian.Uint16(b[4:]),
			Flags: binary.NativeEndian.Uint16(b[6:]),
			Seq:   binary.NativeEndian.Uint32(b[8:]),
			Pid:   binary.NativeEndian.Uint32(b[12:]),
			Body:  b[nlmsgHdrLen:n],
		})
		if align4(n) >= len(b) {
			break
		}
		b = b[align4(n):]
	}
	return out, nil
}

// ParseAttrs splits an attribute stream.
func ParseAttrs(b []byte) ([]Attr, error) {
	var out []Attr
	for len(b) >= nlaHdrLen {
		n := int(binary.NativeEndian.Uint16(b))
		if n < nlaHdrLen || n > len(b) {
			return out, ErrTruncated
		}
		out = append(out, Attr{Type: binary.NativeEndian.Uint16(b[2:]) & 0x3fff, Data: b[nlaHdrLen:n]})
		if align4(n) >= len(b) {
			break
		}
		b = b[align4(n):]
	}
	return out, nil
}

// ErrnoOf returns the error carried by an NLMSG_ERROR message: nil for an
// ACK (error 0), else the unix.Errno.
func ErrnoOf(m Message) error {
	if m.Type != unix.NLMSG_ERROR {
		return nil
	}
	if len(m.Body) < 4 {
		return ErrTruncated
	}
	e := int32(binary.NativeEndian.Uint32(m.Body))
	if e == 0 {
		return nil
	}
	return unix.Errno(-e)
}

// Device is one entry of a device dump.
type Device struct {
	Index    uint32
	Name     string
	NodeGUID uint64 // as the kernel stores it (big-endian GUID read natively)
	Ports    uint32
}

func cstring(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// ParseDevice decodes the attributes of one GET reply.
func ParseDevice(body []byte) (Device, error) {
	attrs, err := ParseAttrs(body)
	var d Device
	for _, a := range attrs {
		switch a.Type {
		case AttrDevIndex:
			if len(a.Data) >= 4 {
				d.Index = binary.NativeEndian.Uint32(a.Data)
			}
		case AttrDevName:
			d.Name = cstring(a.Data)
		case AttrPortIndex:
			if len(a.Data) >= 4 {
				d.Ports = binary.NativeEndian.Uint32(a.Data)
			}
		case AttrNodeGUID:
			if len(a.Data) >= 8 {
				d.NodeGUID = binary.NativeEndian.Uint64(a.Data)
			}
		}
	}
	return d, err
}

// Conn is an NETLINK_RDMA socket. It belongs to the network namespace of the
// thread that called Dial.
type Conn struct {
	fd  int
	seq atomic.Uint32
}

// Dial opens a NETLINK_RDMA socket (close-on-exec).
func Dial() (*Conn, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, NetlinkRDMA)
	if err != nil {
		return nil, os.NewSyscallError("socket(NETLINK_RDMA)", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("bind", err)
	}
	c := &Conn{fd: fd}
	c.seq.Store(uint32(os.Getpid()))
	return c, nil
}

// Close closes the socket.
func (c *Conn) Close() error { return unix.Close(c.fd) }

// roundTrip sends req and collects replies for its sequence number until an
// NLMSG_ERROR (ack) or NLMSG_DONE arrives. It returns the data messages.
func (c *Conn) roundTrip(req []byte) ([]Message, error) {
	seq := binary.NativeEndian.Uint32(req[8:])
	if err := unix.Sendto(c.fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, os.NewSyscallError("sendto", err)
	}
	var data []Message
	buf := make([]byte, 1<<16)
	for {
		n, _, err := unix.Recvfrom(c.fd, buf, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, os.NewSyscallError("recvfrom", err)
		}
		msgs, err := ParseMessages(buf[:n])
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			if m.Seq != seq {
				continue
			}
			switch m.Type {
			case unix.NLMSG_ERROR:
				return data, ErrnoOf(m)
			case unix.NLMSG_DONE:
				return data, nil
			default:
				m.Body = append([]byte(nil), m.Body...)
				data = append(data, m)
			}
		}
	}
}

// AddLink creates an RDMA link: AddLink("rxe0", "rxe", "d0").
func (c *Conn) AddLink(name, linkType, netdev string) error {
	_, err := c.roundTrip(NewLinkMsg(c.seq.Add(1), name, linkType, netdev))
	if err != nil {
		return fmt.Errorf("rdma link add %s type %s netdev %s: %w", name, linkType, netdev, err)
	}
	return nil
}

// Devices lists RDMA devices (RDMA_NLDEV_CMD_GET dump).
func (c *Conn) Devices() ([]Device, error) {
	msgs, err := c.roundTrip(GetDumpMsg(c.seq.Add(1)))
	if err != nil {
		return nil, fmt.Errorf("rdma dev dump: %w", err)
	}
	var out []Device
	for _, m := range msgs {
		d, err := ParseDevice(m.Body)
		if err != nil {
			return out, err
		}
		out = append(out, d)
	}
	return out, nil
}

// DelLink deletes the RDMA link (rxe or siw device) with the given name.
func (c *Conn) DelLink(name string) error {
	devs, err := c.Devices()
	if err != nil {
		return err
	}
	for _, d := range devs {
		if d.Name == name {
			if _, err := c.roundTrip(DelLinkMsg(c.seq.Add(1), d.Index)); err != nil {
				return fmt.Errorf("rdma link delete %s: %w", name, err)
			}
			return nil
		}
	}
	return fmt.Errorf("rdma link delete %s: %w", name, unix.ENODEV)
}
