package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/pureverbs/pureverbs/uverbs"
)

// This file turns plain data into ibv_devinfo's text. Everything here is
// pure formatting (no kernel access), so it is unit-tested on the host.
// The layout follows libibverbs/examples/devinfo.c of rdma-core v44.

// Transport is enum ibv_transport_type.
type Transport int

const (
	TransportUnknown     Transport = -1
	TransportIB          Transport = 0
	TransportIWARP       Transport = 1
	TransportUSNIC       Transport = 2
	TransportUSNICUDP    Transport = 3
	TransportUnspecified Transport = 4
)

// transportOf derives the transport from the node type as libibverbs does
// when it builds its device list (init.c).
func transportOf(t uverbs.NodeType) Transport {
	switch t {
	case uverbs.NodeCA, uverbs.NodeSwitch, uverbs.NodeRouter:
		return TransportIB
	case uverbs.NodeRNIC:
		return TransportIWARP
	case uverbs.NodeUSNIC:
		return TransportUSNIC
	case uverbs.NodeUSNICUDP:
		return TransportUSNICUDP
	case uverbs.NodeUnspecified:
		return TransportUnspecified
	}
	return TransportUnknown
}

func (t Transport) String() string {
	switch t {
	case TransportIB:
		return "InfiniBand"
	case TransportIWARP:
		return "iWARP"
	case TransportUSNIC:
		return "usNIC"
	case TransportUSNICUDP:
		return "usNIC UDP"
	case TransportUnspecified:
		return "unspecified"
	}
	return "invalid transport"
}

// deviceInfo is everything printed for one device.
type deviceInfo struct {
	Name           string
	Transport      Transport
	Attr           uverbs.DeviceAttr
	BoardID        string // sysfs board_id, "" when absent
	NumCompVectors int
	Ports          []portInfo // the selected ports, ascending
}

// portInfo is everything printed for one port.
type portInfo struct {
	Num  int
	Attr uverbs.PortAttr
	GIDs []uverbs.GIDEntry // valid entries in index order (printed with -v)
}

// writeList prints the -l output.
func writeList(w io.Writer, names []string) {
	s := "s"
	if len(names) == 1 {
		s = ""
	}
	fmt.Fprintf(w, "%d HCA%s found:\n", len(names), s)
	for _, n := range names {
		fmt.Fprintf(w, "\t%s\n", n)
	}
	fmt.Fprint(w, "\n")
}

// guidString formats a GUID (the big-endian value as one number) the way
// ibv_devinfo and sysfs do: four groups of four hex digits.
func guidString(g uint64) string {
	return fmt.Sprintf("%04x:%04x:%04x:%04x", g>>48&0xffff, g>>32&0xffff, g>>16&0xffff, g&0xffff)
}

// writeDevice prints one device (and its selected ports) as ibv_devinfo
// does; verbose adds what ibv_devinfo -v adds.
func writeDevice(w io.Writer, d *deviceInfo, verbose bool) {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	a := &d.Attr

	p("hca_id:\t%s\n", d.Name)
	p("\ttransport:\t\t\t%s (%d)\n", d.Transport, int(d.Transport))
	if a.FWVer != "" {
		p("\tfw_ver:\t\t\t\t%s\n", a.FWVer)
	}
	p("\tnode_guid:\t\t\t%s\n", guidString(a.NodeGUID))
	p("\tsys_image_guid:\t\t\t%s\n", guidString(a.SysImageGUID))
	p("\tvendor_id:\t\t\t0x%04x\n", a.VendorID)
	p("\tvendor_part_id:\t\t\t%d\n", int32(a.VendorPartID))
	p("\thw_ver:\t\t\t\t0x%X\n", a.HWVer)
	if d.BoardID != "" {
		p("\tboard_id:\t\t\t%s\n", d.BoardID)
	}
	p("\tphys_port_cnt:\t\t\t%d\n", a.PhysPortCnt)

	if verbose {
		writeDeviceVerbose(&b, d)
	}

	for _, port := range d.Ports {
		writePort(&b, d, &port, verbose)
	}
	io.WriteString(w, b.String())
}

