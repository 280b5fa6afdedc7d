package twohost

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/uverbs"
)

// The opcode test runs on host A (the driver) and, through
// testkit.Host.StartTest, on host B in the peer role: the same test
// binary, serving requests over a TCP connection on the wire (fill, read
// or write its memory, post receives, poll, post work requests towards
// the driver). Each side has an RC QP, a UD QP, their CQs and one 64 KiB
// MR on rxew; the RC QPs are connected to each other across the wire
// through GID 1 (::ffff:10.77.0.x).

const (
	opcodesRole    = "opcodes"
	opcodesPortEnv = "PV_OPCODES_PORT"
	opcodesReady   = "opcodes peer listening"
	udQKey         = 0x11111111
	bufSize        = 1 << 16
	access         = uverbs.AccessLocalWrite | uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead | uverbs.AccessRemoteAtomic
)

// endpoint is what the sides exchange to reach each other.
type endpoint struct {
	QPN, UDQPN uint32
	GID        uverbs.GID
	Addr       uint64
	RKey       uint32
}

// wrSpec is a work request the peer posts on its RC QP towards the
// driver's MR: local pieces are (offset, length) in the peer's buffer,
// RemoteOff an offset in the driver's.
type wrSpec struct {
	Opcode     uverbs.WROpcode
	ID         uint64
	SGL        [][2]int
	Imm        uint32
	RemoteOff  uint64
	CompareAdd uint64
	Swap       uint64
	RKey       uint32 // the driver's MR's when 0 (else a memory window's)
}

type request struct {
	Op    string // hello fill clear read write recv poll post udsend mcast-join mcast-detach mcast-leave bye
	Hello *endpoint
	Off   int
	N     int
	Seed  byte
	Data  []byte
	UD    bool     // recv, poll: on the UD QP
	UD2   bool     // recv, mcast-detach: on the second UD QP (mcast-join makes it)
	Group string   // mcast-*: the group's IP address
	ID    uint64   // recv
	SGL   [][2]int // recv, udsend
	WR    *wrSpec  // post
	Imm   uint32   // udsend
}

type reply struct {
	Err   string
	Hello *endpoint
	Data  []byte
	WCs   []uverbs.WC
	QPN   uint32 // mcast-join: the second UD QP's
}

// side is one host's verbs objects.
type side struct {
	c        *uverbs.Context
	pd       *uverbs.PD
	cq, udcq *uverbs.CQ
	qp, ud   *uverbs.QP
	buf      []byte
	mr       *uverbs.MR
	gid      uverbs.GID
	ah       *uverbs.AH // to the other side's UD QP, once known

	ud2  *uverbs.QP   // a second UD QP on udcq for multicast (mcast-join)
	join *net.UDPConn // the host's IP membership of the group
}

// mcastJoin makes the host an IP member of group on the wire netdev (rxe
// delivers a group's datagrams only then: uverbs.QP.AttachMcast) and
// attaches the UD QP and a second one to the group.
func (s *side) mcastJoin(group string) (uint32, error) {
	ip := net.ParseIP(group)
	if ip == nil || !ip.IsMulticast() {
		return 0, fmt.Errorf("%q is not a multicast address", group)
	}
	ifi, err := net.InterfaceByName(testkit.WireNetdev)
	if err != nil {
		return 0, err
	}
	network := "udp6"
	if ip.To4() != nil {
		network = "udp4"
	}
	if s.join, err = net.ListenMulticastUDP(network, ifi, &net.UDPAddr{IP: ip}); err != nil {
		return 0, err
	}
	if s.ud2, err = s.pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeUD, SendCQ: s.udcq, RecvCQ: s.udcq,
		Cap: uverbs.QPCap{MaxSendWR: 1, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		return 0, err
	}
	if err := readyUD(s.ud2, uverbs.QPStateRTR); err != nil {
		return 0, err
	}
	g := gidOf(ip)
	for _, q := range []*uverbs.QP{s.ud, s.ud2} {
		if err := q.AttachMcast(g, 0); err != nil {
			return 0, err
		}
	}
	return s.ud2.QPN(), nil
}

// mcastLeave undoes mcastJoin: detaches both QPs (one may have left
// already), destroys the second and leaves the IP group.
func (s *side) mcastLeave(group string) error {
	g := gidOf(net.ParseIP(group))
	var errs []error
	for _, q := range []*uverbs.QP{s.ud, s.ud2} {
		if q == nil {
			continue
		}
		if err := q.DetachMcast(g, 0); err != nil && !errors.Is(err, sys.EINVAL) {
			errs = append(errs, err)
		}
	}
	if s.ud2 != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		errs = append(errs, s.ud2.Destroy(ctx))
		s.ud2 = nil
	}
	if s.join != nil {
		errs = append(errs, s.join.Close())
		s.join = nil
	}
	return errors.Join(errs...)
}

func gidOf(ip net.IP) uverbs.GID {
	var g uverbs.GID
	copy(g[:], ip.To16())
	return g
}

