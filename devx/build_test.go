package devx

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pureverbs/pureverbs/internal/sys"
	m "github.com/pureverbs/pureverbs/internal/testkit/ioctlmodel"
)

// The golden table: for each DEVX ioctl, the header and attributes the
// builder must produce, written here from the numbers of the uapi headers
// (rdma/mlx5_user_ioctl_cmds.h, rdma/ib_user_ioctl_verbs.h) and libmlx5's
// encoding, independently of the abi package the builders use.
const (
	drvMlx5 = 1 // RDMA_DRIVER_MLX5

	objDevx    = 0x1000 // MLX5_IB_OBJECT_DEVX
	objObj     = 0x1001 // MLX5_IB_OBJECT_DEVX_OBJ
	objUmem    = 0x1002 // MLX5_IB_OBJECT_DEVX_UMEM
	objCmdFD   = 0x1004 // MLX5_IB_OBJECT_DEVX_ASYNC_CMD_FD
	objEventFD = 0x1005 // MLX5_IB_OBJECT_DEVX_ASYNC_EVENT_FD

	mOther, mQueryUAR, mQueryEQN, mSubscribe        = 0x1000, 0x1001, 0x1002, 0x1003         // MLX5_IB_METHOD_DEVX_*
	mCreate, mDestroy, mModify, mQuery, mQueryAsync = 0x1000, 0x1001, 0x1002, 0x1003, 0x1004 // MLX5_IB_METHOD_DEVX_OBJ_*
	mUmemReg, mUmemDereg                            = 0x1000, 0x1001
	mAlloc                                          = 0x1000 // ASYNC_CMD_FD_ALLOC, ASYNC_EVENT_FD_ALLOC

	fMand = 1 // UVERBS_ATTR_F_MANDATORY
)

// gAttr is one expected attribute; Buf, when set, is the caller buffer the
// attribute must point to (its address is the expected data).
type gAttr struct {
	ID, Len, Flags, AttrData uint16
	Data                     uint64
	Buf                      []byte
}

type golden struct {
	name           string
	object, method uint16
	attrs          []gAttr
	build          func(cmd *sys.Ioctl)
	env            func() *m.Env // what the command names, for the model
}

func u16s(v ...uint16) uint64 {
	var b [8]byte
	for i, x := range v {
		binary.LittleEndian.PutUint16(b[2*i:], x)
	}
	return binary.LittleEndian.Uint64(b[:])
}

// Objects and fds the golden commands name.
const (
	gObj     = 7  // a DEVX object handle
	gUmem    = 9  // a umem handle
	gEventCh = 41 // an event channel fd
	gCmdComp = 42 // a command completion fd
	gEventFD = 43 // an eventfd
	gAddr    = 0x7f0000001000
)

func goldenEnv() *m.Env {
	return &m.Env{
		Objects: map[uint32]uint16{gObj: objObj, gUmem: objUmem},
		FDs:     map[int64]uint16{gEventCh: objEventFD, gCmdComp: objCmdFD, gEventFD: m.NotUverbs},
	}
}

