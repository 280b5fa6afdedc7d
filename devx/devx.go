// Package devx drives mlx5 DEVX, the "device executes" interface of
// ConnectX adapters (mlx5dv_devx_*(3)): PRM commands built by the caller
// and passed through the kernel to the device's firmware, DEVX objects,
// user memory registrations (UMEMs), asynchronous commands, and event
// channels with subscriptions (mlx5dv_devx_subscribe_devx_event(3),
// mlx5dv_devx_subscribe_devx_event_fd(3)).
//
// A Context for DEVX comes from Open, which asks the mlx5 kernel driver
// for a DEVX user context (mlx5dv_open_device with
// MLX5DV_CONTEXT_FLAGS_DEVX). It is an ordinary *uverbs.Context: PDs, MRs
// and queries work on it too.
//
// Command buffers are the device's PRM layouts (mlx5_ifc.h): big-endian
// bit fields the caller fills. This package moves them to the device and
// back and does not interpret them, except to check the minimum sizes the
// kernel enforces.
//
// On any device that is not mlx5 (rdma_rxe, siw, ...) every call fails
// with an error matching uverbs.ErrNotSupported that names the device and
// its driver, and nothing is sent to the kernel. An mlx5 context opened
// without DEVX (OpenPreferred's and uverbs.Open's fallback) has no DEVX
// uid: the calls whose kernel handlers need one (CreateObj, Obj.Query,
// Obj.Modify, Obj.QueryAsync, RegUmem, Subscribe, SubscribeFd, and
// GeneralCmd with any command but QUERY_HCA_CAP, QUERY_HCA_VPORT_CONTEXT,
// QUERY_ESW_VPORT_CONTEXT and QUERY_ESW_FUNCTIONS) fail the same way, with
// nothing sent; the others (GeneralCmd with one of those commands,
// QueryEQN, QueryUAR, NewCmdComp, NewEventChannel, Obj.Destroy,
// Umem.Dereg) are sent and the kernel answers. Errors of the kernel are
// *uverbs.OpError values wrapping the errno (errors.Is(err, unix.EINVAL));
// arguments the kernel would refuse are rejected first with
// uverbs.ErrInvalid.
//
// See docs/devx.md for what is proved without ConnectX hardware and how.
package devx

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/pureverbs/pureverbs/abi"
	"github.com/pureverbs/pureverbs/internal/core"
	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/uverbs"
)

// Limits the kernel enforces on DEVX commands.
const (
	// MinCmdIn and MinCmdOut are the smallest command and response
	// buffers: the PRM general command headers (general_obj_in_cmd_hdr,
	// general_obj_out_cmd_hdr).
	MinCmdIn  = 16
	MinCmdOut = 16
	// MaxCmdLen is the largest buffer one ioctl attribute can describe.
	MaxCmdLen = 0xFFFF
	// MaxEvents is the most event numbers one Subscribe may name
	// (the kernel's MAX_NUM_EVENTS).
	MaxEvents = 16
	// MaxEventNum is the largest event number the kernel subscribes to
	// (its MAX_SUPP_EVENT_NUM: the PRM's event types are 8 bits).
	MaxEventNum = 255
)

// Open opens dev with a DEVX user context, as mlx5dv_open_device(3) with
// MLX5DV_CONTEXT_FLAGS_DEVX: libmlx5's GET_CONTEXT request with
// MLX5_IB_ALLOC_UCTX_DEVX, shortened for older kernels as libmlx5 does.
// A device that is not mlx5 fails with an error matching
// uverbs.ErrNotSupported before anything is opened; an mlx5 device whose
// firmware has no DEVX support fails with an error matching both
// uverbs.ErrNotSupported and the kernel's errno. (uverbs.Open and
// OpenPreferred ask for DEVX and fall back to a plain context.)
func Open(dev uverbs.Device) (*uverbs.Context, error) {
	x, err := core.Open(dev, core.OpenOptions{DEVX: true})
	if err != nil {
		return nil, err
	}
	c, ok := x.(*uverbs.Context)
	if !ok {
		return nil, fmt.Errorf("%w: devx: open returned %T", uverbs.ErrInvalid, x)
	}
	return c, nil
}

