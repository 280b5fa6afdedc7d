package uverbs

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pureverbs/pureverbs/abi"
	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/internal/testkit"
)

// memRing builds an in-memory rxe queue with slots slots of 1<<shift bytes,
// laid out as the kernel's rxe_queue_init does.
func memRing(t testing.TB, slots int, shift uint32) *sys.Mapping {
	t.Helper()
	m, err := sys.AnonMapping(rxeDataOff+slots<<shift, "test ring")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Unmap() })
	m.Store32(rxeLog2ElemOff, shift)
	m.Store32(rxeMaskOff, uint32(slots-1))
	return m
}

func TestRxeRingHeaderChecks(t *testing.T) {
	for _, c := range []struct {
		name        string
		shift, mask uint32
		size        int
	}{
		{"mask not 2^n-1", 6, 6, 4096},
		{"tiny slots", 2, 7, 4096},
		{"slots beyond mapping", 8, 63, 4096},
	} {
		m, _ := sys.AnonMapping(c.size, "bad ring")
		m.Store32(rxeLog2ElemOff, c.shift)
		m.Store32(rxeMaskOff, c.mask)
		if _, err := newRxeRing(m, true); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", c.name, err)
		}
		m.Unmap()
	}
	m, _ := sys.AnonMapping(100, "short")
	defer m.Unmap()
	if _, err := newRxeRing(m, false); !errors.Is(err, ErrInvalid) {
		t.Errorf("short mapping: %v", err)
	}
	// A queue of no entries (max_recv_wr 0: rxe_queue_init allows it)
	// has one slot, index mask 0: valid, never ready, always full.
	z := memRing(t, 1, 6)
	r, err := newRxeRing(z, true)
	if err != nil {
		t.Fatalf("zero-entry queue: %v", err)
	}
	if r.free() != 0 || r.ready() != 0 {
		t.Errorf("zero-entry queue: free %d ready %d", r.free(), r.ready())
	}
}

// TestRxeRingProducerWrap fills, drains and wraps a producer ring the way
// the kernel consumes it: full at slots-1, empty after the consumer
// catches up, indices masked across many laps.
func TestRxeRingProducerWrap(t *testing.T) {
	m := memRing(t, 8, 6)
	r, err := newRxeRing(m, true)
	if err != nil {
		t.Fatal(err)
	}
	if r.free() != 7 || r.slots() != 8 || r.slotSize() != 64 {
		t.Fatalf("free %d slots %d size %d", r.free(), r.slots(), r.slotSize())
	}
	cons := uint32(0)
	for lap := 0; lap < 50; lap++ {
		n := uint32(lap%7 + 1)
		if r.free() < n {
			t.Fatalf("lap %d: free %d < %d", lap, r.free(), n)
		}
		for i := uint32(0); i < n; i++ {
			off := r.slot(i)
			if want := rxeDataOff + int((r.own+i)&7)*64; off != want {
				t.Fatalf("slot offset %d, want %d", off, want)
			}
			m.Store32(off, uint32(lap*100)+i)
		}
		r.advance(n)
		if got := m.Load32(rxeProdOff); got != r.own || got > 7 {
			t.Fatalf("published producer %d, own %d", got, r.own)
		}
		// The "kernel" consumes everything published.
		for cons != m.Load32(rxeProdOff) {
			if v := m.Load32(rxeDataOff + int(cons)*64); v/100 != uint32(lap) {
				t.Fatalf("lap %d: consumer read %d", lap, v)
			}
			cons = (cons + 1) & 7
			m.Store32(rxeConsOff, cons)
		}
		if r.free() != 7 {
			t.Fatalf("after drain free %d", r.free())
		}
	}
	// Full: 7 in flight, none free.
	r.advance(7)
	if r.free() != 0 {
		t.Fatalf("full ring has %d free", r.free())
	}
}

func TestRxeRingConsumerWrap(t *testing.T) {
	m := memRing(t, 4, 7)
	r, err := newRxeRing(m, false)
	if err != nil {
		t.Fatal(err)
	}
	prod := uint32(0)
	next := uint64(0)
	for lap := 0; lap < 40; lap++ {
		n := lap%3 + 1
		for i := 0; i < n; i++ {
			m.WriteAt(binary.LittleEndian.AppendUint64(nil, uint64(lap*10+i)), rxeDataOff+int(prod)<<7)
			prod = (prod + 1) & 3
		}
		m.Store32(rxeProdOff, prod)
		if r.ready() != uint32(n) {
			t.Fatalf("lap %d: ready %d, want %d", lap, r.ready(), n)
		}
		buf := make([]byte, 8)
		for i := 0; i < n; i++ {
			m.ReadAt(buf, r.slot(uint32(i)))
			if got := binary.LittleEndian.Uint64(buf); got != uint64(lap*10+i) {
				t.Fatalf("lap %d slot %d = %d", lap, i, got)
			}
			next++
		}
		r.advance(uint32(n))
		if r.ready() != 0 || m.Load32(rxeConsOff) != prod {
			t.Fatalf("after consume: ready %d consumer %d producer %d", r.ready(), m.Load32(rxeConsOff), prod)
		}
	}
}

