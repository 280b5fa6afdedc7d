package uverbs

import (
	"errors"
	"fmt"

	"github.com/pureverbs/pureverbs/abi"
	"github.com/pureverbs/pureverbs/internal/core"
	"github.com/pureverbs/pureverbs/internal/sys"
)

// The mlx5 provider: the GET_CONTEXT request libmlx5 sends (with or
// without DEVX) and a provider that creates no queues yet. The mlx5 data
// path (user-allocated CQ/QP buffers, doorbell records, UAR mappings) is
// not implemented: CQ, QP, SRQ and AH creation report ErrNotSupported
// before anything reaches the kernel, while PDs, MRs, queries and the
// DEVX commands of package devx work.

// mlx5State is what an mlx5 Context keeps of its GET_CONTEXT exchange.
type mlx5State struct {
	devx   bool // the kernel allocated a DEVX uid for the context
	reqLen int  // the request length the kernel accepted
	resp   abi.Mlx5IbAllocUcontextResp
}

// libmlx5's request values (providers/mlx5/mlx5.c mlx5_alloc_context with
// no environment overrides).
const (
	// get_total_uuars: MLX5_DEF_TOT_UUARS (8 * MLX5_NUM_NON_FP_BFREGS_PER_UAR),
	// at least one UAR page's worth (2 with 4 KiB pages), aligned to 2.
	mlx5TotalBfregs = 16
	// get_num_low_lat_uuars: max(4, total - MLX5_MED_BFREGS_TSHOLD (12)).
	mlx5LowLatencyBfregs = 4
	// MLX5_CQE_VERSION_V1.
	mlx5CQEVersion = 1
)

// mlx5RequestLens are the UHW_IN lengths libmlx5's mlx5_cmd_get_context
// tries in turn, because older kernels refuse a request longer than the
// struct they know: the whole mlx5_ib_alloc_ucontext_req_v2, then up to
// lib_caps, then up to max_cqe_version. (The kernel takes 8 bytes as the
// v0 request and 16 or more as v2.)
var mlx5RequestLens = [...]int{abi.SizeofMlx5IbAllocUcontextReqV2, 24, 16}

// mlx5ContextRequest returns libmlx5's request, with
// MLX5_IB_ALLOC_UCTX_DEVX when devx is set.
func mlx5ContextRequest(devx bool) *abi.Mlx5IbAllocUcontextReqV2 {
	req := &abi.Mlx5IbAllocUcontextReqV2{
		TotalNumBfregs:      mlx5TotalBfregs,
		NumLowLatencyBfregs: mlx5LowLatencyBfregs,
		MaxCqeVersion:       mlx5CQEVersion,
		LibCaps:             abi.MLX5_LIB_CAP_4K_UAR | abi.MLX5_LIB_CAP_DYN_UAR,
	}
	if devx {
		req.Flags = abi.MLX5_IB_ALLOC_UCTX_DEVX
	}
	return req
}

// mlx5AllocContext is allocContext; tests replace it to play the kernel.
var mlx5AllocContext = (*Context).allocContext

// getContextMlx5 allocates an mlx5 user context with libmlx5's request and
// its fallbacks to shorter requests. With o.DEVX the request carries
// MLX5_IB_ALLOC_UCTX_DEVX and, as mlx5dv_open_device with
// MLX5DV_CONTEXT_FLAGS_DEVX does, there is no fallback without it: a
// refusal is an error matching ErrNotSupported and the kernel's errno.
// With o.DEVXOptional as well, a refusal is followed by the plain request
// (ibv_open_device's behaviour on mlx5).
func (c *Context) getContextMlx5(cmd *sys.Ioctl, o core.OpenOptions) (viaWrite bool, err error) {
	viaWrite, err = c.getContextMlx5Req(cmd, o.DEVX)
	if err != nil && o.DEVX && o.DEVXOptional && !errors.Is(err, ErrClosed) {
		return c.getContextMlx5Req(cmd, false)
	}
	return viaWrite, err
}

func (c *Context) getContextMlx5Req(cmd *sys.Ioctl, devx bool) (viaWrite bool, err error) {
	o := core.OpenOptions{DEVX: devx}
	req := mlx5ContextRequest(o.DEVX)
	st := new(mlx5State)
	in := sys.AsBytes(req)
	var first error
	for _, n := range mlx5RequestLens {
		st.resp = abi.Mlx5IbAllocUcontextResp{}
		viaWrite, err = mlx5AllocContext(c, cmd, in[:n], sys.AsBytes(&st.resp))
		if err == nil {
			st.devx, st.reqLen = o.DEVX, n
			c.mlx5 = st
			return viaWrite, nil
		}
		if first == nil {
			first = err
		}
		if errors.Is(err, ErrClosed) {
			break
		}
	}
	if o.DEVX {
		cause := first
		var oe *OpError
		if errors.As(first, &oe) {
			cause = oe.Err
		}
		return false, &OpError{Object: "device", Method: "get_context", Err: fmt.Errorf(
			"%w: %s (driver %s) refused a DEVX user context (the firmware must report log_max_uctx): %w",
			ErrNotSupported, c.dev.Name, c.dev.Driver, cause)}
	}
	return false, first
}

// mlx5Provider is the mlx5 provider without a data path.
type mlx5Provider struct{}

func (mlx5Provider) name() string           { return "mlx5" }
func (mlx5Provider) newCQ() (*CQ, cqDriver) { return nil, nil }
func (mlx5Provider) newQP() (*QP, qpDriver) { return nil, nil }

// qpCreateFlags: QPs are refused before this matters (unsupported).
func (mlx5Provider) qpCreateFlags() QPCreateFlags { return 0 }

// unsupported refuses every object that needs the mlx5 data path.
func (mlx5Provider) unsupported(object string) error {
	return fmt.Errorf("%w: the mlx5 %s data path is not implemented (PDs, MRs, queries and DEVX commands work; see docs/devx.md)",
		ErrNotSupported, object)
}
