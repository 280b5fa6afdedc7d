package main

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/uverbs"
)

// rxeAttr is what QueryDevice returns for rdma_rxe on Linux 6.1 (the values
// behind testdata/rxe0-v.txt, which is ibv_devinfo -v output from the VM).
func rxeAttr(guid uint64) uverbs.DeviceAttr {
	return uverbs.DeviceAttr{
		FWVer: "0.0.0", NodeGUID: guid, SysImageGUID: guid,
		MaxMRSize: 0xffffffffffffffff, PageSizeCap: 0xfffff000,
		VendorID: 0xffffff, VendorPartID: 0, HWVer: 0,
		MaxQP: 1048560, MaxQPWR: 1048576, DeviceCapFlags: 0x1223c76,
		MaxSGE: 32, MaxSGERd: 32, MaxCQ: 1048576, MaxCQE: 32767,
		MaxMR: 524287, MaxPD: 1048576, MaxQPRdAtom: 128, MaxResRdAtom: 258048,
		MaxQPInitRdAtom: 128, AtomicCap: 1, MaxMW: 524287,
		MaxMcastGrp: 8192, MaxMcastQPAttach: 56, MaxTotalMcastQPAttach: 458752,
		MaxAH: 32767, MaxSRQ: 917503, MaxSRQWR: 1048576, MaxSRQSGE: 27,
		MaxPKeys: 64, LocalCAAckDelay: 15, PhysPortCnt: 1,
	}
}

func rxePort(activeMTU uverbs.MTU) uverbs.PortAttr {
	return uverbs.PortAttr{
		State: uverbs.PortActive, MaxMTU: 5, ActiveMTU: activeMTU, GIDTblLen: 1024,
		PortCapFlags: 0x00010000, MaxMsgSz: 0x800000, PKeyTblLen: 1, MaxVLNum: 1,
		ActiveWidth: 1, ActiveSpeed: 1, PhysState: 5, LinkLayer: uverbs.LinkLayerEthernet,
	}
}

func gid(t *testing.T, port, index int, addr string) uverbs.GIDEntry {
	t.Helper()
	a, err := netip.ParseAddr(addr)
	if err != nil {
		t.Fatal(err)
	}
	return uverbs.GIDEntry{GID: a.As16(), Index: index, Port: port, Type: uverbs.GIDTypeRoCEv2}
}

func rxe0(t *testing.T) *deviceInfo {
	return &deviceInfo{
		Name: "rxe0", Transport: transportOf(uverbs.NodeCA), Attr: rxeAttr(0x000000fffe990001),
		NumCompVectors: 2,
		Ports: []portInfo{{Num: 1, Attr: rxePort(3), GIDs: []uverbs.GIDEntry{
			gid(t, 1, 0, "fe80::ff:fe99:1"),
			gid(t, 1, 1, "::ffff:10.99.0.1"),
		}}},
	}
}

func rxelo(t *testing.T) *deviceInfo {
	return &deviceInfo{
		Name: "rxelo", Transport: transportOf(uverbs.NodeCA), Attr: rxeAttr(0x020000fffe000000),
		NumCompVectors: 2,
		Ports: []portInfo{{Num: 1, Attr: rxePort(5), GIDs: []uverbs.GIDEntry{
			gid(t, 1, 0, "fe80::200:ff:fe00:0"),
			gid(t, 1, 1, "::ffff:127.0.0.1"),
			gid(t, 1, 2, "::1"),
		}}},
	}
}

func format(d *deviceInfo, verbose bool) string {
	var b bytes.Buffer
	writeDevice(&b, d, verbose)
	return b.String()
}

// diffLines reports the first differing lines of got and want, with tabs
// made visible.
func diffLines(t *testing.T, got, want string) {
	t.Helper()
	if got == want {
		return
	}
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	show := func(s string) string { return strings.ReplaceAll(s, "\t", `\t`) }
	n := 0
	for i := 0; i < max(len(g), len(w)) && n < 10; i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			t.Errorf("line %d:\n got %q\nwant %q", i+1, show(gl), show(wl))
			n++
		}
	}
	if n == 0 {
		t.Errorf("outputs differ (line count got %d, want %d)", len(g), len(w))
	}
}

func TestVerboseMatchesIbvDevinfo(t *testing.T) {
	for _, tc := range []struct {
		file string
		dev  *deviceInfo
	}{
		{"testdata/rxe0-v.txt", rxe0(t)},
		{"testdata/rxelo-v.txt", rxelo(t)},
	} {
		t.Run(tc.dev.Name, func(t *testing.T) {
			want, err := os.ReadFile(tc.file)
			if err != nil {
				t.Fatal(err)
			}
			diffLines(t, format(tc.dev, true), string(want))
		})
	}
}

