package sys

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pureverbs/pureverbs/abi"
)

// RDMA netlink (NETLINK_RDMA, client RDMA_NL_NLDEV): device dump, uverbs
// char device lookup and rxe/siw link add/delete, without cgo and without
// iproute2's rdma tool.
//
// Message layout (uverbs-abi-notes §6): a 16-byte nlmsghdr followed
// directly by netlink attributes; there is no generic-netlink header. The
// type is (RDMA_NL_NLDEV << 10) | op. Requests that change state, and
// GET_CHARDEV, carry NLM_F_REQUEST|NLM_F_ACK and end with an NLMSG_ERROR
// message whose error field is 0 (ack) or -errno. Dumps carry
// NLM_F_REQUEST|NLM_F_DUMP and end with NLMSG_DONE.
//
// Every reply is parsed defensively: a malformed or truncated message is
// an error wrapping ErrNLMalformed, never a panic (FuzzParseNLReply).

// NetlinkRDMA is the NETLINK_RDMA protocol number (linux/netlink.h).
const NetlinkRDMA = unix.NETLINK_RDMA

// DefaultNLTimeout bounds a netlink exchange whose context has no
// deadline. The kernel answers RDMA netlink requests synchronously (the
// reply is queued before sendto returns), so this only matters if
// something is badly wrong.
const DefaultNLTimeout = 10 * time.Second

// NLDevType returns the nlmsghdr type of an NLDEV command:
// RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, op).
func NLDevType(op uint16) uint16 { return abi.RDMA_NL_NLDEV<<10 | op }

const (
	nlmsgHdrLen = 16
	nlaHdrLen   = 4
	nlaTypeMask = 0x3fff // ^(NLA_F_NESTED | NLA_F_NET_BYTEORDER)
)

func nlAlign(n int) int { return (n + 3) &^ 3 }

// ErrNLMalformed reports a netlink reply that is short, has lengths that
// do not fit, or lacks a required attribute.
var ErrNLMalformed = errors.New("sys: malformed RDMA netlink message")

// NLAttr is one netlink attribute (type without the NESTED/BYTEORDER flags).
type NLAttr struct {
	Type uint16
	Data []byte
}

// NLStringAttr returns a NUL-terminated string attribute, as iproute2's
// mnl_attr_put_strz writes it.
func NLStringAttr(typ uint16, s string) NLAttr {
	return NLAttr{Type: typ, Data: append([]byte(s), 0)}
}

// NLU32Attr returns a native-endian u32 attribute.
func NLU32Attr(typ uint16, v uint32) NLAttr {
	return NLAttr{Type: typ, Data: binary.NativeEndian.AppendUint32(nil, v)}
}

// EncodeNLMsg builds a netlink message: header, then the attributes, each
// padded to 4 bytes. pid is 0 (the kernel fills in the sender).
func EncodeNLMsg(typ, flags uint16, seq uint32, attrs ...NLAttr) []byte {
	n := nlmsgHdrLen
	for _, a := range attrs {
		n += nlAlign(nlaHdrLen + len(a.Data))
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
		off += nlAlign(nlaHdrLen + len(a.Data))
	}
	return b
}

// NLNewLinkMsg encodes `rdma link add NAME type LINKTYPE netdev NETDEV`
// (attributes in iproute2's order: DEV_NAME, LINK_TYPE, NDEV_NAME).
func NLNewLinkMsg(seq uint32, name, linkType, netdev string) []byte {
	return EncodeNLMsg(NLDevType(abi.RDMA_NLDEV_CMD_NEWLINK), unix.NLM_F_REQUEST|unix.NLM_F_ACK, seq,
		NLStringAttr(abi.RDMA_NLDEV_ATTR_DEV_NAME, name),
		NLStringAttr(abi.RDMA_NLDEV_ATTR_LINK_TYPE, linkType),
		NLStringAttr(abi.RDMA_NLDEV_ATTR_NDEV_NAME, netdev))
}

