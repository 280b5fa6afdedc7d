package uverbs

import (
	"context"
	"math"

	"github.com/pureverbs/pureverbs/abi"
	"github.com/pureverbs/pureverbs/internal/sys"
)

// CQOptions are the optional parameters of CreateCQ.
type CQOptions struct {
	// CompVector is the completion vector, 0 <= CompVector <
	// NumCompVectors().
	CompVector int
	// (A completion channel comes with the completion-event issue.)
}

// CQ is a completion queue (struct ibv_cq, ibv_create_cq(3)).
//
// Its affiliated async events (IBV_EVENT_CQ_ERR) map back to it through
// its user handle; Destroy waits, as libibverbs does, until every event of
// the CQ that was read has been acknowledged.
type CQ struct {
	ctx    *Context
	handle uint32
	uh     uint64
	cqe    int
	drv    cqDriver
	life
}

// CreateCQ creates a completion queue with room for at least cqe entries
// (ibv_create_cq(3)); CQE returns the depth the device granted. opts may
// be nil. It sends the CQ/CREATE ioctl with the context's async event fd
// and maps the provider's ring; if the mapping fails the CQ is destroyed.
func (c *Context) CreateCQ(cqe int, opts *CQOptions) (*CQ, error) {
	if c == nil {
		return nil, invalidErr("cq", "create", "nil context")
	}
	if cqe < 1 || cqe > math.MaxInt32 {
		return nil, invalidErr("cq", "create", "cqe %d out of range", cqe)
	}
	var o CQOptions
	if opts != nil {
		o = *opts
	}
	if o.CompVector < 0 || o.CompVector > math.MaxInt32 || (c.numCompVectors > 0 && o.CompVector >= c.numCompVectors) {
		return nil, invalidErr("cq", "create", "completion vector %d out of range [0,%d)", o.CompVector, c.numCompVectors)
	}
	if c.Closed() {
		return nil, closedErr("cq", "create")
	}
	p, err := c.provider("cq")
	if err != nil {
		return nil, err
	}
	drv := p.newCQ()
	cq := &CQ{ctx: c, drv: drv}
	// The user handle is reserved before the create command, so that an
	// event of the new CQ read before CreateCQ returns still finds it (the
	// reader waits until the CQ is published, complete).
	uh, err := c.reg.Reserve(&cq.counts)
	if err != nil {
		return nil, closedErr("cq", "create")
	}
	cq.uh = uh
	hook("cq:before-create")

	var granted uint32
	cmd := c.get()
	cmd.Reset(abi.UVERBS_OBJECT_CQ, abi.UVERBS_METHOD_CQ_CREATE, c.driverID)
	ha := cmd.IDRNew(abi.UVERBS_ATTR_CREATE_CQ_HANDLE)
	cmd.InlineIn(abi.UVERBS_ATTR_CREATE_CQ_CQE, uint64(cqe), 4, true)
	cmd.InlineIn(abi.UVERBS_ATTR_CREATE_CQ_USER_HANDLE, uh, 8, true)
	cmd.InlineIn(abi.UVERBS_ATTR_CREATE_CQ_COMP_VECTOR, uint64(o.CompVector), 4, true)
	cmd.FDIn(abi.UVERBS_ATTR_CREATE_CQ_EVENT_FD, c.async.Fd(), false)
	sys.PtrOut(cmd, abi.UVERBS_ATTR_CREATE_CQ_RESP_CQE, &granted, true)
	if in := drv.udataIn(); len(in) > 0 {
		cmd.BytesIn(abi.UVERBS_ATTR_UHW_IN, in, true)
	}
	if out := drv.udataOut(); len(out) > 0 {
		cmd.BytesOut(abi.UVERBS_ATTR_UHW_OUT, out, true)
	}
	err = cmd.Exec(c.cmd)
	cq.handle = cmd.Handle(ha)
	c.put(cmd)
	if err != nil {
		c.reg.Abort(uh)
		return nil, c.opErr("cq", "create", err)
	}
	cq.cqe = int(granted)

	if err := drv.created(c); err != nil {
		cq.destroyCmd()
		drv.release()
		c.reg.Abort(uh)
		return nil, err
	}
	cq.release = drv.release
	hook("cq:created")
	if err := c.reg.Publish(uh, cq); err != nil {
		// Close ran meanwhile: the kernel CQ goes with the command fd;
		// unmap the ring so nothing of it is left.
		drv.release()
		return nil, closedErr("cq", "create")
	}
	return cq, nil
}

// destroyCmd sends CQ/DESTROY and returns the kernel's event counts.
func (cq *CQ) destroyCmd() (resp abi.IbUverbsDestroyCqResp, err error) {
	c := cq.ctx
	cmd := c.get()
	cmd.Reset(abi.UVERBS_OBJECT_CQ, abi.UVERBS_METHOD_CQ_DESTROY, c.driverID)
	cmd.IDRIn(abi.UVERBS_ATTR_DESTROY_CQ_HANDLE, cq.handle, true)
	sys.PtrOut(cmd, abi.UVERBS_ATTR_DESTROY_CQ_RESP, &resp, true)
	err = cmd.Exec(c.cmd)
	c.put(cmd)
	if err != nil {
		return resp, c.opErr("cq", "destroy", err)
	}
	return resp, nil
}

// Destroy destroys the CQ (ibv_destroy_cq(3)). After the kernel destroyed
// it, Destroy waits until the application acknowledged every event of the
// CQ the kernel reports as read (async events through async.Reader.Ack,
// completion events through the completion channel), as libibverbs does,
// but only until ctx ends: then it returns an *UnackedError saying what is
// unacknowledged (the CQ is destroyed and its ring unmapped regardless).
// Destroy waits for uses of the CQ in flight (a QP being created with it)
// before it sends the command. A nil ctx is an error wrapping ErrInvalid.
//
// The kernel refuses (EBUSY) to destroy a CQ still used by a QP; the CQ
// then stays usable. Destroying twice returns an error wrapping ErrClosed.
func (cq *CQ) Destroy(ctx context.Context) error {
	if cq == nil || cq.ctx == nil {
		return invalidErr("cq", "destroy", "nil CQ")
	}
	return cq.destroy(ctx, cq.ctx, cq, "cq", func() (uint32, uint32, error) {
		resp, err := cq.destroyCmd()
		return resp.AsyncEventsReported, resp.CompEventsReported, err
	})
}

// CQE returns the number of entries the device granted (at least the
// number requested).
func (cq *CQ) CQE() int { return cq.cqe }

// Handle returns the kernel's handle of the CQ.
func (cq *CQ) Handle() uint32 { return cq.handle }

// UserHandle returns the value the kernel echoes in the CQ's events.
func (cq *CQ) UserHandle() uint64 { return cq.uh }

// Kind returns ElementCQ.
func (cq *CQ) Kind() ElementKind { return ElementCQ }

// Context returns the context the CQ was created on.
func (cq *CQ) Context() *Context { return cq.ctx }