// testQP returns a QP with an in-memory send and receive ring.
func testQP(t testing.TB, typ QPType, shift uint32) (*QP, *rxeQP) {
	d := &rxeQP{}
	var err error
	if d.sqRing, err = newRxeRing(memRing(t, 8, shift), true); err != nil {
		t.Fatal(err)
	}
	if d.rqRing, err = newRxeRing(memRing(t, 8, 7), true); err != nil {
		t.Fatal(err)
	}
	qp := &QP{typ: typ, drv: d, handle: 0x1234, cap: QPCap{MaxSendWR: 7, MaxRecvWR: 7, MaxSendSGE: 3, MaxRecvSGE: 5, MaxInlineData: 48}}
	d.setDoorbell(qp.handle)
	return qp, d
}

// TestRxeSendWQEEncoding checks the bytes of send WQEs at the offsets of
// struct rxe_send_wqe (whose layout abi's gcc test checks), for every
// opcode family.
func TestRxeSendWQEEncoding(t *testing.T) {
	qp, d := testQP(t, QPTypeRC, 8)
	r := d.sqRing
	le := binary.LittleEndian
	sgl := []SGE{{Addr: 0x1000, Length: 100, LKey: 0x11}, {Addr: 0x2000, Length: 28, LKey: 0x22}}
	cases := []struct {
		wr    SendWR
		check func(t *testing.T, b []byte)
	}{
		{SendWR{ID: 0xabc, Opcode: WRSendWithImm, Flags: SendSignaled | SendSolicited, SGL: sgl, ImmData: 0x01020304}, func(t *testing.T, b []byte) {
			if le.Uint32(b[12:]) != 3 || le.Uint32(b[16:]) != 6 || string(b[20:24]) != "\x01\x02\x03\x04" {
				t.Errorf("opcode %d flags %d imm % x", le.Uint32(b[12:]), le.Uint32(b[16:]), b[20:24])
			}
			if le.Uint32(b[184:]) != 128 || le.Uint32(b[188:]) != 128 || le.Uint32(b[196:]) != 2 || le.Uint32(b[192:]) != 0 {
				t.Errorf("dma length %d resid %d num_sge %d", le.Uint32(b[184:]), le.Uint32(b[188:]), le.Uint32(b[196:]))
			}
			if le.Uint64(b[208:]) != 0x1000 || le.Uint32(b[216:]) != 100 || le.Uint32(b[220:]) != 0x11 ||
				le.Uint64(b[224:]) != 0x2000 || le.Uint32(b[232:]) != 28 || le.Uint32(b[236:]) != 0x22 {
				t.Errorf("sges % x", b[208:240])
			}
		}},
		{SendWR{ID: 2, Opcode: WRRDMAWrite, SGL: sgl[:1], RemoteAddr: 0xdead0000, RKey: 0x77}, func(t *testing.T, b []byte) {
			if le.Uint32(b[12:]) != 0 || le.Uint64(b[24:]) != 0xdead0000 || le.Uint32(b[32:]) != 0x77 || le.Uint64(b[152:]) != 0xdead0000 {
				t.Errorf("rdma: opcode %d addr %#x rkey %#x iova %#x", le.Uint32(b[12:]), le.Uint64(b[24:]), le.Uint32(b[32:]), le.Uint64(b[152:]))
			}
		}},
		{SendWR{ID: 3, Opcode: WRAtomicCmpAndSwp, SGL: []SGE{{Addr: 0x3000, Length: 8, LKey: 5}}, RemoteAddr: 0x4008, RKey: 9, CompareAdd: 11, Swap: 22}, func(t *testing.T, b []byte) {
			if le.Uint64(b[24:]) != 0x4008 || le.Uint64(b[32:]) != 11 || le.Uint64(b[40:]) != 22 || le.Uint32(b[48:]) != 9 || le.Uint64(b[152:]) != 0x4008 {
				t.Errorf("atomic fields % x", b[24:56])
			}
		}},
		{SendWR{ID: 4, Opcode: WRSend, Flags: SendInline, Inline: []byte("inline payload")}, func(t *testing.T, b []byte) {
			if le.Uint32(b[16:]) != 8 || le.Uint32(b[184:]) != 14 || le.Uint32(b[196:]) != 0 || string(b[208:222]) != "inline payload" {
				t.Errorf("inline: flags %d len %d num_sge %d data %q", le.Uint32(b[16:]), le.Uint32(b[184:]), le.Uint32(b[196:]), b[208:222])
			}
		}},
	}
	b := make([]byte, r.slotSize())
	for i, c := range cases {
		if err := d.writeSend(qp, r, 0, &c.wr, i); err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		r.m.ReadAt(b, r.slot(0))
		if le.Uint64(b[0:]) != c.wr.ID {
			t.Errorf("case %d: wr_id %#x", i, le.Uint64(b))
		}
		// The same bytes decode through the generated abi type.
		var w abi.RxeSendWqe
		copy(sys.AsBytes(&w), b)
		if w.Wr.WrId != c.wr.ID || w.Wr.Opcode != uint32(c.wr.Opcode) {
			t.Errorf("case %d: abi view %+v", i, w.Wr)
		}
		c.check(t, b)
	}
}

