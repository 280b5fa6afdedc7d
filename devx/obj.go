package devx

import (
	"math"

	"github.com/pureverbs/pureverbs/internal/core"
	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/uverbs"
)

// Obj is a DEVX object (struct mlx5dv_devx_obj): a device object created
// by a PRM create command, owned by the context and destroyed with it.
type Obj struct {
	ctx    *uverbs.Context
	handle uint32
	life
}

// CreateObj runs the PRM create command in (mlx5dv_devx_obj_create(3)),
// out receiving the device's response (with the new object's id), and
// returns the object. The kernel accepts only commands that create an
// object it knows how to destroy, on a context with DEVX.
func CreateObj(c *uverbs.Context, in, out []byte) (*Obj, error) {
	const object, method = "devx_obj", "create"
	sh, err := shared(c, object, method)
	if err != nil {
		return nil, err
	}
	if err := checkCmd(object, method, in, out); err != nil {
		return nil, err
	}
	o := &Obj{ctx: c}
	var h sys.Attr
	err = run(sh, object, method,
		func(cmd *sys.Ioctl, drv uint32) { h = buildObjCreate(cmd, drv, in, out) },
		func(cmd *sys.Ioctl) { o.handle = cmd.Handle(h) })
	if err != nil {
		return nil, err
	}
	return o, nil
}

// Handle returns the kernel's handle of the object (0 for a nil *Obj).
func (o *Obj) Handle() uint32 {
	if o == nil {
		return 0
	}
	return o.handle
}

// Context returns the context the object was created on (nil for a nil
// *Obj).
func (o *Obj) Context() *uverbs.Context {
	if o == nil {
		return nil
	}
	return o.ctx
}

// use checks the device and the DEVX uid (the kernel's OBJ_QUERY,
// OBJ_MODIFY and OBJ_ASYNC_QUERY refuse a context without one), then
// holds the object for one command.
func (o *Obj) use(method string) (*core.Shared, error) {
	if o == nil || o.ctx == nil {
		return nil, invalid("devx_obj", method, "nil *devx.Obj")
	}
	sh, err := shared(o.ctx, "devx_obj", method)
	if err != nil {
		return nil, err
	}
	if !o.hold() {
		return nil, closed("devx_obj", method)
	}
	return sh, nil
}

// Query runs the PRM query command in on the object
// (mlx5dv_devx_obj_query(3)); out receives the response.
func (o *Obj) Query(in, out []byte) error {
	const method = "query"
	sh, err := o.use(method)
	if err != nil {
		return err
	}
	defer o.release()
	if err := checkCmd("devx_obj", method, in, out); err != nil {
		return err
	}
	return run(sh, "devx_obj", method, func(cmd *sys.Ioctl, drv uint32) { buildObjQuery(cmd, drv, o.handle, in, out) }, nil)
}

// Modify runs the PRM modify command in on the object
// (mlx5dv_devx_obj_modify(3)); out receives the response.
func (o *Obj) Modify(in, out []byte) error {
	const method = "modify"
	sh, err := o.use(method)
	if err != nil {
		return err
	}
	defer o.release()
	if err := checkCmd("devx_obj", method, in, out); err != nil {
		return err
	}
	return run(sh, "devx_obj", method, func(cmd *sys.Ioctl, drv uint32) { buildObjModify(cmd, drv, o.handle, in, out) }, nil)
}

// Destroy destroys the object (mlx5dv_devx_obj_destroy(3)) once the
// commands in flight on it are done. A refusal of the kernel (EBUSY while
// other objects use it) leaves it usable; a destroyed object returns
// errors matching uverbs.ErrClosed. The kernel runs the destroy command
// it stored at creation and needs no DEVX uid for it.
func (o *Obj) Destroy() error {
	const method = "destroy"
	if o == nil || o.ctx == nil {
		return invalid("devx_obj", method, "nil *devx.Obj")
	}
	sh, err := mlx5Shared(o.ctx, "devx_obj", method)
	if err != nil {
		return err
	}
	o.rw.Lock()
	defer o.rw.Unlock()
	if o.dead {
		return closed("devx_obj", method)
	}
	err = run(sh, "devx_obj", method, func(cmd *sys.Ioctl, drv uint32) { buildObjDestroy(cmd, drv, o.handle) }, nil)
	if err == nil || isClosed(err) {
		o.dead = true
	}
	return err
}

