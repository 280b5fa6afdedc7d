package uverbs

import (
	"encoding/binary"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pureverbs/pureverbs/abi"
	"github.com/pureverbs/pureverbs/internal/sys"
)

// Host tests of the MR, AH and Buffer encodings (byte offsets of the
// gcc-checked abi structs), of PD's EBUSY message, and of the argument
// errors that must come before any system call.

func TestAccessValues(t *testing.T) {
	// enum ibv_access_flags / ib_uverbs_access_flags.
	want := map[Access]uint32{
		AccessLocalWrite: 1, AccessRemoteWrite: 2, AccessRemoteRead: 4, AccessRemoteAtomic: 8,
		AccessMWBind: 16, AccessZeroBased: 32, AccessOnDemand: 64, AccessHugeTLB: 128,
		AccessRelaxedOrdering: 1 << 20,
	}
	for a, v := range want {
		if uint32(a) != v {
			t.Errorf("%v = %#x, want %#x", a, uint32(a), v)
		}
	}
	if accessKnown != 0x3ff000ff {
		t.Errorf("accessKnown = %#x", uint32(accessKnown))
	}
	for a, s := range map[Access]string{
		0: "0", AccessLocalWrite | AccessRemoteRead: "LOCAL_WRITE|REMOTE_READ",
		AccessRelaxedOrdering | AccessHugeTLB: "HUGETLB|RELAXED_ORDERING", 1<<9 | 1: "LOCAL_WRITE|0x200",
	} {
		if a.String() != s {
			t.Errorf("%#x.String() = %q, want %q", uint32(a), a.String(), s)
		}
	}
}

// TestRegMREncoding: the 40-byte REG_MR request.
func TestRegMREncoding(t *testing.T) {
	buf := make([]byte, 100)
	mr := &MR{first: mrState{buf: buf[3:], access: AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead}}
	req := mr.first.regRequest(0x17)
	b := sys.AsBytes(&req)
	if len(b) != 40 {
		t.Fatalf("REG_MR request %d bytes", len(b))
	}
	le := binary.LittleEndian
	addr := sys.SliceAddr(buf) + 3
	if le.Uint64(b[0:]) != 0 || le.Uint64(b[8:]) != addr || le.Uint64(b[16:]) != 97 || le.Uint64(b[24:]) != addr ||
		le.Uint32(b[32:]) != 0x17 || le.Uint32(b[36:]) != 7 {
		t.Errorf("REG_MR request % x (addr %#x)", b, addr)
	}
	if mr.Addr() != addr || mr.Len() != 97 || &mr.Bytes()[0] != &buf[3] || mr.IOVA() != addr {
		t.Errorf("Addr %#x IOVA %#x Len %d", mr.Addr(), mr.IOVA(), mr.Len())
	}
	// RegMRIOVA: the device's address in hca_va, the buffer's in start.
	mr.first.iova, mr.first.iovaSet = 0x7000_0000_0000+addr%4096, true
	req = mr.first.regRequest(0x17)
	b = sys.AsBytes(&req)
	if le.Uint64(b[8:]) != addr || le.Uint64(b[24:]) != mr.first.iova || mr.IOVA() != mr.first.iova || mr.SGE(5, 9) != (SGE{Addr: mr.first.iova + 5, Length: 9, LKey: mr.first.lkey}) {
		t.Errorf("REG_MR request with an IOVA % x", b)
	}
	pd := &PD{ctx: &Context{}}
	big := make([]byte, 8192)
	off := sys.SliceAddr(big) % 4096
	for name, iova := range map[string]uint64{
		"another page offset": 0x7000_0000_0000 + (off+1)%4096,
		"wrapping":            ^uint64(0) - 4095 + off,
	} {
		if _, err := pd.RegMRIOVA(big, iova, AccessLocalWrite); !errors.Is(err, ErrInvalid) {
			t.Errorf("RegMRIOVA, %s: %v", name, err)
		}
	}
	var resp abi.IbUverbsRegMrResp
	if len(sys.AsBytes(&resp)) != 12 {
		t.Error("REG_MR response size")
	}
}

