package uverbs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/pureverbs/pureverbs/abi"
	"github.com/pureverbs/pureverbs/internal/core"
	"github.com/pureverbs/pureverbs/internal/sys"
)

// Context is an opened RDMA device: the uverbs command fd, the kernel user
// context allocated on it, and the device's asynchronous event file.
// It corresponds to struct ibv_context (ibv_open_device(3)).
//
// A Context is safe for concurrent use. Close releases everything it owns.
type Context struct {
	dev      Device
	cmd      *sys.FD
	asyncRaw int // the async event fd's number, for EVENT_FD attributes
	// The async event fd is registered with the runtime poller only when
	// someone reads it (asyncFile): a Context whose events nobody reads
	// pays no fcntl and epoll_ctl calls on open and close.
	asyncMu  sync.Mutex
	asyncFD  *sys.FD        // until the first read
	async    *sys.EventFile // from the first read on
	driverID uint32

	numCompVectors int
	coreSupport    uint64
	invokeWrite    bool // the kernel has the INVOKE_WRITE ioctl bridge

	// Command buffers: one cached in cmd1 (an atomic swap to take, a
	// compare-and-swap to return), the rest, for concurrent commands, in
	// the package's cmdPool. sync.Pool alone costs about 0.35 us per
	// command under QEMU's TCG, 4 % of a QUERY_PORT. Close returns cmd1's
	// buffer to cmdPool, so opening a context allocates none.
	cmd1 atomic.Pointer[sys.Ioctl]

	mlx5 *mlx5State // mlx5 devices: the GET_CONTEXT exchange (mlx5.go)

	mu      sync.Mutex
	closed  bool
	reg     core.Registry[Affiliated] // user handle -> live affiliated object
	chans   map[*CompChannel]struct{} // open completion channels (under mu)
	onClose map[uint64]func()         // sibling packages' close hooks (under mu)
	hookSeq uint64
}

// addChannel records an open completion channel so Close can close it.
func (c *Context) addChannel(ch *CompChannel) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return closedErr("comp_channel", "create")
	}
	if c.chans == nil {
		c.chans = map[*CompChannel]struct{}{}
	}
	c.chans[ch] = struct{}{}
	return nil
}

func (c *Context) removeChannel(ch *CompChannel) {
	c.mu.Lock()
	delete(c.chans, ch)
	c.mu.Unlock()
}

func init() {
	core.SetAccessor(func(x any) (*core.Shared, bool) {
		c, ok := x.(*Context)
		if !ok || c == nil {
			return nil, false
		}
		return &core.Shared{AsyncFile: c.asyncFile, Objects: &c.reg, Closed: c.Closed,
			DriverID: c.driverID, DEVX: c.mlx5 != nil && c.mlx5.devx,
			Exec: c.execIoctl, OnClose: c.addOnClose}, true
	})
	core.SetOpener(func(dev any, o core.OpenOptions) (any, error) {
		d, ok := dev.(Device)
		if !ok {
			return nil, fmt.Errorf("%w: open of a %T", ErrInvalid, dev)
		}
		return open(d, o)
	})
}

// execIoctl runs one ioctl for a sibling package (core.Shared.Exec).
func (c *Context) execIoctl(object, method string, build, read func(*sys.Ioctl)) error {
	cmd := c.get()
	defer c.put(cmd)
	build(cmd)
	if err := cmd.Exec(c.cmd); err != nil {
		return c.opErr(object, method, err)
	}
	if read != nil {
		read(cmd)
	}
	return nil
}

// addOnClose registers a sibling package's close hook (core.Shared.OnClose).
func (c *Context) addOnClose(f func()) (func(), error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, closedErr("context", "register")
	}
	if c.onClose == nil {
		c.onClose = map[uint64]func(){}
	}
	c.hookSeq++
	id := c.hookSeq
	c.onClose[id] = f
	return func() {
		c.mu.Lock()
		delete(c.onClose, id)
		c.mu.Unlock()
	}, nil
}

// driverIDFor returns the RDMA_DRIVER_* id to put in every ioctl header.
// The kernel rejects (EINVAL) an ioctl whose driver id differs from the
// device's, so a device whose driver this library cannot identify is sent
// RDMA_DRIVER_UNKNOWN and Open reports ErrNotSupported if the kernel
// refuses it.
func driverIDFor(d Device) uint32 {
	if d.DriverID != 0 {
		return d.DriverID
	}
	switch d.Driver {
	case "rxe", "rdma_rxe":
		return abi.RDMA_DRIVER_RXE
	case "mlx5", "mlx5_core", "mlx5_ib":
		return abi.RDMA_DRIVER_MLX5
	case "siw":
		return abi.RDMA_DRIVER_SIW
	}
	return abi.RDMA_DRIVER_UNKNOWN
}

