package uverbs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/pureverbs/pureverbs/abi"
	"github.com/pureverbs/pureverbs/internal/sys"
)

// Bits of DeviceAttr.ODPGeneralCaps (enum ibv_odp_general_caps, the
// kernel's IB_ODP_SUPPORT*): the device can register memory with
// AccessOnDemand, and a whole address space at once (implicit ODP).
const (
	ODPSupport         uint64 = 1 << 0
	ODPSupportImplicit uint64 = 1 << 1
)

// Bits of DeviceAttr's per-transport ODP capabilities (ODPRCCaps,
// ODPUCCaps, ODPUDCaps, XRCODPCaps; enum ibv_odp_transport_cap_bits):
// which operations of that transport may use on-demand paged memory.
const (
	ODPSend uint32 = 1 << iota
	ODPRecv
	ODPWrite
	ODPRead
	ODPAtomic
	ODPSRQRecv
)

// DeviceAttr holds a device's attributes (struct ibv_device_attr_ex,
// ibv_query_device_ex(3)).
type DeviceAttr struct {
	FWVer                 string // "major.minor.sub" as libibverbs formats it
	NodeGUID              uint64 // in host order of the big-endian wire value
	SysImageGUID          uint64
	MaxMRSize             uint64
	PageSizeCap           uint64
	VendorID              uint32
	VendorPartID          uint32
	HWVer                 uint32
	MaxQP                 int
	MaxQPWR               int
	DeviceCapFlags        uint64 // full 64-bit IB_UVERBS_DEVICE_* / IBV_DEVICE_* bits
	MaxSGE                int
	MaxSGERd              int
	MaxCQ                 int
	MaxCQE                int
	MaxMR                 int
	MaxPD                 int
	MaxQPRdAtom           int
	MaxEERdAtom           int
	MaxResRdAtom          int
	MaxQPInitRdAtom       int
	MaxEEInitRdAtom       int
	AtomicCap             int // 0 none, 1 HCA, 2 global
	MaxEE                 int
	MaxRDD                int
	MaxMW                 int
	MaxRawIPv6QP          int
	MaxRawEthyQP          int
	MaxMcastGrp           int
	MaxMcastQPAttach      int
	MaxTotalMcastQPAttach int
	MaxAH                 int
	MaxFMR                int
	MaxMapPerFMR          int
	MaxSRQ                int
	MaxSRQWR              int
	MaxSRQSGE             int
	MaxPKeys              int
	LocalCAAckDelay       int
	PhysPortCnt           int

	// Extended attributes (zero when the kernel did not report them).
	CompMask uint32
	// On-demand paging: ODPSupport and ODPSupportImplicit in the general
	// capabilities, ODPSend ... ODPSRQRecv per transport.
	ODPGeneralCaps   uint64
	ODPRCCaps        uint32
	ODPUCCaps        uint32
	ODPUDCaps        uint32
	XRCODPCaps       uint32
	TimestampMask    uint64
	HCACoreClock     uint64 // kHz
	MaxWQTypeRQ      uint32
	RawPacketCaps    uint32
	MaxDMSize        uint64
	RSSSupportedQPTs uint32
	MaxRWQIndTables  uint32
	MaxRWQIndTblSize uint32
	TMMaxNumTags     uint32
	CQModMaxCount    uint16
	CQModMaxPeriod   uint16
}