// NLDelLinkMsg encodes a DELLINK request for the device with this index.
func NLDelLinkMsg(seq, index uint32) []byte {
	return EncodeNLMsg(NLDevType(abi.RDMA_NLDEV_CMD_DELLINK), unix.NLM_F_REQUEST|unix.NLM_F_ACK, seq,
		NLU32Attr(abi.RDMA_NLDEV_ATTR_DEV_INDEX, index))
}

// NLGetDumpMsg encodes a dump of all RDMA devices (RDMA_NLDEV_CMD_GET).
func NLGetDumpMsg(seq uint32) []byte {
	return EncodeNLMsg(NLDevType(abi.RDMA_NLDEV_CMD_GET), unix.NLM_F_REQUEST|unix.NLM_F_DUMP, seq)
}

// NLGetChardevMsg encodes RDMA_NLDEV_CMD_GET_CHARDEV for device index and
// char device type chardevType ("uverbs").
func NLGetChardevMsg(seq, index uint32, chardevType string) []byte {
	return EncodeNLMsg(NLDevType(abi.RDMA_NLDEV_CMD_GET_CHARDEV), unix.NLM_F_REQUEST|unix.NLM_F_ACK, seq,
		NLU32Attr(abi.RDMA_NLDEV_ATTR_DEV_INDEX, index),
		NLStringAttr(abi.RDMA_NLDEV_ATTR_CHARDEV_TYPE, chardevType))
}

// NLMsg is one parsed netlink message. Body aliases the parsed buffer.
type NLMsg struct {
	Type  uint16
	Flags uint16
	Seq   uint32
	Pid   uint32
	Body  []byte // everything after the 16-byte header
}

// ParseNLMsgs splits a datagram into netlink messages. On error it returns
// the messages parsed before the bad one.
func ParseNLMsgs(b []byte) ([]NLMsg, error) {
	var out []NLMsg
	for len(b) > 0 {
		if len(b) < nlmsgHdrLen {
			return out, fmt.Errorf("%w: %d trailing bytes, shorter than a message header", ErrNLMalformed, len(b))
		}
		n := int(binary.NativeEndian.Uint32(b))
		if n < nlmsgHdrLen || n > len(b) {
			return out, fmt.Errorf("%w: message length %d with %d bytes left", ErrNLMalformed, n, len(b))
		}
		out = append(out, NLMsg{
			Type:  binary.NativeEndian.Uint16(b[4:]),
			Flags: binary.NativeEndian.Uint16(b[6:]),
			Seq:   binary.NativeEndian.Uint32(b[8:]),
			Pid:   binary.NativeEndian.Uint32(b[12:]),
			Body:  b[nlmsgHdrLen:n],
		})
		if nlAlign(n) >= len(b) {
			break
		}
		b = b[nlAlign(n):]
	}
	return out, nil
}

// ParseNLAttrs splits an attribute stream. On error it returns the
// attributes parsed before the bad one.
func ParseNLAttrs(b []byte) ([]NLAttr, error) {
	var out []NLAttr
	for len(b) > 0 {
		if len(b) < nlaHdrLen {
			return out, fmt.Errorf("%w: %d trailing bytes, shorter than an attribute header", ErrNLMalformed, len(b))
		}
		n := int(binary.NativeEndian.Uint16(b))
		if n < nlaHdrLen || n > len(b) {
			return out, fmt.Errorf("%w: attribute length %d with %d bytes left", ErrNLMalformed, n, len(b))
		}
		out = append(out, NLAttr{Type: binary.NativeEndian.Uint16(b[2:]) & nlaTypeMask, Data: b[nlaHdrLen:n]})
		if nlAlign(n) >= len(b) {
			break
		}
		b = b[nlAlign(n):]
	}
	return out, nil
}

