package uverbs

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/pureverbs/pureverbs/abi"
	"github.com/pureverbs/pureverbs/internal/core"
	"github.com/pureverbs/pureverbs/internal/sys"
)

// TestChannelEventDecode: a completion event record (8 bytes, the CQ's
// user handle, little-endian) read from the channel names its CQ, counts
// the event for AckEvents, and takes the CQ off the armed list; a record
// of the wrong size is refused; an empty channel answers ErrNoEvent; a
// channel with one CQ on it refuses to close.
func TestChannelEventDecode(t *testing.T) {
	r, w, err := sys.NewRecordReaderPipe("test channel")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	defer r.Close()
	ch := &CompChannel{ctx: &Context{dev: Device{Name: "fake0"}}, r: r, cqs: map[uint64]*CQ{}, recSem: make(chan struct{}, 1)}
	cq, fr := fakeChannelCQ(ch, false)
	cq.uh = 5<<32 | 3 // a registry handle: generation above, slot below
	ch.cqs[cq.uh] = cq

	if _, err := ch.TryGetCQEvent(); !errors.Is(err, ErrNoEvent) || !errors.Is(err, sys.EAGAIN) {
		t.Fatalf("TryGetCQEvent on an empty channel = %v, want ErrNoEvent", err)
	}

	ch.arming(cq)
	fr.written++ // the arm fired
	rec := binary.LittleEndian.AppendUint64(nil, cq.uh)
	if _, err := sys.Write(w, rec); err != nil {
		t.Fatal(err)
	}
	got, err := ch.TryGetCQEvent()
	if err != nil || got != cq {
		t.Fatalf("TryGetCQEvent = %v, %v; want the CQ", got, err)
	}
	if d, a := cq.counts.Counts(core.CompEvents); d != 1 || a != 0 {
		t.Errorf("completion events delivered %d acked %d, want 1 and 0", d, a)
	}
	if cq.arm.at != -1 || len(ch.armed) != 0 || ch.queued != 0 {
		t.Errorf("after the event: arm at %d, %d armed, %d queued; want the CQ off the armed list", cq.arm.at, len(ch.armed), ch.queued)
	}

	// A record of a CQ the channel does not know is skipped.
	if _, err := sys.Write(w, binary.LittleEndian.AppendUint64(nil, cq.uh+1)); err != nil {
		t.Fatal(err)
	}
	if got, err := ch.TryGetCQEvent(); !errors.Is(err, ErrNoEvent) {
		t.Fatalf("event of an unknown CQ: %v, %v; want it skipped (ErrNoEvent)", got, err)
	}

	for _, n := range []int{4, 7} {
		if _, err := sys.Write(w, rec[:n]); err != nil {
			t.Fatal(err)
		}
		if got, err := ch.TryGetCQEvent(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%d-byte record: %v, %v; want ErrInvalid", n, got, err)
		}
	}

	if err := ch.Close(); !errors.Is(err, sys.EBUSY) {
		t.Fatalf("Close with one CQ on the channel = %v, want EBUSY", err)
	}
}

// TestRxeRingHeaderBounds: the header checks at their edges: 32-byte
// slots are the smallest taken, and a mapping one slot short of what
// the header claims is refused while one of exactly that size is taken.
func TestRxeRingHeaderBounds(t *testing.T) {
	m, _ := sys.AnonMapping(4096, "16-byte slots")
	defer m.Unmap()
	m.Store32(rxeLog2ElemOff, 4)
	m.Store32(rxeMaskOff, 7)
	if _, err := newRxeRing(m, true); !errors.Is(err, ErrInvalid) {
		t.Errorf("16-byte slots: %v, want ErrInvalid", err)
	}
	m.Store32(rxeLog2ElemOff, 5)
	if _, err := newRxeRing(m, true); err != nil {
		t.Errorf("32-byte slots: %v", err)
	}
	short, _ := sys.AnonMapping(rxeDataOff+7<<6, "one slot short")
	defer short.Unmap()
	short.Store32(rxeLog2ElemOff, 6)
	short.Store32(rxeMaskOff, 7)
	if short.Len() >= rxeDataOff+8<<6 {
		t.Skipf("mapping rounded up to %d bytes", short.Len())
	}
	if _, err := newRxeRing(short, true); !errors.Is(err, ErrInvalid) {
		t.Errorf("8 slots of 64 bytes in a %d-byte mapping: %v, want ErrInvalid", short.Len(), err)
	}
}