// QueryDevice returns the device attributes (ibv_query_device_ex(3)).
// Like libibverbs it sends the extended QUERY_DEVICE and falls back to the
// legacy command when the kernel does not implement the extended one.
func (c *Context) QueryDevice() (*DeviceAttr, error) {
	if c == nil {
		return nil, errNilContext
	}
	var resp abi.IbUverbsExQueryDeviceResp
	var req abi.IbUverbsExQueryDevice
	w := sys.WriteCmd{
		Cmd:  abi.IB_USER_VERBS_CMD_FLAG_EXTENDED | abi.IB_USER_VERBS_EX_CMD_QUERY_DEVICE,
		Req:  sys.AsBytes(&req),
		Resp: sys.AsBytes(&resp),
	}
	err := c.execWrite(&w, "device", "query_device")
	ext := true
	if isNotSupported(err) {
		ext = false
		var lreq abi.IbUverbsQueryDevice
		w = sys.WriteCmd{Cmd: abi.IB_USER_VERBS_CMD_QUERY_DEVICE, Req: sys.AsBytes(&lreq), Resp: sys.AsBytes(&resp.Base)}
		err = c.execWrite(&w, "device", "query_device")
	}
	if err != nil {
		return nil, err
	}
	b := &resp.Base
	a := &DeviceAttr{
		FWVer:                 fmt.Sprintf("%d.%d.%d", (b.FwVer>>32)&0xffff, (b.FwVer>>16)&0xffff, b.FwVer&0xffff),
		NodeGUID:              be64(b.NodeGuid),
		SysImageGUID:          be64(b.SysImageGuid),
		MaxMRSize:             b.MaxMrSize,
		PageSizeCap:           b.PageSizeCap,
		VendorID:              b.VendorId,
		VendorPartID:          b.VendorPartId,
		HWVer:                 b.HwVer,
		MaxQP:                 int(b.MaxQp),
		MaxQPWR:               int(b.MaxQpWr),
		DeviceCapFlags:        uint64(b.DeviceCapFlags),
		MaxSGE:                int(b.MaxSge),
		MaxSGERd:              int(b.MaxSgeRd),
		MaxCQ:                 int(b.MaxCq),
		MaxCQE:                int(b.MaxCqe),
		MaxMR:                 int(b.MaxMr),
		MaxPD:                 int(b.MaxPd),
		MaxQPRdAtom:           int(b.MaxQpRdAtom),
		MaxEERdAtom:           int(b.MaxEeRdAtom),
		MaxResRdAtom:          int(b.MaxResRdAtom),
		MaxQPInitRdAtom:       int(b.MaxQpInitRdAtom),
		MaxEEInitRdAtom:       int(b.MaxEeInitRdAtom),
		AtomicCap:             int(b.AtomicCap),
		MaxEE:                 int(b.MaxEe),
		MaxRDD:                int(b.MaxRdd),
		MaxMW:                 int(b.MaxMw),
		MaxRawIPv6QP:          int(b.MaxRawIpv6Qp),
		MaxRawEthyQP:          int(b.MaxRawEthyQp),
		MaxMcastGrp:           int(b.MaxMcastGrp),
		MaxMcastQPAttach:      int(b.MaxMcastQpAttach),
		MaxTotalMcastQPAttach: int(b.MaxTotalMcastQpAttach),
		MaxAH:                 int(b.MaxAh),
		MaxFMR:                int(b.MaxFmr),
		MaxMapPerFMR:          int(b.MaxMapPerFmr),
		MaxSRQ:                int(b.MaxSrq),
		MaxSRQWR:              int(b.MaxSrqWr),
		MaxSRQSGE:             int(b.MaxSrqSge),
		MaxPKeys:              int(b.MaxPkeys),
		LocalCAAckDelay:       int(b.LocalCaAckDelay),
		PhysPortCnt:           int(b.PhysPortCnt),
	}
	if !ext {
		return a, nil
	}
	// Fields past response_length were not written by an older kernel
	// and read as zero (the buffer started zeroed).
	a.CompMask = resp.CompMask
	a.ODPGeneralCaps = resp.OdpCaps.GeneralCaps
	a.ODPRCCaps = resp.OdpCaps.PerTransportCaps.RcOdpCaps
	a.ODPUCCaps = resp.OdpCaps.PerTransportCaps.UcOdpCaps
	a.ODPUDCaps = resp.OdpCaps.PerTransportCaps.UdOdpCaps
	a.TimestampMask = resp.TimestampMask
	a.HCACoreClock = resp.HcaCoreClock
	if resp.DeviceCapFlagsEx != 0 {
		a.DeviceCapFlags = resp.DeviceCapFlagsEx
	}
	a.RSSSupportedQPTs = resp.RssCaps.SupportedQpts
	a.MaxRWQIndTables = resp.RssCaps.MaxRwqIndirectionTables
	a.MaxRWQIndTblSize = resp.RssCaps.MaxRwqIndirectionTableSize
	a.MaxWQTypeRQ = resp.MaxWqTypeRq
	a.RawPacketCaps = resp.RawPacketCaps
	a.TMMaxNumTags = resp.TmCaps.MaxNumTags
	a.CQModMaxCount = resp.CqModerationCaps.MaxCqModerationCount
	a.CQModMaxPeriod = resp.CqModerationCaps.MaxCqModerationPeriod
	a.MaxDMSize = resp.MaxDmSize
	a.XRCODPCaps = resp.XrcOdpCaps
	return a, nil
}

