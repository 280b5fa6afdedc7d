package uverbs

import (
	"context"
	"math"
	"sync/atomic"

	"github.com/pureverbs/pureverbs/abi"
	"github.com/pureverbs/pureverbs/internal/core"
	"github.com/pureverbs/pureverbs/internal/sys"
)

// CQOptions are the optional parameters of CreateCQ.
type CQOptions struct {
	// CompVector is the completion vector, 0 <= CompVector <
	// NumCompVectors().
	CompVector int
	// Channel, if not nil, is the completion channel the CQ reports to
	// after each ReqNotify (ibv_create_cq's channel). It must belong to
	// the same Context; one channel may serve many CQs.
	Channel *CompChannel
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
	cqe    atomic.Int32 // the granted depth; Resize changes it
	drv    cqDriver
	ch     *CompChannel // nil without a completion channel
	arm    cqArm        // the channel's bookkeeping of its arms (arm.go)
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
	if o.Channel != nil && o.Channel.ctx != c {
		return nil, invalidErr("cq", "create", "completion channel of another context")
	}
	cq, drv := p.newCQ()
	*cq = CQ{ctx: c, drv: drv, ch: o.Channel, arm: cqArm{at: -1}}
	// The user handle is reserved before the create command, so that an
	// event of the new CQ read before CreateCQ returns still finds it (the
	// reader waits until the CQ is published, complete).
	uh, err := c.reg.Reserve(&cq.counts)
	if err != nil {
		return nil, closedErr("cq", "create")
	}
	cq.uh = uh
	if cq.ch != nil {
		// Joined before the command: the channel cannot close (EBUSY)
		// while its fd number is in flight.
		if err := cq.ch.attach(cq); err != nil {
			c.reg.Abort(uh)
			return nil, err
		}
	}
	hook("cq:before-create")

	cmd := c.get()
	cmd.Reset(abi.UVERBS_OBJECT_CQ, abi.UVERBS_METHOD_CQ_CREATE, c.driverID)
	granted := sys.Scratch[uint32](cmd) // read before cmd goes back
	ha := cmd.IDRNew(abi.UVERBS_ATTR_CREATE_CQ_HANDLE)
	cmd.InlineIn(abi.UVERBS_ATTR_CREATE_CQ_CQE, uint64(cqe), 4, true)
	cmd.InlineIn(abi.UVERBS_ATTR_CREATE_CQ_USER_HANDLE, uh, 8, true)
	cmd.InlineIn(abi.UVERBS_ATTR_CREATE_CQ_COMP_VECTOR, uint64(o.CompVector), 4, true)
	cmd.FDIn(abi.UVERBS_ATTR_CREATE_CQ_EVENT_FD, c.asyncRaw, false)
	if cq.ch != nil {
		cmd.FDIn(abi.UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL, cq.ch.r.Fd(), false)
	}
	sys.PtrOut(cmd, abi.UVERBS_ATTR_CREATE_CQ_RESP_CQE, granted, true)
	if in := drv.udataIn(); len(in) > 0 {
		cmd.BytesIn(abi.UVERBS_ATTR_UHW_IN, in, true)
	}
	if out := drv.udataOut(); len(out) > 0 {
		cmd.BytesOut(abi.UVERBS_ATTR_UHW_OUT, out, true)
	}
	err = cmd.Exec(c.cmd)
	cq.handle = cmd.Handle(ha)
	cq.cqe.Store(int32(*granted))
	c.put(cmd)
	if err != nil {
		cq.detach()
		c.reg.Abort(uh)
		return nil, c.limitErr(c.opErr("cq", "create", err), "cq", func(a *DeviceAttr) string {
			return c.overLimit(limitCheck{"cqe", cqe, a.MaxCQE, "max_cqe", "DeviceAttr.MaxCQE"})
		})
	}

	if err := drv.created(c); err != nil {
		cq.destroyCmd()
		drv.release()
		cq.detach()
		c.reg.Abort(uh)
		return nil, err
	}
	cq.release = drv
	hook("cq:created")
	if err := c.reg.Publish(uh, cq); err != nil {
		// Close ran meanwhile: the kernel CQ goes with the command fd;
		// unmap the ring so nothing of it is left.
		drv.release()
		cq.detach()
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
	out := sys.Scratch[abi.IbUverbsDestroyCqResp](cmd) // in the command: no allocation
	sys.PtrOut(cmd, abi.UVERBS_ATTR_DESTROY_CQ_RESP, out, true)
	err = cmd.Exec(c.cmd)
	resp = *out
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
	}, cq.detach)
}

// CQE returns the number of entries the device granted (at least the
// number requested), by CreateCQ or the last Resize.
func (cq *CQ) CQE() int {
	if cq == nil {
		return 0
	}
	return int(cq.cqe.Load())
}