// TestReregMREncoding: the 48-byte REREG_MR request (struct
// ib_uverbs_rereg_mr: response, mr_handle, flags, start, length, hca_va,
// pd_handle, access_flags) for each change, and the registration the MR
// takes if the kernel accepts it. Only what flags name is sent; a new
// translation drops an IOVA of RegMRIOVA for the new memory's address.
func TestReregMREncoding(t *testing.T) {
	le := binary.LittleEndian
	pd1, pd2 := &PD{handle: 0x11}, &PD{handle: 0x22}
	old := &mrState{pd: pd1, buf: make([]byte, 4096), iova: 0x7000_0000_0000, iovaSet: true,
		access: AccessLocalWrite, lkey: 0x101, rkey: 0x102}
	nbuf := make([]byte, 100)
	naddr := sys.SliceAddr(nbuf[5:])
	for _, tc := range []struct {
		name   string
		flags  ReregFlags
		wantRq [6]uint64 // flags, start, length, hca_va, pd_handle, access_flags
		check  func(n *mrState) bool
	}{
		{"access", ReregAccess, [6]uint64{4, 0, 0, 0, 0, 3},
			func(n *mrState) bool {
				return n.access == AccessLocalWrite|AccessRemoteWrite && n.pd == pd1 && n.iovaSet
			}},
		{"pd", ReregPD, [6]uint64{2, 0, 0, 0, 0x22, 0},
			func(n *mrState) bool { return n.pd == pd2 && n.access == AccessLocalWrite && n.iovaSet }},
		{"translation", ReregTranslation, [6]uint64{1, naddr, 95, naddr, 0, 0},
			func(n *mrState) bool {
				return &n.buf[0] == &nbuf[5] && len(n.buf) == 95 && !n.iovaSet && n.ioVA() == naddr && n.pd == pd1
			}},
		{"all", ReregTranslation | ReregPD | ReregAccess, [6]uint64{7, naddr, 95, naddr, 0x22, 3},
			func(n *mrState) bool {
				return &n.buf[0] == &nbuf[5] && n.pd == pd2 && n.access == AccessLocalWrite|AccessRemoteWrite
			}},
	} {
		var next mrState
		req := old.rereg(&next, 0x33, tc.flags, pd2, nbuf[5:], AccessLocalWrite|AccessRemoteWrite)
		b := sys.AsBytes(&req)
		if len(b) != 48 {
			t.Fatalf("REREG_MR request %d bytes", len(b))
		}
		got := [6]uint64{uint64(le.Uint32(b[12:])), le.Uint64(b[16:]), le.Uint64(b[24:]), le.Uint64(b[32:]),
			uint64(le.Uint32(b[40:])), uint64(le.Uint32(b[44:]))}
		if le.Uint64(b[0:]) != 0 || le.Uint32(b[8:]) != 0x33 || got != tc.wantRq {
			t.Errorf("%s: REREG_MR request % x, want handle 0x33 and %#x", tc.name, b, tc.wantRq)
		}
		if !tc.check(&next) || next.lkey != old.lkey || next.rkey != old.rkey {
			t.Errorf("%s: next registration %+v", tc.name, next)
		}
	}
	// The old state is never written: readers may still hold it.
	if old.pd != pd1 || old.access != AccessLocalWrite || len(old.buf) != 4096 || !old.iovaSet {
		t.Errorf("rereg changed the old state: %+v", old)
	}
	var resp abi.IbUverbsReregMrResp
	if len(sys.AsBytes(&resp)) != 8 {
		t.Error("REREG_MR response size")
	}
}

// TestCreateAHEncoding: the 56-byte CREATE_AH request with a RoCE v2
// global address.
func TestCreateAHEncoding(t *testing.T) {
	var dgid GID
	copy(dgid[:], net.ParseIP("::ffff:10.99.0.1").To16())
	attr := AHAttr{DGID: dgid, FlowLabel: 0xabcde, SGIDIndex: 1, HopLimit: 64, TrafficClass: 0x68,
		IsGlobal: true, DLID: 0x1234, SL: 3, SrcPathBits: 5, StaticRate: 7, PortNum: 1}
	req := abi.IbUverbsCreateAh{PdHandle: 9, Attr: attr.toABI()}
	b := sys.AsBytes(&req)
	if len(b) != 56 {
		t.Fatalf("CREATE_AH request %d bytes", len(b))
	}
	want := make([]byte, 56)
	le := binary.LittleEndian
	le.PutUint32(want[16:], 9)       // pd_handle
	copy(want[24:40], dgid[:])       // grh.dgid
	le.PutUint32(want[40:], 0xabcde) // grh.flow_label
	want[44] = 1                     // grh.sgid_index
	want[45] = 64                    // grh.hop_limit
	want[46] = 0x68                  // grh.traffic_class
	le.PutUint16(want[48:], 0x1234)  // dlid
	want[50] = 3                     // sl
	want[51] = 5                     // src_path_bits
	want[52] = 7                     // static_rate
	want[53] = 1                     // is_global
	want[54] = 1                     // port_num
	for i := range want {
		if b[i] != want[i] {
			t.Errorf("byte %d = %#x, want %#x", i, b[i], want[i])
		}
	}
	d := rxeProvider{}.newAH()
	if n := len(d.udataOut()); n != 8 {
		t.Errorf("rxe AH udata out %d bytes, want 8", n)
	}
	if _, err := d.created(); !errors.Is(err, ErrNotSupported) {
		t.Errorf("ah_num 0 = %v, want ErrNotSupported", err)
	}
	binary.LittleEndian.PutUint32(d.udataOut(), 42)
	if n, err := d.created(); n != 42 || err != nil {
		t.Errorf("ah_num = %d, %v", n, err)
	}
}