func goldens() []golden {
	in16 := make([]byte, 16)
	in64 := make([]byte, 64)
	out16 := make([]byte, 16)
	out256 := make([]byte, 256)
	for i := range in64 {
		in64[i] = byte(i)
	}
	var eqn, uarIdx, umemID uint32
	eqnB := sys.AsBytes(&eqn)
	uarB := sys.AsBytes(&uarIdx)
	umemB := sys.AsBytes(&umemID)
	events5 := []uint16{1, 2, 3, 4, 5}
	var events5B []byte
	return []golden{
		{"general_cmd", objDevx, mOther, []gAttr{
			{ID: 0x1000, Len: 64, Flags: fMand, Buf: in64},    // CMD_IN by pointer
			{ID: 0x1001, Len: 256, Flags: fMand, Buf: out256}, // CMD_OUT
		}, func(c *sys.Ioctl) { buildGeneral(c, drvMlx5, in64, out256) }, goldenEnv},
		{"obj_create", objObj, mCreate, []gAttr{
			{ID: 0x1000, Flags: fMand},                        // HANDLE, IDR NEW: data 0
			{ID: 0x1001, Len: 16, Flags: fMand, Buf: in16},    // CMD_IN
			{ID: 0x1002, Len: 256, Flags: fMand, Buf: out256}, // CMD_OUT
		}, func(c *sys.Ioctl) { buildObjCreate(c, drvMlx5, in16, out256) }, goldenEnv},
		{"obj_query", objObj, mQuery, []gAttr{
			{ID: 0x1000, Flags: fMand, Data: gObj},
			{ID: 0x1001, Len: 64, Flags: fMand, Buf: in64},
			{ID: 0x1002, Len: 16, Flags: fMand, Buf: out16},
		}, func(c *sys.Ioctl) { buildObjQuery(c, drvMlx5, gObj, in64, out16) }, goldenEnv},
		{"obj_modify", objObj, mModify, []gAttr{
			{ID: 0x1000, Flags: fMand, Data: gObj},
			{ID: 0x1001, Len: 64, Flags: fMand, Buf: in64},
			{ID: 0x1002, Len: 16, Flags: fMand, Buf: out16},
		}, func(c *sys.Ioctl) { buildObjModify(c, drvMlx5, gObj, in64, out16) }, goldenEnv},
		{"obj_destroy", objObj, mDestroy, []gAttr{
			{ID: 0x1000, Flags: fMand, Data: gObj},
		}, func(c *sys.Ioctl) { buildObjDestroy(c, drvMlx5, gObj) }, goldenEnv},
		{"obj_query_async", objObj, mQueryAsync, []gAttr{
			{ID: 0x1000, Flags: fMand, Data: gObj},           // QUERY_HANDLE
			{ID: 0x1001, Len: 16, Flags: fMand, Buf: in16},   // QUERY_CMD_IN
			{ID: 0x1004, Len: 8, Flags: fMand, Data: 256},    // OUT_LEN, a CONST_IN: 8 bytes
			{ID: 0x1003, Len: 8, Flags: fMand, Data: 0xfeed}, // WR_ID
			{ID: 0x1002, Flags: fMand, Data: gCmdComp},       // FD
		}, func(c *sys.Ioctl) { buildObjQueryAsync(c, drvMlx5, gObj, in16, 256, 0xfeed, gCmdComp) }, goldenEnv},
		{"umem_reg", objUmem, mUmemReg, []gAttr{
			{ID: 0x1001, Len: 8, Flags: fMand, Data: gAddr},     // ADDR
			{ID: 0x1002, Len: 8, Flags: fMand, Data: 8192},      // LEN
			{ID: 0x1003, Len: 4, Flags: fMand, Data: 1},         // ACCESS as libmlx5's u32
			{ID: 0x1005, Len: 8, Flags: 0, Data: ^uint64(4095)}, // PGSZ_BITMAP, optional (legacy reg)
			{ID: 0x1004, Len: 4, Flags: fMand, Buf: umemB},      // OUT_ID
			{ID: 0x1000, Flags: fMand},                          // HANDLE, IDR NEW
		}, func(c *sys.Ioctl) { buildUmemReg(c, drvMlx5, gAddr, 8192, 1, ^uint64(4095), true, &umemID) }, goldenEnv},
		{"umem_reg_ex", objUmem, mUmemReg, []gAttr{
			{ID: 0x1001, Len: 8, Flags: fMand, Data: gAddr},
			{ID: 0x1002, Len: 8, Flags: fMand, Data: 8192},
			{ID: 0x1003, Len: 4, Flags: fMand, Data: 7},
			{ID: 0x1005, Len: 8, Flags: fMand, Data: 1 << 21}, // PGSZ_BITMAP, mandatory (reg_ex)
			{ID: 0x1004, Len: 4, Flags: fMand, Buf: umemB},
			{ID: 0x1000, Flags: fMand},
		}, func(c *sys.Ioctl) { buildUmemReg(c, drvMlx5, gAddr, 8192, 7, 1<<21, false, &umemID) }, goldenEnv},
		{"umem_dereg", objUmem, mUmemDereg, []gAttr{
			{ID: 0x1000, Flags: fMand, Data: gUmem},
		}, func(c *sys.Ioctl) { buildUmemDereg(c, drvMlx5, gUmem) }, goldenEnv},
		{"query_eqn", objDevx, mQueryEQN, []gAttr{
			{ID: 0x1000, Len: 4, Flags: fMand, Data: 3},   // USER_VEC
			{ID: 0x1001, Len: 4, Flags: fMand, Buf: eqnB}, // DEV_EQN
		}, func(c *sys.Ioctl) { buildQueryEQN(c, drvMlx5, 3, &eqn) }, goldenEnv},
		{"query_uar", objDevx, mQueryUAR, []gAttr{
			{ID: 0x1000, Len: 4, Flags: fMand, Data: 5},   // USER_IDX
			{ID: 0x1001, Len: 4, Flags: fMand, Buf: uarB}, // DEV_IDX
		}, func(c *sys.Ioctl) { buildQueryUAR(c, drvMlx5, 5, &uarIdx) }, goldenEnv},
		{"cmd_comp_alloc", objCmdFD, mAlloc, []gAttr{
			{ID: 0x1000, Flags: fMand, Data: ^uint64(0)}, // HANDLE, FD NEW (-1 until the kernel writes it)
		}, func(c *sys.Ioctl) { buildCmdCompAlloc(c, drvMlx5) }, goldenEnv},
		{"event_channel_alloc", objEventFD, mAlloc, []gAttr{
			{ID: 0x1000, Flags: fMand, Data: ^uint64(0)},
			{ID: 0x1001, Len: 4, Flags: fMand, Data: 0}, // FLAGS as libmlx5's u32
		}, func(c *sys.Ioctl) { buildEventChannelAlloc(c, drvMlx5, 0) }, goldenEnv},
		{"event_channel_alloc_omit_data", objEventFD, mAlloc, []gAttr{
			{ID: 0x1000, Flags: fMand, Data: ^uint64(0)},
			{ID: 0x1001, Len: 4, Flags: fMand, Data: 1}, // MLX5_IB_UAPI_DEVX_CR_EV_CH_FLAGS_OMIT_DATA
		}, func(c *sys.Ioctl) { buildEventChannelAlloc(c, drvMlx5, 1) }, goldenEnv},
		{"subscribe_unaffiliated", objDevx, mSubscribe, []gAttr{
			{ID: 0x1000, Flags: fMand, Data: gEventCh},           // FD_HANDLE
			{ID: 0x1004, Len: 8, Flags: fMand, Data: 0xc00c1e},   // COOKIE
			{ID: 0x1002, Len: 4, Flags: fMand, Data: u16s(9, 1)}, // TYPE_NUM_LIST inline
		}, func(c *sys.Ioctl) {
			buildSubscribe(c, drvMlx5, gEventCh, 0, false, eventList([]uint16{9, 1}), 0xc00c1e)
		}, goldenEnv},
		{"subscribe_obj", objDevx, mSubscribe, []gAttr{
			{ID: 0x1000, Flags: fMand, Data: gEventCh},
			{ID: 0x1004, Len: 8, Flags: fMand, Data: 0}, // the cookie is sent even when 0
			{ID: 0x1001, Flags: fMand, Data: gObj},      // OBJ_HANDLE
			{ID: 0x1002, Len: 8, Flags: fMand, Data: u16s(0, 1, 2, 3)},
		}, func(c *sys.Ioctl) {
			buildSubscribe(c, drvMlx5, gEventCh, gObj, true, eventList([]uint16{0, 1, 2, 3}), 0)
		}, goldenEnv},
		{"subscribe_obj_5_events", objDevx, mSubscribe, []gAttr{
			{ID: 0x1000, Flags: fMand, Data: gEventCh},
			{ID: 0x1004, Len: 8, Flags: fMand, Data: 77},
			{ID: 0x1001, Flags: fMand, Data: gObj},
			{ID: 0x1002, Len: 10, Flags: fMand, Buf: nil}, // by pointer: filled below
		}, func(c *sys.Ioctl) {
			events5B = eventList(events5)
			buildSubscribe(c, drvMlx5, gEventCh, gObj, true, events5B, 77)
		}, goldenEnv},
		{"subscribe_fd_unaffiliated", objDevx, mSubscribe, []gAttr{
			{ID: 0x1000, Flags: fMand, Data: gEventCh},
			{ID: 0x1002, Len: 2, Flags: fMand, Data: 0x16},     // one u16 event number
			{ID: 0x1003, Len: 4, Flags: fMand, Data: gEventFD}, // FD_NUM, a plain u32
		}, func(c *sys.Ioctl) { buildSubscribeFd(c, drvMlx5, gEventCh, 0, false, 0x16, gEventFD) }, goldenEnv},
		{"subscribe_fd_obj", objDevx, mSubscribe, []gAttr{
			{ID: 0x1000, Flags: fMand, Data: gEventCh},
			{ID: 0x1001, Flags: fMand, Data: gObj},
			{ID: 0x1002, Len: 2, Flags: fMand, Data: 0},
			{ID: 0x1003, Len: 4, Flags: fMand, Data: gEventFD},
		}, func(c *sys.Ioctl) { buildSubscribeFd(c, drvMlx5, gEventCh, gObj, true, 0, gEventFD) }, goldenEnv},
	}
}