func writeDeviceVerbose(b *strings.Builder, d *deviceInfo) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	a := &d.Attr

	p("\tmax_mr_size:\t\t\t0x%x\n", a.MaxMRSize)
	p("\tpage_size_cap:\t\t\t0x%x\n", a.PageSizeCap)
	p("\tmax_qp:\t\t\t\t%d\n", a.MaxQP)
	p("\tmax_qp_wr:\t\t\t%d\n", a.MaxQPWR)
	// device_cap_flags is the 32-bit legacy field: the low half of the
	// 64-bit flags (the kernel fills it with lower_32_bits of the same value).
	capFlags := uint32(a.DeviceCapFlags)
	p("\tdevice_cap_flags:\t\t0x%08x\n", capFlags)
	writeFlags(b, uint64(capFlags), deviceCapFlagNames, "%X")
	p("\tmax_sge:\t\t\t%d\n", a.MaxSGE)
	p("\tmax_sge_rd:\t\t\t%d\n", a.MaxSGERd)
	p("\tmax_cq:\t\t\t\t%d\n", a.MaxCQ)
	p("\tmax_cqe:\t\t\t%d\n", a.MaxCQE)
	p("\tmax_mr:\t\t\t\t%d\n", a.MaxMR)
	p("\tmax_pd:\t\t\t\t%d\n", a.MaxPD)
	p("\tmax_qp_rd_atom:\t\t\t%d\n", a.MaxQPRdAtom)
	p("\tmax_ee_rd_atom:\t\t\t%d\n", a.MaxEERdAtom)
	p("\tmax_res_rd_atom:\t\t%d\n", a.MaxResRdAtom)
	p("\tmax_qp_init_rd_atom:\t\t%d\n", a.MaxQPInitRdAtom)
	p("\tmax_ee_init_rd_atom:\t\t%d\n", a.MaxEEInitRdAtom)
	p("\tatomic_cap:\t\t\t%s (%d)\n", atomicCapString(a.AtomicCap), a.AtomicCap)
	p("\tmax_ee:\t\t\t\t%d\n", a.MaxEE)
	p("\tmax_rdd:\t\t\t%d\n", a.MaxRDD)
	p("\tmax_mw:\t\t\t\t%d\n", a.MaxMW)
	p("\tmax_raw_ipv6_qp:\t\t%d\n", a.MaxRawIPv6QP)
	p("\tmax_raw_ethy_qp:\t\t%d\n", a.MaxRawEthyQP)
	p("\tmax_mcast_grp:\t\t\t%d\n", a.MaxMcastGrp)
	p("\tmax_mcast_qp_attach:\t\t%d\n", a.MaxMcastQPAttach)
	p("\tmax_total_mcast_qp_attach:\t%d\n", a.MaxTotalMcastQPAttach)
	p("\tmax_ah:\t\t\t\t%d\n", a.MaxAH)
	p("\tmax_fmr:\t\t\t%d\n", a.MaxFMR)
	if a.MaxFMR != 0 {
		p("\tmax_map_per_fmr:\t\t%d\n", a.MaxMapPerFMR)
	}
	p("\tmax_srq:\t\t\t%d\n", a.MaxSRQ)
	if a.MaxSRQ != 0 {
		p("\tmax_srq_wr:\t\t\t%d\n", a.MaxSRQWR)
		p("\tmax_srq_sge:\t\t\t%d\n", a.MaxSRQSGE)
	}
	p("\tmax_pkeys:\t\t\t%d\n", a.MaxPKeys)
	p("\tlocal_ca_ack_delay:\t\t%d\n", a.LocalCAAckDelay)

	// On-demand paging.
	p("\tgeneral_odp_caps:\n")
	writeFlags(b, a.ODPGeneralCaps, odpGeneralNames, "%X")
	p("\trc_odp_caps:\n")
	writeODPTransportCaps(b, a.ODPRCCaps)
	p("\tuc_odp_caps:\n")
	writeODPTransportCaps(b, a.ODPUCCaps)
	p("\tud_odp_caps:\n")
	writeODPTransportCaps(b, a.ODPUDCaps)
	p("\txrc_odp_caps:\n")
	writeODPTransportCaps(b, a.XRCODPCaps)

	if a.TimestampMask != 0 {
		p("\tcompletion timestamp_mask:\t\t\t0x%016x\n", a.TimestampMask)
	} else {
		p("\tcompletion_timestamp_mask not supported\n")
	}
	if a.HCACoreClock != 0 {
		p("\thca_core_clock:\t\t\t%dkHZ\n", a.HCACoreClock)
	} else {
		p("\tcore clock not supported\n")
	}
	if a.RawPacketCaps != 0 {
		p("\traw packet caps:\n")
		for _, f := range rawPacketCapNames {
			if uint64(a.RawPacketCaps)&f.bit != 0 {
				p("\t\t\t\t\t%s\n", f.name)
			}
		}
	}

	p("\tdevice_cap_flags_ex:\t\t0x%X\n", a.DeviceCapFlags)
	writeFlags(b, a.DeviceCapFlags&0xffffffff00000000, deviceCapFlagExNames, "%X")

	// TSO capabilities come from provider-specific data (mlx5), never
	// from the kernel's generic reply; every other provider reports 0.
	p("\ttso_caps:\n")
	p("\t\tmax_tso:\t\t\t%d\n", 0)

	p("\trss_caps:\n")
	p("\t\tmax_rwq_indirection_tables:\t\t\t%d\n", a.MaxRWQIndTables)
	p("\t\tmax_rwq_indirection_table_size:\t\t\t%d\n", a.MaxRWQIndTblSize)
	// The hash function and fields are provider-specific data as well.
	p("\t\trx_hash_function:\t\t\t\t0x%x\n", 0)
	p("\t\trx_hash_fields_mask:\t\t\t\t0x%X\n", 0)
	writeQPTypes(b, a.RSSSupportedQPTs)
	p("\tmax_wq_type_rq:\t\t\t%d\n", a.MaxWQTypeRQ)

	// Packet pacing is provider-specific data too (mlx5 only).
	p("\tpacket_pacing_caps:\n")
	p("\t\tqp_rate_limit_min:\t%dkbps\n", 0)
	p("\t\tqp_rate_limit_max:\t%dkbps\n", 0)

	if a.TMMaxNumTags != 0 {
		// uverbs.DeviceAttr carries only max_num_tags of the kernel's
		// tag-matching capabilities; see the report in writeTMCaps.
		writeTMCaps(b, a)
	} else {
		p("\ttag matching not supported\n")
	}

	if a.CQModMaxCount != 0 && a.CQModMaxPeriod != 0 {
		p("\n\tcq moderation caps:\n")
		p("\t\tmax_cq_count:\t%d\n", a.CQModMaxCount)
		p("\t\tmax_cq_period:\t%d us\n\n", a.CQModMaxPeriod)
	}
	if a.MaxDMSize != 0 {
		p("\tmaximum available device memory:\t%dBytes\n\n", a.MaxDMSize)
	}
	p("\tnum_comp_vectors:\t\t%d\n", d.NumCompVectors)
}

