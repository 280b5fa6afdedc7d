package uverbs

import (
	"encoding/binary"
	"fmt"

	"github.com/pureverbs/pureverbs/internal/sys"
)

// GRHSize is the size of the global routing header (struct ibv_grh) that
// a UD receive gets in the first 40 bytes of its buffer, ahead of the
// payload, when the completion has WCGRH. On RoCE v2 over IPv4 its last 20
// bytes hold the packet's IPv4 header instead.
const GRHSize = 40

// ipProtoUDP and ibNextHdr are the GRH next headers of RoCE v2 (UDP) and
// of InfiniBand and RoCE v1 (the IB transport header).
const (
	ipProtoUDP = 17
	ibNextHdr  = 0x1b
)

// AHAttrFromWC returns the address vector that answers the sender of a UD
// message received on port (ibv_init_ah_from_wc(3)): DLID, SL and
// SrcPathBits from wc, and, when wc has WCGRH, the route from grh, the
// first GRHSize bytes of the receive buffer: the sender's GID becomes
// DGID; SGIDIndex is the index of the port's GID the message was sent to,
// of the type the header shows (RoCE v2 for IPv4 and for IPv6 over UDP, IB
// or RoCE v1 for an IB next header); HopLimit and TrafficClass are the
// received ones (an IPv4 header's TTL and TOS). Like libibverbs it tells
// an IPv4 header from an IPv6 one by the version nibbles and, when both
// could be, the IPv4 header's checksum.
//
// Errors wrap ErrInvalid: grh shorter than GRHSize, a message sent to a
// multicast address (no GID of the port to answer from), no GID of the
// port equal to the destination, a header that is neither IPv4 nor IPv6
// or an IPv6 header whose next header is neither UDP nor IB (both also
// match unix.EPROTONOSUPPORT, libibverbs' errno), or a port out of range;
// errors of the GID table query are returned as they are.
func (c *Context) AHAttrFromWC(port int, wc *WC, grh []byte) (AHAttr, error) {
	if c == nil {
		return AHAttr{}, errNilContext
	}
	if wc == nil {
		return AHAttr{}, invalidErr("ah", "init_from_wc", "nil work completion")
	}
	if port < 1 || port > 255 {
		return AHAttr{}, invalidErr("ah", "init_from_wc", "port %d out of range", port)
	}
	attr, want, err := parseGRH(port, wc, grh)
	if err != nil || !attr.IsGlobal {
		return attr, err
	}
	idx, err := c.findGIDIndex(port, want.gid, want.typ)
	if err != nil {
		return AHAttr{}, err
	}
	attr.SGIDIndex = uint8(idx)
	return attr, nil
}

// CreateAHFromWC creates an address handle in pd that answers the sender
// of a UD message received on port (ibv_create_ah_from_wc(3)): CreateAH
// of AHAttrFromWC's attributes. The reply goes to wc.SrcQP.
func (pd *PD) CreateAHFromWC(port int, wc *WC, grh []byte) (*AH, error) {
	if pd == nil || pd.ctx == nil {
		return nil, invalidErr("ah", "create_from_wc", "nil PD")
	}
	attr, err := pd.ctx.AHAttrFromWC(port, wc, grh)
	if err != nil {
		return nil, err
	}
	return pd.CreateAH(attr)
}

// gidWant is the local GID a received message was addressed to.
type gidWant struct {
	gid GID
	typ GIDType
}