func isNotSupported(err error) bool {
	if err == nil {
		return false
	}
	if op, ok := err.(*OpError); ok {
		_, ns := op.Err.(notSupported)
		return ns
	}
	return false
}

// be64 converts a big-endian 64-bit wire value (read as host order) into
// the integer that prints as the GUID.
func be64(v uint64) uint64 {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], v)
	return binary.BigEndian.Uint64(b[:])
}

// PortState is enum ibv_port_state.
type PortState uint8

// Port states, the values of enum ibv_port_state.
const (
	PortNOP         PortState = 0
	PortDown        PortState = 1
	PortInit        PortState = 2
	PortArmed       PortState = 3
	PortActive      PortState = 4
	PortActiveDefer PortState = 5
)

var portStateNames = [...]string{"PORT_NOP", "PORT_DOWN", "PORT_INIT", "PORT_ARMED", "PORT_ACTIVE", "PORT_ACTIVE_DEFER"}

// String returns the state's name as ibv_devinfo(1) prints it, e.g.
// "PORT_ACTIVE", or "invalid state" for other values.
// (ibv_port_state_str(3) returns a description, "active", instead.)
func (s PortState) String() string {
	if int(s) < len(portStateNames) {
		return portStateNames[s]
	}
	return "invalid state"
}

// MTU is enum ibv_mtu: 1 = 256 bytes ... 5 = 4096 bytes.
type MTU uint8

// Bytes returns the MTU in bytes, or 0 for an invalid value.
func (m MTU) Bytes() int {
	if m < 1 || m > 5 {
		return 0
	}
	return 128 << m
}

// LinkLayer is the port's link layer (IBV_LINK_LAYER_*).
type LinkLayer uint8

// Link layers, the values of IBV_LINK_LAYER_*.
const (
	LinkLayerUnspecified LinkLayer = 0
	LinkLayerInfiniBand  LinkLayer = 1
	LinkLayerEthernet    LinkLayer = 2
)

// String returns the name ibv_devinfo(1) prints: "InfiniBand" (also for
// LinkLayerUnspecified, as ibv_devinfo does), "Ethernet", or "Unknown".
func (l LinkLayer) String() string {
	switch l {
	case LinkLayerInfiniBand, LinkLayerUnspecified:
		return "InfiniBand"
	case LinkLayerEthernet:
		return "Ethernet"
	}
	return "Unknown"
}

// PortAttr holds a port's attributes (struct ibv_port_attr,
// ibv_query_port(3)).
type PortAttr struct {
	State         PortState
	MaxMTU        MTU
	ActiveMTU     MTU
	GIDTblLen     int
	PortCapFlags  uint32
	MaxMsgSz      uint32
	BadPKeyCntr   uint32
	QKeyViolCntr  uint32
	PKeyTblLen    uint16
	LID           uint16
	SMLID         uint16
	LMC           uint8
	MaxVLNum      uint8
	SMSL          uint8
	SubnetTimeout uint8
	InitTypeReply uint8
	ActiveWidth   uint8
	ActiveSpeed   uint8
	PhysState     uint8
	LinkLayer     LinkLayer
	Flags         uint8 // IBV_QPF_GRH_REQUIRED = 1
	PortCapFlags2 uint16
}

// QueryPort returns the attributes of port, numbered from 1
// (ibv_query_port(3)), using the DEVICE/QUERY_PORT ioctl and falling back
// to the write() command. It allocates nothing.
func (c *Context) QueryPort(port int) (PortAttr, error) {
	var pa PortAttr
	err := c.QueryPortInto(port, &pa)
	return pa, err
}