// OpenByName opens the device with the given ibdev name (e.g. "rxe0"):
// DeviceByName, then Open (ibv_open_device(3)). Like DeviceByName it may
// wait up to 5 seconds for RDMA netlink.
func OpenByName(name string) (*Context, error) {
	d, err := DeviceByName(name)
	if err != nil {
		return nil, err
	}
	return Open(d)
}

// Open opens dev (ibv_open_device(3)): it opens the uverbs character
// device O_RDWR|O_CLOEXEC, allocates the kernel user context over the
// ioctl interface (DEVICE/GET_CONTEXT) and the asynchronous event fd
// (ASYNC_EVENT/ALLOC). Kernels without the ioctl interface get the write()
// GET_CONTEXT, which creates the async fd itself. An mlx5 device gets
// libmlx5's GET_CONTEXT request, asking for a DEVX user context first
// and, refused that (firmware without DEVX), a plain one, as
// ibv_open_device does (mlx5_alloc_context's always_devx): the devx
// package works on the context in the first case.
func Open(dev Device) (*Context, error) {
	return open(dev, core.OpenOptions{DEVX: true, DEVXOptional: true})
}

func open(dev Device, o core.OpenOptions) (*Context, error) {
	if o.DEVX && o.DEVXOptional && driverIDFor(dev) != abi.RDMA_DRIVER_MLX5 {
		o = core.OpenOptions{}
	}
	if o.DEVX && driverIDFor(dev) != abi.RDMA_DRIVER_MLX5 {
		return nil, &OpError{Object: "device", Method: "open", Err: fmt.Errorf(
			"%w: DEVX needs an mlx5 device; %s has driver %q (driver id %d)",
			ErrNotSupported, dev.Name, dev.Driver, driverIDFor(dev))}
	}
	path := devPath(dev)
	fd, err := sys.Open(path, sys.O_RDWR)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s: %w", ErrNoDevice, dev.Name, err)
		}
		return nil, &OpError{Object: "device", Method: "open", Err: openErr(path, err)}
	}
	c := &Context{dev: dev, cmd: fd, driverID: driverIDFor(dev)}
	if err := c.getContext(o); err != nil {
		fd.Close()
		return nil, err
	}
	return c, nil
}

// devPath is the device node Open opens.
func devPath(dev Device) string {
	if dev.DevPath != "" {
		return dev.DevPath
	}
	return filepath.Join("/dev/infiniband", dev.UverbsName)
}

func (c *Context) getContext(o core.OpenOptions) error {
	cmd := c.get()
	defer c.put(cmd)

	var viaWrite bool
	var err error
	if c.driverID == abi.RDMA_DRIVER_MLX5 {
		viaWrite, err = c.getContextMlx5(cmd, o)
	} else {
		viaWrite, err = c.allocContext(cmd, nil, nil)
	}
	if err != nil || viaWrite {
		return err
	}
	// No probe for INVOKE_WRITE (libibverbs sends one, a QUERY_DEVICE
	// the kernel answers ENOSPC): the kernel just answered the ioctl
	// GET_CONTEXT, which Linux gained after INVOKE_WRITE (method 0 of the
	// device object, Linux 5.0), so it has the bridge. execWrite still
	// falls back to write() if the bridge is missing after all.
	c.invokeWrite = true

	cmd.Reset(abi.UVERBS_OBJECT_ASYNC_EVENT, abi.UVERBS_METHOD_ASYNC_EVENT_ALLOC, c.driverID)
	fa := cmd.FDNew(abi.UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE)
	if err := cmd.Exec(c.cmd); err != nil {
		return c.opErr("async_event", "alloc", err)
	}
	return c.adoptAsync(cmd.NewFDNum(fa))
}

// allocContext sends DEVICE/GET_CONTEXT with the provider's private
// request and response (UHW_IN/UHW_OUT; nil for none), falling back to
// the write() GET_CONTEXT on kernels without ioctl, which also creates
// the async fd (viaWrite).
func (c *Context) allocContext(cmd *sys.Ioctl, in, out []byte) (viaWrite bool, err error) {
	var ncv uint32
	var core uint64
	a0, a1 := buildGetContext(cmd, c.driverID, &ncv, &core, in, out)
	err = cmd.Exec(c.cmd)
	if err == sys.ENOTTY || err == sys.EPROTONOSUPPORT {
		return true, c.getContextWrite(cmd, in, out)
	}
	if err == sys.EINVAL && c.driverID == abi.RDMA_DRIVER_UNKNOWN {
		return false, &OpError{Object: "device", Method: "get_context", Err: fmt.Errorf(
			"%w: %s: driver %q has no RDMA driver id known to this library (the kernel refused RDMA_DRIVER_UNKNOWN): %w",
			ErrNotSupported, c.dev.Name, c.dev.Driver, err)}
	}
	if err != nil {
		return false, c.opErr("device", "get_context", err)
	}
	if cmd.Valid(a0) {
		c.numCompVectors = int(ncv)
	}
	if cmd.Valid(a1) {
		c.coreSupport = core
	}
	return false, nil
}

