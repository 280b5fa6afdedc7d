package uverbs

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pureverbs/pureverbs/abi"
	"github.com/pureverbs/pureverbs/internal/core"
	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/internal/testkit/ioctlmodel"
)

// TestMlx5ContextRequest: libmlx5's struct mlx5_ib_alloc_ucontext_req_v2,
// byte for byte, built here from the uapi values on its own.
func TestMlx5ContextRequest(t *testing.T) {
	for _, devx := range []bool{false, true} {
		want := make([]byte, 32)
		binary.LittleEndian.PutUint32(want[0:], 16) // total_num_bfregs
		binary.LittleEndian.PutUint32(want[4:], 4)  // num_low_latency_bfregs
		if devx {
			binary.LittleEndian.PutUint32(want[8:], 1) // flags: MLX5_IB_ALLOC_UCTX_DEVX
		}
		want[16] = 1                                // max_cqe_version: MLX5_CQE_VERSION_V1
		binary.LittleEndian.PutUint64(want[24:], 3) // lib_caps: 4K_UAR | DYN_UAR
		got := sys.AsBytes(mlx5ContextRequest(devx))
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("devx=%v request (-want +got):\n%s", devx, diff)
		}
		// Every length libmlx5 tries passes mlx5_ib_alloc_ucontext's
		// checks, as the v2 request with the flag intact.
		for _, n := range mlx5RequestLens {
			ver, flags, err := mlx5UctxKernelCheck(got[:n])
			if err != nil || ver != 2 || (flags == 1) != devx {
				t.Errorf("devx=%v len %d: kernel model says v%d flags %d %v", devx, n, ver, flags, err)
			}
		}
	}
	if !slicesEqual(mlx5RequestLens[:], []int{32, 24, 16}) {
		t.Errorf("request lengths %v, want libmlx5's 32, 24 (offsetof lib_caps), 16 (offsetof max_cqe_version)", mlx5RequestLens)
	}
}

func slicesEqual(a, b []int) bool { return cmp.Equal(a, b) }

// mlx5UctxKernelCheck is the request check of the kernel's
// mlx5_ib_alloc_ucontext (drivers/infiniband/hw/mlx5/main.c): 8 bytes is
// the v0 request, 16 (offsetof max_cqe_version) or more v2, anything else
// EINVAL; unknown flags, comp_mask and reserved fields EOPNOTSUPP; at
// least one bfreg beyond the low-latency ones.
func mlx5UctxKernelCheck(in []byte) (ver int, flags uint32, err error) {
	switch {
	case len(in) == 8:
		ver = 0
	case len(in) >= 16:
		ver = 2
	default:
		return 0, 0, sys.EINVAL
	}
	var req [32]byte
	copy(req[:], in)
	total := binary.LittleEndian.Uint32(req[0:])
	low := binary.LittleEndian.Uint32(req[4:])
	flags = binary.LittleEndian.Uint32(req[8:])
	if flags&^abi.MLX5_IB_ALLOC_UCTX_DEVX != 0 {
		return ver, flags, sys.EOPNOTSUPP
	}
	if binary.LittleEndian.Uint32(req[12:]) != 0 || req[17] != 0 || binary.LittleEndian.Uint16(req[18:]) != 0 ||
		binary.LittleEndian.Uint32(req[20:]) != 0 {
		return ver, flags, sys.EOPNOTSUPP
	}
	total = (total + 1) &^ 1 // ALIGN(total, MLX5_NON_FP_BFREGS_PER_UAR)
	if low > total-1 {
		return ver, flags, sys.EINVAL
	}
	return ver, flags, nil
}

// TestMlx5GetContextCommand: the GET_CONTEXT command Open builds for mlx5
// passes the kernel validation model at every request length.
func TestMlx5GetContextCommand(t *testing.T) {
	api := ioctlmodel.Mlx5()
	env := &ioctlmodel.Env{}
	for _, n := range mlx5RequestLens {
		cmd := sys.NewIoctl()
		var ncv uint32
		var cs uint64
		resp := new(abi.Mlx5IbAllocUcontextResp)
		buildGetContext(cmd, abi.RDMA_DRIVER_MLX5, &ncv, &cs, sys.AsBytes(mlx5ContextRequest(true))[:n], sys.AsBytes(resp))
		c := ioctlmodel.FromIoctl(cmd)
		if v := api.Check(env, &c); !v.OK() {
			t.Errorf("request of %d bytes: %v\n\t%s", n, v, c.Describe(api))
		}
		if a := c.Attrs[2]; a.ID != abi.UVERBS_ATTR_UHW_IN || int(a.Len) != n || a.Flags != 1 {
			t.Errorf("UHW_IN %+v", a)
		}
		if a := c.Attrs[3]; a.ID != abi.UVERBS_ATTR_UHW_OUT || a.Len != abi.SizeofMlx5IbAllocUcontextResp {
			t.Errorf("UHW_OUT %+v", a)
		}
	}
}