// parseGRH decodes what AHAttrFromWC needs from the completion and the
// header, without the GID table: the attributes (SGIDIndex still 0) and,
// for a global route, the local GID to look up.
func parseGRH(port int, wc *WC, grh []byte) (AHAttr, gidWant, error) {
	attr := AHAttr{DLID: wc.SLID, SL: wc.SL, SrcPathBits: wc.DLIDPathBits, PortNum: uint8(port)}
	if len(grh) >= 4 {
		// Taken whether or not the route is global, as libibverbs does.
		attr.FlowLabel = binary.BigEndian.Uint32(grh[0:4]) & 0xfffff
	}
	if wc.Flags&WCGRH == 0 {
		return attr, gidWant{}, nil
	}
	if len(grh) < GRHSize {
		return AHAttr{}, gidWant{}, invalidErr("ah", "init_from_wc", "global routing header of %d bytes, want %d", len(grh), GRHSize)
	}
	vtf := binary.BigEndian.Uint32(grh[0:4])
	attr.IsGlobal = true
	ip4 := grh[20:40]
	switch grhVersion(vtf, ip4) {
	case 4:
		daddr := binary.BigEndian.Uint32(ip4[16:20])
		if daddr>>28 == 0xe { // class D: multicast, in no GID table
			return AHAttr{}, gidWant{}, invalidErr("ah", "init_from_wc", "message sent to multicast address %d.%d.%d.%d", ip4[16], ip4[17], ip4[18], ip4[19])
		}
		var want GID
		mapIPv4(&want, ip4[16:20])
		mapIPv4(&attr.DGID, ip4[12:16])
		attr.HopLimit = ip4[8]
		attr.TrafficClass = ip4[1]
		return attr, gidWant{gid: want, typ: GIDTypeRoCEv2}, nil
	case 6:
		var want GID
		copy(want[:], grh[24:40])
		if want[0] == 0xff {
			return AHAttr{}, gidWant{}, invalidErr("ah", "init_from_wc", "message sent to multicast GID %v", want)
		}
		var typ GIDType
		switch grh[6] {
		case ipProtoUDP:
			typ = GIDTypeRoCEv2
		case ibNextHdr:
			typ = GIDTypeIB
		default:
			return AHAttr{}, gidWant{}, &OpError{Object: "ah", Method: "init_from_wc",
				Err: fmt.Errorf("%w: next header %#x is neither UDP nor IB: %w", ErrInvalid, grh[6], sys.EPROTONOSUPPORT)}
		}
		copy(attr.DGID[:], grh[8:24])
		attr.HopLimit = grh[7]
		attr.TrafficClass = uint8(vtf >> 20)
		return attr, gidWant{gid: want, typ: typ}, nil
	}
	return AHAttr{}, gidWant{}, &OpError{Object: "ah", Method: "init_from_wc",
		Err: fmt.Errorf("%w: the header is neither IPv6 (version %d) nor IPv4 (version %d): %w", ErrInvalid, vtf>>28, ip4[0]>>4, sys.EPROTONOSUPPORT)}
}

// grhVersion tells which header the 40 bytes hold, as libibverbs does: an
// IPv6 version nibble means IPv6 unless the last 20 bytes are a valid
// IPv4 header (length 5 words, checksum right; rxe zeroes the first 20
// bytes before an IPv4 header, but a real IPv6 header's first nibble is
// 6); otherwise IPv4 if its version nibble says so; 0 for neither.
func grhVersion(vtf uint32, ip4 []byte) int {
	if vtf>>28 != 6 {
		if ip4[0]>>4 == 4 {
			return 4
		}
		return 0
	}
	if ip4[0]&0xf != 5 || ipv4Checksum(ip4) != binary.BigEndian.Uint16(ip4[10:12]) {
		return 6
	}
	return 4
}

// ipv4Checksum is the header checksum of a 20-byte IPv4 header, computed
// with its checksum field taken as zero.
func ipv4Checksum(h []byte) uint16 {
	var sum uint32
	for i := 0; i < 20; i += 2 {
		if i == 10 {
			continue
		}
		sum += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// mapIPv4 stores the IPv4-mapped IPv6 address of a (4 bytes) in g.
func mapIPv4(g *GID, a []byte) {
	*g = GID{10: 0xff, 11: 0xff}
	copy(g[12:], a)
}

// findGIDIndex returns the index of port's GID equal to gid, of type typ
// (IB matching IB and RoCE v1 entries, as the sysfs type "IB/RoCE v1"
// does), from the GID table.
func (c *Context) findGIDIndex(port int, gid GID, typ GIDType) (int, error) {
	tbl, err := c.QueryGIDTable()
	if err != nil {
		return 0, err
	}
	for _, e := range tbl {
		if e.Port != port || e.GID != gid {
			continue
		}
		if e.Type == typ || typ != GIDTypeRoCEv2 && e.Type != GIDTypeRoCEv2 {
			return e.Index, nil
		}
	}
	return 0, &OpError{Object: "ah", Method: "init_from_wc",
		Err: fmt.Errorf("%w: no %v GID %v on port %d to answer from", ErrInvalid, typ, gid, port)}
}