// NLMsgErr returns the error carried by an NLMSG_ERROR or NLMSG_DONE
// message: nil for an ack (error 0) or a DONE without an error field,
// Errno for -errno, ErrNLMalformed for a short or positive error field.
// Other message types give nil.
func NLMsgErr(m NLMsg) error {
	switch m.Type {
	case unix.NLMSG_ERROR:
		if len(m.Body) < 4 {
			return fmt.Errorf("%w: NLMSG_ERROR with %d-byte body", ErrNLMalformed, len(m.Body))
		}
	case unix.NLMSG_DONE:
		if len(m.Body) < 4 {
			return nil // older kernels may send an empty DONE
		}
	default:
		return nil
	}
	e := int32(binary.NativeEndian.Uint32(m.Body))
	switch {
	case e == 0:
		return nil
	case e < 0 && e > -4096:
		return Errno(-e)
	}
	return fmt.Errorf("%w: error field %d", ErrNLMalformed, e)
}

// NLDevice is one entry of an RDMA_NLDEV_CMD_GET dump.
type NLDevice struct {
	Index    uint32 // DEV_INDEX
	Name     string // DEV_NAME
	NodeGUID uint64 // NODE_GUID as the kernel stores it (the big-endian GUID read natively); 0 if absent
	Ports    uint32 // PORT_INDEX (in a device reply: the number of ports); 0 if absent
}

// NLChardev is the answer to RDMA_NLDEV_CMD_GET_CHARDEV.
type NLChardev struct {
	Name        string // CHARDEV_NAME, e.g. "uverbs0"
	ABI         uint64 // CHARDEV_ABI: the driver's uverbs ABI version (rxe 2)
	Major       uint32 // from CHARDEV (huge_encode_dev form)
	Minor       uint32
	DriverID    uint32 // UVERBS_DRIVER_ID: enum rdma_driver_id; valid if HasDriverID
	HasDriverID bool   // the kernel sent UVERBS_DRIVER_ID (absent before Linux 5.0 and for non-uverbs types)
}

