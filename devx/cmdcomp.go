package devx

import (
	"context"
	"encoding/binary"
	"errors"

	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/uverbs"
)

// CmdHeaderSize is the size of the header of an asynchronous command
// completion (struct mlx5_ib_uapi_devx_async_cmd_hdr: the u64 wr_id
// before the response).
const CmdHeaderSize = 8

// CmdResp is one asynchronous command completion.
type CmdResp struct {
	// WrID is the value given to Obj.QueryAsync.
	WrID uint64
	// Out is the device's response (outLen bytes). It aliases the buffer
	// passed to Get.
	Out []byte
}

// DecodeCmdResp decodes one completion record as the kernel writes it:
// the wr_id, then the response. A record shorter than the header is an
// error matching ErrShortRecord (libmlx5's
// mlx5dv_devx_get_async_cmd_comp returns EINVAL). It allocates nothing
// and never panics.
func DecodeCmdResp(rec []byte) (CmdResp, error) {
	if len(rec) < CmdHeaderSize {
		return CmdResp{}, shortRecord("command completion", len(rec), CmdHeaderSize)
	}
	return CmdResp{WrID: binary.LittleEndian.Uint64(rec), Out: rec[CmdHeaderSize:]}, nil
}

// CmdComp receives the completions of asynchronous commands (struct
// mlx5dv_devx_cmd_comp): an fd the kernel queues one record per
// completed command on.
type CmdComp struct {
	ctx    *uverbs.Context
	r      *sys.RecordReader
	remove func()
	life
}

// NewCmdComp creates a command completion fd (mlx5dv_devx_create_cmd_comp(3)).
// Closing the context closes it too. The kernel needs no DEVX uid for it
// (though Obj.QueryAsync, which uses it, does).
func NewCmdComp(c *uverbs.Context) (*CmdComp, error) {
	const object, method = "devx_cmd_comp", "create"
	sh, err := mlx5Shared(c, object, method)
	if err != nil {
		return nil, err
	}
	var fa sys.Attr
	raw := -1
	err = run(sh, object, method,
		func(cmd *sys.Ioctl, drv uint32) { fa = buildCmdCompAlloc(cmd, drv) },
		func(cmd *sys.Ioctl) { raw = cmd.NewFDNum(fa) })
	if err != nil {
		return nil, err
	}
	r, err := adopt(raw, c.Device().Name+" devx command completions")
	if err != nil {
		return nil, &uverbs.OpError{Object: object, Method: method, Err: err}
	}
	cc := &CmdComp{ctx: c, r: r}
	remove, err := sh.OnClose(func() { cc.close() })
	if err != nil {
		r.Close()
		return nil, err
	}
	cc.remove = remove
	return cc, nil
}

// adopt wraps a new fd from the kernel as a RecordReader.
func adopt(raw int, name string) (*sys.RecordReader, error) {
	fd, err := sys.NewFD(raw, name)
	if err != nil {
		return nil, err
	}
	r, err := sys.NewRecordReader(fd)
	if err != nil {
		fd.Close()
		return nil, err
	}
	return r, nil
}

// Fd returns the (non-blocking) descriptor, for the caller's own poll or
// epoll loop; read it with TryGet. It returns -1 after Close (or the
// context's Close) and for a nil *CmdComp: the old number may name
// another file by then.
func (cc *CmdComp) Fd() int {
	if cc == nil || cc.r == nil {
		return -1
	}
	if !cc.hold() {
		return -1
	}
	defer cc.release()
	return cc.r.Fd()
}

// Get waits, parked on the runtime poller, for one completion and
// decodes it into buf (mlx5dv_devx_get_async_cmd_comp(3)): buf must hold
// CmdHeaderSize plus the largest outLen of the commands in flight, or the
// kernel leaves the record queued and Get fails with an error matching
// unix.ENOSPC. Get returns ctx's error when ctx ends and an error
// matching uverbs.ErrClosed after Close; a nil ctx is refused with
// uverbs.ErrInvalid. With a context used again and again it allocates
// nothing.
func (cc *CmdComp) Get(ctx context.Context, buf []byte) (CmdResp, error) {
	if err := cc.check(buf); err != nil {
		return CmdResp{}, err
	}
	if ctx == nil {
		return CmdResp{}, errNilCmdCtx
	}
	n, err := cc.r.Read(ctx, buf)
	return cc.done(buf, n, err)
}

// TryGet is Get without waiting (mlx5dv_devx_get_async_cmd_comp(3) on a
// non-blocking fd): when no completion is queued, or
// another goroutine is waiting in Get (which takes the next one), it
// fails with ErrNoEvent (which matches unix.EAGAIN).
func (cc *CmdComp) TryGet(buf []byte) (CmdResp, error) {
	if err := cc.check(buf); err != nil {
		return CmdResp{}, err
	}
	n, err := cc.r.TryRead(buf)
	return cc.done(buf, n, err)
}

func (cc *CmdComp) check(buf []byte) error {
	if cc == nil || cc.r == nil {
		return errNilCmdComp
	}
	if len(buf) < CmdHeaderSize {
		return errSmallCmdBuf
	}
	return nil
}

var (
	errNilCmdComp  = invalid("devx_cmd_comp", "get", "nil *devx.CmdComp")
	errNilCmdCtx   = invalid("devx_cmd_comp", "get", "nil context.Context")
	errSmallCmdBuf = invalid("devx_cmd_comp", "get", "buffer smaller than the %d-byte header", CmdHeaderSize)
	errCmdClosed   = closed("devx_cmd_comp", "get")
)

func (cc *CmdComp) done(buf []byte, n int, err error) (CmdResp, error) {
	if err != nil {
		return CmdResp{}, readErr("devx_cmd_comp", err, errCmdClosed)
	}
	return DecodeCmdResp(buf[:n])
}

// Close closes the fd (mlx5dv_devx_destroy_cmd_comp(3)), waking a
// blocked Get with an error matching uverbs.ErrClosed. Completions not
// read are lost. It waits for QueryAsync calls in flight on cc.
func (cc *CmdComp) Close() error {
	if cc == nil || cc.r == nil {
		return errNilCmdComp
	}
	if cc.remove != nil {
		cc.remove()
	}
	return cc.close()
}

func (cc *CmdComp) close() error {
	cc.rw.Lock()
	cc.dead = true
	cc.rw.Unlock()
	return cc.r.Close()
}

// readErr maps a RecordReader error.
func readErr(object string, err, closedErr error) error {
	switch {
	case err == sys.ErrFileClosed:
		return closedErr
	case err == sys.EAGAIN:
		return ErrNoEvent
	case err == sys.EOVERFLOW:
		return ErrOverflow
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	}
	if e, ok := err.(sys.Errno); ok {
		return &uverbs.OpError{Object: object, Method: "read", Err: e}
	}
	return &uverbs.OpError{Object: object, Method: "read", Err: err}
}