func TestRxeSendValidation(t *testing.T) {
	qp, d := testQP(t, QPTypeRC, 8)
	ud, dud := testQP(t, QPTypeUD, 8)
	uc, duc := testQP(t, QPTypeUC, 8)
	sge := []SGE{{Addr: 1, Length: 8, LKey: 1}}
	bad := []struct {
		qp *QP
		d  *rxeQP
		wr SendWR
	}{
		{qp, d, SendWR{Opcode: 99}},
		{qp, d, SendWR{Opcode: WRSend, Flags: 1 << 7}},
		{qp, d, SendWR{Opcode: WRSend, SGL: make([]SGE, 4)}},
		{qp, d, SendWR{Opcode: WRSend, Flags: SendInline, Inline: make([]byte, 49)}},
		{qp, d, SendWR{Opcode: WRSend, Flags: SendInline, Inline: []byte("x"), SGL: sge}},
		{qp, d, SendWR{Opcode: WRSend, Inline: []byte("x")}},
		{qp, d, SendWR{Opcode: WRRDMARead, Flags: SendInline, Inline: []byte("x")}},
		{qp, d, SendWR{Opcode: WRAtomicFetchAndAdd, SGL: sge, RemoteAddr: 4}},
		{qp, d, SendWR{Opcode: WRAtomicFetchAndAdd, SGL: []SGE{{Length: 4}}, RemoteAddr: 8}},
		{qp, d, SendWR{Opcode: WRAtomicFetchAndAdd, RemoteAddr: 8}},
		{uc, duc, SendWR{Opcode: WRRDMARead, SGL: sge}},
		{uc, duc, SendWR{Opcode: WRAtomicCmpAndSwp, SGL: sge}},
		{ud, dud, SendWR{Opcode: WRRDMAWrite, SGL: sge}},
		{ud, dud, SendWR{Opcode: WRSend, SGL: sge}},                     // no AH
		{ud, dud, SendWR{Opcode: WRSend, SGL: sge, AH: &AH{pd: &PD{}}}}, // another PD's AH
		{qp, d, SendWR{Opcode: WRSend, SGL: []SGE{{Length: 1 << 31}, {Length: 1 << 31}}}},
		{qp, d, SendWR{Opcode: WRBindMW, BindMW: &MW{pd: qp.pd}, ImmData: 1}}, // librxe: EINVAL
		{qp, d, SendWR{Opcode: WRSend, Flags: 1 << 5}},                        // no such ibv_send_flags bit
	}
	// IBV_SEND_IP_CSUM, which librxe passes on and rxe ignores, posts.
	if err := d.writeSend(qp, d.sqRing, 0, &SendWR{Opcode: WRSend, Flags: SendSignaled | SendIPCsum, SGL: sge}, 0); err != nil {
		t.Errorf("a send with IBV_SEND_IP_CSUM: %v", err)
	}
	for i, c := range bad {
		err := c.d.writeSend(c.qp, c.d.sqRing, 0, &c.wr, 5)
		var pe *PostError
		if !errors.Is(err, ErrInvalid) || !errors.As(err, &pe) || pe.Index != 5 {
			t.Errorf("case %d (%v): %v, want a PostError at 5 wrapping ErrInvalid", i, c.wr.Opcode, err)
		}
	}
}

// TestRxeSendFullValidatesFirst: on a full send queue an invalid request
// is refused as invalid (EINVAL), a valid one as ErrQueueFull (ENOMEM), as
// librxe's post_one_send orders its checks (the full queue once won), and
// neither touches a slot the kernel may read: the request goes into the
// one slot the ring keeps empty.
func TestRxeSendFullValidatesFirst(t *testing.T) {
	qp, d := testQP(t, QPTypeRC, 8)
	qp.state.Store(uint32(QPStateRTS))
	r := d.sqRing
	sge := []SGE{{Addr: 0x1000, Length: 8, LKey: 1}}
	for i := range uint32(7) { // 8 slots, 7 usable
		if err := d.writeSend(qp, r, i, &SendWR{ID: 100 + uint64(i), Opcode: WRSend, SGL: sge}, 0); err != nil {
			t.Fatal(err)
		}
	}
	r.advance(7)
	before := make([]byte, 8<<8)
	r.m.ReadAt(before, rxeDataOff)
	var pe *PostError
	err := d.postSendLocked(qp, []SendWR{{Opcode: WRSend, SGL: make([]SGE, 10)}})
	if !errors.As(err, &pe) || pe.Index != 0 || !errors.Is(err, ErrInvalid) || errors.Is(err, ErrQueueFull) {
		t.Errorf("an invalid request on a full queue: %v, want ErrInvalid", err)
	}
	err = d.postSendLocked(qp, []SendWR{{ID: 9, Opcode: WRSend, SGL: sge}})
	if !errors.As(err, &pe) || pe.Index != 0 || !errors.Is(err, ErrQueueFull) {
		t.Errorf("a valid request on a full queue: %v, want ErrQueueFull", err)
	}
	after := make([]byte, 8<<8)
	r.m.ReadAt(after, rxeDataOff)
	for i := range 8 {
		if i == 7 { // the empty slot, cons-1
			continue
		}
		if a, b := before[i<<8:(i+1)<<8], after[i<<8:(i+1)<<8]; !bytes.Equal(a, b) {
			t.Errorf("slot %d, in the kernel's part of the ring, changed", i)
		}
	}
	if prod := r.m.Load32(rxeProdOff); prod != 7 {
		t.Errorf("producer %d, want 7", prod)
	}
}