func TestDefaultOutput(t *testing.T) {
	want := "hca_id:\trxe0\n" +
		"\ttransport:\t\t\tInfiniBand (0)\n" +
		"\tfw_ver:\t\t\t\t0.0.0\n" +
		"\tnode_guid:\t\t\t0000:00ff:fe99:0001\n" +
		"\tsys_image_guid:\t\t\t0000:00ff:fe99:0001\n" +
		"\tvendor_id:\t\t\t0xffffff\n" +
		"\tvendor_part_id:\t\t\t0\n" +
		"\thw_ver:\t\t\t\t0x0\n" +
		"\tphys_port_cnt:\t\t\t1\n" +
		"\t\tport:\t1\n" +
		"\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n" +
		"\t\t\tmax_mtu:\t\t4096 (5)\n" +
		"\t\t\tactive_mtu:\t\t1024 (3)\n" +
		"\t\t\tsm_lid:\t\t\t0\n" +
		"\t\t\tport_lid:\t\t0\n" +
		"\t\t\tport_lmc:\t\t0x00\n" +
		"\t\t\tlink_layer:\t\tEthernet\n" +
		"\n"
	diffLines(t, format(rxe0(t), false), want)
}

func TestOptionalLines(t *testing.T) {
	d := rxe0(t)
	d.Attr.FWVer = ""
	d.BoardID = "MT_0000000010"
	d.Attr.MaxFMR = 4
	d.Attr.MaxMapPerFMR = 7
	d.Attr.MaxSRQ = 0
	d.Attr.TimestampMask = 0xffff
	d.Attr.HCACoreClock = 156250
	d.Attr.RawPacketCaps = 1<<1 | 1<<3
	d.Attr.DeviceCapFlags |= 1<<34 | 1<<40
	d.Attr.RSSSupportedQPTs = 1<<8 | 1<<4 | 1<<2
	d.Attr.CQModMaxCount = 65535
	d.Attr.CQModMaxPeriod = 4095
	d.Attr.MaxDMSize = 131072
	d.Attr.ODPGeneralCaps = 1 | 1<<5
	d.Attr.ODPRCCaps = 1<<0 | 1<<3 | 1<<9
	d.Ports[0].Attr.LinkLayer = uverbs.LinkLayerInfiniBand
	d.Ports[0].Attr.State = uverbs.PortActiveDefer
	d.Ports[0].Attr.ActiveMTU = 0
	d.Ports[0].GIDs = append(d.Ports[0].GIDs,
		uverbs.GIDEntry{Index: 7, Port: 1, Type: uverbs.GIDTypeIB, GID: netip.MustParseAddr("fe80::1").As16()},
		uverbs.GIDEntry{Index: 8, Port: 1, Type: uverbs.GIDTypeRoCEv1, GID: netip.MustParseAddr("fe80::").As16()}, // zero interface ID: skipped
	)
	got := format(d, true)
	for _, want := range []string{
		"\tboard_id:\t\t\tMT_0000000010\n\tphys_port_cnt:",
		"\tmax_fmr:\t\t\t4\n\tmax_map_per_fmr:\t\t7\n\tmax_srq:\t\t\t0\n\tmax_pkeys:",
		"\tgeneral_odp_caps:\n\t\t\t\t\tODP_SUPPORT\n\t\t\t\t\tUnknown flags: 0x20\n\trc_odp_caps:\n" +
			"\t\t\t\t\tSUPPORT_SEND\n\t\t\t\t\tSUPPORT_READ\n\t\t\t\t\tUnknown flags: 0x200\n\tuc_odp_caps:\n",
		"\tcompletion timestamp_mask:\t\t\t0x000000000000ffff\n",
		"\thca_core_clock:\t\t\t156250kHZ\n",
		"\traw packet caps:\n\t\t\t\t\tScatter FCS offload\n\t\t\t\t\tDelay drop\n\tdevice_cap_flags_ex:",
		"\tdevice_cap_flags_ex:\t\t0x10401223C76\n\t\t\t\t\tRAW_SCATTER_FCS\n\t\t\t\t\tUnknown flags: 0x10000000000\n\ttso_caps:",
		"\t\tsupported_qp:\n\t\t\t\t\tSUPPORT_RAW_PACKET\n\t\t\t\t\tSUPPORT_UD\n\t\t\t\t\tUnknown flags: 0x4\n\tmax_wq_type_rq:",
		"\n\tcq moderation caps:\n\t\tmax_cq_count:\t65535\n\t\tmax_cq_period:\t4095 us\n\n",
		"\tmaximum available device memory:\t131072Bytes\n\n\tnum_comp_vectors:",
		"\t\t\tstate:\t\t\tinvalid state (5)\n",
		"\t\t\tactive_mtu:\t\tinvalid MTU (0)\n",
		"\t\t\tlink_layer:\t\tInfiniBand\n",
		// IB link layer: no GID type suffix; IB GIDs in full hex.
		"\t\t\tGID[  1]:\t\t::ffff:10.99.0.1\n\t\t\tGID[  7]:\t\tfe80:0000:0000:0000:0000:0000:0000:0001\n\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q; got:\n%s", want, got)
		}
	}
	for _, bad := range []string{"fw_ver", "max_srq_wr", "GID[  8]"} {
		if strings.Contains(got, bad) {
			t.Errorf("output has %q; got:\n%s", bad, got)
		}
	}
}