// QueryPortInto is QueryPort writing into *pa (ibv_query_port(3)).
func (c *Context) QueryPortInto(port int, pa *PortAttr) error {
	if c == nil {
		return errNilContext
	}
	if pa == nil {
		return &OpError{Object: "device", Method: "query_port", Err: fmt.Errorf("%w: nil *PortAttr", ErrInvalid)}
	}
	if port < 1 || port > 255 {
		return &OpError{Object: "device", Method: "query_port", Err: fmt.Errorf("%w: port %d", ErrInvalid, port)}
	}
	cmd := c.get()
	defer c.put(cmd)
	// The response lives in the command's own (heap) scratch: no buffer
	// of its own, no second pool.
	resp := sys.Scratch[abi.IbUverbsQueryPortRespEx](cmd)
	cmd.Reset(abi.UVERBS_OBJECT_DEVICE, abi.UVERBS_METHOD_QUERY_PORT, c.driverID)
	cmd.ConstIn(abi.UVERBS_ATTR_QUERY_PORT_PORT_NUM, uint64(port), true)
	sys.PtrOut(cmd, abi.UVERBS_ATTR_QUERY_PORT_RESP, resp, true)
	err := cmd.Exec(c.cmd)
	if err == sys.EPROTONOSUPPORT || err == sys.ENOTTY {
		var req abi.IbUverbsQueryPort
		req.PortNum = uint8(port)
		w := sys.WriteCmd{Cmd: abi.IB_USER_VERBS_CMD_QUERY_PORT, Req: sys.AsBytes(&req), Resp: sys.AsBytes(&resp.LegacyResp)}
		err = cmd.LegacyWrite(c.cmd, &w)
	}
	if err != nil {
		return c.opErr("device", "query_port", err)
	}
	r := &resp.LegacyResp
	*pa = PortAttr{
		State: PortState(r.State), MaxMTU: MTU(r.MaxMtu), ActiveMTU: MTU(r.ActiveMtu),
		GIDTblLen: int(r.GidTblLen), PortCapFlags: r.PortCapFlags, MaxMsgSz: r.MaxMsgSz,
		BadPKeyCntr: r.BadPkeyCntr, QKeyViolCntr: r.QkeyViolCntr, PKeyTblLen: r.PkeyTblLen,
		LID: r.Lid, SMLID: r.SmLid, LMC: r.Lmc, MaxVLNum: r.MaxVlNum, SMSL: r.SmSl,
		SubnetTimeout: r.SubnetTimeout, InitTypeReply: r.InitTypeReply, ActiveWidth: r.ActiveWidth,
		ActiveSpeed: r.ActiveSpeed, PhysState: r.PhysState, LinkLayer: LinkLayer(r.LinkLayer),
		Flags: r.Flags, PortCapFlags2: resp.PortCapFlags2,
	}
	return nil
}

// GIDType is the type of a GID table entry (IBV_GID_TYPE_*).
type GIDType uint32

// GID types, the values of IBV_GID_TYPE_*.
const (
	GIDTypeIB     GIDType = 0
	GIDTypeRoCEv1 GIDType = 1
	GIDTypeRoCEv2 GIDType = 2
)

// String returns "IB", "RoCE v1" or "RoCE v2", or "GIDType(n)" for other
// values.
func (t GIDType) String() string {
	switch t {
	case GIDTypeIB:
		return "IB"
	case GIDTypeRoCEv1:
		return "RoCE v1"
	case GIDTypeRoCEv2:
		return "RoCE v2"
	}
	return fmt.Sprintf("GIDType(%d)", uint32(t))
}

// GID is a 128-bit global identifier in network byte order.
type GID [16]byte

// IsZero reports whether the GID is all zeroes (an empty table slot).
func (g GID) IsZero() bool { return g == GID{} }

// String formats the GID as ibv_devinfo does: eight colon-separated
// groups of four hex digits.
func (g GID) String() string {
	var b strings.Builder
	for i := 0; i < 16; i += 2 {
		if i > 0 {
			b.WriteByte(':')
		}
		fmt.Fprintf(&b, "%02x%02x", g[i], g[i+1])
	}
	return b.String()
}