// expectImage lays out header and attributes as the kernel reads them.
func expectImage(object, method uint16, attrs []gAttr) []byte {
	b := make([]byte, 24+16*len(attrs))
	binary.LittleEndian.PutUint16(b[0:], uint16(len(b)))
	binary.LittleEndian.PutUint16(b[2:], object)
	binary.LittleEndian.PutUint16(b[4:], method)
	binary.LittleEndian.PutUint16(b[6:], uint16(len(attrs)))
	binary.LittleEndian.PutUint32(b[16:], drvMlx5)
	for i, a := range attrs {
		p := b[24+16*i:]
		binary.LittleEndian.PutUint16(p[0:], a.ID)
		binary.LittleEndian.PutUint16(p[2:], a.Len)
		binary.LittleEndian.PutUint16(p[4:], a.Flags)
		binary.LittleEndian.PutUint16(p[6:], a.AttrData)
		d := a.Data
		if a.Buf != nil {
			d = sys.SliceAddr(a.Buf)
		}
		binary.LittleEndian.PutUint64(p[8:], d)
	}
	return b
}

// view decodes an image for readable diffs.
func view(img []byte) []string {
	var out []string
	out = append(out, fmt.Sprintf("hdr len=%d obj=%#x meth=%#x n=%d res1=%#x drv=%d res2=%#x",
		binary.LittleEndian.Uint16(img), binary.LittleEndian.Uint16(img[2:]), binary.LittleEndian.Uint16(img[4:]),
		binary.LittleEndian.Uint16(img[6:]), binary.LittleEndian.Uint64(img[8:]), binary.LittleEndian.Uint32(img[16:]),
		binary.LittleEndian.Uint32(img[20:])))
	for p := img[24:]; len(p) >= 16; p = p[16:] {
		out = append(out, fmt.Sprintf("attr id=%#x len=%d flags=%d attr_data=%d data=%#x",
			binary.LittleEndian.Uint16(p), binary.LittleEndian.Uint16(p[2:]), binary.LittleEndian.Uint16(p[4:]),
			binary.LittleEndian.Uint16(p[6:]), binary.LittleEndian.Uint64(p[8:])))
	}
	return out
}