func newSide(t *testing.T) *side {
	t.Helper()
	s := &side{}
	var err error
	if s.c, err = uverbs.OpenByName(testkit.WireDev); err != nil {
		t.Fatalf("OpenByName(%s): %v", testkit.WireDev, err)
	}
	t.Cleanup(func() { s.c.Close() })
	g, err := s.c.QueryGID(1, 1)
	if err != nil {
		t.Fatal(err)
	}
	s.gid = g.GID
	if s.pd, err = s.c.AllocPD(); err != nil {
		t.Fatal(err)
	}
	if s.cq, err = s.c.CreateCQ(64, nil); err != nil {
		t.Fatal(err)
	}
	if s.udcq, err = s.c.CreateCQ(16, nil); err != nil {
		t.Fatal(err)
	}
	if s.qp, err = s.pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: s.cq, RecvCQ: s.cq,
		Cap: uverbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 4, MaxRecvSGE: 4, MaxInlineData: 128}}); err != nil {
		t.Fatal(err)
	}
	if s.ud, err = s.pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeUD, SendCQ: s.udcq, RecvCQ: s.udcq,
		Cap: uverbs.QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := readyUD(s.ud, uverbs.QPStateRTS); err != nil {
		t.Fatal(err)
	}
	s.buf = make([]byte, bufSize)
	if s.mr, err = s.pd.RegMR(s.buf, access|uverbs.AccessMWBind); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if s.ud2 != nil {
			t.Errorf("the multicast QP is still there (no mcast-leave)")
		}
		for _, q := range []*uverbs.QP{s.qp, s.ud} {
			if err := q.Destroy(ctx); err != nil {
				t.Errorf("destroy QP: %v", err)
			}
		}
		if s.ah != nil {
			s.ah.Destroy()
		}
		for _, cq := range []*uverbs.CQ{s.cq, s.udcq} {
			if err := cq.Destroy(ctx); err != nil {
				t.Errorf("destroy CQ: %v", err)
			}
		}
		s.mr.Dereg()
		s.pd.Dealloc()
	})
	return s
}

// readyUD drives a UD QP from RESET through INIT (port 1, udQKey) up to
// state: RTR to receive, RTS to send too.
func readyUD(qp *uverbs.QP, state uverbs.QPState) error {
	for _, st := range []struct {
		attr uverbs.QPAttr
		mask uverbs.QPAttrMask
	}{
		{uverbs.QPAttr{State: uverbs.QPStateInit, PortNum: 1, QKey: udQKey}, uverbs.QPAttrState | uverbs.QPAttrPKeyIndex | uverbs.QPAttrPort | uverbs.QPAttrQKey},
		{uverbs.QPAttr{State: uverbs.QPStateRTR}, uverbs.QPAttrState},
		{uverbs.QPAttr{State: uverbs.QPStateRTS}, uverbs.QPAttrState | uverbs.QPAttrSQPSN},
	} {
		if err := qp.Modify(&st.attr, st.mask); err != nil {
			return fmt.Errorf("UD QP to %v: %w", st.attr.State, err)
		}
		if st.attr.State == state {
			return nil
		}
	}
	return nil
}

func (s *side) endpoint() *endpoint {
	return &endpoint{QPN: s.qp.QPN(), UDQPN: s.ud.QPN(), GID: s.gid, Addr: s.mr.Addr(), RKey: s.mr.RKey()}
}

// connect drives the RC QP RESET→RTS towards the remote one, and makes an
// address handle for the remote UD QP.
func (s *side) connect(r *endpoint) error {
	for _, st := range []struct {
		attr uverbs.QPAttr
		mask uverbs.QPAttrMask
	}{
		{uverbs.QPAttr{State: uverbs.QPStateInit, PortNum: 1, AccessFlags: access},
			uverbs.QPAttrState | uverbs.QPAttrPKeyIndex | uverbs.QPAttrPort | uverbs.QPAttrAccessFlags},
		{uverbs.QPAttr{State: uverbs.QPStateRTR, PathMTU: 3, DestQPN: r.QPN, MaxDestRdAtomic: 4, MinRNRTimer: 12,
			AH: uverbs.AHAttr{DGID: r.GID, SGIDIndex: 1, HopLimit: 64, IsGlobal: true, PortNum: 1}},
			uverbs.QPAttrState | uverbs.QPAttrAV | uverbs.QPAttrPathMTU | uverbs.QPAttrDestQPN | uverbs.QPAttrRQPSN |
				uverbs.QPAttrMaxDestRdAtomic | uverbs.QPAttrMinRNRTimer},
		{uverbs.QPAttr{State: uverbs.QPStateRTS, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 4},
			uverbs.QPAttrState | uverbs.QPAttrTimeout | uverbs.QPAttrRetryCnt | uverbs.QPAttrRNRRetry |
				uverbs.QPAttrSQPSN | uverbs.QPAttrMaxQPRdAtomic},
	} {
		if err := s.qp.Modify(&st.attr, st.mask); err != nil {
			return fmt.Errorf("RC QP to %v: %w", st.attr.State, err)
		}
	}
	var err error
	s.ah, err = s.pd.CreateAH(uverbs.AHAttr{DGID: r.GID, SGIDIndex: 1, HopLimit: 64, IsGlobal: true, PortNum: 1})
	return err
}

func (s *side) sge(off, n int) uverbs.SGE {
	return uverbs.SGE{Addr: s.mr.Addr() + uint64(off), Length: uint32(n), LKey: s.mr.LKey()}
}

func (s *side) sgl(pieces [][2]int) []uverbs.SGE {
	var l []uverbs.SGE
	for _, p := range pieces {
		l = append(l, s.sge(p[0], p[1]))
	}
	return l
}

// poll waits up to 10 s for n completions on cq.
func poll(cq *uverbs.CQ, n int) ([]uverbs.WC, error) {
	out := make([]uverbs.WC, 0, n)
	buf := make([]uverbs.WC, 16)
	deadline := time.Now().Add(10 * time.Second)
	for len(out) < n {
		k, err := cq.Poll(buf[:min(len(buf), n-len(out))])
		if err != nil {
			return out, err
		}
		out = append(out, buf[:k]...)
		if k == 0 {
			if time.Now().After(deadline) {
				return out, fmt.Errorf("got %d of %d completions in 10 s: %+v", len(out), n, out)
			}
			time.Sleep(time.Millisecond)
		}
	}
	return out, nil
}