// OpenPreferred opens dev as ibv_open_device(3) does on mlx5: with a
// DEVX user context when the device grants one, and otherwise with a
// plain one (Available then reports ErrNotSupported); uverbs.Open does
// the same. A device that is not mlx5 is opened as uverbs.Open does.
func OpenPreferred(dev uverbs.Device) (*uverbs.Context, error) {
	x, err := core.Open(dev, core.OpenOptions{DEVX: true, DEVXOptional: true})
	if err != nil {
		return nil, err
	}
	c, ok := x.(*uverbs.Context)
	if !ok {
		return nil, fmt.Errorf("%w: devx: open returned %T", uverbs.ErrInvalid, x)
	}
	return c, nil
}

// OpenByName opens the device with the given ibdev name (e.g. "mlx5_0")
// with a DEVX user context. It finds the device with
// uverbs.DeviceByName, so it may wait up to 5 seconds for RDMA netlink.
func OpenByName(name string) (*uverbs.Context, error) {
	dev, err := uverbs.DeviceByName(name)
	if err != nil {
		return nil, err
	}
	return Open(dev)
}

// Available returns nil when c has a DEVX user context (a DEVX uid), and
// otherwise the error the calls that need one return on c (matching
// uverbs.ErrNotSupported, uverbs.ErrClosed or uverbs.ErrInvalid). On an
// mlx5 context without DEVX the calls the kernel serves without a uid
// (see the package documentation) may still work.
func Available(c *uverbs.Context) error {
	_, err := shared(c, "devx", "check")
	return err
}

// execs counts the commands handed to the kernel (tests check that
// refused calls send none).
var execs atomic.Uint64

// sharedOf is core.Of; host tests replace it to give devx the state of an
// mlx5 context without DEVX, which no device here can provide.
var sharedOf = core.Of

// mlx5Shared returns c's internals once c is known to be an open context
// of an mlx5 device: all that the methods whose kernel handlers need no
// DEVX uid ask for (MLX5_IB_METHOD_DEVX_QUERY_EQN, _QUERY_UAR, the
// ASYNC_CMD_FD and ASYNC_EVENT_FD allocations, the destroys, and OTHER
// with a whitelisted command).
func mlx5Shared(c *uverbs.Context, object, method string) (*core.Shared, error) {
	if c == nil {
		return nil, &uverbs.OpError{Object: object, Method: method, Err: fmt.Errorf("%w: nil *uverbs.Context", uverbs.ErrInvalid)}
	}
	sh, ok := sharedOf(c)
	if !ok {
		return nil, &uverbs.OpError{Object: object, Method: method, Err: fmt.Errorf("%w: context unknown to uverbs", uverbs.ErrInvalid)}
	}
	if sh.Closed() {
		return nil, &uverbs.OpError{Object: object, Method: method, Err: uverbs.ErrClosed}
	}
	if sh.DriverID != abi.RDMA_DRIVER_MLX5 {
		d := c.Device()
		return nil, &uverbs.OpError{Object: object, Method: method, Err: fmt.Errorf(
			"%w: DEVX needs an mlx5 device; %s has driver %q (driver id %d)",
			uverbs.ErrNotSupported, d.Name, d.Driver, sh.DriverID)}
	}
	return sh, nil
}

// shared returns c's internals once c is also known to hold a DEVX uid,
// for the methods whose kernel handlers refuse a context without one
// with a bare EINVAL: devx_get_uid in OBJ_CREATE, OBJ_MODIFY, OBJ_QUERY
// and OBJ_ASYNC_QUERY (no whitelisted command is an object command), and
// the c->devx_uid checks of UMEM_REG and SUBSCRIBE_EVENT.
func shared(c *uverbs.Context, object, method string) (*core.Shared, error) {
	sh, err := mlx5Shared(c, object, method)
	if err != nil {
		return nil, err
	}
	if !sh.DEVX {
		return nil, noDEVX(c, object, method, "")
	}
	return sh, nil
}