// QueryAsync starts the PRM query command in on the object without
// waiting for the device (mlx5dv_devx_obj_query_async(3)): the response,
// outLen bytes (1 to 65535), arrives on cc with wrID (CmdComp.Get).
func (o *Obj) QueryAsync(in []byte, outLen int, wrID uint64, cc *CmdComp) error {
	const method = "query_async"
	sh, err := o.use(method)
	if err != nil {
		return err
	}
	defer o.release()
	if err := checkCmdIn("devx_obj", method, in); err != nil {
		return err
	}
	if outLen <= 0 || outLen > math.MaxUint16 {
		return invalid("devx_obj", method, "response length %d (want 1 to 65535)", outLen)
	}
	if cc == nil || cc.r == nil {
		return invalid("devx_obj", method, "nil *devx.CmdComp")
	}
	if !sameContext(o.ctx, cc.ctx) {
		return invalid("devx_obj", method, "%v", errForeign)
	}
	if !cc.hold() {
		return closed("devx_cmd_comp", method)
	}
	defer cc.release()
	return run(sh, "devx_obj", method, func(cmd *sys.Ioctl, drv uint32) {
		buildObjQueryAsync(cmd, drv, o.handle, in, uint16(outLen), wrID, cc.r.Fd())
	}, nil)
}

// Umem is user memory registered for the device (struct
// mlx5dv_devx_umem): DEVX objects name it by ID.
type Umem struct {
	ctx    *uverbs.Context
	handle uint32
	id     uint32
	buf    []byte // kept reachable while registered
	life
}

// DefaultPageSizes is the page-size bitmap mlx5dv_devx_umem_reg(3) sends:
// every power of two from 4 KiB (MLX5_ADAPTER_PAGE_SIZE) up.
const DefaultPageSizes = ^uint64(4096 - 1)

// UmemOptions are the extended registration arguments
// (mlx5dv_devx_umem_reg_ex(3)).
type UmemOptions struct {
	// PageSizes is the bitmap of page sizes the device may map the
	// memory with; it bounds the alignment of objects placed in it.
	PageSizes uint64
}

// RegUmem registers buf (mlx5dv_devx_umem_reg(3); with opts,
// mlx5dv_devx_umem_reg_ex(3)) for device access with the given rights
// (uverbs.AccessLocalWrite, AccessRemoteWrite, AccessRemoteRead; the
// kernel allows no others). buf stays referenced until Dereg; memory from
// uverbs.AllocBuffer keeps it out of the Go heap. Without opts the page
// sizes are DefaultPageSizes, sent as an optional attribute older kernels
// ignore. It needs a context with DEVX: the kernel refuses any other.
func RegUmem(c *uverbs.Context, buf []byte, access uverbs.Access, opts *UmemOptions) (*Umem, error) {
	const object, method = "devx_umem", "reg"
	sh, err := shared(c, object, method)
	if err != nil {
		return nil, err
	}
	if len(buf) == 0 {
		return nil, invalid(object, method, "empty buffer")
	}
	const allowed = uverbs.AccessLocalWrite | uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead
	if access&^allowed != 0 {
		return nil, invalid(object, method, "access %#x beyond local write, remote write and remote read", uint32(access))
	}
	pgsz, legacy := DefaultPageSizes, true
	if opts != nil {
		if opts.PageSizes == 0 {
			return nil, invalid(object, method, "no page size allowed")
		}
		pgsz, legacy = opts.PageSizes, false
	}
	u := &Umem{ctx: c, buf: buf}
	outID := new(uint32)
	var h sys.Attr
	err = run(sh, object, method, func(cmd *sys.Ioctl, drv uint32) {
		h = buildUmemReg(cmd, drv, sys.SliceAddr(buf), uint64(len(buf)), uint32(access), pgsz, legacy, outID)
	}, func(cmd *sys.Ioctl) { u.handle = cmd.Handle(h) })
	if err != nil {
		return nil, err
	}
	u.id = *outID
	return u, nil
}

// ID returns the device's id of the umem (umem_id), which PRM commands
// name (0 for a nil *Umem).
func (u *Umem) ID() uint32 {
	if u == nil {
		return 0
	}
	return u.id
}

// Handle returns the kernel's handle of the registration (0 for a nil
// *Umem).
func (u *Umem) Handle() uint32 {
	if u == nil {
		return 0
	}
	return u.handle
}

// Dereg deregisters the memory (mlx5dv_devx_umem_dereg(3)); the kernel
// refuses (EBUSY) while DEVX objects use it, leaving it registered. As
// for Obj.Destroy, the kernel needs no DEVX uid for it.
func (u *Umem) Dereg() error {
	const method = "dereg"
	if u == nil || u.ctx == nil {
		return invalid("devx_umem", method, "nil *devx.Umem")
	}
	sh, err := mlx5Shared(u.ctx, "devx_umem", method)
	if err != nil {
		return err
	}
	u.rw.Lock()
	defer u.rw.Unlock()
	if u.dead {
		return closed("devx_umem", method)
	}
	err = run(sh, "devx_umem", method, func(cmd *sys.Ioctl, drv uint32) { buildUmemDereg(cmd, drv, u.handle) }, nil)
	if err == nil || isClosed(err) {
		u.dead = true
		u.buf = nil
	}
	return err
}
