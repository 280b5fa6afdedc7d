package uverbs_test

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/uverbs"
)

const mcastQKey = 0x11111111

func gidOf(ip net.IP) uverbs.GID {
	var g uverbs.GID
	copy(g[:], ip.To16())
	return g
}

// TestVMMulticastAttach: what the kernel accepts and refuses in
// ibv_attach_mcast and ibv_detach_mcast (the same results libibverbs gets
// on rxe, 6.1 and 6.12), a group's QP limit, the kernel's refusal to
// destroy an attached QP, and that closing the context releases one.
func TestVMMulticastAttach(t *testing.T) {
	c := openRxe(t)
	base := testkit.Resources(t, testkit.RxeDev)
	attr, err := c.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cq, err := c.CreateCQ(16, nil)
	if err != nil {
		t.Fatal(err)
	}
	ud := udQP(t, pd, cq, mcastQKey)
	rc := rcQP(t, pd, cq)
	g6 := gidOf(net.ParseIP("ff0e::1"))
	g4 := gidOf(net.ParseIP("239.1.0.1"))
	own, err := c.QueryGID(1, 1)
	if err != nil {
		t.Fatal(err)
	}

	for _, g := range []uverbs.GID{g6, g6, g4} {
		if err := ud.AttachMcast(g, 0); err != nil {
			t.Fatalf("AttachMcast(%v): %v", g, err)
		}
	}
	if err := ud.DetachMcast(g6, 0); err != nil {
		t.Fatalf("DetachMcast(%v): %v", g6, err)
	}
	einval := func(what string, err error, method string) {
		t.Helper()
		var oe *uverbs.OpError
		if !errors.Is(err, sys.EINVAL) || !errors.As(err, &oe) || oe.Method != method {
			t.Errorf("%s: %v, want an OpError of %q wrapping EINVAL", what, err, method)
		}
	}
	einval("detaching a group the QP left", ud.DetachMcast(g6, 0), "detach mcast")
	// The kernel keeps each (GID, LID) pair as an attachment of its own:
	// a detach with another LID finds none, and ud stays attached.
	einval("detaching with a LID the QP did not attach with", ud.DetachMcast(g4, 9), "detach mcast")
	if err := ud.Destroy(bg(t)); !errors.Is(err, sys.EBUSY) || !strings.Contains(err.Error(), "attached to 1 multicast group") {
		t.Errorf("Destroy after a detach with another LID: %v, want EBUSY naming the group", err)
	}
	einval("attaching an RC QP", rc.AttachMcast(g6, 0), "attach mcast")
	einval("attaching to a unicast GID", ud.AttachMcast(own.GID, 0), "attach mcast")
	einval("attaching to the zero GID", ud.AttachMcast(uverbs.GID{}, 0), "attach mcast")

	// A group holds at most MaxMcastQPAttach QPs: ud is one of them.
	t.Logf("max_mcast_grp %d, max_mcast_qp_attach %d, max_total_mcast_qp_attach %d",
		attr.MaxMcastGrp, attr.MaxMcastQPAttach, attr.MaxTotalMcastQPAttach)
	if attr.MaxMcastQPAttach < 1 || attr.MaxMcastQPAttach > 1024 {
		t.Fatalf("MaxMcastQPAttach %d", attr.MaxMcastQPAttach)
	}
	qps := []*uverbs.QP{}
	for range attr.MaxMcastQPAttach - 1 {
		q := udQP(t, pd, cq, mcastQKey)
		if err := q.AttachMcast(g4, 0); err != nil {
			t.Fatalf("attaching QP %d of %d: %v", len(qps)+2, attr.MaxMcastQPAttach, err)
		}
		qps = append(qps, q)
	}
	extra := udQP(t, pd, cq, mcastQKey)
	if err := extra.AttachMcast(g4, 0); !errors.Is(err, sys.ENOMEM) {
		t.Errorf("attaching QP %d to a group of %d: %v, want ENOMEM", attr.MaxMcastQPAttach+1, attr.MaxMcastQPAttach, err)
	}
	// The kernel refuses to destroy an attached QP; the QP stays usable.
	err = qps[0].Destroy(bg(t))
	if !errors.Is(err, sys.EBUSY) || !strings.Contains(err.Error(), "attached to 1 multicast group") {
		t.Errorf("Destroy of an attached QP: %v, want EBUSY naming the group", err)
	}
	if err := qps[0].DetachMcast(g4, 0); err != nil {
		t.Fatalf("DetachMcast after the refused Destroy: %v", err)
	}
	if err := qps[0].Destroy(bg(t)); err != nil {
		t.Fatal(err)
	}
	if err := extra.AttachMcast(g4, 0); err != nil {
		t.Errorf("attaching after a QP left the full group: %v", err)
	}
	if err := qps[0].AttachMcast(g4, 0); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("AttachMcast on a destroyed QP: %v, want ErrClosed", err)
	}
	if err := qps[0].DetachMcast(g4, 0); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("DetachMcast on a destroyed QP: %v, want ErrClosed", err)
	}
	for _, q := range append(qps[1:], ud, extra) {
		for _, g := range []uverbs.GID{g4, g6} {
			if err := q.DetachMcast(g, 0); err != nil && !errors.Is(err, sys.EINVAL) {
				t.Fatal(err)
			}
		}
	}

	// Closing the context releases attached QPs (the kernel detaches them).
	c2 := openRxe(t)
	pd2, err := c2.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	cq2, err := c2.CreateCQ(4, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := udQP(t, pd2, cq2, mcastQKey).AttachMcast(g4, 0); err != nil {
		t.Fatal(err)
	}
	if err := c2.Close(); err != nil {
		t.Fatalf("Close with an attached QP: %v", err)
	}
	for i, q := range append(qps[1:], ud, rc, extra) {
		if err := q.Destroy(bg(t)); err != nil {
			t.Fatalf("QP %d of %d (then ud, rc, extra): %v", i, len(qps)-1, err)
		}
	}
	if err := cq.Destroy(bg(t)); err != nil {
		t.Fatal(err)
	}
	if err := pd.Dealloc(); err != nil {
		t.Fatal(err)
	}
	waitResources(t, base)
}