// noDEVX is the refusal of a call that needs a DEVX uid on an mlx5
// context without one; why, when not empty, is added to the message.
func noDEVX(c *uverbs.Context, object, method, why string) error {
	d := c.Device()
	return &uverbs.OpError{Object: object, Method: method, Err: fmt.Errorf(
		"%w: %s (driver %q) was opened without DEVX: open it with devx.Open%s",
		uverbs.ErrNotSupported, d.Name, d.Driver, why)}
}

// run sends one DEVX command over sh (from mlx5Shared or shared: the
// device checks come before any argument check, so every call on a
// device that is not mlx5, and every call that needs a DEVX uid on a
// context without one, reports that; GeneralCmd alone checks its buffers
// first, as it needs the command's opcode).
func run(sh *core.Shared, object, method string, build func(cmd *sys.Ioctl, drv uint32), read func(*sys.Ioctl)) error {
	execs.Add(1)
	drv := sh.DriverID
	return sh.Exec(object, method, func(cmd *sys.Ioctl) { build(cmd, drv) }, read)
}

func invalid(object, method, format string, args ...any) error {
	return &uverbs.OpError{Object: object, Method: method, Err: fmt.Errorf("%w: "+format, append([]any{uverbs.ErrInvalid}, args...)...)}
}

func closed(object, method string) error {
	return &uverbs.OpError{Object: object, Method: method, Err: uverbs.ErrClosed}
}

// checkCmd checks a command/response buffer pair against the kernel's
// bounds: a nil out is refused like an empty one.
func checkCmd(object, method string, in, out []byte) error {
	if err := checkCmdIn(object, method, in); err != nil {
		return err
	}
	if len(out) < MinCmdOut || len(out) > MaxCmdLen {
		return invalid(object, method, "response buffer of %d bytes (want %d to %d)", len(out), MinCmdOut, MaxCmdLen)
	}
	return nil
}

// checkCmdIn checks a command buffer alone (QueryAsync's response goes to
// the CmdComp).
func checkCmdIn(object, method string, in []byte) error {
	if len(in) < MinCmdIn || len(in) > MaxCmdLen {
		return invalid(object, method, "command of %d bytes (want %d to %d)", len(in), MinCmdIn, MaxCmdLen)
	}
	return nil
}

// PRM opcodes (mlx5_ifc.h) the kernel runs through GeneralCmd on a
// context without a DEVX uid: devx_is_whitelist_cmd's list, which
// devx_get_uid tags with the device's own uid (devx_whitelist_uid).
const (
	opQueryHCACap          = 0x100 // MLX5_CMD_OP_QUERY_HCA_CAP
	opQueryESWFunctions    = 0x740 // MLX5_CMD_OP_QUERY_ESW_FUNCTIONS
	opQueryESWVportContext = 0x752 // MLX5_CMD_OP_QUERY_ESW_VPORT_CONTEXT
	opQueryHCAVportContext = 0x762 // MLX5_CMD_OP_QUERY_HCA_VPORT_CONTEXT

	whitelistNames = "QUERY_HCA_CAP, QUERY_HCA_VPORT_CONTEXT, QUERY_ESW_VPORT_CONTEXT and QUERY_ESW_FUNCTIONS"
)

// opcode returns a PRM command's opcode: its first 16 bits, big-endian
// (general_obj_in_cmd_hdr.opcode); 0 for a command too short to have one.
func opcode(in []byte) uint16 {
	if len(in) < 2 {
		return 0
	}
	return binary.BigEndian.Uint16(in)
}