func TestRxeRecvEncodingAndFull(t *testing.T) {
	_, d := testQP(t, QPTypeRC, 8)
	r := d.rqRing
	wrs := make([]RecvWR, 9)
	for i := range wrs {
		wrs[i] = RecvWR{ID: uint64(100 + i), SGL: []SGE{{Addr: uint64(0x1000 * i), Length: 64, LKey: 3}, {Addr: 7, Length: 1, LKey: 4}}}
	}
	n, err := postRecvRing(r, 5, wrs, "post_recv")
	var pe *PostError
	if n != 7 || !errors.Is(err, ErrQueueFull) || !errors.Is(err, sys.ENOMEM) || !errors.As(err, &pe) || pe.Index != 7 {
		t.Fatalf("8 slots took %d of 9: %v", n, err)
	}
	le := binary.LittleEndian
	b := make([]byte, r.slotSize())
	for i := 0; i < n; i++ {
		r.m.ReadAt(b, r.slot(uint32(i)))
		if le.Uint64(b) != uint64(100+i) || le.Uint32(b[16:]) != 65 || le.Uint32(b[20:]) != 65 || le.Uint32(b[28:]) != 2 ||
			le.Uint64(b[40:]) != uint64(0x1000*i) || le.Uint32(b[48:]) != 64 || le.Uint32(b[52:]) != 3 || le.Uint64(b[56:]) != 7 {
			t.Fatalf("recv wqe %d: % x", i, b[:72])
		}
	}
	if _, err := postRecvRing(r, 1, wrs[:1], "post_srq_recv"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("too many SGEs: %v", err)
	}
	// A receive larger than the largest message posts, as librxe's does,
	// while its total fits the WQE's 32-bit length.
	for _, c := range []struct {
		sgl []SGE
		ok  bool
	}{
		{[]SGE{{Addr: 0x1000, Length: 0xC0000000, LKey: 1}}, true},
		{[]SGE{{Length: 0x80000000}, {Length: 0x7ffffffe}}, true},
		{[]SGE{{Length: 0x80000000}, {Length: 0x7fffffff}}, false}, // MR.SGE's mark
		{[]SGE{{Length: 0x80000000}, {Length: 0x80000000}}, false}, // wraps
	} {
		r2 := testQPRecvRing(t)
		_, err := postRecvRing(r2, 5, []RecvWR{{SGL: c.sgl}}, "post_recv")
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrInvalid)) {
			t.Errorf("receive into %+v: %v, want ok %v", c.sgl, err, c.ok)
		}
	}
}

// testQPRecvRing is a fresh RC QP's receive ring.
func testQPRecvRing(t *testing.T) *rxeRing {
	_, d := testQP(t, QPTypeRC, 8)
	return d.rqRing
}

func TestRxePollDecode(t *testing.T) {
	m := memRing(t, 4, 7)
	r, err := newRxeRing(m, false)
	if err != nil {
		t.Fatal(err)
	}
	d := testCQ(t, r)
	cqes := []abi.IbUverbsWc{
		{WrId: 1, Status: 0, Opcode: 128, ByteLen: 40 + 6, QpNum: 17, SrcQp: 18, WcFlags: 3, PortNum: 1},
		{WrId: 2, Status: 5, QpNum: 17},
		{WrId: 3, Opcode: 129, WcFlags: 2, ByteLen: 4096},
	}
	cqes[0].Ex.SetImmData(0x04030201) // big-endian 0x01020304 as stored
	cqes[2].Ex.SetImmData(0xefbeadde)
	for i := range cqes {
		m.WriteAt(sys.AsBytes(&cqes[i]), rxeDataOff+i<<7)
	}
	m.Store32(rxeProdOff, 3)
	wcs := make([]WC, 2)
	if n := d.poll1(wcs); n != 2 {
		t.Fatalf("poll = %d", n)
	}
	want := []WC{
		{ID: 1, Opcode: WCRecv, ByteLen: 46, QPNum: 17, SrcQP: 18, Flags: WCGRH | WCWithImm, ImmData: 0x01020304, PortNum: 1},
		{ID: 2, Status: WCWRFlushErr, QPNum: 17},
	}
	if diff := cmp.Diff(want, wcs); diff != "" {
		t.Fatalf("decoded (-want +got):\n%s", diff)
	}
	if wcs[1].Status.String() != "Work Request Flushed Error" || WCStatus(99).String() != "unknown" || WCSuccess.String() != "success" {
		t.Fatalf("status text %q", wcs[1].Status)
	}
	if n := d.poll1(wcs); n != 1 || wcs[0].ImmData != 0xdeadbeef || wcs[0].Opcode != WCRecvRDMAWithImm {
		t.Fatalf("third = %d %+v", n, wcs[0])
	}
	if n := d.poll1(wcs); n != 0 {
		t.Fatalf("empty poll = %d", n)
	}
	testkit.NoAllocs(t, 2000, func() { d.poll1(wcs) })
}

// TestRxeEmpty: the lock-free empty check follows the producer index and
// the consumer index of the last poll, across the ring's wrap, and is
// never true while a completion waits.
func TestRxeEmpty(t *testing.T) {
	m := memRing(t, 4, 7) // 4 slots: 3 usable
	r, err := newRxeRing(m, false)
	if err != nil {
		t.Fatal(err)
	}
	d := testCQ(t, r)
	wcs := make([]WC, 4)
	prod := uint32(0)
	for lap := 0; lap < 5; lap++ {
		if !d.empty() {
			t.Fatalf("lap %d: not empty before the kernel wrote", lap)
		}
		for i := 0; i < 1+lap%3; i++ {
			prod = (prod + 1) & 3
			m.Store32(rxeProdOff, prod)
			if d.empty() {
				t.Fatalf("lap %d: empty with %d completions waiting", lap, i+1)
			}
		}
		// A partial poll leaves it non-empty.
		if n := d.poll1(wcs[:1]); n != 1 {
			t.Fatalf("lap %d: poll = %d", lap, n)
		}
		if lap%3 > 0 && d.empty() {
			t.Fatalf("lap %d: empty after a partial poll", lap)
		}
		d.poll1(wcs)
	}
	if !d.empty() {
		t.Fatal("not empty after the last poll")
	}
	testkit.NoAllocs(t, 2000, func() { d.empty() })
}