// writeTMCaps prints the tag-matching capabilities. The library exposes
// only max_num_tags; max_rndv_hdr_size, max_ops, max_sge and flags are in
// the kernel reply (struct ib_uverbs_tm_caps) but not in
// uverbs.DeviceAttr, so they print as 0 here. No software device (rxe,
// siw) supports tag matching.
func writeTMCaps(b *strings.Builder, a *uverbs.DeviceAttr) {
	fmt.Fprintf(b, "\tmax_rndv_hdr_size:\t\t%d\n", 0)
	fmt.Fprintf(b, "\tmax_num_tags:\t\t\t%d\n", a.TMMaxNumTags)
	fmt.Fprintf(b, "\tmax_ops:\t\t\t%d\n", 0)
	fmt.Fprintf(b, "\tmax_sge:\t\t\t%d\n", 0)
	fmt.Fprintf(b, "\tflags:\n")
}

func writePort(b *strings.Builder, d *deviceInfo, port *portInfo, verbose bool) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	pa := &port.Attr

	p("\t\tport:\t%d\n", port.Num)
	p("\t\t\tstate:\t\t\t%s (%d)\n", portStateString(pa.State), pa.State)
	p("\t\t\tmax_mtu:\t\t%s (%d)\n", mtuString(pa.MaxMTU), pa.MaxMTU)
	p("\t\t\tactive_mtu:\t\t%s (%d)\n", mtuString(pa.ActiveMTU), pa.ActiveMTU)
	p("\t\t\tsm_lid:\t\t\t%d\n", pa.SMLID)
	p("\t\t\tport_lid:\t\t%d\n", pa.LID)
	p("\t\t\tport_lmc:\t\t0x%02x\n", pa.LMC)
	p("\t\t\tlink_layer:\t\t%s\n", linkLayerString(pa.LinkLayer))

	if verbose {
		p("\t\t\tmax_msg_sz:\t\t0x%x\n", pa.MaxMsgSz)
		p("\t\t\tport_cap_flags:\t\t0x%08x\n", pa.PortCapFlags)
		p("\t\t\tport_cap_flags2:\t0x%04x\n", pa.PortCapFlags2)
		p("\t\t\tmax_vl_num:\t\t%s (%d)\n", vlString(pa.MaxVLNum), pa.MaxVLNum)
		p("\t\t\tbad_pkey_cntr:\t\t0x%x\n", pa.BadPKeyCntr)
		p("\t\t\tqkey_viol_cntr:\t\t0x%x\n", pa.QKeyViolCntr)
		p("\t\t\tsm_sl:\t\t\t%d\n", pa.SMSL)
		p("\t\t\tpkey_tbl_len:\t\t%d\n", pa.PKeyTblLen)
		p("\t\t\tgid_tbl_len:\t\t%d\n", pa.GIDTblLen)
		p("\t\t\tsubnet_timeout:\t\t%d\n", pa.SubnetTimeout)
		p("\t\t\tinit_type_reply:\t%d\n", pa.InitTypeReply)
		p("\t\t\tactive_width:\t\t%sX (%d)\n", widthString(pa.ActiveWidth), pa.ActiveWidth)
		p("\t\t\tactive_speed:\t\t%s (%d)\n", speedString(pa.ActiveSpeed), pa.ActiveSpeed)
		if d.Transport == TransportIB {
			p("\t\t\tphys_state:\t\t%s (%d)\n", physStateString(pa.PhysState), pa.PhysState)
		}
		for _, g := range port.GIDs {
			writeGID(b, g, pa.LinkLayer)
		}
	}
	p("\n")
}