// uidFree reports whether the kernel runs the general command in without
// a DEVX uid: devx_get_uid refuses every other command with EINVAL when
// the context has none. The first three are mainline's list;
// QUERY_ESW_FUNCTIONS was added by a 2022 rdma-next patch ("IB/mlx5:
// Support querying eswitch functions from DEVX") that some kernels carry
// and the mainline sources read do not: it is sent, and a kernel without
// it answers EINVAL.
func uidFree(in []byte) bool {
	switch opcode(in) {
	case opQueryHCACap, opQueryHCAVportContext, opQueryESWVportContext, opQueryESWFunctions:
		return true
	}
	return false
}

// GeneralCmd runs a PRM command that creates no object
// (mlx5dv_devx_general_cmd(3)), such as QUERY_HCA_CAP: in is the command,
// out receives the device's response. The kernel refuses commands that
// create, modify or destroy objects here (EINVAL); a firmware error comes
// back as the kernel's errno with the PRM status and syndrome in out.
//
// On an mlx5 context without DEVX the kernel runs only QUERY_HCA_CAP,
// QUERY_HCA_VPORT_CONTEXT and QUERY_ESW_VPORT_CONTEXT (and, on some
// kernels, QUERY_ESW_FUNCTIONS), under the device's own DEVX uid, as
// libmlx5 relies on to read the device's capabilities on every context;
// those are sent (a kernel without that uid answers EOPNOTSUPP, and one
// on firmware without DEVX EPROTONOSUPPORT: both match
// uverbs.ErrNotSupported), and any other command is refused with
// uverbs.ErrNotSupported, nothing sent. Buffer sizes are checked before
// that.
func GeneralCmd(c *uverbs.Context, in, out []byte) error {
	const object, method = "devx", "general_cmd"
	sh, err := mlx5Shared(c, object, method)
	if err != nil {
		return err
	}
	if err := checkCmd(object, method, in, out); err != nil {
		return err
	}
	if !sh.DEVX && !uidFree(in) {
		return noDEVX(c, object, method, fmt.Sprintf(
			" (without it the kernel runs only %s here, not opcode %#x)",
			whitelistNames, opcode(in)))
	}
	return run(sh, object, method, func(cmd *sys.Ioctl, drv uint32) { buildGeneral(cmd, drv, in, out) }, nil)
}

// QueryEQN returns the device EQ number serving completion vector vector
// (mlx5dv_devx_query_eqn(3)), for CQs created with DEVX. The kernel needs
// no DEVX uid for it.
func QueryEQN(c *uverbs.Context, vector uint32) (uint32, error) {
	sh, err := mlx5Shared(c, "devx", "query_eqn")
	if err != nil {
		return 0, err
	}
	eqn := new(uint32)
	err = run(sh, "devx", "query_eqn", func(cmd *sys.Ioctl, drv uint32) { buildQueryEQN(cmd, drv, vector, eqn) }, nil)
	return *eqn, err
}

// QueryUAR returns the device's index of the context's user access
// region page userIdx (MLX5_IB_METHOD_DEVX_QUERY_UAR, which
// mlx5dv_devx_alloc_uar(3) uses for statically allocated UARs). The
// kernel needs no DEVX uid for it.
func QueryUAR(c *uverbs.Context, userIdx uint32) (uint32, error) {
	sh, err := mlx5Shared(c, "devx", "query_uar")
	if err != nil {
		return 0, err
	}
	idx := new(uint32)
	err = run(sh, "devx", "query_uar", func(cmd *sys.Ioctl, drv uint32) { buildQueryUAR(cmd, drv, userIdx, idx) }, nil)
	return *idx, err
}

// life guards an object whose handle or fd travels in commands: uses hold
// it shared for the length of their command, Destroy/Close exclusively,
// so a handle is never sent after the kernel freed it (and maybe reused
// it for a new object).
type life struct {
	rw   sync.RWMutex
	dead bool
}

func (l *life) hold() bool {
	l.rw.RLock()
	if l.dead {
		l.rw.RUnlock()
		return false
	}
	return true
}

func (l *life) release() { l.rw.RUnlock() }

// sameContext reports whether two objects belong to one context.
func sameContext(a, b *uverbs.Context) bool { return a == b }

var errForeign = errors.New("object of another context")