// buildGetContext builds DEVICE/GET_CONTEXT.
func buildGetContext(cmd *sys.Ioctl, driverID uint32, ncv *uint32, core *uint64, in, out []byte) (a0, a1 sys.Attr) {
	cmd.Reset(abi.UVERBS_OBJECT_DEVICE, abi.UVERBS_METHOD_GET_CONTEXT, driverID)
	a0 = sys.PtrOut(cmd, abi.UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS, ncv, false)
	a1 = sys.PtrOut(cmd, abi.UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT, core, false)
	if len(in) > 0 {
		cmd.BytesIn(abi.UVERBS_ATTR_UHW_IN, in, true)
	}
	if len(out) > 0 {
		cmd.BytesOut(abi.UVERBS_ATTR_UHW_OUT, out, true)
	}
	return a0, a1
}

// getContextWrite is the write() GET_CONTEXT of kernels without ioctl
// support; it returns the async fd directly.
func (c *Context) getContextWrite(cmd *sys.Ioctl, in, out []byte) error {
	// The ioctl's ENOTTY also comes from files that are not uverbs
	// devices at all (a DevPath naming /dev/null or a regular file):
	// write nothing to a file that is not a character device, and take
	// a reply the kernel did not write (the async fd left at its
	// sentinel) as the same mistake, not as async fd 0.
	if chr, err := sys.IsCharDevice(c.cmd); err != nil {
		return c.opErr("device", "get_context", err)
	} else if !chr {
		return c.notVerbs()
	}
	var req abi.IbUverbsGetContext
	resp := abi.IbUverbsGetContextResp{AsyncFd: ^uint32(0)}
	w := sys.WriteCmd{Cmd: abi.IB_USER_VERBS_CMD_GET_CONTEXT, Req: sys.AsBytes(&req), Resp: sys.AsBytes(&resp),
		UdataIn: in, UdataOut: out}
	if err := cmd.LegacyWrite(c.cmd, &w); err != nil {
		return c.opErr("device", "get_context", err)
	}
	if resp.AsyncFd == ^uint32(0) {
		return c.notVerbs()
	}
	c.numCompVectors = int(resp.NumCompVectors)
	return c.adoptAsync(int(resp.AsyncFd))
}

// notVerbs is the error of a device path that is not a uverbs device.
func (c *Context) notVerbs() error {
	return &OpError{Object: "device", Method: "get_context", Err: fmt.Errorf(
		"%w: %s is not an RDMA verbs device (no reply to GET_CONTEXT): %w", ErrInvalid, devPath(c.dev), sys.ENOTTY)}
}

func (c *Context) adoptAsync(raw int) error {
	fd, err := sys.NewFDKind(raw, c.dev.Name, "async events")
	if err != nil {
		return c.opErr("async_event", "alloc", err)
	}
	c.asyncFD, c.asyncRaw = fd, raw
	return nil
}

// asyncFile returns the async event file, registering the fd with the
// runtime poller on first use.
func (c *Context) asyncFile() (*sys.EventFile, error) {
	c.asyncMu.Lock()
	defer c.asyncMu.Unlock()
	if c.async != nil {
		return c.async, nil
	}
	if c.asyncFD == nil || c.Closed() {
		return nil, closedErr("async_event", "read")
	}
	ef, err := sys.NewEventFile(c.asyncFD)
	if err != nil {
		return nil, c.opErr("async_event", "read", err)
	}
	c.async, c.asyncFD = ef, nil
	return ef, nil
}

func (c *Context) get() *sys.Ioctl {
	if i := c.cmd1.Swap(nil); i != nil {
		return i
	}
	return cmdPool.Get().(*sys.Ioctl)
}

// cmdPool holds the command buffers of all contexts (an Ioctl names its
// driver at Reset, so any context may use any buffer).
var cmdPool = sync.Pool{New: func() any { return sys.NewIoctl() }}

// put returns a command buffer to the pool, dropping its references to the
// caller's buffers so the pool does not keep them alive.
func (c *Context) put(i *sys.Ioctl) {
	i.Clear()
	if !c.cmd1.CompareAndSwap(nil, i) {
		cmdPool.Put(i)
	}
}