func TestPortSelectionAndIWARP(t *testing.T) {
	d := rxe0(t)
	d.Transport = transportOf(uverbs.NodeRNIC)
	d.Attr.PhysPortCnt = 2
	d.Ports = []portInfo{{Num: 2, Attr: rxePort(3)}}
	got := format(d, true)
	if !strings.Contains(got, "\ttransport:\t\t\tiWARP (1)\n") {
		t.Errorf("no iWARP transport line in\n%s", got)
	}
	if !strings.Contains(got, "\t\tport:\t2\n") || strings.Contains(got, "\t\tport:\t1\n") {
		t.Errorf("want only port 2 in\n%s", got)
	}
	if strings.Contains(got, "phys_state") {
		t.Errorf("phys_state printed for a non-IB transport:\n%s", got)
	}
}

func TestTransport(t *testing.T) {
	for nt, want := range map[uverbs.NodeType]string{
		uverbs.NodeCA:          "InfiniBand (0)",
		uverbs.NodeSwitch:      "InfiniBand (0)",
		uverbs.NodeRouter:      "InfiniBand (0)",
		uverbs.NodeRNIC:        "iWARP (1)",
		uverbs.NodeUSNIC:       "usNIC (2)",
		uverbs.NodeUSNICUDP:    "usNIC UDP (3)",
		uverbs.NodeUnspecified: "unspecified (4)",
		uverbs.NodeUnknown:     "invalid transport (-1)",
	} {
		tr := transportOf(nt)
		if got := fmt.Sprintf("%s (%d)", tr, int(tr)); got != want {
			t.Errorf("node type %v: transport %q, want %q", nt, got, want)
		}
	}
}

func TestList(t *testing.T) {
	for _, tc := range []struct {
		names []string
		want  string
	}{
		{[]string{"rxe0", "rxelo"}, "2 HCAs found:\n\trxe0\n\trxelo\n\n"},
		{[]string{"rxe0"}, "1 HCA found:\n\trxe0\n\n"},
		{nil, "0 HCAs found:\n\n"},
	} {
		var b bytes.Buffer
		writeList(&b, tc.names)
		if b.String() != tc.want {
			t.Errorf("writeList(%q) = %q, want %q", tc.names, b.String(), tc.want)
		}
	}
}

func TestGUIDString(t *testing.T) {
	if got, want := guidString(0x0200_00ff_fe00_0000), "0200:00ff:fe00:0000"; got != want {
		t.Errorf("guidString = %q, want %q", got, want)
	}
}