// TestRxeEmptyDuringPoll: the kernel may fill the slots a poll gives back
// at once, while the poll still holds the lock. At that moment empty, which
// takes no lock, must not see the new completion as none. The "kernel"
// here writes into the slots its view of the consumer index frees (one
// if any): with the ring's 3 polled and 1 more written, producer and
// consumed count agree modulo the ring's 4 slots if the count lags the
// index, which it did (poll advanced the index first).
func TestRxeEmptyDuringPoll(t *testing.T) {
	m := memRing(t, 4, 7) // mask 3
	r, err := newRxeRing(m, false)
	if err != nil {
		t.Fatal(err)
	}
	d := testCQ(t, r)
	m.Store32(rxeProdOff, 3) // 3 completions: the ring is full
	fired := false
	testHook = func(point string) {
		if point != "cq:polled" {
			return
		}
		fired = true
		prod, cons := m.Load32(rxeProdOff)&3, m.Load32(rxeConsOff)&3
		if free := 3 - (prod-cons)&3; free > 0 { // the kernel writes where it may
			m.Store32(rxeProdOff, (prod+1)&3)
			if d.empty() {
				t.Errorf("empty with a completion waiting (producer %d, consumer %d, consumed %d)", (prod+1)&3, cons, d.consumed.Load())
			}
		} else if !d.empty() {
			t.Errorf("not empty with the ring polled and nothing new (producer %d, consumer %d)", prod, cons)
		}
	}
	defer func() { testHook = nil }()
	wcs := make([]WC, 4)
	if n := d.poll1(wcs); n != 3 || !fired {
		t.Fatalf("poll = %d (hook fired %v)", n, fired)
	}
	testHook = nil
	if n := d.poll1(wcs); n != 0 || !d.empty() {
		t.Fatalf("after: poll = %d, empty %v", n, d.empty())
	}
	// With the consumer index published first the kernel wrote nothing in
	// the hook; now it may.
	m.Store32(rxeProdOff, 0)
	if d.empty() || d.poll1(wcs) != 1 {
		t.Fatal("the completion written after the poll is not seen")
	}
}

func TestRxePostNoAllocs(t *testing.T) {
	qp, d := testQP(t, QPTypeRC, 8)
	sgl := []SGE{{Addr: 0x1000, Length: 64, LKey: 1}}
	swr := SendWR{Opcode: WRSend, Flags: SendSignaled, SGL: sgl}
	rwr := []RecvWR{{ID: 1, SGL: sgl}}
	testkit.NoAllocs(t, 2000, func() {
		if err := d.writeSend(qp, d.sqRing, 0, &swr, 0); err != nil {
			t.Fatal(err)
		}
		n, err := postRecvRing(d.rqRing, 5, rwr, "post_recv")
		if err != nil || n != 1 {
			t.Fatal(n, err)
		}
		// consume as the kernel would
		d.rqRing.m.Store32(rxeConsOff, d.rqRing.m.Load32(rxeProdOff))
		d.rqRing.advance(1)
		d.rqRing.m.Store32(rxeConsOff, d.rqRing.own)
	})
}

// TestRxeSRQPostNoAllocs: an SRQ's ring is made with its mapping, so
// its first post allocates nothing either (it was built lazily, one
// allocation on the first post and after every resize); a ring with a bad
// header fails the create, not a post.
func TestRxeSRQPostNoAllocs(t *testing.T) {
	d := &rxeSRQ{}
	d.q.m = memRing(t, 8, 7)
	if err := d.useRing("create"); err != nil {
		t.Fatal(err)
	}
	srq := &SRQ{attr: SRQAttr{MaxWR: 7, MaxSGE: 2}, drv: d}
	wrs := []RecvWR{{ID: 1, SGL: []SGE{{Addr: 0x1000, Length: 8, LKey: 1}}}}
	post := func() {
		if err := d.postRecv(srq, wrs); err != nil {
			t.Fatal(err)
		}
		d.q.m.Store32(rxeConsOff, d.q.m.Load32(rxeProdOff)) // the kernel takes it
	}
	if n := testkit.FirstCallAllocs(t, post); n != 0 {
		t.Errorf("the first post allocated %d objects", n)
	}
	testkit.NoAllocs(t, 1000, post)
	bad := &rxeSRQ{}
	bad.q.m = memRing(t, 8, 7)
	bad.q.m.Store32(rxeMaskOff, 6)
	if err := bad.useRing("create"); !errors.Is(err, ErrInvalid) || bad.q.m != nil {
		t.Fatalf("a ring with a bad header: %v, mapping %v", err, bad.q.m)
	}
}