// TestRxeSendWQEMore covers what TestRxeSendWQEEncoding and
// TestRxeSendValidation leave out: an RDMA read's iova, a UD send's
// address fields, the QP's inline limit below the slot's room, a message
// of exactly 2 GiB, flags on a local invalidate, and every unknown flag.
func TestRxeSendWQEMore(t *testing.T) {
	qp, d := testQP(t, QPTypeRC, 8)
	r := d.sqRing
	wqe := func() abi.RxeSendWqe {
		var w abi.RxeSendWqe
		b := make([]byte, r.slotSize())
		r.m.ReadAt(b, r.slot(0))
		copy(sys.AsBytes(&w), b)
		return w
	}
	sge := []SGE{{Addr: 0x1000, Length: 8, LKey: 1}}

	if err := d.writeSend(qp, r, 0, &SendWR{Opcode: WRRDMARead, SGL: sge, RemoteAddr: 0xbeef000, RKey: 0x42}, 0); err != nil {
		t.Fatal(err)
	}
	if w := wqe(); w.Iova != 0xbeef000 || w.Wr.Wr.Rdma().RemoteAddr != 0xbeef000 || w.Wr.Wr.Rdma().Rkey != 0x42 {
		t.Errorf("RDMA read: iova %#x rdma %+v", w.Iova, w.Wr.Wr.Rdma())
	}

	ud, dud := testQP(t, QPTypeUD, 8)
	ud.pd = &PD{}
	ah := &AH{pd: ud.pd, num: 7}
	if err := dud.writeSend(ud, dud.sqRing, 0, &SendWR{Opcode: WRSend, SGL: sge, AH: ah, RemoteQPN: 0x123, RemoteQKey: 0x11111111}, 0); err != nil {
		t.Fatal(err)
	}
	var uw abi.RxeSendWqe
	b := make([]byte, dud.sqRing.slotSize())
	dud.sqRing.m.ReadAt(b, dud.sqRing.slot(0))
	copy(sys.AsBytes(&uw), b)
	if u := uw.Wr.Wr.Ud(); u.RemoteQpn != 0x123 || u.RemoteQkey != 0x11111111 || u.AhNum != 7 {
		t.Errorf("UD send: %+v", u)
	}

	// 512-byte slots leave 304 bytes of room: the QP's 48 is the limit.
	big, dbig := testQP(t, QPTypeRC, 9)
	if err := dbig.writeSend(big, dbig.sqRing, 0, &SendWR{Opcode: WRSend, Flags: SendInline, Inline: make([]byte, 49)}, 0); !errors.Is(err, ErrInvalid) {
		t.Errorf("49 inline bytes on a QP of 48: %v, want ErrInvalid", err)
	}
	if err := dbig.writeSend(big, dbig.sqRing, 0, &SendWR{Opcode: WRSend, Flags: SendInline, Inline: make([]byte, 48)}, 0); err != nil {
		t.Errorf("48 inline bytes on a QP of 48: %v", err)
	}

	// librxe refuses a message longer than 2^31 bytes, not one of 2^31.
	if err := d.writeSend(qp, r, 0, &SendWR{Opcode: WRSend, SGL: []SGE{{Length: 1 << 30}, {Length: 1 << 30}}}, 0); err != nil {
		t.Errorf("a 2 GiB message: %v", err)
	}
	if w := wqe(); w.Dma.Length != 1<<31 {
		t.Errorf("2 GiB message: dma length %#x", w.Dma.Length)
	}

	if err := d.writeSend(qp, r, 0, &SendWR{Opcode: WRLocalInv, Flags: SendInline, InvalidateRKey: 1}, 3); !errors.Is(err, ErrInvalid) {
		t.Errorf("local invalidate with SendInline: %v, want ErrInvalid", err)
	}

	known := SendFence | SendSignaled | SendSolicited | SendInline | SendIPCsum
	for bit := range 32 {
		f := SendFlags(1) << bit
		if f&known != 0 {
			continue
		}
		if err := d.writeSend(qp, r, 0, &SendWR{Opcode: WRSend, Flags: f, SGL: sge}, 0); !errors.Is(err, ErrInvalid) {
			t.Errorf("send flag %#x: %v, want ErrInvalid", uint32(f), err)
		}
	}
}

// TestMTUBytes: enum ibv_mtu 1..5 is 256..4096 bytes, anything else 0.
func TestMTUBytes(t *testing.T) {
	for m, want := range map[MTU]int{0: 0, 1: 256, 2: 512, 3: 1024, 4: 2048, 5: 4096, 6: 0, 255: 0} {
		if got := m.Bytes(); got != want {
			t.Errorf("MTU(%d).Bytes() = %d, want %d", m, got, want)
		}
	}
}

// TestIPv4ChecksumFolds: a sum whose first fold carries again (0x1ffff
// folds to 0x10000, then to 1) gives ^1, as RFC 1071's loop does.
func TestIPv4ChecksumFolds(t *testing.T) {
	h := make([]byte, 20)
	for i, v := range []uint16{0x4500, 0xbaff, 0xffff, 0x0001} {
		binary.BigEndian.PutUint16(h[2*i:], v)
	}
	binary.BigEndian.PutUint16(h[10:], 0x1234) // the checksum field is left out
	if got := ipv4Checksum(h); got != 0xfffe {
		t.Errorf("ipv4Checksum = %#04x, want 0xfffe", got)
	}
}

// TestInetNtopDottedOnlyMapped: five leading zero groups end in dotted
// IPv4 only before an ffff group, as glibc's inet_ntop6.
func TestInetNtopDottedOnlyMapped(t *testing.T) {
	for g, want := range map[GID]string{
		{11: 1, 12: 10, 13: 11, 14: 12, 15: 13}:              "::1:a0b:c0d",
		{10: 0xff, 11: 0xff, 12: 10, 13: 11, 14: 12, 15: 13}: "::ffff:10.11.12.13",
	} {
		if got := g.InetNtop(); got != want {
			t.Errorf("InetNtop(%x) = %q, want %q", g[:], got, want)
		}
	}
}