// TestRunBadArgs: command lines that ibv_devinfo's option loop ends
// itself end the same way, without touching a device: the usage on
// stdout, getopt's complaint (if any) on stderr, and its exit status.
func TestRunBadArgs(t *testing.T) {
	for _, c := range []struct {
		args   []string
		status int
		stderr string
	}{
		{[]string{"-i", "0"}, 1, ""},
		{[]string{"-i", "x"}, 1, ""},
		{[]string{"-i", "-1"}, 1, ""},
		{[]string{"-i", "4294967296"}, 1, ""}, // an int of 0 in C
		{[]string{"-x"}, 255, "devinfo: invalid option -- 'x'\n"},
		{[]string{"-h"}, 255, "devinfo: invalid option -- 'h'\n"},
		{[]string{"-i"}, 255, "devinfo: option requires an argument -- 'i'\n"},
		{[]string{"--ib-port"}, 255, "devinfo: option '--ib-port' requires an argument\n"},
		{[]string{"--list=1"}, 255, "devinfo: option '--list' doesn't allow an argument\n"},
		{[]string{"--ib=rxe0"}, 255, "devinfo: option '--ib=rxe0' is ambiguous; possibilities: '--ib-dev' '--ib-port'\n"},
		{[]string{"-ib-dev=rxe0"}, 1, ""}, // -i with "b-dev=rxe0"
		// In order: the bad port ends the loop before -x is seen, and
		// the reverse.
		{[]string{"-i", "0", "-x"}, 1, ""},
		{[]string{"-x", "-i", "0"}, 255, "devinfo: invalid option -- 'x'\n"},
	} {
		var out, errb bytes.Buffer
		if rc := run("devinfo", c.args, &out, &errb); rc != c.status {
			t.Errorf("run(%q) = %d, want %d", c.args, rc, c.status)
		}
		if !strings.HasPrefix(out.String(), "Usage: devinfo             print the ca attributes\n") || errb.String() != c.stderr {
			t.Errorf("run(%q): stdout %q, stderr %q; want the usage on stdout and %q on stderr", c.args, out.String(), errb.String(), c.stderr)
		}
	}
}

func TestParseArgs(t *testing.T) {
	for _, c := range []struct {
		args []string
		want options
	}{
		{[]string{"--ib-dev=rxe0", "-i", "0x2", "-v", "extra"}, options{dev: "rxe0", devSet: true, port: 2, verbose: true}},
		{[]string{"--ib-d", "rxe1", "--ib-p=010"}, options{dev: "rxe1", devSet: true, port: 8}},
		{[]string{"-i", "2abc"}, options{port: 2}},
		{[]string{"-i", "256"}, options{port: 0}}, // a uint8_t in ibv_devinfo: all ports
		{[]string{"-i", "257"}, options{port: 1}},
		{[]string{"-vd", "rxe0"}, options{dev: "rxe0", devSet: true, verbose: true}},
	} {
		var out, errb bytes.Buffer
		o, status, done := parseArgs("devinfo", c.args, &out, &errb)
		if done || status != 0 || *o != c.want || out.Len() != 0 || errb.Len() != 0 {
			t.Errorf("parseArgs(%q) = %+v, %d, %v (stdout %q, stderr %q); want %+v", c.args, o, status, done, out.String(), errb.String(), c.want)
		}
	}
}

// TestRunNoDevice: on a machine without RDMA devices (the host) devinfo
// ends as ibv_devinfo does there, for which libibverbs lists no device:
// -l prints "0 HCAs found:" and a blank line (status 0), the report "No IB
// devices found" (255), -d its not-found line (255). It printed the
// library's "no RDMA device" error instead. On a kernel with no RDMA
// support at all, ibv_devinfo's list fails (ENOSYS) and every line ends
// in "Failed to get IB devices list: Function not implemented" (255), as
// Debian 12's ibv_devinfo printed on such a host.
func TestRunNoDevice(t *testing.T) {
	if _, err := uverbs.Devices(); !errors.Is(err, uverbs.ErrNoDevice) {
		t.Skip("this machine has RDMA devices") // the VM has; vm_test.go runs the tool there
	}
	for _, c := range []struct {
		args           []string
		status         int
		stdout, stderr string
	}{
		{[]string{"-l"}, 0, "0 HCAs found:\n\n", ""},
		{nil, 255, "", "No IB devices found\n"},
		{[]string{"-v"}, 255, "", "No IB devices found\n"},
		{[]string{"-d", "rxe0"}, 255, "", "IB device 'rxe0' wasn't found\n"},
	} {
		if _, err := uverbs.Devices(); errors.Is(err, sys.ENOSYS) {
			// No RDMA support in this kernel at all (no RDMA netlink,
			// no uverbs class): ibv_get_device_list fails, ENOSYS, and
			// every line ends in perror's.
			c.status, c.stdout, c.stderr = 255, "", "Failed to get IB devices list: Function not implemented\n"
		}
		var out, errb bytes.Buffer
		if rc := run("devinfo", c.args, &out, &errb); rc != c.status || out.String() != c.stdout || errb.String() != c.stderr {
			t.Errorf("run(%q) without devices: %d, stdout %q, stderr %q; want %d, %q, %q", c.args, rc, out.String(), errb.String(), c.status, c.stdout, c.stderr)
		}
	}
}