// Resize changes the CQ's depth to at least cqe entries (ibv_resize_cq(3)):
// the write command RESIZE_CQ, then, on rxe, the kernel's new ring is
// mapped in place of the old one. Completions waiting in the CQ are kept,
// in order, and polled from the new ring; CQE reports the granted depth. A
// depth below the completions now waiting, or above the device's
// MaxCQE, is the kernel's EINVAL, and the CQ is left as it was. Resize
// waits for the CQ's uses in flight (polls, arms) to end and blocks new
// ones while it runs. On a completion channel an armed CQ stays armed;
// the channel's next wait reads the channel before it parks, since its
// record of the arm describes the old ring.
func (cq *CQ) Resize(cqe int) error {
	if cq == nil || cq.ctx == nil {
		return invalidErr("cq", "resize", "nil CQ")
	}
	if cqe < 1 || cqe > math.MaxInt32 {
		return invalidErr("cq", "resize", "cqe %d out of range", cqe)
	}
	cq.rw.Lock()
	defer cq.rw.Unlock()
	if cq.dead {
		return closedErr("cq", "resize")
	}
	if cq.ch != nil {
		cq.ch.resizing(cq)
	}
	req := abi.IbUverbsResizeCq{CqHandle: cq.handle, Cqe: uint32(cqe)}
	var resp abi.IbUverbsResizeCqResp
	w := sys.WriteCmd{Cmd: abi.IB_USER_VERBS_CMD_RESIZE_CQ, Req: sys.AsBytes(&req), Resp: sys.AsBytes(&resp),
		UdataOut: cq.drv.resizeOut()}
	if err := cq.ctx.execWrite(&w, "cq", "resize"); err != nil {
		return err
	}
	cq.cqe.Store(int32(resp.Cqe))
	return cq.drv.resized(cq.ctx)
}

// Handle returns the kernel's handle of the CQ.
func (cq *CQ) Handle() uint32 {
	if cq == nil {
		return 0
	}
	return cq.handle
}

// UserHandle returns the value the kernel echoes in the CQ's events.
func (cq *CQ) UserHandle() uint64 {
	if cq == nil {
		return 0
	}
	return cq.uh
}

// Kind returns ElementCQ.
func (cq *CQ) Kind() ElementKind { return ElementCQ }

// Context returns the context the CQ was created on.
func (cq *CQ) Context() *Context {
	if cq == nil {
		return nil
	}
	return cq.ctx
}

// detach leaves the completion channel (if any).
func (cq *CQ) detach() {
	if cq.ch != nil {
		cq.ch.detach(cq)
	}
}

// Channel returns the CQ's completion channel, or nil.
func (cq *CQ) Channel() *CompChannel {
	if cq == nil {
		return nil
	}
	return cq.ch
}

// ReqNotify arms the CQ (ibv_req_notify_cq(3)): the next completion
// (solicitedOnly false), or the next solicited or error completion
// (true), makes the kernel queue one event on the CQ's channel. A
// completion that arrived before the arm does not trigger one, so poll
// again after arming before you wait. It is one write(2) of the
// REQ_NOTIFY_CQ command, as librxe does, and allocates nothing; besides
// the command it notes the arm in the channel, under a lock held for a
// few loads. A CQ without a channel gives ErrInvalid.
func (cq *CQ) ReqNotify(solicitedOnly bool) error {
	if cq == nil || cq.ctx == nil {
		return invalidErr("cq", "req_notify", "nil CQ")
	}
	if cq.ch == nil {
		return invalidErr("cq", "req_notify", "the CQ has no completion channel")
	}
	if !cq.hold() {
		return closedErr("cq", "req_notify")
	}
	defer cq.drop()
	var cmd struct {
		hdr abi.IbUverbsCmdHdr
		req abi.IbUverbsReqNotifyCq
	}
	cmd.hdr = abi.IbUverbsCmdHdr{Command: abi.IB_USER_VERBS_CMD_REQ_NOTIFY_CQ, InWords: 4}
	cmd.req = abi.IbUverbsReqNotifyCq{CqHandle: cq.handle}
	if solicitedOnly {
		cmd.req.SolicitedOnly = 1
	}
	// The channel learns of the arm before the kernel: an event of it may
	// be queued as soon as the command returns.
	snap, again := cq.ch.arming(cq)
	// The command fd stays open while the CQ is held (Close kills the CQ
	// first), so no fd lock is needed.
	if err := sys.WriteHeldValue(cq.ctx.cmd, &cmd); err != nil {
		return cq.ctx.opErr("cq", "req_notify", err)
	}
	if again {
		cq.ch.rearmed(cq, snap)
	}
	return nil
}

// AckEvents acknowledges n completion events of the CQ read from its
// channel (ibv_ack_cq_events(3)); acknowledging in batches is cheaper.
// Destroy waits until every event read has been acknowledged. More acks
// than events read is an error wrapping ErrInvalid and changes nothing.
func (cq *CQ) AckEvents(n int) error {
	if cq == nil || cq.ctx == nil {
		return invalidErr("cq", "ack_events", "nil CQ")
	}
	if n < 0 || n > math.MaxInt32 {
		return invalidErr("cq", "ack_events", "%d events", n)
	}
	if n == 0 {
		return nil
	}
	if err := cq.counts.Ack(core.CompEvents, 0, uint32(n)); err != nil {
		d, a := cq.counts.Counts(core.CompEvents)
		return invalidErr("cq", "ack_events", "acknowledging %d events, %d of %d read are unacknowledged", n, d-a, d)
	}
	return nil
}

// Ready returns how many completions are waiting to be polled, without
// consuming them: the check between arming and sleeping.
func (cq *CQ) Ready() (int, error) {
	if cq == nil || cq.ctx == nil {
		return 0, invalidErr("cq", "ready", "nil CQ")
	}
	if !cq.hold() {
		return 0, closedErr("cq", "ready")
	}
	n := cq.drv.ready()
	cq.drop()
	return n, nil
}