// writeGID prints one GID line. Like ibv_devinfo it skips GIDs whose
// interface ID (the low 64 bits) is zero, prints IB and RoCE v1 GIDs as
// eight full groups and RoCE v2 GIDs as inet_ntop(3) does, and names the
// GID type on Ethernet ports.
func writeGID(b *strings.Builder, g uverbs.GIDEntry, ll uverbs.LinkLayer) {
	if [8]byte(g.GID[8:]) == [8]byte{} {
		return
	}
	v2 := g.Type == uverbs.GIDTypeRoCEv2
	suffix := ""
	if ll == uverbs.LinkLayerEthernet {
		if v2 {
			suffix = ", RoCE v2"
		} else {
			suffix = ", RoCE v1"
		}
	}
	text := g.GID.String()
	if v2 {
		text = g.GID.InetNtop()
	}
	fmt.Fprintf(b, "\t\t\tGID[%3d]:\t\t%s%s\n", g.Index, text, suffix)
}

type flagName struct {
	bit  uint64
	name string
}

// IBV_DEVICE_* (verbs.h), in ibv_devinfo's order.
var deviceCapFlagNames = []flagName{
	{1 << 0, "RESIZE_MAX_WR"},
	{1 << 1, "BAD_PKEY_CNTR"},
	{1 << 2, "BAD_QKEY_CNTR"},
	{1 << 3, "RAW_MULTI"},
	{1 << 4, "AUTO_PATH_MIG"},
	{1 << 5, "CHANGE_PHY_PORT"},
	{1 << 6, "UD_AV_PORT_ENFORCE"},
	{1 << 7, "CURR_QP_STATE_MOD"},
	{1 << 8, "SHUTDOWN_PORT"},
	{1 << 9, "INIT_TYPE"},
	{1 << 10, "PORT_ACTIVE_EVENT"},
	{1 << 11, "SYS_IMAGE_GUID"},
	{1 << 12, "RC_RNR_NAK_GEN"},
	{1 << 13, "SRQ_RESIZE"},
	{1 << 14, "N_NOTIFY_CQ"},
	{1 << 17, "MEM_WINDOW"},
	{1 << 18, "UD_IP_CSUM"},
	{1 << 20, "XRC"},
	{1 << 21, "MEM_MGT_EXTENSIONS"},
	{1 << 23, "MEM_WINDOW_TYPE_2A"},
	{1 << 24, "MEM_WINDOW_TYPE_2B"},
	{1 << 25, "RC_IP_CSUM"},
	{1 << 26, "RAW_IP_CSUM"},
	{1 << 29, "MANAGED_FLOW_STEERING"},
}

