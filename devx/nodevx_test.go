package devx

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/pureverbs/pureverbs/abi"
	"github.com/pureverbs/pureverbs/internal/core"
	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/uverbs"
)

// There is no mlx5 device here, so these tests give devx, through its
// sharedOf seam, the shared state of a context of a given driver, with or
// without a DEVX uid, whose Exec builds the command as the real one would
// and stops there: it records the object and method and fails with
// errFakeKernel. What reaches Exec is what a real context would send.

var errFakeKernel = errors.New("fake kernel: not sent")

type fakeCtx struct {
	c      *uverbs.Context
	sh     *core.Shared
	closed bool
	sent   []string // "object/method" ids of the commands built
}

// fakeContext installs, for the length of the test, a context of the
// driver with (devx) or without a DEVX uid.
func fakeContext(t *testing.T, driverID uint32, devx bool) *fakeCtx {
	t.Helper()
	f := &fakeCtx{c: new(uverbs.Context)}
	f.sh = &core.Shared{
		DriverID: driverID,
		DEVX:     devx,
		Closed:   func() bool { return f.closed },
		Exec: func(object, method string, build, read func(*sys.Ioctl)) error {
			cmd := sys.NewIoctl()
			build(cmd)
			if err := cmd.BuildErr(); err != nil {
				t.Errorf("%s %s: command not built: %v", object, method, err)
			}
			if cmd.DriverID() != driverID {
				t.Errorf("%s %s: driver id %d in the header, want %d", object, method, cmd.DriverID(), driverID)
			}
			f.sent = append(f.sent, ids(cmd.Object(), cmd.Method()))
			return &uverbs.OpError{Object: object, Method: method, Err: errFakeKernel}
		},
		OnClose: func(func()) (func(), error) { return func() {}, nil },
	}
	old := sharedOf
	sharedOf = func(x any) (*core.Shared, bool) {
		if x == any(f.c) {
			return f.sh, true
		}
		return old(x)
	}
	t.Cleanup(func() { sharedOf = old })
	return f
}

func ids(object, method uint16) string { return fmt.Sprintf("%#x/%#x", object, method) }

// prmCmd returns a 64-byte PRM command with the given opcode.
func prmCmd(op uint16) []byte {
	in := make([]byte, 64)
	binary.BigEndian.PutUint16(in, op)
	return in
}

type devxCall struct {
	name string
	want string // object/method ids of the command, when it is sent
	call func() error
}

// uidFreeCalls are the calls whose kernel handlers need no DEVX uid.
func uidFreeCalls(f *fakeCtx) []devxCall {
	out := make([]byte, 256)
	return []devxCall{
		{"GeneralCmd(QUERY_HCA_CAP)", ids(objDevx, mOther), func() error { return GeneralCmd(f.c, prmCmd(0x100), out) }},
		{"GeneralCmd(QUERY_HCA_VPORT_CONTEXT)", ids(objDevx, mOther), func() error { return GeneralCmd(f.c, prmCmd(0x762), out) }},
		{"GeneralCmd(QUERY_ESW_VPORT_CONTEXT)", ids(objDevx, mOther), func() error { return GeneralCmd(f.c, prmCmd(0x752), out) }},
		{"GeneralCmd(QUERY_ESW_FUNCTIONS)", ids(objDevx, mOther), func() error { return GeneralCmd(f.c, prmCmd(0x740), out) }},
		{"GeneralCmd(QUERY_HCA_CAP, op_mod 1, 16 bytes)", ids(objDevx, mOther), func() error {
			in := prmCmd(0x100)[:16]
			in[7] = 1 // op_mod
			return GeneralCmd(f.c, in, out[:16])
		}},
		{"QueryEQN", ids(objDevx, mQueryEQN), func() error { return second(QueryEQN(f.c, 0)) }},
		{"QueryUAR", ids(objDevx, mQueryUAR), func() error { return second(QueryUAR(f.c, 1)) }},
		{"NewCmdComp", ids(objCmdFD, mAlloc), func() error { return second(NewCmdComp(f.c)) }},
		{"NewEventChannel", ids(objEventFD, mAlloc), func() error { return second(NewEventChannel(f.c, 0)) }},
		{"NewEventChannel(OmitData)", ids(objEventFD, mAlloc), func() error { return second(NewEventChannel(f.c, OmitData)) }},
		{"Obj.Destroy", ids(objObj, mDestroy), func() error { return (&Obj{ctx: f.c, handle: 1}).Destroy() }},
		{"Umem.Dereg", ids(objUmem, mUmemDereg), func() error { return (&Umem{ctx: f.c, handle: 2}).Dereg() }},
	}
}