// TestMlx5ContextFallbacks plays the kernel to getContextMlx5: the request
// lengths are tried in libmlx5's order until one is accepted; a DEVX
// request the device refuses at every length is ErrNotSupported wrapping
// the kernel's errno, with no retry without DEVX.
func TestMlx5ContextFallbacks(t *testing.T) {
	defer func(f func(*Context, *sys.Ioctl, []byte, []byte) (bool, error)) { mlx5AllocContext = f }(mlx5AllocContext)
	type call struct {
		N    int
		DEVX bool
	}
	var calls []call
	play := func(accept int, errno sys.Errno) {
		calls = nil
		mlx5AllocContext = func(c *Context, _ *sys.Ioctl, in, out []byte) (bool, error) {
			calls = append(calls, call{len(in), binary.LittleEndian.Uint32(in[8:]) == 1})
			if len(out) != abi.SizeofMlx5IbAllocUcontextResp {
				t.Errorf("response buffer of %d bytes", len(out))
			}
			if len(in) == accept {
				return false, nil
			}
			return false, c.opErr("device", "get_context", errno)
		}
	}
	c := &Context{dev: Device{Name: "mlx5_0", Driver: "mlx5_core"}, driverID: abi.RDMA_DRIVER_MLX5}

	play(24, sys.EINVAL)
	if _, err := c.getContextMlx5(nil, core.OpenOptions{}); err != nil || c.mlx5 == nil || c.mlx5.reqLen != 24 || c.mlx5.devx {
		t.Fatalf("plain open, kernel takes 24 bytes: %v %+v", err, c.mlx5)
	}
	if !cmp.Equal(calls, []call{{32, false}, {24, false}}) {
		t.Errorf("plain open tried %v", calls)
	}

	c.mlx5 = nil
	play(32, 0)
	if _, err := c.getContextMlx5(nil, core.OpenOptions{DEVX: true}); err != nil || !c.mlx5.devx || c.mlx5.reqLen != 32 {
		t.Fatalf("DEVX open: %v %+v", err, c.mlx5)
	}
	sh, _ := core.Of(c)
	if !sh.DEVX || sh.DriverID != abi.RDMA_DRIVER_MLX5 {
		t.Errorf("core.Shared DEVX %v driver %d", sh.DEVX, sh.DriverID)
	}

	c.mlx5 = nil
	play(-1, sys.EINVAL)
	_, err := c.getContextMlx5(nil, core.OpenOptions{DEVX: true})
	if !errors.Is(err, ErrNotSupported) || !errors.Is(err, sys.EINVAL) || !strings.Contains(err.Error(), "mlx5_0") ||
		!strings.Contains(err.Error(), "mlx5_core") || strings.Count(err.Error(), "get_context") != 1 {
		t.Errorf("refused DEVX: %v", err)
	}
	if !cmp.Equal(calls, []call{{32, true}, {24, true}, {16, true}}) || c.mlx5 != nil {
		t.Errorf("refused DEVX tried %v (no retry without DEVX)", calls)
	}

	// DEVX preferred (ibv_open_device): every DEVX length, then the
	// plain request.
	calls = nil
	mlx5AllocContext = func(c *Context, _ *sys.Ioctl, in, out []byte) (bool, error) {
		devx := binary.LittleEndian.Uint32(in[8:]) == 1
		calls = append(calls, call{len(in), devx})
		if !devx {
			return false, nil
		}
		return false, c.opErr("device", "get_context", sys.EINVAL)
	}
	if _, err := c.getContextMlx5(nil, core.OpenOptions{DEVX: true, DEVXOptional: true}); err != nil || c.mlx5 == nil || c.mlx5.devx {
		t.Fatalf("DEVX preferred, refused: %v %+v", err, c.mlx5)
	}
	if !cmp.Equal(calls, []call{{32, true}, {24, true}, {16, true}, {32, false}}) {
		t.Errorf("DEVX preferred tried %v", calls)
	}
	c.mlx5 = nil

	play(-1, sys.EOPNOTSUPP)
	_, err = c.getContextMlx5(nil, core.OpenOptions{})
	if !errors.Is(err, sys.EOPNOTSUPP) || len(calls) != 3 {
		t.Errorf("refused plain open: %v after %v", err, calls)
	}
}

// TestMlx5Provider: CQ, QP, SRQ and AH creation on an mlx5 context is
// refused before anything is sent.
func TestMlx5Provider(t *testing.T) {
	c := &Context{dev: Device{Name: "mlx5_0", Driver: "mlx5_core"}, driverID: abi.RDMA_DRIVER_MLX5}
	for _, obj := range []string{"cq", "qp"} {
		_, err := c.provider(obj)
		var oe *OpError
		if !errors.Is(err, ErrNotSupported) || !errors.As(err, &oe) || oe.Object != obj || !strings.Contains(err.Error(), "mlx5") {
			t.Errorf("%s on mlx5: %v", obj, err)
		}
	}
	var p provider = mlx5Provider{}
	if _, ok := p.(interface{ newSRQ() srqDriver }); ok {
		t.Error("mlx5 provider claims SRQs")
	}
}

// TestOpenDEVXNotMlx5: asking an rxe device for DEVX fails before any fd
// is opened, naming the device and its driver.
func TestOpenDEVXNotMlx5(t *testing.T) {
	dev := Device{Name: "rxe0", Driver: "rdma_rxe", DriverID: abi.RDMA_DRIVER_RXE, DevPath: "/nonexistent/uverbs9"}
	c, err := open(dev, core.OpenOptions{DEVX: true})
	if c != nil || !errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), "rxe0") || !strings.Contains(err.Error(), "rdma_rxe") {
		t.Errorf("DEVX open of rxe: %v %v", c, err)
	}
	if _, err := core.Open("not a device", core.OpenOptions{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("core.Open of a string: %v", err)
	}
}