// FuzzDecodeWC: any 48 bytes decode without panicking, and every field
// comes from its offset (immediate data big-endian, an invalidated rkey
// in host order).
func FuzzDecodeWC(f *testing.F) {
	f.Add(make([]byte, 48))
	f.Add([]byte("0123456789abcdef0123456789abcdef0123456789abcdef"))
	inv := make([]byte, 48)
	binary.LittleEndian.PutUint32(inv[36:], uint32(WCWithInvalidate))
	binary.LittleEndian.PutUint32(inv[24:], 0x12345678)
	f.Add(inv)
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < 48 {
			return
		}
		var c abi.IbUverbsWc
		copy(sys.AsBytes(&c), b)
		var wc WC
		decodeWC(&c, &wc)
		// Every field from its offset in struct ib_uverbs_wc, read here
		// independently of the generated layout.
		le := binary.LittleEndian
		flags := le.Uint32(b[36:])
		want := WC{
			ID: le.Uint64(b), Status: WCStatus(le.Uint32(b[8:])), Opcode: WCOpcode(le.Uint32(b[12:])),
			VendorErr: le.Uint32(b[16:]), ByteLen: le.Uint32(b[20:]), QPNum: le.Uint32(b[28:]), SrcQP: le.Uint32(b[32:]),
			Flags: WCFlags(flags), PKeyIndex: le.Uint16(b[40:]), SLID: le.Uint16(b[42:]), SL: b[44], DLIDPathBits: b[45], PortNum: b[46],
		}
		switch {
		case flags&uint32(WCWithImm) != 0:
			want.ImmData = binary.BigEndian.Uint32(b[24:]) // big-endian on the wire and in the CQE
		case flags&uint32(WCWithInvalidate) != 0:
			want.ImmData = le.Uint32(b[24:]) // invalidate_rkey, host order
		}
		if wc != want {
			t.Fatalf("decoded %+v, want %+v from % x", wc, want, b[:48])
		}
		_ = wc.Status.String()
		_ = wc.Opcode.String()
	})
}

// BenchmarkRxeEmptyPoll: an empty poll under the CQ's lock against the
// lock-free check CQ.Poll makes first.
func BenchmarkRxeEmptyPoll(b *testing.B) {
	m := memRing(b, 64, 7)
	r, err := newRxeRing(m, false)
	if err != nil {
		b.Fatal(err)
	}
	d := testCQ(b, r)
	wcs := make([]WC, 2)
	b.Run("locked", func(b *testing.B) {
		for b.Loop() {
			d.poll1(wcs)
		}
	})
	b.Run("lockfree", func(b *testing.B) {
		for b.Loop() {
			d.empty()
		}
	})
}

// BenchmarkRxeWriteSend: the user-space half of a post: one 64-byte send
// WQE with one SGE built into the ring (no doorbell).
func BenchmarkRxeWriteSend(b *testing.B) {
	qp, d := testQP(b, QPTypeRC, 8)
	swr := SendWR{Opcode: WRSend, Flags: SendSignaled, SGL: []SGE{{Addr: 0x1000, Length: 64, LKey: 1}}}
	for b.Loop() {
		d.writeSend(qp, d.sqRing, 0, &swr, 0)
	}
}

// BenchmarkRxeDataPath: the public data-path calls on in-memory rings,
// everything but the kernel: PostSend (its doorbell written to /dev/null),
// PostRecv, and a Poll that finds one completion. The "kernel" side of each
// ring is played by plain index stores between calls. What it measures is
// the library's own cost per call, locks and atomics included.
func BenchmarkRxeDataPath(b *testing.B) {
	null, err := sys.Open("/dev/null", sys.O_RDWR)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { null.Close() })
	qp, d := testQP(b, QPTypeRC, 8)
	qp.ctx = &Context{cmd: null}
	qp.state.Store(uint32(QPStateRTS))
	swr := []SendWR{{Opcode: WRSend, Flags: SendSignaled, SGL: []SGE{{Addr: 0x1000, Length: 64, LKey: 1}}}}
	rwr := []RecvWR{{SGL: []SGE{{Addr: 0x1000, Length: 64, LKey: 1}}}}
	b.Run("PostSend", func(b *testing.B) {
		for b.Loop() {
			if err := qp.PostSend(swr); err != nil {
				b.Fatal(err)
			}
			d.sqRing.m.Store32(rxeConsOff, d.sqRing.own) // the kernel took it
		}
	})
	b.Run("PostRecv", func(b *testing.B) {
		for b.Loop() {
			if err := qp.PostRecv(rwr); err != nil {
				b.Fatal(err)
			}
			d.rqRing.m.Store32(rxeConsOff, d.rqRing.own)
		}
	})
	b.Run("Poll1", func(b *testing.B) {
		m := memRing(b, 64, 7)
		cq := &CQ{ctx: qp.ctx, drv: &rxeCQ{}}
		cd := cq.drv.(*rxeCQ)
		if err := cd.attach(m); err != nil {
			b.Fatal(err)
		}
		wcs := make([]WC, 2)
		prod := uint32(0)
		for b.Loop() {
			prod = (prod + 1) & 63
			m.Store32(rxeProdOff, prod) // the kernel posted one CQE
			if n, err := cq.Poll(wcs); n != 1 || err != nil {
				b.Fatal(n, err)
			}
		}
	})
}

