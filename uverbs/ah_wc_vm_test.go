package uverbs_test

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/uverbs"
)

// TestVMAHFromWC: a UD server answers a client it knows only from the
// received datagram (ibv_create_ah_from_wc): over RoCE v2 with IPv4 (GID
// 1 of rxe0) and IPv6 (GID 0, link-local), with traffic classes, the
// attributes name the client's GID, the server's GID index the datagram
// was sent to and the received hop limit and the sender's traffic class,
// and the reply
// through the new AH reaches the client intact. The GRHs are returned for
// the comparison with libibverbs.
func TestVMAHFromWC(t *testing.T) {
	c := openRxe(t)
	base := testkit.Resources(t, testkit.RxeDev)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cqa, err := c.CreateCQ(16, nil)
	if err != nil {
		t.Fatal(err)
	}
	cqb, err := c.CreateCQ(16, nil)
	if err != nil {
		t.Fatal(err)
	}
	const qkey = 0x22222222
	a := udQP(t, pd, cqa, qkey) // client
	b := udQP(t, pd, cqb, qkey) // server
	buf := make([]byte, 8192)
	mr, err := pd.RegMR(buf, uverbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []struct {
		gid     int
		tc, hop uint8
	}{{1, 0, 64}, {1, 0x20, 17}, {0, 0, 64}, {0, 0x68, 3}} {
		g, err := c.QueryGID(1, v.gid)
		if err != nil {
			t.Fatal(err)
		}
		toServer, err := pd.CreateAH(uverbs.AHAttr{DGID: g.GID, SGIDIndex: uint8(v.gid), HopLimit: v.hop, TrafficClass: v.tc, IsGlobal: true, PortNum: 1})
		if err != nil {
			t.Fatal(err)
		}
		// The server's receive at 0, the client's at 2048; the request's
		// payload at 4096, the reply's at 6144.
		fill(buf[4096:4096+64], byte(v.gid)+v.hop)
		fill(buf[6144:6144+64], byte(v.gid)+v.hop+1)
		if err := b.PostRecv([]uverbs.RecvWR{{ID: 1, SGL: []uverbs.SGE{sge(mr, 0, uverbs.GRHSize+64)}}}); err != nil {
			t.Fatal(err)
		}
		if err := a.PostRecv([]uverbs.RecvWR{{ID: 2, SGL: []uverbs.SGE{sge(mr, 2048, uverbs.GRHSize+64)}}}); err != nil {
			t.Fatal(err)
		}
		if wc := one(t, a, cqa, uverbs.SendWR{ID: 3, Opcode: uverbs.WRSend, AH: toServer, RemoteQPN: b.QPN(), RemoteQKey: qkey,
			SGL: []uverbs.SGE{sge(mr, 4096, 64)}}); wc.Status != uverbs.WCSuccess || wc.ID != 3 {
			t.Fatalf("request: %+v", wc)
		}
		req := pollN(t, cqb, 1)[0]
		if req.Status != uverbs.WCSuccess || req.Flags&uverbs.WCGRH == 0 || req.SrcQP != a.QPN() {
			t.Fatalf("request received: %+v", req)
		}
		grh := append([]byte(nil), buf[:uverbs.GRHSize]...)
		attr, err := c.AHAttrFromWC(1, &req, grh)
		if err != nil {
			t.Fatalf("GID %d tc %#x hop %d: AHAttrFromWC: %v (GRH %x)", v.gid, v.tc, v.hop, err, grh)
		}
		// The hop limit is the one received: rxe sends with the route's
		// (64 here), not the AH's, in the IPv4 TTL (byte 28 of the GRH
		// area) or the IPv6 hop limit (byte 7).
		hop := grh[7]
		if v.gid == 1 {
			hop = grh[28]
		}
		want := uverbs.AHAttr{DGID: g.GID, SGIDIndex: uint8(v.gid), HopLimit: hop, TrafficClass: v.tc, IsGlobal: true, PortNum: 1,
			FlowLabel: attr.FlowLabel, DLID: req.SLID, SL: req.SL}
		if diff := cmp.Diff(want, attr); diff != "" {
			t.Errorf("GID %d tc %#x hop %d: AHAttrFromWC (-want +got):\n%s\nGRH %x", v.gid, v.tc, v.hop, diff, grh)
		}
		grhs = append(grhs, grhCase{fmt.Sprintf("received, GID %d tc %#x hop %d", v.gid, v.tc, v.hop), req, grh})

		reply, err := pd.CreateAHFromWC(1, &req, grh)
		if err != nil {
			t.Fatal(err)
		}
		if wc := one(t, b, cqb, uverbs.SendWR{ID: 4, Opcode: uverbs.WRSend, AH: reply, RemoteQPN: req.SrcQP, RemoteQKey: qkey,
			SGL: []uverbs.SGE{sge(mr, 6144, 64)}}); wc.Status != uverbs.WCSuccess || wc.ID != 4 {
			t.Fatalf("reply: %+v", wc)
		}
		got := pollN(t, cqa, 1)[0]
		if got.Status != uverbs.WCSuccess || got.ID != 2 || got.SrcQP != b.QPN() || got.ByteLen != uverbs.GRHSize+64 {
			t.Fatalf("reply received: %+v", got)
		}
		if !bytes.Equal(buf[2048+uverbs.GRHSize:2048+uverbs.GRHSize+64], buf[6144:6144+64]) {
			t.Fatal("the reply's payload differs")
		}
		for _, ah := range []*uverbs.AH{toServer, reply} {
			if err := ah.Destroy(); err != nil {
				t.Fatal(err)
			}
		}
	}

	// What cannot be answered.
	req := uverbs.WC{Flags: uverbs.WCGRH}
	if _, err := c.AHAttrFromWC(1, &req, make([]byte, 39)); !errors.Is(err, uverbs.ErrInvalid) {
		t.Errorf("short GRH: %v", err)
	}
	if _, err := c.AHAttrFromWC(0, &req, make([]byte, 40)); !errors.Is(err, uverbs.ErrInvalid) {
		t.Errorf("port 0: %v", err)
	}
	if _, err := c.AHAttrFromWC(1, nil, make([]byte, 40)); !errors.Is(err, uverbs.ErrInvalid) {
		t.Errorf("nil WC: %v", err)
	}
	if _, err := pd.CreateAHFromWC(1, &req, make([]byte, 40)); !errors.Is(err, uverbs.ErrInvalid) {
		t.Errorf("an all-zero GRH: %v", err)
	}

	for _, q := range []*uverbs.QP{a, b} {
		if err := q.Destroy(bg(t)); err != nil {
			t.Fatal(err)
		}
	}
	if err := mr.Dereg(); err != nil {
		t.Fatal(err)
	}
	for _, cq := range []*uverbs.CQ{cqa, cqb} {
		if err := cq.Destroy(bg(t)); err != nil {
			t.Fatal(err)
		}
	}
	if err := pd.Dealloc(); err != nil {
		t.Fatal(err)
	}
	waitResources(t, base)
}

// grhCase is one input of the comparison with libibverbs.
type grhCase struct {
	name string
	wc   uverbs.WC
	grh  []byte
}

// grhs collects the GRHs TestVMAHFromWC received.
var grhs []grhCase

// TestVMAHAttrFromWCAgainstC feeds the same completions and headers to
// Context.AHAttrFromWC and to libibverbs' ibv_init_ah_from_wc (pv_ahwc, in
// the same guest, on the same device): the headers rxe delivered in
// TestVMAHFromWC, and headers built to reach each branch: IPv4 with TTL,
// TOS and a checksum that is right or wrong, IPv4 behind a zeroed or an
// IPv6-looking first half, multicast destinations of both families, IPv6
// with UDP, IB and other next headers, flow labels, destinations that are
// not the port's, versions that are neither, and no GRH at all. Every
// line must match.
func TestVMAHAttrFromWCAgainstC(t *testing.T) {
	c := openRxe(t)
	if len(grhs) == 0 {
		TestVMAHFromWC(t)
	}
	g1, err := c.QueryGID(1, 1)
	if err != nil {
		t.Fatal(err)
	}
	g0, err := c.QueryGID(1, 0)
	if err != nil {
		t.Fatal(err)
	}
	cases := append([]grhCase(nil), grhs...)
	ip4 := func(name string, first uint32, tos, ttl uint8, src, dst []byte, goodSum bool) {
		h := make([]byte, 40)
		binary.BigEndian.PutUint32(h, first)
		p := h[20:]
		p[0], p[1], p[8], p[9] = 0x45, tos, ttl, 17
		binary.BigEndian.PutUint16(p[2:], 20+8+12+64+4)
		copy(p[12:16], src)
		copy(p[16:20], dst)
		sum := ipv4Sum(p)
		if !goodSum {
			sum ^= 0x0101
		}
		binary.BigEndian.PutUint16(p[10:], sum)
		cases = append(cases, grhCase{name, uverbs.WC{Flags: uverbs.WCGRH, SLID: 0xffff, SL: 3}, h})
	}
	me4 := g1.GID[12:16]
	peer4 := []byte{10, 1, 2, 3}
	ip4("ipv4", 0, 0, 64, peer4, me4, true)
	ip4("ipv4 tos ttl", 0, 0xb8, 1, peer4, me4, true)
	ip4("ipv4 behind an IPv6 version nibble, checksum right", 0x60012345, 0x10, 9, peer4, me4, true)
	ip4("ipv4 behind an IPv6 version nibble, checksum wrong", 0x60012345, 0x10, 9, peer4, me4, false)
	ip4("ipv4 with a bad checksum and no IPv6 nibble", 0, 0, 64, peer4, me4, false)
	ip4("ipv4 multicast destination", 0, 0, 64, peer4, []byte{239, 1, 1, 1}, true)
	ip4("ipv4 to an address not on the port", 0, 0, 64, peer4, []byte{10, 9, 9, 9}, true)
	ip6 := func(name string, vtf uint32, next, hop uint8, src, dst uverbs.GID) {
		h := make([]byte, 40)
		binary.BigEndian.PutUint32(h, vtf)
		binary.BigEndian.PutUint16(h[4:], 64)
		h[6], h[7] = next, hop
		copy(h[8:24], src[:])
		copy(h[24:40], dst[:])
		cases = append(cases, grhCase{name, uverbs.WC{Flags: uverbs.WCGRH, SLID: 7, SL: 1, DLIDPathBits: 2}, h})
	}
	var peer6, mc6, other6 uverbs.GID
	copy(peer6[:], []byte{0xfe, 0x80, 15: 0x42})
	copy(mc6[:], []byte{0xff, 0x0e, 15: 1})
	copy(other6[:], []byte{0x20, 0x01, 0x0d, 0xb8, 15: 9})
	ip6("ipv6 udp", 0x6000_0000, 17, 64, peer6, g0.GID)
	ip6("ipv6 udp tclass flow", 0x6ab1_2345, 17, 200, peer6, g0.GID)
	ip6("ipv6 udp to the IPv4-mapped GID", 0x6000_0000, 17, 64, peer6, g1.GID)
	ip6("ipv6 ib next header (no IB or RoCE v1 GID on rxe)", 0x6000_0000, 0x1b, 64, peer6, g0.GID)
	ip6("ipv6 tcp next header", 0x6000_0000, 6, 64, peer6, g0.GID)
	ip6("ipv6 multicast destination", 0x6000_0000, 17, 64, peer6, mc6)
	ip6("ipv6 to a GID not on the port", 0x6000_0000, 17, 64, peer6, other6)
	ip6("version 5", 0x5000_0000, 17, 64, peer6, g0.GID)
	cases = append(cases,
		grhCase{"no GRH", uverbs.WC{SLID: 0x1234, SL: 5, DLIDPathBits: 1}, make([]byte, 40)},
		grhCase{"no GRH flag, a flow label in the buffer", uverbs.WC{SLID: 9}, append([]byte{0x60, 0x0a, 0xbc, 0xde}, make([]byte, 36)...)},
		grhCase{"all zero", uverbs.WC{Flags: uverbs.WCGRH}, make([]byte, 40)},
	)
	for _, port := range []int{1, 2} { // rxe has one port: 2 fails in both
		cases = append(cases, grhCase{fmt.Sprintf("port %d", port), uverbs.WC{Flags: uverbs.WCGRH}, cases[0].grh})
		cases[len(cases)-1].wc.PortNum = uint8(port) // carried to the line below
	}

	var in, goOut strings.Builder
	for _, k := range cases {
		port := 1
		if k.wc.PortNum != 0 {
			port = int(k.wc.PortNum)
		}
		fmt.Fprintf(&in, "%d %d %d %d %d %s\n", port, k.wc.SLID, k.wc.SL, k.wc.DLIDPathBits, uint32(k.wc.Flags), hex.EncodeToString(k.grh))
		wc := k.wc
		a, err := c.AHAttrFromWC(port, &wc, k.grh)
		if err != nil {
			fmt.Fprintln(&goOut, "err")
			continue
		}
		fmt.Fprintf(&goOut, "ok global=%d dgid=%x flow=%d sgid_index=%d hop=%d tclass=%d dlid=%d sl=%d path_bits=%d port=%d\n",
			b2i(a.IsGlobal), a.DGID[:], a.FlowLabel, a.SGIDIndex, a.HopLimit, a.TrafficClass, a.DLID, a.SL, a.SrcPathBits, a.PortNum)
	}
	cmd := exec.Command("pv_ahwc", testkit.RxeDev)
	cmd.Stdin = strings.NewReader(in.String())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cOut, err := cmd.Output()
	if err != nil {
		t.Fatalf("pv_ahwc: %v: %s", err, stderr.String())
	}
	gl, cl := strings.Split(goOut.String(), "\n"), strings.Split(string(cOut), "\n")
	if len(gl) != len(cl) {
		t.Fatalf("%d lines from Go, %d from libibverbs:\n%s\n%s", len(gl), len(cl), goOut.String(), cOut)
	}
	oks := 0
	for i := range len(cases) {
		if gl[i] != cl[i] {
			t.Errorf("%s:\n  go: %s\n   C: %s", cases[i].name, gl[i], cl[i])
		}
		if strings.HasPrefix(cl[i], "ok") {
			oks++
		}
	}
	if !t.Failed() {
		t.Logf("%d cases, %d answerable, all alike in Go and libibverbs", len(cases), oks)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// ipv4Sum is the IPv4 header checksum of the 20-byte header p (its
// checksum field taken as zero).
func ipv4Sum(p []byte) uint16 {
	var s uint32
	for i := 0; i < 20; i += 2 {
		if i != 10 {
			s += uint32(binary.BigEndian.Uint16(p[i:]))
		}
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}
