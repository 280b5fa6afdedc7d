package abi

import (
	"bytes"
	"encoding/binary"
	"github.com/pureverbs/pureverbs/internal/testkit"
	"testing"
	"unsafe"
)

// cBytes is the memory of *p as the kernel sees it.
func cBytes[T any](p *T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(p)), unsafe.Sizeof(*p))
}

// rowOffset returns the offset of the C member designator c in the layout
// table of the C type ctype (the offsets TestLayoutAgainstC checks with gcc).
func rowOffset(t *testing.T, ctype, c string) int {
	t.Helper()
	for _, lt := range layoutTable {
		if lt.c != ctype {
			continue
		}
		for _, r := range lt.rows() {
			if r.c == c {
				return int(r.off)
			}
		}
	}
	t.Fatalf("no layout row %s.%s", ctype, c)
	return 0
}

// TestSendWrRdmaRoundTrip sets ib_uverbs_send_wr.wr.rdma through the
// struct-member setter and checks the bytes against the C layout, using
// offsets hand-checked from rdma/ib_user_verbs.h (wr at 24; rdma.remote_addr
// +0, rkey +8, reserved +12), which must also be those of the layout table
// (compared with gcc by TestLayoutAgainstC).
func TestSendWrRdmaRoundTrip(t *testing.T) {
	for c, want := range map[string]int{"wr": 24, "wr.rdma.remote_addr": 24, "wr.rdma.rkey": 32, "wr.rdma.reserved": 36, "wr.ud.remote_qkey": 32} {
		if got := rowOffset(t, "struct ib_uverbs_send_wr", c); got != want {
			t.Errorf("layout table: offsetof(struct ib_uverbs_send_wr, %s) = %d, hand-checked %d", c, got, want)
		}
	}

	var wr IbUverbsSendWr
	rdma := IbUverbsSendWrWrRdma{RemoteAddr: 0x1122334455667788, Rkey: 0xaabbccdd, Reserved: 0x01020304}
	wr.Wr.SetRdma(rdma)
	b := cBytes(&wr)
	want := make([]byte, SizeofIbUverbsSendWr)
	binary.LittleEndian.PutUint64(want[24:], 0x1122334455667788)
	binary.LittleEndian.PutUint32(want[32:], 0xaabbccdd)
	binary.LittleEndian.PutUint32(want[36:], 0x01020304)
	if !bytes.Equal(b, want) {
		t.Errorf("after SetRdma:\n got % x\nwant % x", b, want)
	}
	if got := wr.Wr.Rdma(); got != rdma {
		t.Errorf("Rdma() = %+v, want %+v", got, rdma)
	}
	// The other members alias the same bytes, as in C.
	if ud := wr.Wr.Ud(); ud.Ah != 0x55667788 || ud.RemoteQkey != 0xaabbccdd {
		t.Errorf("Ud() = %+v after SetRdma", ud)
	}
	at := wr.Wr.Atomic()
	if at.RemoteAddr != rdma.RemoteAddr || at.CompareAdd != 0x01020304aabbccdd {
		t.Errorf("Atomic() = %+v after SetRdma", at)
	}
	// A smaller member leaves the rest of the union alone.
	wr.Wr.SetUd(IbUverbsSendWrWrUd{Ah: 7})
	if got := wr.Wr.Rdma(); got.RemoteAddr != 7 || got.Rkey != 0 {
		t.Errorf("Rdma() = %+v after SetUd", got)
	}
	at.Swap = 0xfeed
	wr.Wr.SetAtomic(at)
	if got := binary.LittleEndian.Uint64(b[24+16:]); got != 0xfeed {
		t.Errorf("atomic.swap bytes = %#x", got)
	}
}

// TestRxeGidRawGlobal: the raw (array) and global (struct of __be64) views
// of union rxe_gid.
func TestRxeGidRawGlobal(t *testing.T) {
	var g RxeGid
	var raw [16]uint8
	for i := range raw {
		raw[i] = byte(0xf0 + i)
	}
	g.SetRaw(raw)
	gl := g.Global()
	// Big-endian members hold the memory bytes loaded host-endian.
	if gl.SubnetPrefix != binary.LittleEndian.Uint64(raw[:8]) || gl.InterfaceId != binary.LittleEndian.Uint64(raw[8:]) {
		t.Errorf("Global() = %+v for raw % x", gl, raw)
	}
	if binary.BigEndian.Uint64(cBytes(&g)[8:]) != 0xf8f9fafbfcfdfeff {
		t.Errorf("memory % x", cBytes(&g))
	}
	gl.InterfaceId = 0
	g.SetGlobal(gl)
	if r := g.Raw(); !bytes.Equal(r[:8], raw[:8]) || r[8] != 0 || r[15] != 0 {
		t.Errorf("Raw() = % x", r)
	}
}

// TestAccessorAllocs: accessors copy by value without allocating.
func TestAccessorAllocs(t *testing.T) {
	var wc IbUverbsWcEx
	var wr IbUverbsSendWr
	var rxe RxeSendWr
	var spec IbUverbsFlowSpecEth
	var sink uint64
	for name, f := range map[string]func(){
		"scalar": func() {
			wc.SetImmData(wc.ImmData() + 1)
		},
		"struct": func() {
			r := wr.Wr.Rdma()
			r.Rkey++
			wr.Wr.SetRdma(r)
		},
		"nested struct with unions": func() {
			ud := rxe.Wr.Ud()
			ud.Av.Grh.Dgid.SetRaw([16]uint8{1})
			rxe.Wr.SetUd(ud)
			sink += uint64(ud.RemoteQpn)
		},
		"anonymous union": func() {
			spec.SetSize(spec.Size() + 1)
		},
	} {
		f() // writes even when NoAllocs skips (under -race)
		t.Run(name, func(t *testing.T) { testkit.NoAllocs(t, 1000, f) })
	}
	if wc.ImmData() == 0 || wr.Wr.Rdma().Rkey == 0 || spec.Hdr.Size == 0 {
		t.Error("accessors did not write")
	}
	_ = sink
}