// errNilContext is returned by the methods of a nil *Context.
var errNilContext = fmt.Errorf("%w: nil *uverbs.Context (use Open)", ErrInvalid)

// opErr wraps err with the object and method that failed, mapping the
// kernel's "not implemented" answers onto ErrNotSupported as well.
func (c *Context) opErr(object, method string, err error) error {
	if err == sys.ErrClosedFD {
		err = ErrClosed
	}
	if err == sys.EOPNOTSUPP || err == sys.ENOSYS || err == sys.EPROTONOSUPPORT {
		err = notSupported{err.(sys.Errno)}
	}
	return &OpError{Object: object, Method: method, Err: err}
}

// notSupported matches both ErrNotSupported and the kernel's errno.
type notSupported struct{ errno sys.Errno }

func (n notSupported) Error() string { return n.errno.Error() + " (not supported)" }
func (n notSupported) Is(t error) bool {
	return t == ErrNotSupported || t == n.errno
}
func (n notSupported) Unwrap() error { return n.errno }

// Device returns the device this context was opened on.
func (c *Context) Device() Device {
	if c == nil {
		return Device{}
	}
	return c.dev
}

// DriverID returns the RDMA_DRIVER_* id sent in every ioctl header.
func (c *Context) DriverID() uint32 {
	if c == nil {
		return 0
	}
	return c.driverID
}

// NumCompVectors returns the number of completion vectors.
func (c *Context) NumCompVectors() int {
	if c == nil {
		return 0
	}
	return c.numCompVectors
}

// execWrite sends a write-ABI command as rdma-core does: through the
// INVOKE_WRITE ioctl when the kernel has it, by write(2) otherwise.
func (c *Context) execWrite(w *sys.WriteCmd, object, method string) error {
	cmd := c.get()
	defer c.put(cmd)
	var err error
	if c.invokeWrite {
		err = cmd.InvokeWrite(c.cmd, c.driverID, w)
		if err == sys.ENOTTY || err == sys.EPROTONOSUPPORT {
			// No INVOKE_WRITE method after all (open assumes it).
			err = cmd.LegacyWrite(c.cmd, w)
		}
	} else {
		err = cmd.LegacyWrite(c.cmd, w)
	}
	if err != nil {
		return c.opErr(object, method, err)
	}
	return nil
}

// Close releases the context (ibv_close_device(3)), in this order: what
// other packages of this module keep on the context is closed first (devx
// event channels and command completions, whose waiters wake with
// ErrClosed); every live CQ, QP and SRQ is marked destroyed after the
// uses in flight and its rings are unmapped (the kernel destroys the
// objects when the command fd closes), and waiters in their Destroy are
// released; the command fd and then the async event file are closed
// (waking blocked async readers with ErrClosed); last, every completion
// channel of the context is closed: its Fd returns -1 and waiters in
// GetCQEvent wake with ErrClosed. A create racing Close returns ErrClosed
// and leaves nothing behind. Close is idempotent.
func (c *Context) Close() error {
	if c == nil {
		return errNilContext
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	// The registry closes with the flag: once Closed reports true, a
	// create racing Close can no longer publish its object, and returns
	// ErrClosed instead of an object Close is about to kill.
	objs := c.reg.Close()
	chans := c.chans
	c.chans = nil
	hooks := c.onClose
	c.onClose = nil
	c.mu.Unlock()
	// Sibling packages' objects on the context (devx event channels and
	// command completions) wake their waiters with ErrClosed.
	for _, f := range hooks {
		f()
	}
	for _, o := range objs {
		o.(killer).kill()
	}
	// The command fd goes first: a create racing Close either finishes
	// its ioctl (with the async fd and the completion channels still
	// open) or fails with ErrClosed, never passes a stale fd number,
	// which another open may have taken by then.
	errs := []error{c.cmd.Close()}
	c.asyncMu.Lock()
	if c.async != nil {
		errs = append(errs, c.async.Close())
	} else if c.asyncFD != nil {
		errs = append(errs, c.asyncFD.Close())
	}
	c.asyncMu.Unlock()
	hook("context:cmd-closed")
	// Waiters in GetCQEvent wake with ErrClosed.
	for ch := range chans {
		ch.closeForContext()
	}
	if i := c.cmd1.Swap(nil); i != nil {
		cmdPool.Put(i) // for the next context
	}
	return errors.Join(errs...)
}

// Closed reports whether Close was called.
func (c *Context) Closed() bool {
	if c == nil {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// String returns "uverbs.Context(<device name>)".
func (c *Context) String() string {
	if c == nil {
		return "uverbs.Context(<nil>)"
	}
	return "uverbs.Context(" + c.dev.Name + ")"
}