// uidCalls are the calls whose kernel handlers refuse a context without a
// DEVX uid.
func uidCalls(t *testing.T, f *fakeCtx) []devxCall {
	in, out := prmCmd(0x400), make([]byte, 256) // CREATE_CQ
	obj := &Obj{ctx: f.c, handle: 1}
	ch, _ := seqChannel(t, false)
	ch.ctx = f.c
	cc, _ := seqCmdComp(t)
	cc.ctx = f.c
	return []devxCall{
		{"CreateObj", ids(objObj, mCreate), func() error { return second(CreateObj(f.c, in, out)) }},
		{"Obj.Query", ids(objObj, mQuery), func() error { return obj.Query(prmCmd(0x402), out) }},
		{"Obj.Modify", ids(objObj, mModify), func() error { return obj.Modify(prmCmd(0x403), out) }},
		{"Obj.QueryAsync", ids(objObj, mQueryAsync), func() error { return obj.QueryAsync(prmCmd(0x402), 64, 9, cc) }},
		{"RegUmem", ids(objUmem, mUmemReg), func() error {
			return second(RegUmem(f.c, make([]byte, 4096), uverbs.AccessLocalWrite, nil))
		}},
		{"Subscribe", ids(objDevx, mSubscribe), func() error { return Subscribe(ch, nil, []uint16{1}, 7) }},
		{"Subscribe(obj)", ids(objDevx, mSubscribe), func() error { return Subscribe(ch, obj, []uint16{0}, 7) }},
		{"SubscribeFd", ids(objDevx, mSubscribe), func() error { return SubscribeFd(ch, 0, nil, 1) }},
		// General commands outside devx_is_whitelist_cmd, including
		// ones devx_is_general_cmd would run with a uid.
		{"GeneralCmd(QUERY_VPORT_STATE)", ids(objDevx, mOther), func() error { return GeneralCmd(f.c, prmCmd(0x750), out) }},
		{"GeneralCmd(QUERY_ADAPTER)", ids(objDevx, mOther), func() error { return GeneralCmd(f.c, prmCmd(0x101), out) }},
		{"GeneralCmd(NOP)", ids(objDevx, mOther), func() error { return GeneralCmd(f.c, prmCmd(0x10d), out) }},
		{"GeneralCmd(CREATE_CQ)", ids(objDevx, mOther), func() error { return GeneralCmd(f.c, in, out) }},
		{"GeneralCmd(opcode 0)", ids(objDevx, mOther), func() error { return GeneralCmd(f.c, prmCmd(0), out) }},
		// QUERY_HCA_CAP's opcode in the wrong byte order is another command.
		{"GeneralCmd(0x0001)", ids(objDevx, mOther), func() error { return GeneralCmd(f.c, prmCmd(0x0001), out) }},
	}
}

// sentOnce checks that call reached the send step once, with the command
// want, and nothing else.
func sentOnce(t *testing.T, f *fakeCtx, c devxCall) {
	t.Helper()
	f.sent = nil
	before := execs.Load()
	err := c.call()
	if !errors.Is(err, errFakeKernel) {
		t.Errorf("%s: %v, want the fake kernel's error (the command sent)", c.name, err)
	}
	if n := execs.Load() - before; n != 1 {
		t.Errorf("%s: %d commands handed to the kernel, want 1", c.name, n)
	}
	if len(f.sent) != 1 || f.sent[0] != c.want {
		t.Errorf("%s: built %v, want [%s]", c.name, f.sent, c.want)
	}
}

// TestNoDEVXUidFreeCallsSent: on an mlx5 context without DEVX the calls
// the kernel serves without a DEVX uid (devx_is_whitelist_cmd's commands
// through DEVX_OTHER, QUERY_EQN, QUERY_UAR, the async cmd and event fd
// allocations, the destroys) reach the send step, each with its command.
func TestNoDEVXUidFreeCallsSent(t *testing.T) {
	f := fakeContext(t, abi.RDMA_DRIVER_MLX5, false)
	for _, c := range uidFreeCalls(f) {
		sentOnce(t, f, c)
	}
}

// TestNoDEVXUidCallsRefused: on an mlx5 context without DEVX the calls
// whose kernel handlers need a DEVX uid fail with ErrNotSupported saying
// the context was opened without DEVX, nothing sent; Available reports
// the same refusal.
func TestNoDEVXUidCallsRefused(t *testing.T) {
	f := fakeContext(t, abi.RDMA_DRIVER_MLX5, false)
	calls := append(uidCalls(t, f), devxCall{name: "Available", call: func() error { return Available(f.c) }})
	before := execs.Load()
	for _, c := range calls {
		err := c.call()
		var oe *uverbs.OpError
		switch {
		case !errors.Is(err, uverbs.ErrNotSupported):
			t.Errorf("%s: %v, want ErrNotSupported", c.name, err)
		case !errors.As(err, &oe):
			t.Errorf("%s: %T is not a *uverbs.OpError", c.name, err)
		case !strings.Contains(err.Error(), "was opened without DEVX: open it with devx.Open"):
			t.Errorf("%s: %q does not say the context has no DEVX", c.name, err)
		case strings.HasPrefix(c.name, "GeneralCmd(") && !strings.Contains(err.Error(), "QUERY_HCA_CAP"):
			t.Errorf("%s: %q does not name the commands that run without DEVX", c.name, err)
		}
	}
	if n := execs.Load() - before; n != 0 || len(f.sent) != 0 {
		t.Errorf("%d commands handed to the kernel, built %v", n, f.sent)
	}
	err := GeneralCmd(f.c, prmCmd(0x750), make([]byte, 16))
	if !strings.Contains(fmt.Sprint(err), "opcode 0x750") {
		t.Errorf("GeneralCmd(QUERY_VPORT_STATE): %q does not name the opcode", err)
	}
}