// cstring returns the text of a NUL-terminated string attribute.
func cstring(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

func nlU32(a NLAttr) (uint32, error) {
	if len(a.Data) != 4 {
		return 0, fmt.Errorf("%w: attribute %d: %d bytes, want a u32", ErrNLMalformed, a.Type, len(a.Data))
	}
	return binary.NativeEndian.Uint32(a.Data), nil
}

func nlU64(a NLAttr) (uint64, error) {
	if len(a.Data) != 8 {
		return 0, fmt.Errorf("%w: attribute %d: %d bytes, want a u64", ErrNLMalformed, a.Type, len(a.Data))
	}
	return binary.NativeEndian.Uint64(a.Data), nil
}

// ParseNLDevice decodes one GET reply body. DEV_INDEX and a non-empty
// DEV_NAME are required; a known attribute of the wrong size is an error.
func ParseNLDevice(body []byte) (NLDevice, error) {
	attrs, err := ParseNLAttrs(body)
	if err != nil {
		return NLDevice{}, err
	}
	var d NLDevice
	var haveIndex bool
	for _, a := range attrs {
		switch a.Type {
		case abi.RDMA_NLDEV_ATTR_DEV_INDEX:
			d.Index, err = nlU32(a)
			haveIndex = true
		case abi.RDMA_NLDEV_ATTR_DEV_NAME:
			d.Name = cstring(a.Data)
		case abi.RDMA_NLDEV_ATTR_PORT_INDEX:
			d.Ports, err = nlU32(a)
		case abi.RDMA_NLDEV_ATTR_NODE_GUID:
			d.NodeGUID, err = nlU64(a)
		}
		if err != nil {
			return NLDevice{}, err
		}
	}
	if !haveIndex || d.Name == "" {
		return NLDevice{}, fmt.Errorf("%w: device reply without DEV_INDEX or DEV_NAME", ErrNLMalformed)
	}
	return d, nil
}

// ParseNLChardev decodes a GET_CHARDEV reply body. CHARDEV_NAME,
// CHARDEV_ABI and CHARDEV are required (as rdma-core requires them);
// UVERBS_DRIVER_ID is optional.
func ParseNLChardev(body []byte) (NLChardev, error) {
	attrs, err := ParseNLAttrs(body)
	if err != nil {
		return NLChardev{}, err
	}
	var c NLChardev
	var haveName, haveABI, haveDev bool
	for _, a := range attrs {
		switch a.Type {
		case abi.RDMA_NLDEV_ATTR_CHARDEV_NAME:
			c.Name = cstring(a.Data)
			haveName = c.Name != ""
		case abi.RDMA_NLDEV_ATTR_CHARDEV_ABI:
			c.ABI, err = nlU64(a)
			haveABI = true
		case abi.RDMA_NLDEV_ATTR_CHARDEV:
			var v uint64
			v, err = nlU64(a)
			// huge_encode_dev: major in bits 8-19, minor in bits 0-7 and 20-31.
			c.Major = uint32((v & 0xfff00) >> 8)
			c.Minor = uint32((v & 0xff) | ((v >> 12) & 0xfff00))
			haveDev = true
		case abi.RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID:
			c.DriverID, err = nlU32(a)
			c.HasDriverID = true
		}
		if err != nil {
			return NLChardev{}, err
		}
	}
	if !haveName || !haveABI || !haveDev {
		return NLChardev{}, fmt.Errorf("%w: GET_CHARDEV reply without CHARDEV_NAME, CHARDEV_ABI or CHARDEV", ErrNLMalformed)
	}
	return c, nil
}

// nlCollector gathers the replies to one request, datagram by datagram:
// the data messages with the request's sequence number, until an
// NLMSG_ERROR (ack or error) or NLMSG_DONE (end of a multi-part dump).
// Messages of other sequence numbers are ignored.
type nlCollector struct {
	seq  uint32
	data []NLMsg // bodies copied out of the receive buffer
}

// feed processes one datagram. done reports that the exchange is over;
// err is the exchange's error (a kernel errno or ErrNLMalformed).
func (c *nlCollector) feed(dgram []byte) (done bool, err error) {
	msgs, err := ParseNLMsgs(dgram)
	if err != nil {
		return true, err
	}
	for _, m := range msgs {
		if m.Seq != c.seq {
			continue
		}
		switch m.Type {
		case unix.NLMSG_ERROR, unix.NLMSG_DONE:
			return true, NLMsgErr(m)
		case unix.NLMSG_NOOP:
			continue
		case unix.NLMSG_OVERRUN:
			return true, fmt.Errorf("%w: NLMSG_OVERRUN", ErrNLMalformed)
		}
		m.Body = append([]byte(nil), m.Body...)
		c.data = append(c.data, m)
	}
	return false, nil
}

// NLConn is a NETLINK_RDMA socket. It belongs to the network namespace of
// the thread that called DialNL. Its methods may be called concurrently;
// requests are serialised. Every exchange is bounded by its context's
// deadline, or DefaultNLTimeout when the context has none.
type NLConn struct {
	file  *os.File
	rc    syscall.RawConn
	peer  unix.Sockaddr // the kernel; nil for a connected test socket
	trace *FD           // leak-tracing stand-in

	mu  sync.Mutex
	seq uint32

	// dlMu orders deadline changes: exchange sets the socket deadline
	// for its own request (generation dlGen); a context's AfterFunc may
	// expire it only while that generation is current, so the late
	// AfterFunc of an earlier, already finished exchange can never cut
	// a later one short.
	dlMu  sync.Mutex
	dlGen uint64
}

// DialNL opens a NETLINK_RDMA socket (close-on-exec, non-blocking and
// driven by the runtime poller). It fails with EPROTONOSUPPORT when the
// kernel has no RDMA netlink (ib_core not loaded).
func DialNL() (*NLConn, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, NetlinkRDMA)
	if err != nil {
		return nil, os.NewSyscallError("socket(AF_NETLINK, NETLINK_RDMA)", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("bind(NETLINK_RDMA)", err)
	}
	return newNLConn(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
}

// newNLConn wraps a non-blocking close-on-exec datagram socket. peer nil
// means the socket is connected (tests use a socketpair).
func newNLConn(fd int, peer unix.Sockaddr) (*NLConn, error) {
	f := os.NewFile(uintptr(fd), "netlink-rdma")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	c := &NLConn{file: f, rc: rc, peer: peer, seq: uint32(time.Now().UnixNano())}
	if tracing.Load() {
		c.trace = &FD{raw: int32(fd), name: "netlink-rdma socket"}
		traceOpen(c.trace)
	}
	return c, nil
}

// Close closes the socket.
func (c *NLConn) Close() error {
	if c.trace != nil {
		traceClose(c.trace)
	}
	return c.file.Close()
}

// nlRecvBuf is large enough for any RDMA netlink datagram: the kernel
// sizes dump skbs by the reader's buffer but caps them at 32 KiB.
const nlRecvBuf = 64 << 10

// exchange sends req and returns the data messages answering it.
func (c *NLConn) exchange(ctx context.Context, req []byte) ([]NLMsg, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(DefaultNLTimeout)
	}
	c.dlMu.Lock()
	c.dlGen++
	gen := c.dlGen
	err := c.file.SetDeadline(deadline)
	c.dlMu.Unlock()
	if err != nil {
		return nil, err
	}
	// A cancelled context expires the deadline, waking a parked reader,
	// but only while this exchange is the current one.
	stop := context.AfterFunc(ctx, func() {
		c.dlMu.Lock()
		if c.dlGen == gen {
			c.file.SetDeadline(time.Unix(1, 0))
		}
		c.dlMu.Unlock()
	})
	defer func() {
		stop()
		c.dlMu.Lock()
		c.dlGen++ // retire this exchange's generation
		c.dlMu.Unlock()
	}()

	col := nlCollector{seq: binary.NativeEndian.Uint32(req[8:])}
	var serr error
	err = c.rc.Write(func(fd uintptr) bool {
		serr = unix.Sendto(int(fd), req, 0, c.peer)
		return serr != unix.EAGAIN && serr != unix.EINTR
	})
	if err == nil && serr != nil {
		err = os.NewSyscallError("sendto", serr)
	}
	if err != nil {
		return nil, c.ctxErr(ctx, err)
	}
	buf := make([]byte, nlRecvBuf)
	for {
		var n int
		var from unix.Sockaddr
		var rerr error
		err := c.rc.Read(func(fd uintptr) bool {
			n, from, rerr = unix.Recvfrom(int(fd), buf, unix.MSG_TRUNC)
			return rerr != unix.EAGAIN && rerr != unix.EINTR
		})
		if err == nil && rerr != nil {
			err = os.NewSyscallError("recvfrom", rerr)
		}
		if err != nil {
			return nil, c.ctxErr(ctx, err)
		}
		if nl, ok := from.(*unix.SockaddrNetlink); ok && nl.Pid != 0 {
			continue // not from the kernel
		}
		if n > len(buf) {
			return nil, fmt.Errorf("%w: %d-byte datagram exceeds the %d-byte buffer", ErrNLMalformed, n, len(buf))
		}
		done, err := col.feed(buf[:n])
		if done {
			return col.data, err
		}
	}
}

// ctxErr turns a deadline expiry into the context's error, or into an
// ETIMEDOUT error for the default timeout.
func (c *NLConn) ctxErr(ctx context.Context, err error) error {
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		return err
	}
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		// The poller's timer fired before the context's.
		return context.DeadlineExceeded
	}
	return fmt.Errorf("no RDMA netlink reply in time: %w", ETIMEDOUT)
}

