package ioctlmodel_test

import (
	"testing"

	"golang.org/x/sys/unix"

	"github.com/pureverbs/pureverbs/abi"
	"github.com/pureverbs/pureverbs/internal/sys"
	m "github.com/pureverbs/pureverbs/internal/testkit/ioctlmodel"
)

// hostWorld stands in for the VM's objects: the model only compares the
// numbers with Env.
func hostWorld(bare bool) *world {
	return &world{driverID: abi.RDMA_DRIVER_RXE, cmdFD: 3, async: 4, comp: 5, pd: 1, cq: 2, bare: bare}
}

// TestModelCases checks the model's verdict on every case of the
// agreement table on the host; the VM test then checks the kernels give
// the same answers.
func TestModelCases(t *testing.T) {
	api := m.Rxe()
	for _, k := range cases() {
		w := hostWorld(k.bare)
		c := k.build(w)
		v := api.Check(w.env(), &c)
		if v.Errno != k.want {
			t.Errorf("%s: model says %v, the table expects %v\n\t%s", k.name, v, errName(k.want), c.Describe(api))
		}
	}
}

func errName(e unix.Errno) string {
	if e == 0 {
		return "accepted"
	}
	return unix.ErrnoName(e)
}

// TestModelFromIoctl: a command from the library's builder converts to the
// same header and attributes, pointer buffers included.
func TestModelFromIoctl(t *testing.T) {
	c := sys.NewIoctl()
	c.Reset(abi.UVERBS_OBJECT_CQ, abi.UVERBS_METHOD_CQ_CREATE, abi.RDMA_DRIVER_RXE)
	c.IDRNew(abi.UVERBS_ATTR_CREATE_CQ_HANDLE)
	c.InlineIn(abi.UVERBS_ATTR_CREATE_CQ_CQE, 16, 4, true)
	c.InlineIn(abi.UVERBS_ATTR_CREATE_CQ_USER_HANDLE, 9, 8, true)
	c.InlineIn(abi.UVERBS_ATTR_CREATE_CQ_COMP_VECTOR, 0, 4, true)
	var resp uint32
	sys.PtrOut(c, abi.UVERBS_ATTR_CREATE_CQ_RESP_CQE, &resp, true)
	uhw := make([]byte, 16)
	c.BytesOut(abi.UVERBS_ATTR_UHW_OUT, uhw, true)
	cmd := m.FromIoctl(c)
	if cmd.Length != 24+16*6 || cmd.NumAttrs != 6 || len(cmd.Attrs) != 6 {
		t.Fatalf("header %+v", cmd)
	}
	if got := cmd.Attrs[5].Buf; len(got) != 16 || &got[0] != &uhw[0] {
		t.Errorf("UHW_OUT buffer not the caller's")
	}
	if cmd.Attrs[1].Buf != nil || cmd.Attrs[1].Data != 16 {
		t.Errorf("inline CQE: %+v", cmd.Attrs[1])
	}
	env := &m.Env{Objects: map[uint32]uint16{}, FDs: map[int64]uint16{}}
	if v := m.Rxe().Check(env, &cmd); !v.OK() {
		t.Errorf("library CQ create rejected by the model: %v", v)
	}
}

// TestModelRules covers rules the kernel cases cannot reach on rxe: enum
// attributes, absent object types, exclusive attributes, array sizes and
// the model's own guards.
func TestModelRules(t *testing.T) {
	api := &m.API{Name: "test", DriverID: 7, Absent: []uint16{42}, Methods: []*m.Method{{
		Object: 1, ID: 2, Name: "T/M",
		Attrs: []m.AttrSpec{
			{ID: 0, Name: "ENUM", Kind: m.EnumIn, EnumElems: 2, Mandatory: true},
			{ID: 1, Name: "ABSENT", Kind: m.IDR, ObjType: 42, Access: m.Read},
			{ID: 2, Name: "A", Kind: m.PtrIn, MinLen: 8, Len: 8},
			{ID: 3, Name: "B", Kind: m.PtrIn, MinLen: 4, Len: 4},
			{ID: 4, Name: "LIST", Kind: m.PtrIn, MinLen: 2, Len: 0xFFFF, AllocAndCopy: true, ElemSize: 2, MaxElems: 3},
			{ID: 5, Name: "SIGNED", Kind: m.PtrIn, MinLen: 8, Len: 8, Const: &m.ConstRule{Signed: true, Min: -5, Max: 5}},
			{ID: 6, Name: "ANY", Kind: m.IDR, ObjType: m.AnyObject, Access: m.Write},
		},
		Exclusive: [][2]uint16{{2, 3}},
	}}}
	env := &m.Env{Objects: map[uint32]uint16{9: 77}, FDs: map[int64]uint16{}}
	enum := func(elem, res uint8) m.Attr {
		return m.Attr{ID: 0, Len: 0, Flags: m.FlagMandatory, AttrData: uint16(elem) | uint16(res)<<8}
	}
	for _, tc := range []struct {
		name  string
		attrs []m.Attr
		want  unix.Errno
	}{
		{"enum ok", []m.Attr{enum(1, 0)}, 0},
		{"enum element out of range", []m.Attr{enum(2, 0)}, unix.EOPNOTSUPP},
		{"enum reserved byte", []m.Attr{enum(0, 1)}, unix.EINVAL},
		{"absent object type", []m.Attr{enum(0, 0), {ID: 1, Data: 9}}, unix.EINVAL},
		{"exclusive pair", []m.Attr{enum(0, 0), {ID: 2, Len: 8}, {ID: 3, Len: 4}}, unix.EINVAL},
		{"one of the pair", []m.Attr{enum(0, 0), {ID: 3, Len: 4}}, 0},
		{"list of 3", []m.Attr{enum(0, 0), {ID: 4, Len: 6, Data: 0x0003_0002_0001}}, 0},
		{"list odd length", []m.Attr{enum(0, 0), {ID: 4, Len: 5}}, unix.EINVAL},
		{"list too long", []m.Attr{enum(0, 0), {ID: 4, Len: 10, Buf: make([]byte, 10)}}, unix.EINVAL},
		{"list unreadable", []m.Attr{enum(0, 0), {ID: 4, Len: 10, Data: 8}}, unix.EFAULT},
		{"signed const in range", []m.Attr{enum(0, 0), {ID: 5, Len: 8, Data: uint64(^uint64(3))}}, 0},
		{"signed const below", []m.Attr{enum(0, 0), {ID: 5, Len: 8, Data: uint64(^uint64(9))}}, unix.EINVAL},
		{"signed const above", []m.Attr{enum(0, 0), {ID: 5, Len: 8, Data: 6}}, unix.EINVAL},
		{"any object", []m.Attr{enum(0, 0), {ID: 6, Data: 9}}, 0},
		{"any object missing", []m.Attr{enum(0, 0), {ID: 6, Data: 8}}, unix.ENOENT},
	} {
		c := m.Cmd{Object: 1, Method: 2, DriverID: 7, Attrs: tc.attrs}
		if v := api.Check(env, &c); v.Errno != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, v, errName(tc.want))
		}
	}
	c := m.Cmd{Object: 1, Method: 2, DriverID: 7, Attrs: []m.Attr{enum(0, 0)}, NumAttrs: 2, NumAttrsSet: true, Length: 24 + 32, LengthSet: true}
	if v := api.Check(env, &c); v.Errno != unix.EFAULT {
		t.Errorf("num_attrs beyond the attributes given: %v", v)
	}
}