// postOne posts wr (signaled) on qp and waits for its completion on cq.
func postOne(qp *uverbs.QP, cq *uverbs.CQ, wr uverbs.SendWR) (uverbs.WC, error) {
	wr.Flags |= uverbs.SendSignaled
	if err := qp.PostSend([]uverbs.SendWR{wr}); err != nil {
		return uverbs.WC{}, err
	}
	wcs, err := poll(cq, 1)
	if err != nil {
		return uverbs.WC{}, err
	}
	return wcs[0], nil
}

func fill(b []byte, seed byte) {
	for i := range b {
		b[i] = seed + byte(i*7)
	}
}

func filled(n int, seed byte) []byte {
	b := make([]byte, n)
	fill(b, seed)
	return b
}

// servePeer is the peer role: it serves one driver connection until bye.
func servePeer(t *testing.T) {
	// ThisHost first: it starts the leak check, which must see the
	// side's objects made and released.
	me := testkit.ThisHost(t)
	s := newSide(t)
	port := os.Getenv(opcodesPortEnv)
	l, err := net.Listen("tcp", net.JoinHostPort(me.Addr, port))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	fmt.Println(opcodesReady)
	l.(*net.TCPListener).SetDeadline(time.Now().Add(2 * time.Minute))
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	dec, enc := json.NewDecoder(bufio.NewReader(c)), json.NewEncoder(c)
	var remote *endpoint
	for {
		var req request
		if err := dec.Decode(&req); err != nil {
			t.Fatalf("reading a request: %v", err)
		}
		var rep reply
		err := func() error {
			if req.Off < 0 || req.N < 0 || req.Off+req.N > len(s.buf) {
				return fmt.Errorf("range %d+%d outside the buffer", req.Off, req.N)
			}
			switch req.Op {
			case "hello":
				remote = req.Hello
				rep.Hello = s.endpoint()
				return s.connect(remote)
			case "fill":
				fill(s.buf[req.Off:req.Off+req.N], req.Seed)
			case "clear":
				clear(s.buf)
			case "read":
				rep.Data = append([]byte(nil), s.buf[req.Off:req.Off+req.N]...)
			case "write":
				copy(s.buf[req.Off:], req.Data)
			case "recv":
				qp := s.qp
				if req.UD {
					qp = s.ud
				}
				if req.UD2 {
					qp = s.ud2
				}
				return qp.PostRecv([]uverbs.RecvWR{{ID: req.ID, SGL: s.sgl(req.SGL)}})
			case "poll":
				cq := s.cq
				if req.UD {
					cq = s.udcq
				}
				var err error
				rep.WCs, err = poll(cq, req.N)
				return err
			case "post":
				w := req.WR
				rkey := remote.RKey
				if w.RKey != 0 {
					rkey = w.RKey
				}
				wc, err := postOne(s.qp, s.cq, uverbs.SendWR{ID: w.ID, Opcode: w.Opcode, SGL: s.sgl(w.SGL), ImmData: w.Imm,
					RemoteAddr: remote.Addr + w.RemoteOff, RKey: rkey, CompareAdd: w.CompareAdd, Swap: w.Swap})
				rep.WCs = []uverbs.WC{wc}
				return err
			case "udsend":
				wc, err := postOne(s.ud, s.udcq, uverbs.SendWR{ID: req.ID, Opcode: uverbs.WRSendWithImm, ImmData: req.Imm, SGL: s.sgl(req.SGL),
					AH: s.ah, RemoteQPN: remote.UDQPN, RemoteQKey: udQKey})
				rep.WCs = []uverbs.WC{wc}
				return err
			case "mcast-join":
				var err error
				rep.QPN, err = s.mcastJoin(req.Group)
				return err
			case "mcast-detach":
				qp := s.ud
				if req.UD2 {
					qp = s.ud2
				}
				return qp.DetachMcast(gidOf(net.ParseIP(req.Group)), 0)
			case "mcast-leave":
				return s.mcastLeave(req.Group)
			case "bye":
			default:
				return fmt.Errorf("unknown request %q", req.Op)
			}
			return nil
		}()
		if err != nil {
			rep.Err = err.Error()
			t.Errorf("%s: %v", req.Op, err)
		}
		if err := enc.Encode(rep); err != nil {
			t.Fatalf("sending the reply to %s: %v", req.Op, err)
		}
		if req.Op == "bye" {
			return
		}
	}
}

// peerConn is the driver's connection to the peer.
type peerConn struct {
	t   *testing.T
	dec *json.Decoder
	enc *json.Encoder
}

func (p *peerConn) call(req request) reply {
	p.t.Helper()
	if err := p.enc.Encode(req); err != nil {
		p.t.Fatalf("peer: %s: %v", req.Op, err)
	}
	var rep reply
	if err := p.dec.Decode(&rep); err != nil {
		p.t.Fatalf("peer: %s: %v", req.Op, err)
	}
	if rep.Err != "" {
		p.t.Fatalf("peer: %s: %s", req.Op, rep.Err)
	}
	return rep
}

func (p *peerConn) read(off, n int) []byte {
	p.t.Helper()
	return p.call(request{Op: "read", Off: off, N: n}).Data
}

func (p *peerConn) poll(ud bool, n int) []uverbs.WC {
	p.t.Helper()
	return p.call(request{Op: "poll", UD: ud, N: n}).WCs
}