// The 64-bit-only device flags rdma-core v44 names.
var deviceCapFlagExNames = []flagName{
	{1 << 34, "RAW_SCATTER_FCS"},
	{1 << 36, "PCI_WRITE_END_PADDING"},
}

// IBV_ODP_SUPPORT* (general ODP caps).
var odpGeneralNames = []flagName{
	{1 << 0, "ODP_SUPPORT"},
	{1 << 1, "ODP_SUPPORT_IMPLICIT"},
}

// IBV_ODP_SUPPORT_* (per-transport ODP caps), as v44 names them.
var odpTransportNames = []flagName{
	{1 << 0, "SUPPORT_SEND"},
	{1 << 1, "SUPPORT_RECV"},
	{1 << 2, "SUPPORT_WRITE"},
	{1 << 3, "SUPPORT_READ"},
	{1 << 4, "SUPPORT_ATOMIC"},
	{1 << 5, "SUPPORT_SRQ"},
}

// IBV_RAW_PACKET_CAP_*.
var rawPacketCapNames = []flagName{
	{1 << 0, "C-VLAN stripping offload"},
	{1 << 1, "Scatter FCS offload"},
	{1 << 2, "IP csum offload"},
	{1 << 3, "Delay drop"},
}

// writeFlags prints the name of each set flag, then the set bits it has no
// name for ("Unknown flags: 0x..." with unknownFormat for the number).
func writeFlags(b *strings.Builder, v uint64, names []flagName, unknownFormat string) {
	var known uint64
	for _, f := range names {
		known |= f.bit
		if v&f.bit != 0 {
			fmt.Fprintf(b, "\t\t\t\t\t%s\n", f.name)
		}
	}
	if u := v &^ known; u != 0 {
		fmt.Fprintf(b, "\t\t\t\t\tUnknown flags: 0x"+unknownFormat+"\n", u)
	}
}