// TestRxeDataPathAfterKill: after a destroy or Context.Close (kill), the
// public data-path calls fail with ErrClosed (a *PostError at index 0 for
// posts), write nothing to the rings and ring no doorbell, and a Poll
// refuses even with a completion waiting in the CQ ring.
func TestRxeDataPathAfterKill(t *testing.T) {
	null, err := sys.Open("/dev/null", sys.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	qp, d := testQP(t, QPTypeRC, 8)
	qp.ctx = &Context{cmd: null}
	qp.release = d
	qp.state.Store(uint32(QPStateRTS))
	swr := []SendWR{{Opcode: WRSend, SGL: []SGE{{Addr: 0x1000, Length: 64, LKey: 1}}}}
	rwr := []RecvWR{{SGL: []SGE{{Addr: 0x1000, Length: 64, LKey: 1}}}}
	if err := qp.PostSend(swr); err != nil {
		t.Fatal(err)
	}
	if err := qp.PostRecv(rwr); err != nil {
		t.Fatal(err)
	}
	sm, rm := d.sqRing.m, d.rqRing.m
	sprod, rprod := sm.Load32(rxeProdOff), rm.Load32(rxeProdOff)

	m := memRing(t, 64, 7)
	cq := &CQ{ctx: qp.ctx, drv: &rxeCQ{}}
	cd := cq.drv.(*rxeCQ)
	if err := cd.attach(m); err != nil {
		t.Fatal(err)
	}
	cq.release = cd
	m.Store32(rxeProdOff, 1) // one completion waits

	qp.kill()
	cq.kill()
	var pe *PostError
	if err := qp.PostSend(swr); !errors.Is(err, ErrClosed) || !errors.As(err, &pe) || pe.Index != 0 {
		t.Errorf("PostSend after kill: %v", err)
	}
	if err := qp.PostRecv(rwr); !errors.Is(err, ErrClosed) || !errors.As(err, &pe) || pe.Index != 0 {
		t.Errorf("PostRecv after kill: %v", err)
	}
	if got, got2 := sm.Load32(rxeProdOff), rm.Load32(rxeProdOff); got != sprod || got2 != rprod {
		t.Errorf("producer indices moved after kill: send %d -> %d, recv %d -> %d", sprod, got, rprod, got2)
	}
	wcs := make([]WC, 2)
	if n, err := cq.Poll(wcs); n != 0 || !errors.Is(err, ErrClosed) {
		t.Errorf("Poll after kill = %d, %v; want 0, ErrClosed", n, err)
	}
	if got := m.Load32(rxeConsOff); got != 0 {
		t.Errorf("consumer index moved after kill: %d", got)
	}
}

// TestRxeDoorbellBytes: the 32 bytes every post writes, as librxe's
// post_send_db builds them: struct ib_uverbs_cmd_hdr (command
// IB_USER_VERBS_CMD_POST_SEND = 28, in_words 8, out_words 1), then struct
// ib_uverbs_post_send with the response address, the QP handle, no work
// requests and wqe_size sizeof(struct ibv_send_wr) = 128.
func TestRxeDoorbellBytes(t *testing.T) {
	_, d := testQP(t, QPTypeRC, 8)
	b := sys.AsBytes(&d.db)
	if len(b) != 32 {
		t.Fatalf("doorbell is %d bytes", len(b))
	}
	le := binary.LittleEndian
	want := make([]byte, 32)
	le.PutUint32(want[0:], 28)
	le.PutUint16(want[4:], 8)
	le.PutUint16(want[6:], 1)
	le.PutUint64(want[8:], uint64(sys.PtrAddr(&d.dbResp)))
	le.PutUint32(want[16:], 0x1234)
	le.PutUint32(want[28:], 128)
	if diff := cmp.Diff(want, b); diff != "" {
		t.Errorf("doorbell bytes (-want +got):\n%s", diff)
	}
}

// TestRxeDoorbellFails: a doorbell the kernel refuses (here a command
// fd on /dev/full: ENOSPC) comes after the requests were published. The
// PostError's Index follows them (they run at the next doorbell or flush
// in ERR), with the doorbell's errno; it once said 0, "none posted", and
// an application reposting from there would run them twice. A request
// refused in the list keeps its index and its error beside the doorbell's.
func TestRxeDoorbellFails(t *testing.T) {
	full, err := sys.Open("/dev/full", sys.O_RDWR)
	if err != nil {
		t.Skip(err)
	}
	defer full.Close()
	qp, d := testQP(t, QPTypeRC, 8)
	qp.ctx = &Context{cmd: full}
	qp.state.Store(uint32(QPStateRTS))
	sge := []SGE{{Addr: 0x1000, Length: 64, LKey: 1}}
	var pe *PostError
	err = qp.PostSend([]SendWR{{ID: 1, Opcode: WRSend, SGL: sge}, {ID: 2, Opcode: WRSend, SGL: sge}})
	if !errors.As(err, &pe) || pe.Index != 2 || !errors.Is(err, sys.ENOSPC) {
		t.Fatalf("doorbell refused after 2 requests: %v", err)
	}
	if prod := d.sqRing.m.Load32(rxeProdOff); prod != 2 {
		t.Fatalf("producer %d, want 2", prod)
	}
	err = qp.PostSend([]SendWR{{ID: 3, Opcode: WRSend, SGL: sge}, {ID: 4, Opcode: WRSend, SGL: make([]SGE, 10)}})
	if !errors.As(err, &pe) || pe.Index != 1 || !errors.Is(err, ErrInvalid) || !errors.Is(err, sys.ENOSPC) {
		t.Fatalf("one request refused, then the doorbell: %v", err)
	}
	if prod := d.sqRing.m.Load32(rxeProdOff); prod != 3 {
		t.Fatalf("producer %d, want 3", prod)
	}
}

// testCQ is an rxe CQ driver polling r (a ring in memory), as created
// leaves it.
func testCQ(tb testing.TB, r *rxeRing) *rxeCQ {
	tb.Helper()
	d := new(rxeCQ)
	if err := d.attach(r.m); err != nil {
		tb.Fatal(err)
	}
	return d
}

// poll1 is poll for rings that cannot be lost.
func (d *rxeCQ) poll1(wcs []WC) int {
	n, err := d.poll(wcs)
	if err != nil {
		panic(err)
	}
	return n
}

// TestRxeCQResizeModel plays the kernel's side of RESIZE_CQ on rings in
// memory (rxe_queue_resize: the waiting completions copied to the start of
// a new ring, whose consumer index is 0): after replace, the completions
// come out of the new ring in order, once each; the lock-free empty check
// and the channel's snapshots follow the new ring across its wrap; and a
// view taken before the resize still reads (the retired ring), never
// faulting. A new ring that cannot be used leaves polls failing with
// ErrInvalid, never reading the stale ring.
func TestRxeCQResizeModel(t *testing.T) {
	old := memRing(t, 4, 7)
	r, err := newRxeRing(old, false)
	if err != nil {
		t.Fatal(err)
	}
	d := testCQ(t, r)
	put := func(m *sys.Mapping, slot int, id uint64) {
		c := abi.IbUverbsWc{WrId: id}
		m.WriteAt(sys.AsBytes(&c), rxeDataOff+slot<<7)
	}
	wcs := make([]WC, 8)
	// Three laps of the old ring, then ids 100 and 101 wait.
	var next uint64 = 1
	prod := uint32(0)
	for lap := 0; lap < 3; lap++ {
		for i := 0; i < 3; i++ {
			put(old, int(prod), next)
			next++
			prod = (prod + 1) & 3
		}
		old.Store32(rxeProdOff, prod)
		if n := d.poll1(wcs); n != 3 {
			t.Fatalf("lap %d: poll = %d", lap, n)
		}
	}
	put(old, int(prod), 100)
	put(old, int((prod+1)&3), 101)
	old.Store32(rxeProdOff, (prod+2)&3)
	stale := d.view.Load()

	nm := memRing(t, 16, 7)
	put(nm, 0, 100)
	put(nm, 1, 101)
	nm.Store32(rxeProdOff, 2)
	if err := d.replace(rxeQueue{m: nm}, nil); err != nil {
		t.Fatal(err)
	}
	if d.empty() {
		t.Fatal("empty with two copied completions waiting")
	}
	s0, ok := d.snap()
	if !ok || s0.waiting != 2 || d.moved(s0) {
		t.Fatalf("snapshot after resize %+v ok %v, moved %v", s0, ok, d.moved(s0))
	}
	if n := d.poll1(wcs[:1]); n != 1 || wcs[0].ID != 100 {
		t.Fatalf("first after resize: %d %+v", n, wcs[0])
	}
	if n := d.poll1(wcs); n != 1 || wcs[0].ID != 101 {
		t.Fatalf("second after resize: %d %+v", n, wcs[0])
	}
	if !d.empty() || d.poll1(wcs) != 0 {
		t.Fatal("not empty after the copied completions")
	}
	// Four laps of the new ring.
	nprod := uint32(2)
	want := uint64(200)
	for lap := 0; lap < 4; lap++ {
		s, _ := d.snap()
		for i := 0; i < 13; i++ {
			put(nm, int(nprod), 200+uint64(lap*13+i))
			nprod = (nprod + 1) & 15
		}
		nm.Store32(rxeProdOff, nprod)
		if d.empty() || !d.moved(s) {
			t.Fatalf("lap %d: 13 new completions: empty %v moved %v", lap, d.empty(), d.moved(s))
		}
		for got := 0; got < 13; {
			n := d.poll1(wcs)
			for _, wc := range wcs[:n] {
				if wc.ID != want {
					t.Fatalf("lap %d: id %d, want %d", lap, wc.ID, want)
				}
				want++
			}
			got += n
			if n == 0 {
				t.Fatalf("lap %d: %d of 13", lap, got)
			}
		}
		if !d.empty() {
			t.Fatalf("lap %d: not empty after polling all", lap)
		}
	}
	if got := d.consumed.Load(); got != 9+2+52 {
		t.Fatalf("consumed %d, want 63", got)
	}
	// The view from before the resize still reads its ring.
	_ = stale.prod.Load()

	// A ring that cannot be used: polls fail, none reads the stale ring.
	bad := memRing(t, 4, 7)
	bad.Store32(rxeMaskOff, 6) // not 2^n-1
	if err := d.replace(rxeQueue{m: bad}, nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("replace with a bad ring: %v", err)
	}
	if d.empty() {
		t.Fatal("a CQ without a ring says empty: Poll would hide the loss")
	}
	if _, err := d.poll(wcs); !errors.Is(err, ErrInvalid) {
		t.Fatalf("poll without a ring: %v", err)
	}
	if _, ok := d.snap(); ok {
		t.Fatal("a CQ without a ring is watchable")
	}
	if d.ready() != 0 {
		t.Fatal("ready without a ring")
	}
	// A later resize that maps its ring brings the CQ back: the kernel
	// copied the completions of the ring we never saw (it stayed lost once).
	again := memRing(t, 8, 7)
	put(again, 0, 300)
	again.Store32(rxeProdOff, 1)
	if err := d.replace(rxeQueue{m: again}, nil); err != nil {
		t.Fatal(err)
	}
	if d.empty() || d.ready() != 1 {
		t.Fatalf("after a good resize: empty %v, ready %d", d.empty(), d.ready())
	}
	if n, err := d.poll(wcs); n != 1 || err != nil || wcs[0].ID != 300 {
		t.Fatalf("poll after a good resize = %d %v %+v", n, err, wcs[0])
	}
	if s, ok := d.snap(); !ok || d.moved(s) {
		t.Fatalf("not watchable after a good resize: %+v %v", s, ok)
	}
}