func (c *NLConn) nextSeq() uint32 {
	c.seq++
	return c.seq
}

// Devices lists RDMA devices (RDMA_NLDEV_CMD_GET dump), in the kernel's
// order.
func (c *NLConn) Devices(ctx context.Context) ([]NLDevice, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.devices(ctx)
}

func (c *NLConn) devices(ctx context.Context) ([]NLDevice, error) {
	msgs, err := c.exchange(ctx, NLGetDumpMsg(c.nextSeq()))
	if err != nil {
		return nil, fmt.Errorf("rdma netlink device dump: %w", err)
	}
	out := make([]NLDevice, 0, len(msgs))
	for _, m := range msgs {
		if m.Type != NLDevType(abi.RDMA_NLDEV_CMD_GET) {
			continue
		}
		d, err := ParseNLDevice(m.Body)
		if err != nil {
			return nil, fmt.Errorf("rdma netlink device dump: %w", err)
		}
		out = append(out, d)
	}
	return out, nil
}

// Chardev asks for the char device of type chardevType ("uverbs") of the
// device with this index (RDMA_NLDEV_CMD_GET_CHARDEV, Linux 5.0+). Kernels
// without the command answer EINVAL or EOPNOTSUPP.
func (c *NLConn) Chardev(ctx context.Context, index uint32, chardevType string) (NLChardev, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.chardev(ctx, index, chardevType)
}