// InetNtop formats the GID as glibc's inet_ntop(AF_INET6) does, which is
// how ibv_devinfo prints RoCE v2 GIDs and the pingpong, perftest and
// librdmacm example tools print theirs: the longest run of two or more
// zero groups (the first of equal runs) becomes "::", groups are
// lower-case hex without leading zeros, and an address whose first 96
// bits are zero except for an ffff group just before the last 32 bits, or
// whose first 96 bits are all zero (but not "::" or "::1"), ends in
// dotted IPv4: "::ffff:10.99.0.1" (net.IP.String would print
// "10.99.0.1").
func (g GID) InetNtop() string {
	var w [8]int
	for i := range w {
		w[i] = int(g[2*i])<<8 | int(g[2*i+1])
	}
	bestBase, bestLen := -1, 0
	for i := 0; i < 8; {
		if w[i] != 0 {
			i++
			continue
		}
		j := i
		for j < 8 && w[j] == 0 {
			j++
		}
		if j-i > bestLen {
			bestBase, bestLen = i, j-i
		}
		i = j
	}
	if bestLen < 2 {
		bestBase, bestLen = -1, 0
	}
	var b strings.Builder
	for i := 0; i < 8; i++ {
		if bestBase >= 0 && i >= bestBase && i < bestBase+bestLen {
			if i == bestBase {
				b.WriteByte(':')
			}
			continue
		}
		if i != 0 {
			b.WriteByte(':')
		}
		if i == 6 && bestBase == 0 && (bestLen == 6 || bestLen == 5 && w[5] == 0xffff) {
			fmt.Fprintf(&b, "%d.%d.%d.%d", g[12], g[13], g[14], g[15])
			return b.String()
		}
		b.WriteString(strconv.FormatInt(int64(w[i]), 16))
	}
	if bestBase >= 0 && bestBase+bestLen == 8 {
		b.WriteByte(':')
	}
	return b.String()
}

// IP returns the GID as an IPv6 (or IPv4-mapped) address.
func (g GID) IP() net.IP { return net.IP(append([]byte(nil), g[:]...)) }

// GIDEntry is one GID table entry (struct ibv_gid_entry).
type GIDEntry struct {
	GID     GID
	Index   int
	Port    int
	Type    GIDType
	Ifindex int // netdev index, 0 when none
}

func gidEntryFrom(e *abi.IbUverbsGidEntry) GIDEntry {
	var g GID
	binary.LittleEndian.PutUint64(g[0:], e.Gid[0])
	binary.LittleEndian.PutUint64(g[8:], e.Gid[1])
	return GIDEntry{GID: g, Index: int(e.GidIndex), Port: int(e.PortNum), Type: GIDType(e.GidType), Ifindex: int(e.NetdevIfindex)}
}

// QueryGID returns GID table entry index of port (ibv_query_gid_ex(3)).
// An empty or invalid entry gives an error wrapping the kernel's errno.
// Kernels without the ioctl method are served from sysfs.
func (c *Context) QueryGID(port, index int) (GIDEntry, error) {
	if c == nil {
		return GIDEntry{}, errNilContext
	}
	if port < 1 || index < 0 {
		return GIDEntry{}, &OpError{Object: "device", Method: "query_gid_entry", Err: fmt.Errorf("%w: port %d index %d", ErrInvalid, port, index)}
	}
	cmd := c.get()
	defer c.put(cmd)
	e := new(abi.IbUverbsGidEntry)
	cmd.Reset(abi.UVERBS_OBJECT_DEVICE, abi.UVERBS_METHOD_QUERY_GID_ENTRY, c.driverID)
	cmd.ConstIn(abi.UVERBS_ATTR_QUERY_GID_ENTRY_PORT, uint64(port), true)
	cmd.ConstIn(abi.UVERBS_ATTR_QUERY_GID_ENTRY_GID_INDEX, uint64(index), true)
	cmd.FlagsIn(abi.UVERBS_ATTR_QUERY_GID_ENTRY_FLAGS, 0, true)
	sys.PtrOut(cmd, abi.UVERBS_ATTR_QUERY_GID_ENTRY_RESP_ENTRY, e, true)
	err := cmd.Exec(c.cmd)
	if err == sys.EPROTONOSUPPORT || err == sys.ENOTTY {
		return c.gidFromSysfs(port, index)
	}
	if err != nil {
		return GIDEntry{}, c.opErr("device", "query_gid_entry", err)
	}
	return gidEntryFrom(e), nil
}