// TestVMMulticastDelivery sends UD datagrams to multicast groups (IPv4 and
// IPv6) on rxe0 and checks who receives them. rxe delivers a group's
// datagram only when the host is an IP member of the group on the netdev
// (attach programs just the Ethernet filter); the IP layer then loops the
// datagram back to the host, and rxe0 hands it to every attached QP. The
// test joins with a UDP socket, as an application must. Checked: every
// attached QP gets one copy, with the sender's QPN, the immediate data and
// the bytes; a QP that never attached and a QP that detached get nothing
// (a unicast datagram sent after the group's is the first they receive).
func TestVMMulticastDelivery(t *testing.T) {
	c := openRxe(t)
	base := testkit.Resources(t, testkit.RxeDev)
	ifi, err := net.InterfaceByName(testkit.RxeNetdev)
	if err != nil {
		t.Fatal(err)
	}
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<16)
	mr, err := pd.RegMR(buf, uverbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	scq, err := c.CreateCQ(16, nil)
	if err != nil {
		t.Fatal(err)
	}
	rcq, err := c.CreateCQ(64, nil)
	if err != nil {
		t.Fatal(err)
	}
	sender := udQP(t, pd, scq, mcastQKey)
	in1, in2, out := udQP(t, pd, rcq, mcastQKey), udQP(t, pd, rcq, mcastQKey), udQP(t, pd, rcq, mcastQKey)
	own, err := c.QueryGID(1, 1)
	if err != nil {
		t.Fatal(err)
	}
	self, err := pd.CreateAH(uverbs.AHAttr{DGID: own.GID, SGIDIndex: 1, IsGlobal: true, PortNum: 1, HopLimit: 64})
	if err != nil {
		t.Fatal(err)
	}
	const size = 256
	slot := map[*uverbs.QP]int{in1: 1, in2: 2, out: 3}
	post := func(qp *uverbs.QP, id uint64) {
		t.Helper()
		off := slot[qp] * 4096
		clear(buf[off : off+4096])
		if err := qp.PostRecv([]uverbs.RecvWR{{ID: id, SGL: []uverbs.SGE{mr.SGE(off, uverbs.GRHSize+size)}}}); err != nil {
			t.Fatal(err)
		}
	}
	send := func(ah *uverbs.AH, qpn, imm uint32, seed byte) {
		t.Helper()
		fill(buf[:size], seed)
		wc := one(t, sender, scq, uverbs.SendWR{ID: uint64(imm), Opcode: uverbs.WRSendWithImm, ImmData: imm,
			SGL: []uverbs.SGE{mr.SGE(0, size)}, AH: ah, RemoteQPN: qpn, RemoteQKey: mcastQKey})
		if wc.Status != uverbs.WCSuccess {
			t.Fatalf("send to QPN %#x: %v", qpn, wc.Status)
		}
	}
	// got checks that the next completions on rcq are one receive per QP
	// of qps, each carrying the datagram with imm and seed.
	got := func(what string, imm uint32, seed byte, qps ...*uverbs.QP) {
		t.Helper()
		want := make([]byte, size)
		fill(want, seed)
		seen := map[uint32]bool{}
		for _, wc := range pollN(t, rcq, len(qps)) {
			var qp *uverbs.QP
			for _, q := range qps {
				if q.QPN() == wc.QPNum {
					qp = q
				}
			}
			if qp == nil || seen[wc.QPNum] {
				t.Fatalf("%s: a completion on QPN %#x (%+v); want one on each of %v", what, wc.QPNum, wc, qpns(qps))
			}
			seen[wc.QPNum] = true
			if wc.Status != uverbs.WCSuccess || wc.Opcode != uverbs.WCRecv || wc.ByteLen != uverbs.GRHSize+size ||
				wc.Flags&uverbs.WCWithImm == 0 || wc.ImmData != imm || wc.Flags&uverbs.WCGRH == 0 || wc.SrcQP != sender.QPN() {
				t.Fatalf("%s: QPN %#x: completion %+v (%v), want a receive of %d bytes with immediate %#x and a GRH from QPN %#x",
					what, wc.QPNum, wc, wc.Status, uverbs.GRHSize+size, imm, sender.QPN())
			}
			off := slot[qp] * 4096
			if !bytes.Equal(buf[off+uverbs.GRHSize:off+uverbs.GRHSize+size], want) {
				t.Fatalf("%s: QPN %#x received other bytes than were sent", what, wc.QPNum)
			}
		}
	}

	for _, tc := range []struct {
		name  string
		group net.IP
		sgid  int
	}{
		{"ipv4", net.ParseIP("239.1.0.7"), 1},
		{"ipv6", net.ParseIP("ff0e::7"), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			network := "udp6"
			if tc.group.To4() != nil {
				network = "udp4"
			}
			join, err := net.ListenMulticastUDP(network, ifi, &net.UDPAddr{IP: tc.group})
			if err != nil {
				t.Fatalf("joining %v on %s: %v", tc.group, ifi.Name, err)
			}
			defer join.Close()
			g := gidOf(tc.group)
			ah, err := pd.CreateAH(uverbs.AHAttr{DGID: g, SGIDIndex: uint8(tc.sgid), IsGlobal: true, PortNum: 1, HopLimit: 1})
			if err != nil {
				t.Fatalf("CreateAH(%v): %v", g, err)
			}
			defer ah.Destroy()
			for _, q := range []*uverbs.QP{in1, in2} {
				if err := q.AttachMcast(g, 0); err != nil {
					t.Fatal(err)
				}
			}
			post(in1, 1)
			post(in2, 2)
			post(out, 3)
			send(ah, uverbs.MulticastQPN, 0x100, 1)
			got("the group's first datagram", 0x100, 1, in1, in2)
			// The GRH names the group as its destination.
			for _, q := range []*uverbs.QP{in1, in2} {
				grh := buf[slot[q]*4096:][:uverbs.GRHSize]
				var dst uverbs.GID
				if network == "udp4" {
					copy(dst[:], net.IP(grh[20+16:20+20]).To16()) // IPv4 header in the last 20 bytes
				} else {
					copy(dst[:], grh[24:40])
				}
				if dst != g {
					t.Errorf("QPN %#x: GRH destination %v, want %v", q.QPN(), dst, g)
				}
			}

			if err := in2.DetachMcast(g, 0); err != nil {
				t.Fatal(err)
			}
			post(in1, 1)
			post(in2, 2)
			send(ah, uverbs.MulticastQPN, 0x200, 2)
			got("the group's datagram after in2 detached", 0x200, 2, in1)
			send(self, in2.QPN(), 0x300, 3)
			got("a unicast datagram to in2", 0x300, 3, in2)
			send(self, out.QPN(), 0x400, 4)
			got("a unicast datagram to the QP that never attached", 0x400, 4, out)
			if err := in1.DetachMcast(g, 0); err != nil {
				t.Fatal(err)
			}
		})
	}
	for _, q := range []*uverbs.QP{sender, in1, in2, out} {
		if err := q.Destroy(bg(t)); err != nil {
			t.Fatal(err)
		}
	}
	self.Destroy()
	for _, cq := range []*uverbs.CQ{scq, rcq} {
		if err := cq.Destroy(bg(t)); err != nil {
			t.Fatal(err)
		}
	}
	mr.Dereg()
	pd.Dealloc()
	waitResources(t, base)
}

func qpns(qps []*uverbs.QP) string {
	var s []string
	for _, q := range qps {
		s = append(s, fmt.Sprintf("%#x", q.QPN()))
	}
	return strings.Join(s, " ")
}