// TestTwoHostOpcodes is the data-path opcode test (uverbs' TestVMOpcodes
// and TestVMUDSendAH) between two hosts, with the other side played by
// this test on host B: sends with scatter/gather lists on both sides and
// immediate data, inline sends, RDMA write (with immediate), RDMA read and
// both atomics from A to B and from B to A, unsignaled writes, UD
// datagrams through address handles both ways, a UD reply through an
// address handle made from the request's completion (CreateAHFromWC), RDMA
// write and read through a memory window, UD datagrams to a multicast
// group (IPv4 and IPv6) that two of B's QPs joined, and a write with a
// wrong rkey.
// Every byte that lands in the other host's memory is compared.
func TestTwoHostOpcodes(t *testing.T) {
	if testkit.PeerRole() == opcodesRole {
		servePeer(t)
		return
	}
	b := testkit.PeerHost(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	port := strconv.Itoa(int(nextPort.Add(1)))
	peer := b.StartTest(ctx, t, opcodesRole, opcodesPortEnv+"="+port)
	if err := peer.WaitForOutput(ctx, opcodesReady); err != nil {
		t.Fatal(err)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(b.Addr, port))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	p := &peerConn{t: t, dec: json.NewDecoder(bufio.NewReader(conn)), enc: json.NewEncoder(conn)}
	a := newSide(t)
	rb := p.call(request{Op: "hello", Hello: a.endpoint()}).Hello
	if err := a.connect(rb); err != nil {
		t.Fatal(err)
	}
	var want uverbs.GID
	copy(want[:], net.ParseIP(b.Addr).To16()) // ::ffff:10.77.0.2
	if rb.GID != want {
		t.Fatalf("peer GID %x, want %s", rb.GID, b.GID())
	}
	t.Logf("host A: RC QPN %#x, UD QPN %#x; host B: RC QPN %#x, UD QPN %#x", a.qp.QPN(), a.ud.QPN(), rb.QPN, rb.UDQPN)
	one := func(t *testing.T, wr uverbs.SendWR) uverbs.WC {
		t.Helper()
		wc, err := postOne(a.qp, a.cq, wr)
		if err != nil {
			t.Fatal(err)
		}
		return wc
	}
	remote := func(off uint64) uint64 { return rb.Addr + off }
	le := binary.LittleEndian

	t.Run("send-sgl-imm/A-to-B", func(t *testing.T) {
		p.t = t
		fill(a.buf[:3000], 1)
		p.call(request{Op: "clear"})
		p.call(request{Op: "recv", ID: 9, SGL: [][2]int{{100, 1000}, {5000, 2000}}})
		wc := one(t, uverbs.SendWR{ID: 1, Opcode: uverbs.WRSendWithImm, ImmData: 0x12345678,
			SGL: a.sgl([][2]int{{0, 500}, {500, 1500}, {2000, 1000}})})
		if wc.Status != uverbs.WCSuccess || wc.Opcode != uverbs.WCSend || wc.ID != 1 {
			t.Fatalf("send completion %+v (%v)", wc, wc.Status)
		}
		rc := p.poll(false, 1)[0]
		if rc.Status != uverbs.WCSuccess || rc.Opcode != uverbs.WCRecv || rc.ByteLen != 3000 || rc.ImmData != 0x12345678 ||
			rc.Flags&uverbs.WCWithImm == 0 || rc.QPNum != rb.QPN || rc.ID != 9 {
			t.Fatalf("B's receive completion %+v", rc)
		}
		got := append(p.read(100, 1000), p.read(5000, 2000)...)
		if !bytes.Equal(got, a.buf[:3000]) {
			t.Fatal("B received other bytes than A sent")
		}
		if p.read(99, 1)[0] != 0 || p.read(1100, 1)[0] != 0 || p.read(7000, 1)[0] != 0 {
			t.Fatal("the receive wrote outside its SGEs")
		}
	})

	t.Run("inline/A-to-B", func(t *testing.T) {
		p.t = t
		payload := []byte("inline payload across the wire, not registered anywhere")
		p.call(request{Op: "recv", ID: 10, SGL: [][2]int{{0, 256}}})
		wc := one(t, uverbs.SendWR{ID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendInline, Inline: payload})
		rc := p.poll(false, 1)[0]
		if wc.Status != uverbs.WCSuccess || rc.Status != uverbs.WCSuccess || rc.ByteLen != uint32(len(payload)) || rc.ID != 10 {
			t.Fatalf("inline: %+v %+v", wc, rc)
		}
		if got := p.read(0, len(payload)); !bytes.Equal(got, payload) {
			t.Fatalf("B got %q", got)
		}
	})

	t.Run("rdma-write-imm/A-to-B", func(t *testing.T) {
		p.t = t
		fill(a.buf[:4096], 3)
		p.call(request{Op: "clear"})
		wc := one(t, uverbs.SendWR{ID: 3, Opcode: uverbs.WRRDMAWrite, SGL: []uverbs.SGE{a.sge(0, 4096)}, RemoteAddr: remote(8192), RKey: rb.RKey})
		if wc.Status != uverbs.WCSuccess || wc.Opcode != uverbs.WCRDMAWrite {
			t.Fatalf("write completion %+v (%v)", wc, wc.Status)
		}
		got := p.read(8191, 4098)
		if !bytes.Equal(got[1:4097], a.buf[:4096]) || got[0] != 0 || got[4097] != 0 {
			t.Fatal("RDMA write: B's memory differs")
		}
		p.call(request{Op: "recv", ID: 11})
		wc = one(t, uverbs.SendWR{ID: 4, Opcode: uverbs.WRRDMAWriteWithImm, ImmData: 0xfeed, SGL: []uverbs.SGE{a.sge(0, 64)}, RemoteAddr: remote(0), RKey: rb.RKey})
		rc := p.poll(false, 1)[0]
		if wc.Status != uverbs.WCSuccess || rc.Status != uverbs.WCSuccess || rc.Opcode != uverbs.WCRecvRDMAWithImm || rc.ImmData != 0xfeed || rc.ByteLen != 64 || rc.ID != 11 {
			t.Fatalf("write with imm: %+v, B: %+v", wc, rc)
		}
		if !bytes.Equal(p.read(0, 64), a.buf[:64]) {
			t.Fatal("RDMA write with imm: B's memory differs")
		}
	})

	t.Run("rdma-read/A-from-B", func(t *testing.T) {
		p.t = t
		p.call(request{Op: "fill", Off: 20000, N: 10000, Seed: 5})
		clear(a.buf)
		wc := one(t, uverbs.SendWR{ID: 5, Opcode: uverbs.WRRDMARead, SGL: a.sgl([][2]int{{100, 4000}, {9000, 6000}}), RemoteAddr: remote(20000), RKey: rb.RKey})
		if wc.Status != uverbs.WCSuccess || wc.Opcode != uverbs.WCRDMARead || wc.ByteLen != 10000 {
			t.Fatalf("read completion %+v (%v)", wc, wc.Status)
		}
		got := append(append([]byte{}, a.buf[100:4100]...), a.buf[9000:15000]...)
		if !bytes.Equal(got, filled(10000, 5)) || !bytes.Equal(p.read(20000, 10000), got) {
			t.Fatal("RDMA read: A's memory differs from B's")
		}
	})

	t.Run("atomics/A-on-B", func(t *testing.T) {
		p.t = t
		p.call(request{Op: "write", Off: 64, Data: le.AppendUint64(nil, 1000)})
		wc := one(t, uverbs.SendWR{ID: 6, Opcode: uverbs.WRAtomicFetchAndAdd, SGL: []uverbs.SGE{a.sge(0, 8)}, RemoteAddr: remote(64), RKey: rb.RKey, CompareAdd: 234})
		if wc.Status != uverbs.WCSuccess || wc.Opcode != uverbs.WCFetchAdd || le.Uint64(a.buf) != 1000 || le.Uint64(p.read(64, 8)) != 1234 {
			t.Fatalf("fetch-add: %+v original %d", wc, le.Uint64(a.buf))
		}
		wc = one(t, uverbs.SendWR{ID: 7, Opcode: uverbs.WRAtomicCmpAndSwp, SGL: []uverbs.SGE{a.sge(8, 8)}, RemoteAddr: remote(64), RKey: rb.RKey, CompareAdd: 1, Swap: 77})
		if wc.Status != uverbs.WCSuccess || wc.Opcode != uverbs.WCCompSwap || le.Uint64(a.buf[8:]) != 1234 || le.Uint64(p.read(64, 8)) != 1234 {
			t.Fatalf("cmp-swap miss: %+v original %d", wc, le.Uint64(a.buf[8:]))
		}
		wc = one(t, uverbs.SendWR{ID: 8, Opcode: uverbs.WRAtomicCmpAndSwp, SGL: []uverbs.SGE{a.sge(16, 8)}, RemoteAddr: remote(64), RKey: rb.RKey, CompareAdd: 1234, Swap: 77})
		if wc.Status != uverbs.WCSuccess || le.Uint64(a.buf[16:]) != 1234 || le.Uint64(p.read(64, 8)) != 77 {
			t.Fatalf("cmp-swap hit: %+v original %d", wc, le.Uint64(a.buf[16:]))
		}
	})

	t.Run("send-imm/B-to-A", func(t *testing.T) {
		p.t = t
		clear(a.buf)
		if err := a.qp.PostRecv([]uverbs.RecvWR{{ID: 20, SGL: a.sgl([][2]int{{0, 1500}, {10000, 1500}})}}); err != nil {
			t.Fatal(err)
		}
		p.call(request{Op: "fill", Off: 0, N: 2000, Seed: 7})
		wc := p.call(request{Op: "post", WR: &wrSpec{Opcode: uverbs.WRSendWithImm, ID: 30, SGL: [][2]int{{0, 2000}}, Imm: 0xabc}}).WCs[0]
		if wc.Status != uverbs.WCSuccess || wc.Opcode != uverbs.WCSend || wc.ID != 30 {
			t.Fatalf("B's send completion %+v", wc)
		}
		rcs, err := poll(a.cq, 1)
		if err != nil {
			t.Fatal(err)
		}
		rc := rcs[0]
		if rc.Status != uverbs.WCSuccess || rc.Opcode != uverbs.WCRecv || rc.ByteLen != 2000 || rc.ImmData != 0xabc || rc.Flags&uverbs.WCWithImm == 0 || rc.QPNum != a.qp.QPN() || rc.ID != 20 {
			t.Fatalf("A's receive completion %+v", rc)
		}
		if got := append(append([]byte{}, a.buf[:1500]...), a.buf[10000:10500]...); !bytes.Equal(got, filled(2000, 7)) || a.buf[10500] != 0 {
			t.Fatal("A received other bytes than B sent")
		}
	})

	t.Run("rdma-write-read-atomic/B-on-A", func(t *testing.T) {
		p.t = t
		clear(a.buf)
		p.call(request{Op: "fill", Off: 0, N: 4096, Seed: 11})
		wc := p.call(request{Op: "post", WR: &wrSpec{Opcode: uverbs.WRRDMAWrite, ID: 31, SGL: [][2]int{{0, 4096}}, RemoteOff: 8192}}).WCs[0]
		if wc.Status != uverbs.WCSuccess || wc.Opcode != uverbs.WCRDMAWrite || !bytes.Equal(a.buf[8192:8192+4096], filled(4096, 11)) || a.buf[8191] != 0 || a.buf[8192+4096] != 0 {
			t.Fatalf("B's RDMA write into A: %+v", wc)
		}
		fill(a.buf[30000:35000], 13)
		wc = p.call(request{Op: "post", WR: &wrSpec{Opcode: uverbs.WRRDMARead, ID: 32, SGL: [][2]int{{40000, 5000}}, RemoteOff: 30000}}).WCs[0]
		if wc.Status != uverbs.WCSuccess || wc.Opcode != uverbs.WCRDMARead || wc.ByteLen != 5000 || !bytes.Equal(p.read(40000, 5000), a.buf[30000:35000]) {
			t.Fatalf("B's RDMA read from A: %+v", wc)
		}
		le.PutUint64(a.buf[128:], 5)
		wc = p.call(request{Op: "post", WR: &wrSpec{Opcode: uverbs.WRAtomicFetchAndAdd, ID: 33, SGL: [][2]int{{48, 8}}, RemoteOff: 128, CompareAdd: 10}}).WCs[0]
		if wc.Status != uverbs.WCSuccess || wc.Opcode != uverbs.WCFetchAdd || le.Uint64(a.buf[128:]) != 15 || le.Uint64(p.read(48, 8)) != 5 {
			t.Fatalf("B's fetch-add on A: %+v, A's value %d", wc, le.Uint64(a.buf[128:]))
		}
	})

	t.Run("unsignaled/A-to-B", func(t *testing.T) {
		p.t = t
		fill(a.buf[:1600], 9)
		p.call(request{Op: "clear"})
		wrs := make([]uverbs.SendWR, 16)
		for i := range wrs {
			wrs[i] = uverbs.SendWR{ID: uint64(100 + i), Opcode: uverbs.WRRDMAWrite, SGL: []uverbs.SGE{a.sge(i*100, 100)}, RemoteAddr: remote(uint64(i * 100)), RKey: rb.RKey}
			if i%4 == 3 {
				wrs[i].Flags = uverbs.SendSignaled
			}
		}
		for i := 0; i < len(wrs); i += 8 { // the send queue holds 16
			if err := a.qp.PostSend(wrs[i : i+8]); err != nil {
				t.Fatal(err)
			}
			wcs, err := poll(a.cq, 2)
			if err != nil {
				t.Fatal(err)
			}
			for j, wc := range wcs {
				if want := uint64(100 + i + 4*j + 3); wc.ID != want || wc.Status != uverbs.WCSuccess {
					t.Fatalf("completion %+v, want id %d", wc, want)
				}
			}
		}
		if k, _ := a.cq.Poll(make([]uverbs.WC, 4)); k != 0 {
			t.Fatalf("%d completions of unsignaled requests", k)
		}
		if !bytes.Equal(p.read(0, 1600), a.buf[:1600]) {
			t.Fatal("unsignaled writes did not all land on B")
		}
	})

	t.Run("ud/both-ways", func(t *testing.T) {
		p.t = t
		// A to B: the receive gets the 40-byte GRH in front.
		fill(a.buf[4096:4096+512], 42)
		p.call(request{Op: "recv", UD: true, ID: 77, SGL: [][2]int{{50000, 40 + 1024}}})
		wc, err := postOne(a.ud, a.udcq, uverbs.SendWR{ID: 40, Opcode: uverbs.WRSendWithImm, ImmData: 99, AH: a.ah, RemoteQPN: rb.UDQPN, RemoteQKey: udQKey,
			SGL: []uverbs.SGE{a.sge(4096, 512)}})
		if err != nil || wc.Status != uverbs.WCSuccess || wc.Opcode != uverbs.WCSend || wc.ID != 40 {
			t.Fatalf("A's UD send: %+v, %v", wc, err)
		}
		rc := p.poll(true, 1)[0]
		if rc.Status != uverbs.WCSuccess || rc.ID != 77 || rc.ByteLen != 40+512 || rc.SrcQP != a.ud.QPN() || rc.QPNum != rb.UDQPN ||
			rc.Flags&uverbs.WCGRH == 0 || rc.ImmData != 99 {
			t.Fatalf("B's UD receive completion %+v", rc)
		}
		if !bytes.Equal(p.read(50040, 512), a.buf[4096:4096+512]) {
			t.Fatal("UD payload on B differs")
		}
		// B to A.
		clear(a.buf[50000:])
		if err := a.ud.PostRecv([]uverbs.RecvWR{{ID: 78, SGL: []uverbs.SGE{a.sge(50000, 40+1024)}}}); err != nil {
			t.Fatal(err)
		}
		p.call(request{Op: "fill", Off: 0, N: 256, Seed: 17})
		wc = p.call(request{Op: "udsend", ID: 41, Imm: 7, SGL: [][2]int{{0, 256}}}).WCs[0]
		if wc.Status != uverbs.WCSuccess || wc.ID != 41 {
			t.Fatalf("B's UD send %+v", wc)
		}
		rcs, err := poll(a.udcq, 1)
		if err != nil {
			t.Fatal(err)
		}
		if rc := rcs[0]; rc.Status != uverbs.WCSuccess || rc.ID != 78 || rc.ByteLen != 40+256 || rc.SrcQP != rb.UDQPN || rc.Flags&uverbs.WCGRH == 0 || rc.ImmData != 7 {
			t.Fatalf("A's UD receive completion %+v", rc)
		}
		if !bytes.Equal(a.buf[50040:50040+256], filled(256, 17)) {
			t.Fatal("UD payload on A differs")
		}
	})

	t.Run("ud-reply-from-wc/B-to-A-to-B", func(t *testing.T) {
		p.t = t
		// A answers B knowing it only from B's datagram: the address handle
		// comes from the completion and its GRH (ibv_create_ah_from_wc).
		clear(a.buf[50000:])
		if err := a.ud.PostRecv([]uverbs.RecvWR{{ID: 80, SGL: []uverbs.SGE{a.sge(50000, uverbs.GRHSize+1024)}}}); err != nil {
			t.Fatal(err)
		}
		p.call(request{Op: "fill", Off: 0, N: 128, Seed: 19})
		if wc := p.call(request{Op: "udsend", ID: 42, Imm: 8, SGL: [][2]int{{0, 128}}}).WCs[0]; wc.Status != uverbs.WCSuccess {
			t.Fatalf("B's UD send %+v", wc)
		}
		rcs, err := poll(a.udcq, 1)
		if err != nil {
			t.Fatal(err)
		}
		rc := rcs[0]
		if rc.Status != uverbs.WCSuccess || rc.ID != 80 || rc.SrcQP != rb.UDQPN || rc.Flags&uverbs.WCGRH == 0 {
			t.Fatalf("A's UD receive completion %+v", rc)
		}
		grh := a.buf[50000 : 50000+uverbs.GRHSize]
		attr, err := a.c.AHAttrFromWC(1, &rc, grh)
		if err != nil {
			t.Fatalf("AHAttrFromWC: %v (GRH %x)", err, grh)
		}
		if attr.DGID != rb.GID || attr.SGIDIndex != 1 || !attr.IsGlobal || attr.PortNum != 1 {
			t.Fatalf("AHAttrFromWC = %+v, want DGID %v (B's) from GID index 1", attr, rb.GID)
		}
		ah, err := a.pd.CreateAHFromWC(1, &rc, grh)
		if err != nil {
			t.Fatal(err)
		}
		defer ah.Destroy()
		p.call(request{Op: "recv", UD: true, ID: 81, SGL: [][2]int{{60000, uverbs.GRHSize + 1024}}})
		fill(a.buf[4096:4096+300], 23)
		wc, err := postOne(a.ud, a.udcq, uverbs.SendWR{ID: 44, Opcode: uverbs.WRSend, AH: ah, RemoteQPN: rc.SrcQP, RemoteQKey: udQKey,
			SGL: []uverbs.SGE{a.sge(4096, 300)}})
		if err != nil || wc.Status != uverbs.WCSuccess {
			t.Fatalf("A's reply: %+v, %v", wc, err)
		}
		rcb := p.poll(true, 1)[0]
		if rcb.Status != uverbs.WCSuccess || rcb.ID != 81 || rcb.SrcQP != a.ud.QPN() || rcb.ByteLen != uverbs.GRHSize+300 {
			t.Fatalf("B's receive of the reply %+v", rcb)
		}
		if !bytes.Equal(p.read(60000+uverbs.GRHSize, 300), a.buf[4096:4096+300]) {
			t.Fatal("the reply's payload on B differs")
		}
	})

	t.Run("memory-window/B-through-A's-window", func(t *testing.T) {
		p.t = t
		// A grants B an 8 KiB window of its MR; B writes and reads through
		// the window's rkey across the wire; A unbinds it.
		mw, err := a.pd.AllocMW(uverbs.MWType1)
		if err != nil {
			t.Fatal(err)
		}
		defer mw.Dealloc()
		bindDone := func(id uint64) {
			t.Helper()
			wcs, err := poll(a.cq, 1)
			if err != nil {
				t.Fatal(err)
			}
			if wc := wcs[0]; wc.Status != uverbs.WCSuccess || wc.Opcode != uverbs.WCBindMW || wc.ID != id {
				t.Fatalf("bind completion %+v (%v)", wc, wc.Status)
			}
		}
		rk, err := a.qp.BindMW(mw, 60, uverbs.SendSignaled, uverbs.MWBindInfo{MR: a.mr, Addr: a.mr.Addr() + 16384, Length: 8192,
			Access: uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead})
		if err != nil {
			t.Fatal(err)
		}
		bindDone(60)
		clear(a.buf)
		p.call(request{Op: "fill", Off: 0, N: 4096, Seed: 29})
		wc := p.call(request{Op: "post", WR: &wrSpec{Opcode: uverbs.WRRDMAWrite, ID: 34, SGL: [][2]int{{0, 4096}}, RemoteOff: 16384 + 1000, RKey: rk}}).WCs[0]
		if wc.Status != uverbs.WCSuccess || !bytes.Equal(a.buf[17384:17384+4096], filled(4096, 29)) || a.buf[17383] != 0 || a.buf[17384+4096] != 0 {
			t.Fatalf("B's RDMA write through A's window: %+v (%v)", wc, wc.Status)
		}
		fill(a.buf[20000:22000], 31)
		wc = p.call(request{Op: "post", WR: &wrSpec{Opcode: uverbs.WRRDMARead, ID: 35, SGL: [][2]int{{8192, 2000}}, RemoteOff: 20000, RKey: rk}}).WCs[0]
		if wc.Status != uverbs.WCSuccess || !bytes.Equal(p.read(8192, 2000), a.buf[20000:22000]) {
			t.Fatalf("B's RDMA read through A's window: %+v (%v)", wc, wc.Status)
		}
		if _, err := a.qp.BindMW(mw, 61, uverbs.SendSignaled, uverbs.MWBindInfo{}); err != nil {
			t.Fatal(err)
		}
		bindDone(61)
	})

	t.Run("ud-multicast/A-to-B's-group", func(t *testing.T) {
		// B attaches two UD QPs to a group (and joins it at the IP level,
		// which rxe needs); A sends datagrams to the group's GID and
		// MulticastQPN. Each attached QP receives one copy; a QP that
		// detached gets nothing: the unicast datagram A sends after the
		// group's next one is the first it receives.
		for _, g := range []struct {
			group string
			sgid  uint8
		}{{"239.1.0.9", 1}, {"ff0e::9", 0}} {
			p.t = t
			ud2 := p.call(request{Op: "mcast-join", Group: g.group}).QPN
			ah, err := a.pd.CreateAH(uverbs.AHAttr{DGID: gidOf(net.ParseIP(g.group)), SGIDIndex: g.sgid, IsGlobal: true, PortNum: 1, HopLimit: 1})
			if err != nil {
				t.Fatal(err)
			}
			send := func(ah *uverbs.AH, qpn, imm uint32, seed byte) {
				t.Helper()
				fill(a.buf[4096:4096+700], seed)
				wc, err := postOne(a.ud, a.udcq, uverbs.SendWR{ID: uint64(imm), Opcode: uverbs.WRSendWithImm, ImmData: imm, AH: ah,
					RemoteQPN: qpn, RemoteQKey: udQKey, SGL: []uverbs.SGE{a.sge(4096, 700)}})
				if err != nil || wc.Status != uverbs.WCSuccess {
					t.Fatalf("A's send to QPN %#x: %+v, %v", qpn, wc, err)
				}
			}
			// recvd checks B's next completions: one per QPN of want, in
			// any order, each with imm and the bytes of seed.
			recvd := func(what string, imm uint32, seed byte, want map[uint32]int) {
				t.Helper()
				for _, wc := range p.poll(true, len(want)) {
					off, ok := want[wc.QPNum]
					if !ok || wc.Status != uverbs.WCSuccess || wc.ByteLen != uverbs.GRHSize+700 || wc.ImmData != imm ||
						wc.SrcQP != a.ud.QPN() || wc.Flags&uverbs.WCGRH == 0 {
						t.Fatalf("%s (%s): B's completion %+v (%v), want one on each of %v with immediate %#x from QPN %#x",
							what, g.group, wc, wc.Status, want, imm, a.ud.QPN())
					}
					delete(want, wc.QPNum)
					if !bytes.Equal(p.read(off+uverbs.GRHSize, 700), filled(700, seed)) {
						t.Fatalf("%s (%s): QPN %#x received other bytes than A sent", what, g.group, wc.QPNum)
					}
				}
			}
			p.call(request{Op: "recv", UD: true, ID: 90, SGL: [][2]int{{40000, uverbs.GRHSize + 1024}}})
			p.call(request{Op: "recv", UD2: true, ID: 91, SGL: [][2]int{{50000, uverbs.GRHSize + 1024}}})
			send(ah, uverbs.MulticastQPN, 0x1000, 3)
			recvd("the group's first datagram", 0x1000, 3, map[uint32]int{rb.UDQPN: 40000, ud2: 50000})

			p.call(request{Op: "mcast-detach", UD2: true, Group: g.group})
			p.call(request{Op: "recv", UD: true, ID: 92, SGL: [][2]int{{40000, uverbs.GRHSize + 1024}}})
			p.call(request{Op: "recv", UD2: true, ID: 93, SGL: [][2]int{{50000, uverbs.GRHSize + 1024}}})
			send(ah, uverbs.MulticastQPN, 0x2000, 4)
			recvd("the group's datagram after a QP left", 0x2000, 4, map[uint32]int{rb.UDQPN: 40000})
			send(a.ah, ud2, 0x3000, 5)
			recvd("a unicast datagram to the QP that left", 0x3000, 5, map[uint32]int{ud2: 50000})
			p.call(request{Op: "mcast-leave", Group: g.group})
			if err := ah.Destroy(); err != nil {
				t.Fatal(err)
			}
		}
	})

	t.Run("wrong-rkey/A-to-B", func(t *testing.T) {
		p.t = t
		wc := one(t, uverbs.SendWR{ID: 12, Opcode: uverbs.WRRDMAWrite, SGL: []uverbs.SGE{a.sge(0, 8)}, RemoteAddr: remote(0), RKey: rb.RKey ^ 0x5a5a00})
		if wc.Status != uverbs.WCRemAccessErr || wc.ID != 12 {
			t.Fatalf("write with a wrong rkey: %+v (%v), want %v", wc, wc.Status, uverbs.WCRemAccessErr)
		}
		wc = one(t, uverbs.SendWR{ID: 13, Opcode: uverbs.WRSend})
		if wc.Status != uverbs.WCWRFlushErr {
			t.Fatalf("send after the error: %v", wc.Status)
		}
	})

	p.t = t
	p.call(request{Op: "bye"})
	if err := peer.Wait(); err != nil {
		t.Fatalf("the peer on host B: %v\n%s", err, peer.Output())
	}
	if out := peer.Output(); !strings.Contains(out, "--- PASS: "+t.Name()) {
		t.Fatalf("the peer on host B did not pass:\n%s", out)
	}
}