func writeODPTransportCaps(b *strings.Builder, v uint32) {
	if v == 0 {
		b.WriteString("\t\t\t\t\tNO SUPPORT\n")
		return
	}
	writeFlags(b, uint64(v), odpTransportNames, "%X")
}

// writeQPTypes prints the supported_qp list of the RSS capabilities: bit n
// set means QP type n (IBV_QPT_*) is supported.
func writeQPTypes(b *strings.Builder, qpts uint32) {
	if qpts == 0 {
		return
	}
	const rawPacket, ud = 1 << 8, 1 << 4 // 1 << IBV_QPT_RAW_PACKET, 1 << IBV_QPT_UD
	b.WriteString("\t\tsupported_qp:\n")
	if qpts&rawPacket != 0 {
		b.WriteString("\t\t\t\t\tSUPPORT_RAW_PACKET\n")
	}
	if qpts&ud != 0 {
		b.WriteString("\t\t\t\t\tSUPPORT_UD\n")
	}
	if u := qpts &^ (rawPacket | ud); u != 0 {
		fmt.Fprintf(b, "\t\t\t\t\tUnknown flags: 0x%X\n", u)
	}
}

func atomicCapString(c int) string {
	switch c {
	case 0:
		return "ATOMIC_NONE"
	case 1:
		return "ATOMIC_HCA"
	case 2:
		return "ATOMIC_GLOB"
	}
	return "invalid atomic capability"
}

// portStateString is ibv_devinfo's port_state_str, which (unlike
// ibv_port_state_str) has no name for NOP and ACTIVE_DEFER.
func portStateString(s uverbs.PortState) string {
	switch s {
	case uverbs.PortDown, uverbs.PortInit, uverbs.PortArmed, uverbs.PortActive:
		return s.String()
	}
	return "invalid state"
}

func mtuString(m uverbs.MTU) string {
	if n := m.Bytes(); n != 0 {
		return fmt.Sprint(n)
	}
	return "invalid MTU"
}

// linkLayerString is ibv_devinfo's link_layer_str, which calls 0
// "Unspecified" (uverbs.LinkLayer.String calls it InfiniBand).
func linkLayerString(l uverbs.LinkLayer) string {
	switch l {
	case uverbs.LinkLayerUnspecified:
		return "Unspecified"
	case uverbs.LinkLayerInfiniBand:
		return "InfiniBand"
	case uverbs.LinkLayerEthernet:
		return "Ethernet"
	}
	return "Unknown"
}

func physStateString(s uint8) string {
	switch s {
	case 1:
		return "SLEEP"
	case 2:
		return "POLLING"
	case 3:
		return "DISABLED"
	case 4:
		return "PORT_CONFIGURATION TRAINNING" // sic, as rdma-core prints it
	case 5:
		return "LINK_UP"
	case 6:
		return "LINK_ERROR_RECOVERY"
	case 7:
		return "PHY TEST"
	}
	return "invalid physical state"
}

func widthString(w uint8) string {
	switch w {
	case 1:
		return "1"
	case 2:
		return "4"
	case 4:
		return "8"
	case 8:
		return "12"
	case 16:
		return "2"
	}
	return "invalid width"
}

// speedString covers the IB speeds rdma-core v44 names (up to HDR, 128);
// NDR (256) prints as "invalid speed" there as well.
func speedString(s uint8) string {
	switch s {
	case 1:
		return "2.5 Gbps"
	case 2:
		return "5.0 Gbps"
	case 4, 8:
		return "10.0 Gbps"
	case 16:
		return "14.0 Gbps"
	case 32:
		return "25.0 Gbps"
	case 64:
		return "50.0 Gbps"
	case 128:
		return "100.0 Gbps"
	}
	return "invalid speed"
}

func vlString(n uint8) string {
	switch n {
	case 1:
		return "1"
	case 2:
		return "2"
	case 3:
		return "4"
	case 4:
		return "8"
	case 5:
		return "15"
	}
	return "invalid value"
}