func (c *NLConn) chardev(ctx context.Context, index uint32, chardevType string) (NLChardev, error) {
	msgs, err := c.exchange(ctx, NLGetChardevMsg(c.nextSeq(), index, chardevType))
	if err == nil && len(msgs) != 1 {
		err = fmt.Errorf("%w: %d replies, want 1", ErrNLMalformed, len(msgs))
	}
	var cd NLChardev
	if err == nil {
		cd, err = ParseNLChardev(msgs[0].Body)
	}
	if err != nil {
		return NLChardev{}, fmt.Errorf("rdma netlink get_chardev %s of device %d: %w", chardevType, index, err)
	}
	return cd, nil
}

// AddLink creates an RDMA link: AddLink(ctx, "rxe0", "rxe", "d0") is
// `rdma link add rxe0 type rxe netdev d0`. Needs CAP_NET_ADMIN.
func (c *NLConn) AddLink(ctx context.Context, name, linkType, netdev string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := c.exchange(ctx, NLNewLinkMsg(c.nextSeq(), name, linkType, netdev)); err != nil {
		return fmt.Errorf("rdma link add %s type %s netdev %s: %w", name, linkType, netdev, err)
	}
	return nil
}

// DelLink deletes the RDMA link (an rxe or siw device) with this name. It
// fails with ENODEV when no device has the name.
func (c *NLConn) DelLink(ctx context.Context, name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	devs, err := c.devices(ctx)
	if err != nil {
		return err
	}
	for _, d := range devs {
		if d.Name == name {
			if _, err := c.exchange(ctx, NLDelLinkMsg(c.nextSeq(), d.Index)); err != nil {
				return fmt.Errorf("rdma link delete %s: %w", name, err)
			}
			return nil
		}
	}
	return fmt.Errorf("rdma link delete %s: %w", name, ENODEV)
}

// UverbsChardev is what RDMA netlink says about one device's uverbs char
// device.
type UverbsChardev struct {
	Device NLDevice
	NLChardev
}

// UverbsChardevs returns the uverbs char device of every RDMA device in
// the caller's network namespace, keyed by ibdev name: one GET dump and one
// GET_CHARDEV per device, on one socket, as libibverbs' find_sysfs_devs_nl
// does. A device whose GET_CHARDEV fails (it vanished meanwhile, it has no
// uverbs) is left out; if every device fails, the first error is returned,
// so a kernel without GET_CHARDEV (before 5.0) reports an error rather than
// an empty map.
func UverbsChardevs(ctx context.Context) (map[string]UverbsChardev, error) {
	c, err := DialNL()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.mu.Lock()
	defer c.mu.Unlock()
	devs, err := c.devices(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]UverbsChardev, len(devs))
	var first error
	for _, d := range devs {
		cd, err := c.chardev(ctx, d.Index, "uverbs")
		if err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			if first == nil {
				first = err
			}
			continue
		}
		out[d.Name] = UverbsChardev{Device: d, NLChardev: cd}
	}
	if len(out) == 0 && first != nil {
		return nil, first
	}
	return out, nil
}

// UverbsDriverIDs maps each RDMA device's name to its uverbs driver id
// (enum rdma_driver_id, the value every RDMA_VERBS_IOCTL header must
// carry), from RDMA netlink. Devices whose kernel does not report
// UVERBS_DRIVER_ID are left out. Errors are those of UverbsChardevs.
func UverbsDriverIDs(ctx context.Context) (map[string]uint32, error) {
	cds, err := UverbsChardevs(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]uint32, len(cds))
	for name, cd := range cds {
		if cd.HasDriverID {
			out[name] = cd.DriverID
		}
	}
	return out, nil
}