func TestBusyErr(t *testing.T) {
	var u users
	kernel := &OpError{Object: "pd", Method: "dealloc", Err: sys.EBUSY}
	err := busyErr(kernel, &u)
	if !errors.Is(err, sys.EBUSY) || !strings.Contains(err.Error(), "still used by objects in the kernel") {
		t.Errorf("busyErr with no known users = %v", err)
	}
	u.qp.Add(2)
	u.mr.Add(1)
	u.srq.Add(1)
	err = busyErr(kernel, &u)
	var oe *OpError
	if !errors.Is(err, sys.EBUSY) || !errors.As(err, &oe) || oe.Object != "pd" || oe.Method != "dealloc" {
		t.Fatalf("busyErr = %#v", err)
	}
	if want := "uverbs: pd dealloc: device or resource busy: still used by 2 QPs, 1 MR, 1 SRQ (destroy them first)"; err.Error() != want {
		t.Errorf("busyErr =\n%q\nwant\n%q", err.Error(), want)
	}
	other := &OpError{Object: "pd", Method: "dealloc", Err: sys.EINVAL}
	if busyErr(other, &u) != error(other) || busyErr(nil, &u) != nil {
		t.Error("busyErr changed a non-EBUSY error")
	}
}

func TestMRAHArgumentErrors(t *testing.T) {
	var nilPD *PD
	if _, err := nilPD.RegMR(make([]byte, 1), 0); !errors.Is(err, ErrInvalid) {
		t.Errorf("nil RegMR = %v", err)
	}
	if _, err := nilPD.CreateAH(AHAttr{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("nil CreateAH = %v", err)
	}
	var nilMR *MR
	if err := nilMR.Dereg(); !errors.Is(err, ErrInvalid) {
		t.Errorf("nil Dereg = %v", err)
	}
	var nilAH *AH
	if err := nilAH.Destroy(); !errors.Is(err, ErrInvalid) {
		t.Errorf("nil AH Destroy = %v", err)
	}

	// A context of a driver without a provider; nothing here reaches the
	// kernel.
	c := &Context{driverID: abi.RDMA_DRIVER_UNKNOWN, numCompVectors: 1}
	pd := &PD{ctx: c}
	for _, buf := range [][]byte{nil, {}} {
		if _, err := pd.RegMR(buf, AccessLocalWrite); !errors.Is(err, ErrInvalid) {
			t.Errorf("RegMR(len %d) = %v, want ErrInvalid", len(buf), err)
		}
	}
	for _, a := range []Access{1 << 8, 1 << 9, 1 << 30, 1 << 31} {
		if _, err := pd.RegMR(make([]byte, 8), AccessLocalWrite|a); !errors.Is(err, ErrInvalid) {
			t.Errorf("RegMR access %#x = %v, want ErrInvalid", uint32(a), err)
		}
	}
	if _, err := pd.CreateAH(AHAttr{FlowLabel: 1 << 20}); !errors.Is(err, ErrInvalid) {
		t.Errorf("CreateAH 21-bit flow label = %v, want ErrInvalid", err)
	}
	if _, err := pd.CreateAH(AHAttr{IsGlobal: true, PortNum: 1}); !errors.Is(err, ErrNotSupported) {
		t.Errorf("CreateAH on unknown driver = %v, want ErrNotSupported", err)
	}
	mr := &MR{ctx: c, first: mrState{pd: pd}, life: life{dead: true}}
	if err := mr.Dereg(); !errors.Is(err, ErrClosed) {
		t.Errorf("Dereg of a deregistered MR = %v, want ErrClosed", err)
	}
	ah := &AH{ctx: c, pd: pd, life: life{dead: true}}
	if err := ah.Destroy(); !errors.Is(err, ErrClosed) {
		t.Errorf("Destroy of a destroyed AH = %v, want ErrClosed", err)
	}
	pd.dead = true
	if _, err := pd.RegMR(make([]byte, 8), AccessLocalWrite); !errors.Is(err, ErrClosed) {
		t.Errorf("RegMR on a deallocated PD = %v, want ErrClosed", err)
	}
	if _, err := pd.CreateAH(AHAttr{}); !errors.Is(err, ErrClosed) {
		t.Errorf("CreateAH on a deallocated PD = %v, want ErrClosed", err)
	}
}

func TestBufferArgs(t *testing.T) {
	for _, n := range []int{0, -5} {
		if _, err := AllocBuffer(n); !errors.Is(err, ErrInvalid) {
			t.Errorf("AllocBuffer(%d) = %v, want ErrInvalid", n, err)
		}
	}
	var nb *Buffer
	if nb.Bytes() != nil || nb.Len() != 0 || !errors.Is(nb.Close(), ErrInvalid) {
		t.Error("nil Buffer")
	}
	b, err := AllocBuffer(10)
	if err != nil {
		t.Fatal(err)
	}
	mem := b.Bytes()
	if len(mem) != 10 || b.Len() != 10 || sys.SliceAddr(mem)%uint64(sys.PageSize) != 0 {
		t.Fatalf("Bytes len %d Len %d at %#x", len(mem), b.Len(), sys.SliceAddr(mem))
	}
	copy(mem, "registered")
	if r := sys.OpenBuffers(); len(r) != 1 {
		t.Errorf("OpenBuffers = %d entries", len(r))
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if b.Bytes() != nil || b.Close() != nil {
		t.Error("Buffer after Close")
	}
	if r := sys.OpenBuffers(); len(r) != 0 {
		t.Errorf("OpenBuffers after Close = %q", r)
	}
}

// TestHugeBufferArgs: AllocHugeBuffer refuses what AllocBuffer refuses;
// on a host with no huge pages free it fails with ENOMEM and says what
// to reserve (where some are free, the buffer is whole huge pages).
func TestHugeBufferArgs(t *testing.T) {
	for _, n := range []int{0, -5} {
		if _, err := AllocHugeBuffer(n); !errors.Is(err, ErrInvalid) {
			t.Errorf("AllocHugeBuffer(%d) = %v, want ErrInvalid", n, err)
		}
	}
	hp := sys.HugePageSize()
	if hp == 0 {
		if _, err := AllocHugeBuffer(1); !errors.Is(err, ErrNotSupported) {
			t.Errorf("AllocHugeBuffer without huge pages = %v, want ErrNotSupported", err)
		}
		return
	}
	// More than any test host reserves.
	_, err := AllocHugeBuffer(1 << 40)
	if !errors.Is(err, sys.ENOMEM) || !strings.Contains(err.Error(), "vm.nr_hugepages") {
		t.Errorf("AllocHugeBuffer(1 TiB) = %v, want ENOMEM naming vm.nr_hugepages", err)
	}
	if _, err := sys.AllocHugeBuffer(10, "x", 3000); !errors.Is(err, sys.EINVAL) {
		t.Errorf("a huge page size of 3000 = %v", err)
	}
}

// TestMapFileBuffer: a file's pages as a Buffer: what is stored reaches
// the file, from the offset asked for; a file open read-only cannot be
// mapped for writing (EACCES); offsets off a page and sizes below 1 are
// refused before the kernel sees them.
func TestMapFileBuffer(t *testing.T) {
	name := filepath.Join(t.TempDir(), "buf")
	ps := sys.PageSize
	if err := os.WriteFile(name, make([]byte, 3*ps), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := MapFileBuffer(f, int64(ps), ps+10)
	f.Close() // the mapping outlives the file
	if err != nil {
		t.Fatal(err)
	}
	mem := b.Bytes()
	if len(mem) != ps+10 || sys.SliceAddr(mem)%uint64(ps) != 0 {
		t.Fatalf("%d bytes at %#x", len(mem), sys.SliceAddr(mem))
	}
	copy(mem, "first")
	copy(mem[ps:], "second")
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if string(data[ps:ps+5]) != "first" || string(data[2*ps:2*ps+6]) != "second" || data[0] != 0 {
		t.Errorf("file after the stores: %q ... %q", data[ps:ps+8], data[2*ps:2*ps+8])
	}
	ro, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if _, err := MapFileBuffer(ro, 0, ps); !errors.Is(err, sys.EACCES) {
		t.Errorf("read-only file = %v, want EACCES", err)
	}
	for _, c := range []struct {
		off  int64
		size int
	}{{1, ps}, {-4096, ps}, {0, 0}} {
		if _, err := MapFileBuffer(ro, c.off, c.size); !errors.Is(err, ErrInvalid) {
			t.Errorf("offset %d size %d = %v, want ErrInvalid", c.off, c.size, err)
		}
	}
	if _, err := MapFileBuffer(nil, 0, ps); !errors.Is(err, ErrInvalid) {
		t.Errorf("nil file = %v", err)
	}
	if r := sys.OpenBuffers(); len(r) != 0 {
		t.Errorf("OpenBuffers = %q", r)
	}
}