// GID returns the GID at index of port as ibv_query_gid(3) does: an empty
// entry of the table is the zero GID, not an error (libibverbs reads the
// table from sysfs, where an empty entry reads as zeros; QueryGID, like
// ibv_query_gid_ex(3), fails it with ENODATA). An index past the port's
// table, or a port the device does not have, is an error wrapping the
// kernel's EINVAL.
func (c *Context) GID(port, index int) (GID, error) {
	e, err := c.QueryGID(port, index)
	if errors.Is(err, sys.ENODATA) {
		return GID{}, nil
	}
	return e.GID, err
}

// QueryGIDTable returns every valid GID entry of every port
// (ibv_query_gid_table(3)), with the DEVICE/QUERY_GID_TABLE ioctl. Unlike
// QueryGID it has no sysfs fallback: on a kernel without that method it
// returns an *OpError matching ErrNotSupported (unix.EPROTONOSUPPORT), or,
// on a kernel without the ioctl interface, wrapping unix.ENOTTY. There,
// call QueryGID for each index below the port's PortAttr.GIDTblLen.
func (c *Context) QueryGIDTable() ([]GIDEntry, error) {
	if c == nil {
		return nil, errNilContext
	}
	max := 0
	nports := c.dev.NumPorts
	if nports == 0 {
		nports = 1
	}
	for p := 1; p <= nports; p++ {
		pa, err := c.QueryPort(p)
		if err != nil {
			return nil, err
		}
		max += pa.GIDTblLen
	}
	if max == 0 {
		return nil, nil
	}
	entries := make([]abi.IbUverbsGidEntry, max)
	num := new(uint64)
	cmd := c.get()
	defer c.put(cmd)
	cmd.Reset(abi.UVERBS_OBJECT_DEVICE, abi.UVERBS_METHOD_QUERY_GID_TABLE, c.driverID)
	cmd.ConstIn(abi.UVERBS_ATTR_QUERY_GID_TABLE_ENTRY_SIZE, 32, true)
	cmd.FlagsIn(abi.UVERBS_ATTR_QUERY_GID_TABLE_FLAGS, 0, false)
	sys.SliceOut(cmd, abi.UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES, entries, true)
	sys.PtrOut(cmd, abi.UVERBS_ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES, num, true)
	if err := cmd.Exec(c.cmd); err != nil {
		return nil, c.opErr("device", "query_gid_table", err)
	}
	if *num > uint64(len(entries)) {
		return nil, c.opErr("device", "query_gid_table", fmt.Errorf("%w: kernel reported %d entries for a %d-entry buffer", ErrInvalid, *num, len(entries)))
	}
	out := make([]GIDEntry, *num)
	for i := range out {
		out[i] = gidEntryFrom(&entries[i])
	}
	return out, nil
}

// gidFromSysfs serves a GID query from sysfs, as libibverbs does on kernels
// without the ioctl method.
func (c *Context) gidFromSysfs(port, index int) (GIDEntry, error) {
	base := filepath.Join("/sys/class/infiniband", c.dev.Name, "ports", fmt.Sprint(port))
	raw, err := os.ReadFile(filepath.Join(base, "gids", fmt.Sprint(index)))
	if err != nil {
		return GIDEntry{}, c.opErr("device", "query_gid", err)
	}
	ip := net.ParseIP(strings.TrimSpace(string(raw)))
	if ip == nil {
		// sysfs prints eight groups, which ParseIP accepts; anything else is bad data.
		return GIDEntry{}, fmt.Errorf("%w: %s", ErrSysfs, raw)
	}
	var g GID
	copy(g[:], ip.To16())
	if g.IsZero() {
		return GIDEntry{}, c.opErr("device", "query_gid", sys.ENODATA)
	}
	e := GIDEntry{GID: g, Index: index, Port: port}
	if t, err := os.ReadFile(filepath.Join(base, "gid_attrs", "types", fmt.Sprint(index))); err == nil {
		switch strings.TrimSpace(string(t)) {
		case "RoCE v2":
			e.Type = GIDTypeRoCEv2
		case "IB/RoCE v1":
			e.Type = GIDTypeRoCEv1
		}
	}
	if nd, err := os.ReadFile(filepath.Join(base, "gid_attrs", "ndevs", fmt.Sprint(index))); err == nil {
		if ifi, err := net.InterfaceByName(strings.TrimSpace(string(nd))); err == nil {
			e.Ifindex = ifi.Index
		}
	}
	return e, nil
}