// TestGolden compares, for every DEVX ioctl, the bytes the builder
// produces with the table.
func TestGolden(t *testing.T) {
	for _, g := range goldens() {
		t.Run(g.name, func(t *testing.T) {
			cmd := sys.NewIoctl()
			g.build(cmd)
			if err := cmd.BuildErr(); err != nil {
				t.Fatalf("build error %v", err)
			}
			if g.name == "subscribe_obj_5_events" {
				// Five u16s (10 bytes) travel by pointer: the buffer is
				// the one the builder got, holding the numbers.
				buf := cmd.AttrBuf(3)
				if diff := cmp.Diff([]byte{1, 0, 2, 0, 3, 0, 4, 0, 5, 0}, buf); diff != "" {
					t.Errorf("TYPE_NUM_LIST buffer (-want +got):\n%s", diff)
				}
				g.attrs[3].Buf = buf
			}
			want := expectImage(g.object, g.method, g.attrs)
			got := cmd.Image()
			if diff := cmp.Diff(view(want), view(got)); diff != "" {
				t.Errorf("image (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("raw bytes (-want +got):\n%s", diff)
			}
			for i, a := range g.attrs {
				b := cmd.AttrBuf(i)
				if (a.Buf == nil) != (b == nil) || (b != nil && &a.Buf[0] != &b[0]) {
					t.Errorf("attr %d: pointer buffer is not the caller's", i)
				}
			}
		})
	}
}

// TestGoldenPassesModel: every DEVX command the builders produce passes
// the kernel validation model (specs transcribed from devx.c).
func TestGoldenPassesModel(t *testing.T) {
	api := m.Mlx5()
	for _, g := range goldens() {
		cmd := sys.NewIoctl()
		g.build(cmd)
		c := m.FromIoctl(cmd)
		if v := api.Check(g.env(), &c); !v.OK() {
			t.Errorf("%s: model rejects it: %v\n\t%s", g.name, v, c.Describe(api))
		}
	}
}