// TestNoDEVXGeneralCmdChecksBuffersFirst: GeneralCmd reads the opcode
// only from a command of valid size: a short or oversized buffer on a
// context without DEVX is an argument error, whatever the opcode.
func TestNoDEVXGeneralCmdChecksBuffersFirst(t *testing.T) {
	f := fakeContext(t, abi.RDMA_DRIVER_MLX5, false)
	before := execs.Load()
	for name, err := range map[string]error{
		"empty command":              GeneralCmd(f.c, nil, make([]byte, 16)),
		"2-byte QUERY_HCA_CAP":       GeneralCmd(f.c, prmCmd(0x100)[:2], make([]byte, 16)),
		"15-byte QUERY_VPORT_STATE":  GeneralCmd(f.c, prmCmd(0x750)[:15], make([]byte, 16)),
		"QUERY_HCA_CAP, no response": GeneralCmd(f.c, prmCmd(0x100), nil),
		"QUERY_HCA_CAP, oversized":   GeneralCmd(f.c, append(prmCmd(0x100), make([]byte, MaxCmdLen)...), make([]byte, 16)),
	} {
		if !errors.Is(err, uverbs.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if n := execs.Load() - before; n != 0 {
		t.Errorf("%d commands handed to the kernel", n)
	}
}

// TestDEVXContextSendsAll: with a DEVX uid every call reaches the send
// step (the refusals above are the missing uid, not the fake), and
// Available reports nil.
func TestDEVXContextSendsAll(t *testing.T) {
	f := fakeContext(t, abi.RDMA_DRIVER_MLX5, true)
	if err := Available(f.c); err != nil {
		t.Errorf("Available: %v", err)
	}
	for _, c := range append(uidFreeCalls(f), uidCalls(t, f)...) {
		sentOnce(t, f, c)
	}
}

// TestNotMlx5OrClosedRefusesAll: the device and closed checks still come
// first for the calls that need no DEVX uid: on a context that is not
// mlx5, or a closed one, nothing is sent.
func TestNotMlx5OrClosedRefusesAll(t *testing.T) {
	rxe := fakeContext(t, abi.RDMA_DRIVER_RXE, false)
	closedMlx5 := fakeContext(t, abi.RDMA_DRIVER_MLX5, true)
	closedMlx5.closed = true
	before := execs.Load()
	for _, c := range append(uidFreeCalls(rxe), uidCalls(t, rxe)...) {
		if err := c.call(); !errors.Is(err, uverbs.ErrNotSupported) || !strings.Contains(fmt.Sprint(err), "DEVX needs an mlx5 device") {
			t.Errorf("%s on rxe: %v, want ErrNotSupported (not mlx5)", c.name, err)
		}
	}
	for _, c := range append(uidFreeCalls(closedMlx5), uidCalls(t, closedMlx5)...) {
		if err := c.call(); !errors.Is(err, uverbs.ErrClosed) {
			t.Errorf("%s on a closed context: %v, want ErrClosed", c.name, err)
		}
	}
	if n := execs.Load() - before; n != 0 || len(rxe.sent)+len(closedMlx5.sent) != 0 {
		t.Errorf("%d commands handed to the kernel", n)
	}
}

// TestUidFreeOpcodes: the gate reads the opcode as the PRM lays it out
// (the first 16 bits, big-endian) and lets through exactly
// devx_is_whitelist_cmd's commands (and QUERY_ESW_FUNCTIONS).
func TestUidFreeOpcodes(t *testing.T) {
	want := map[uint16]bool{0x100: true, 0x762: true, 0x752: true, 0x740: true}
	for op := 0; op <= 0xffff; op++ {
		if got := uidFree(prmCmd(uint16(op))); got != want[uint16(op)] {
			t.Errorf("opcode %#x: uidFree %v", op, got)
		}
	}
	for _, in := range [][]byte{nil, {0x01}, {0x00, 0x01}} {
		if uidFree(in) {
			t.Errorf("% x: uidFree", in)
		}
	}
	if !uidFree([]byte{0x01, 0x00}) || opcode([]byte{0x07, 0x62, 0xff}) != 0x762 {
		t.Error("opcode byte order")
	}
}
