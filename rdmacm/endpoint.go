package rdmacm

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/uverbs"
)

// Endpoint is an ID used synchronously, as librdmacm's rdma_create_ep(3)
// makes one: each call that waits for the connection manager (CreateEP's
// resolution, GetRequest, Connect, Accept) returns once its event has
// come, bounded by its context, and rdma_verbs.h's helpers (RegMsgs,
// PostSend, PostRecv, PostRead, PostWrite, GetSendComp, GetRecvComp) post
// and wait for completions on the endpoint's QP.
//
// As in librdmacm, every endpoint has an event channel of its own (a
// request moves to a new one, by Migrate, when GetRequest returns it), so
// that one connection's wait never reads another's event. Given no PD,
// CreateEP makes one; it makes a CQ with a completion channel for each
// direction the QP has work requests for (Cap.MaxSendWR, Cap.MaxRecvWR),
// unless attr names CQs; the QP's completions are then waited for parked
// on the runtime poller. A QP with an SRQ gets a receive CQ too when
// Cap.MaxRecvWR is set, as with librdmacm: the SRQ's receives complete
// there. PostRecv posts to the endpoint's own SRQ (CreateSRQ,
// rdma_create_srq(3)) when it has one; a QP given an SRQ in its
// attributes has no receive queue to post to (post to that SRQ).
//
// The post helpers allocate nothing and may be called from several
// goroutines; GetSendComp and GetRecvComp are each for one waiter at a
// time per direction.
type Endpoint struct {
	ch     *EventChannel
	id     *ID
	pd     *uverbs.PD
	myPD   *uverbs.PD          // the PD the endpoint allocated (none given), deallocated by Destroy
	sendCC *uverbs.CompChannel // nil when the send CQ is the caller's
	recvCC *uverbs.CompChannel
	sendCQ *uverbs.CQ
	recvCQ *uverbs.CQ
	made   cqSet // the CQs and completion channels the endpoint made (makeCQs)
	qp     *uverbs.QP
	srq    *uverbs.SRQ        // CreateSRQ's
	attr   *uverbs.QPInitAttr // a listener's, for its requests' QPs
	last   Event              // the event of the last synchronous call

	// connected: a Connect or Accept of a connected (not UD) endpoint
	// succeeded and no Disconnect has been sent since; Disconnect then
	// waits for EventDisconnected.
	connected atomic.Bool

	destroyed atomic.Bool // the fields above stay as they are: other goroutines may be in a call

	// Scratch of the post and completion helpers, so that they
	// allocate nothing.
	smu  sync.Mutex
	swr  [1]uverbs.SendWR
	ssge [1]uverbs.SGE
	rmu  sync.Mutex
	rwr  [1]uverbs.RecvWR
	rsge [1]uverbs.SGE
	swc  [1]uverbs.WC
	rwc  [1]uverbs.WC
}

// epResolveTimeout is rdma_create_ep's for address and route resolution.
const epResolveTimeout = 2000 * time.Millisecond

// CreateEP is rdma_create_ep(3): an ID on an event channel of its own, in
// ai's port space and QP type (GetAddrInfo's answer). With AIPassive it
// is bound to ai.Src and attr, if not nil, is kept for the QPs of the
// requests GetRequest returns; otherwise the address and then the route
// to ai.Dst are resolved (two seconds each, ctx bounding the waits) and,
// if attr is not nil, the ID's QP is made in pd (nil: a PD of the
// endpoint's own) with attr, whose Cap gets the QP's capabilities and
// whose Type is set from ai.
func CreateEP(ctx context.Context, ai *AddrInfo, pd *uverbs.PD, attr *uverbs.QPInitAttr) (*Endpoint, error) {
	const op = "create_ep"
	if ctx == nil {
		return nil, invalid(op, "nil context.Context")
	}
	if ai == nil {
		return nil, invalid(op, "nil AddrInfo")
	}
	ch, err := Open()
	if err != nil {
		return nil, err
	}
	ep := &Endpoint{ch: ch}
	qpType := ai.QPType
	if qpType == 0 {
		qpType = uverbs.QPTypeRC
		if ai.PortSpace == PortSpaceUDP || ai.PortSpace == PortSpaceIPoIB {
			qpType = uverbs.QPTypeUD
		}
	}
	if ep.id, err = ch.CreateIDType(ai.PortSpace, qpType); err != nil {
		ep.Destroy()
		return nil, err
	}
	if ai.Flags&AIPassive != 0 {
		if err := ep.id.BindAddr(ai.Src); err != nil {
			ep.Destroy()
			return nil, err
		}
		if attr != nil {
			a := *attr
			a.Type = qpType
			ep.attr = &a
		}
		ep.pd = pd
		return ep, nil
	}
	if err = ep.id.ResolveAddr(ai.Src, ai.Dst, epResolveTimeout); err == nil {
		err = ep.complete(ctx, op)
	}
	if err == nil {
		if err = ep.id.ResolveRoute(epResolveTimeout); err == nil {
			err = ep.complete(ctx, op)
		}
	}
	if err == nil && attr != nil {
		attr.Type = qpType
		err = ep.createQP(pd, attr)
	}
	if err != nil {
		ep.Destroy()
		return nil, err
	}
	return ep, nil
}

// ID returns the endpoint's ID.
func (ep *Endpoint) ID() *ID {
	if ep == nil {
		return nil
	}
	return ep.id
}

// QP returns the endpoint's QP, nil before it has one.
func (ep *Endpoint) QP() *uverbs.QP {
	if ep == nil {
		return nil
	}
	return ep.qp
}

// PD returns the PD of the endpoint's QP and memory.
func (ep *Endpoint) PD() *uverbs.PD {
	if ep == nil {
		return nil
	}
	return ep.pd
}

// SendCQ returns the CQ of the QP's sends.
func (ep *Endpoint) SendCQ() *uverbs.CQ {
	if ep == nil {
		return nil
	}
	return ep.sendCQ
}

// RecvCQ returns the CQ of the QP's receives.
func (ep *Endpoint) RecvCQ() *uverbs.CQ {
	if ep == nil {
		return nil
	}
	return ep.recvCQ
}

// check is the check of the calls that wait: an endpoint of CreateEP or
// GetRequest, and a context.
func (ep *Endpoint) check(op string, ctx context.Context) error {
	if ep == nil || ep.ch == nil || ep.id == nil {
		return invalid(op, "nil Endpoint (use CreateEP)")
	}
	if ctx == nil {
		return invalid(op, "nil context.Context")
	}
	return nil
}

// Event returns the event that ended the endpoint's last synchronous call
// (librdmacm's id->event): for a request GetRequest returned, the
// request (its private data, and on a UD endpoint the peer's address
// vector); after Connect, the establishment (on a UD endpoint Event.UD
// holds the server's QP number, Q_Key and address vector). Like
// librdmacm's, it is the caller's to read between the calls, not while
// one runs in another goroutine.
func (ep *Endpoint) Event() Event {
	if ep == nil {
		return Event{}
	}
	return ep.last
}

// complete is librdmacm's ucma_complete: the channel's next event, an
// error when it carries a status (ECONNREFUSED for a reject, else the
// status's errno, or the channel's own failure). As in librdmacm, the
// event's type is not checked.
func (ep *Endpoint) complete(ctx context.Context, op string) error {
	ev, err := ep.ch.GetEvent(ctx)
	if err != nil {
		return opErr(op, err)
	}
	ep.last = ev
	return eventErr(op, &ev)
}

func eventErr(op string, ev *Event) error {
	switch {
	case ev.Status == 0:
		return nil
	case ev.Err != nil:
		// The channel's own failure (librdmacm would report errno
		// -status, EPERM, here).
		return opErr(op, fmt.Errorf("%v: %w", ev, ev.Err))
	case ev.Type == EventRejected:
		return opErr(op, fmt.Errorf("%v: %w", ev, sys.ECONNREFUSED))
	case ev.Status < 0:
		return opErr(op, fmt.Errorf("%v: %w", ev, sys.Errno(-ev.Status)))
	}
	return opErr(op, fmt.Errorf("%v: %w", ev, sys.Errno(ev.Status)))
}

// createQP is rdma_create_qp's part of rdma_create_ep: pd, else the
// endpoint's PD, else a PD of the endpoint's own; a CQ and completion
// channel for each direction attr names no CQ for (sized by the
// direction's depth); the endpoint's SRQ when attr names none; the QP.
// attr gets the QP's capabilities. On failure what it made is released
// and the endpoint is as it was.
func (ep *Endpoint) createQP(pd *uverbs.PD, attr *uverbs.QPInitAttr) (err error) {
	const op = "create_qp"
	dev := ep.id.Context()
	if dev == nil {
		return invalid(op, "the ID has no device")
	}
	if ep.qp != nil {
		return invalid(op, "the endpoint already has a QP")
	}
	if pd == nil {
		pd = ep.pd
	}
	ownPD := false
	if pd == nil {
		if pd, err = dev.AllocPD(); err != nil {
			return opErr(op, err)
		}
		ownPD = true
	}
	a := *attr
	if a.SRQ == nil {
		a.SRQ = ep.srq // rdma_create_qp_ex: id->srq when attr names none
	}
	// With an SRQ too: its receives complete on the receive CQ of the QP
	// that took them (librdmacm's rdma_create_qp_ex makes one whenever
	// max_recv_wr is set).
	fail := func(err error) error {
		if ownPD {
			pd.Dealloc()
		}
		return err
	}
	made, err := makeCQs(dev, &a)
	if err != nil {
		return fail(opErr(op, err))
	}
	qp, err := ep.id.CreateQP(pd, a)
	if err != nil {
		made.release(context.Background())
		return fail(err)
	}
	ep.qp, ep.pd = qp, pd
	if ownPD {
		ep.myPD = pd
	}
	ep.sendCQ, ep.recvCQ = a.SendCQ, a.RecvCQ
	ep.sendCC, ep.recvCC = made.cc[0], made.cc[1]
	ep.made = made
	attr.Cap = qp.Cap()
	return nil
}

// checkSetup is the check of the calls that make and destroy the
// endpoint's QP and SRQ: an endpoint of CreateEP or GetRequest, not
// destroyed, and a context.
func (ep *Endpoint) checkSetup(op string, ctx context.Context) error {
	if ep == nil || ep.id == nil {
		return invalid(op, "nil Endpoint (use CreateEP)")
	}
	if ctx == nil {
		return invalid(op, "nil context.Context")
	}
	if ep.destroyed.Load() {
		return opErr(op, ErrClosed)
	}
	return nil
}

// CreateQP is rdma_create_qp(3) on an endpoint that has no QP (CreateEP
// or GetRequest given no attributes, or after DestroyQP): the QP is made
// in pd, or in the endpoint's PD when pd is nil (CreateSRQ's, or a PD of
// the endpoint's own), with a CQ and completion channel for each
// direction attr names no CQ for, as CreateEP makes them, and takes its
// receives from the endpoint's SRQ (CreateSRQ) when attr names none. Its
// type is the ID's; attr.Cap gets the QP's capabilities. On failure
// nothing is left made. A connection that has ended takes no new QP:
// the kernel's connection manager then refuses its attributes (EINVAL),
// as it does librdmacm's.
//
// CreateQP, DestroyQP, CreateSRQ and DestroySRQ change what the
// endpoint's helpers post to and wait on: as with librdmacm, call them
// while no other call on the endpoint runs.
func (ep *Endpoint) CreateQP(pd *uverbs.PD, attr *uverbs.QPInitAttr) error {
	const op = "create_qp"
	if err := ep.checkSetup(op, context.Background()); err != nil {
		return err
	}
	if attr == nil {
		return invalid(op, "nil QPInitAttr")
	}
	if attr.Type == 0 {
		attr.Type = ep.id.qpType
	}
	return ep.createQP(pd, attr)
}

// DestroyQP is rdma_destroy_qp(3): the endpoint's QP, and the CQs and
// completion channels the endpoint made for it (librdmacm's
// ucma_destroy_cqs). ctx bounds the wait for the acknowledgement of
// events of theirs that were read (see Destroy). The PD and the SRQ
// stay.
func (ep *Endpoint) DestroyQP(ctx context.Context) error {
	const op = "destroy_qp"
	if err := ep.checkSetup(op, ctx); err != nil {
		return err
	}
	if ep.qp == nil {
		return invalid(op, "the endpoint has no QP")
	}
	errs := []error{ep.id.DestroyQP(ctx)}
	errs = append(errs, ep.destroyCQs(ctx)...)
	ep.qp = nil
	ep.sendCQ, ep.recvCQ, ep.sendCC, ep.recvCC = nil, nil, nil, nil
	ep.made = cqSet{}
	return firstErr(errs)
}

// destroyCQs destroys the CQs and completion channels the endpoint made.
// The fields stay (Destroy's callers may be in a call).
func (ep *Endpoint) destroyCQs(ctx context.Context) []error {
	made := ep.made // a copy: release forgets its own
	return []error{made.release(ctx)}
}

func firstErr(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// CreateSRQ is rdma_create_srq(3): a shared receive queue for the
// endpoint, made in pd, or in the endpoint's PD when pd is nil (a PD of
// the endpoint's own if it has none yet). A QP the endpoint makes after
// it (CreateQP) takes its receives from it unless its attributes name
// another SRQ, and PostRecv posts to it. The endpoint must be bound to a
// device (CreateEP does that) and have no SRQ yet. Its receives complete
// on the receive CQ of the QP that took them (RecvCQ, GetRecvComp). The
// endpoint destroys it (DestroySRQ, Destroy).
func (ep *Endpoint) CreateSRQ(pd *uverbs.PD, attr uverbs.SRQAttr) (*uverbs.SRQ, error) {
	const op = "create_srq"
	if err := ep.checkSetup(op, context.Background()); err != nil {
		return nil, err
	}
	if ep.srq != nil {
		return nil, invalid(op, "the endpoint already has an SRQ")
	}
	dev := ep.id.Context()
	if dev == nil {
		return nil, invalid(op, "the ID has no device")
	}
	if pd == nil {
		pd = ep.pd
	}
	ownPD := false
	if pd == nil {
		var err error
		if pd, err = dev.AllocPD(); err != nil {
			return nil, opErr(op, err)
		}
		ownPD = true
	} else if pd.Context() != dev {
		return nil, invalid(op, "the PD is not of the ID's Context")
	}
	srq, err := pd.CreateSRQ(attr)
	if err != nil {
		if ownPD {
			pd.Dealloc()
		}
		return nil, opErr(op, err)
	}
	if ep.pd == nil {
		ep.pd = pd // librdmacm: id->pd = attr->pd when the ID has none
	}
	if ownPD {
		ep.myPD = pd
	}
	ep.srq = srq
	return srq, nil
}

// SRQ returns the endpoint's SRQ (CreateSRQ), nil when it has none.
func (ep *Endpoint) SRQ() *uverbs.SRQ {
	if ep == nil {
		return nil
	}
	return ep.srq
}

// DestroySRQ is rdma_destroy_srq(3): the endpoint's SRQ, after its QP
// (a QP taking receives from it keeps the kernel from destroying it:
// DestroyQP first, or the error wraps EBUSY). ctx bounds the wait for
// the acknowledgement of its events that were read.
func (ep *Endpoint) DestroySRQ(ctx context.Context) error {
	const op = "destroy_srq"
	if err := ep.checkSetup(op, ctx); err != nil {
		return err
	}
	if ep.srq == nil {
		return invalid(op, "the endpoint has no SRQ")
	}
	if err := ep.srq.Destroy(ctx); err != nil {
		return opErr(op, err)
	}
	ep.srq = nil
	return nil
}

// Listen is rdma_listen(3) on a passive endpoint.
func (ep *Endpoint) Listen(backlog int) error {
	if ep == nil {
		return invalid("listen", "nil Endpoint")
	}
	return ep.id.Listen(backlog)
}

// GetRequest is rdma_get_request(3): it waits for the next connection
// request on a listening endpoint and returns it as an Endpoint on an
// event channel of its own, with a QP of the listener's attributes (in
// the listener's PD, if CreateEP was given one) when CreateEP had them.
// An event other than a request (a listener gets few: device removal,
// address change) is consumed and returned as an error wrapping EINVAL,
// as in librdmacm.
func (ep *Endpoint) GetRequest(ctx context.Context) (*Endpoint, error) {
	const op = "get_request"
	if err := ep.check(op, ctx); err != nil {
		return nil, err
	}
	ev, err := ep.ch.GetEvent(ctx)
	if err != nil {
		return nil, opErr(op, err)
	}
	if err := eventErr(op, &ev); err != nil {
		return nil, err
	}
	if ev.Type != EventConnectRequest {
		return nil, opErr(op, fmt.Errorf("%v while waiting for a connect request: %w", &ev, sys.EINVAL))
	}
	req := &Endpoint{id: ev.ID, last: ev}
	if req.ch, err = Open(); err != nil {
		ev.ID.Destroy()
		return nil, err
	}
	if err := ev.ID.Migrate(req.ch); err != nil {
		req.Destroy()
		return nil, err
	}
	if ep.attr != nil {
		a := *ep.attr
		if err := req.createQP(ep.pd, &a); err != nil {
			req.Destroy()
			return nil, err
		}
	}
	return req, nil
}

// Accept is rdma_accept(3) on a synchronous ID: it returns once the
// connection is established (for a UD endpoint, once the reply is sent).
func (ep *Endpoint) Accept(ctx context.Context, p *ConnParam) error {
	if err := ep.check("accept", ctx); err != nil {
		return err
	}
	if err := ep.id.Accept(p); err != nil {
		return err
	}
	if ep.id.qpType == uverbs.QPTypeUD {
		return nil // a SIDR reply has no answer
	}
	if err := ep.complete(ctx, "accept"); err != nil {
		return err
	}
	ep.connected.Store(true)
	return nil
}

// Connect is rdma_connect(3) on a synchronous ID: it returns once the
// connection is established, or fails with ECONNREFUSED when rejected.
func (ep *Endpoint) Connect(ctx context.Context, p *ConnParam) error {
	if err := ep.check("connect", ctx); err != nil {
		return err
	}
	if err := ep.id.Connect(p); err != nil {
		return err
	}
	if err := ep.complete(ctx, "connect"); err != nil {
		return err
	}
	ep.connected.Store(ep.id.qpType != uverbs.QPTypeUD)
	return nil
}

// Disconnect is rdma_disconnect(3) on a synchronous ID: the QP goes to ERR,
// the connection's end goes to the peer, and, if Connect or Accept
// established it, Disconnect returns once the endpoint's
// EventDisconnected has arrived (Event returns it), or fails with its
// status (ETIMEDOUT when the peer never answered) or when ctx ends first.
// The event comes when the peer disconnects too or destroys its endpoint
// (the IB CM's DREP), or, if it does neither, after the CM's timeout; if
// the peer disconnected first, it is already there.
//
// librdmacm waits in every case, which never returns on a UD endpoint or
// one that was never connected, where no event comes: Disconnect does not
// wait there.
func (ep *Endpoint) Disconnect(ctx context.Context) error {
	if err := ep.check("disconnect", ctx); err != nil {
		return err
	}
	if err := ep.id.Disconnect(); err != nil {
		return err
	}
	if !ep.connected.Swap(false) {
		return nil
	}
	return ep.complete(ctx, "disconnect")
}

// RegMsgs is rdma_reg_msgs(3): buf registered for local writes (sends
// and receives) in the endpoint's PD.
func (ep *Endpoint) RegMsgs(buf []byte) (*uverbs.MR, error) {
	return ep.reg("reg_msgs", buf, uverbs.AccessLocalWrite)
}

// RegRead is rdma_reg_read(3): buf registered for the peer's RDMA reads.
func (ep *Endpoint) RegRead(buf []byte) (*uverbs.MR, error) {
	return ep.reg("reg_read", buf, uverbs.AccessLocalWrite|uverbs.AccessRemoteRead)
}

// RegWrite is rdma_reg_write(3): buf registered for the peer's RDMA
// writes.
func (ep *Endpoint) RegWrite(buf []byte) (*uverbs.MR, error) {
	return ep.reg("reg_write", buf, uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite)
}

func (ep *Endpoint) reg(op string, buf []byte, access uverbs.Access) (*uverbs.MR, error) {
	if ep == nil || ep.pd == nil {
		return nil, invalid(op, "the endpoint has no PD (no QP yet)")
	}
	mr, err := ep.pd.RegMR(buf, access)
	return mr, opErr(op, err)
}

// sgeOf is the SGE of buf, which must lie in mr's memory.
func sgeOf(op string, buf []byte, mr *uverbs.MR) (uverbs.SGE, error) {
	if mr == nil {
		return uverbs.SGE{}, invalid(op, "no MR")
	}
	if len(buf) == 0 {
		return mr.SGE(0, 0), nil
	}
	off := int64(sys.SliceAddr(buf)) - int64(mr.Addr())
	if off < 0 || off+int64(len(buf)) > int64(mr.Len()) {
		return uverbs.SGE{}, invalid(op, "the buffer is not in the MR's memory")
	}
	return mr.SGE(int(off), len(buf)), nil
}

// PostRecv is rdma_post_recv(3): one receive into buf, which must lie in
// mr's memory, with work request id wrID, posted to the endpoint's SRQ
// if it has one (CreateSRQ), else to its QP.
func (ep *Endpoint) PostRecv(wrID uint64, buf []byte, mr *uverbs.MR) error {
	const op = "post_recv"
	if ep == nil || (ep.qp == nil && ep.srq == nil) {
		return invalid(op, "the endpoint has no QP or SRQ")
	}
	sge, err := sgeOf(op, buf, mr)
	if err != nil {
		return err
	}
	ep.rmu.Lock()
	defer ep.rmu.Unlock()
	ep.rsge[0] = sge
	ep.rwr[0] = uverbs.RecvWR{ID: wrID, SGL: ep.rsge[:]}
	if ep.srq != nil {
		return opErr(op, ep.srq.PostRecv(ep.rwr[:]))
	}
	return opErr(op, ep.qp.PostRecv(ep.rwr[:]))
}

// PostSend is rdma_post_send(3): a SEND of msg, which must lie in mr's
// memory, or with uverbs.SendInline and mr nil is copied into the send
// queue. flags are the work request's (uverbs.SendSignaled for a
// completion, unless the QP signals every send).
func (ep *Endpoint) PostSend(wrID uint64, msg []byte, mr *uverbs.MR, flags uverbs.SendFlags) error {
	return ep.post("post_send", uverbs.SendWR{ID: wrID, Opcode: uverbs.WRSend, Flags: flags}, msg, mr)
}

// UDPQKey is the Q_Key of the UD QPs the connection manager sets up
// (RDMA_UDP_QKEY), which PostUDSend sends with.
const UDPQKey = 0x01234567

// PostUDSend is rdma_post_ud_send(3): a SEND of msg (in mr's memory, or
// inline with mr nil) to QP remoteQPN through ah, with UDPQKey. A UD
// endpoint's peer is in Event().UD: after Connect the server's QP number
// and address vector, for a request the client's (make ah with
// PD().CreateAH).
func (ep *Endpoint) PostUDSend(wrID uint64, msg []byte, mr *uverbs.MR, flags uverbs.SendFlags, ah *uverbs.AH, remoteQPN uint32) error {
	if ah == nil {
		return invalid("post_ud_send", "no AH")
	}
	return ep.post("post_ud_send", uverbs.SendWR{ID: wrID, Opcode: uverbs.WRSend, Flags: flags,
		AH: ah, RemoteQPN: remoteQPN, RemoteQKey: UDPQKey}, msg, mr)
}

// PostRead is rdma_post_read(3): an RDMA READ of len(buf) bytes at the
// peer's remoteAddr (rkey) into buf, which must lie in mr's memory.
func (ep *Endpoint) PostRead(wrID uint64, buf []byte, mr *uverbs.MR, flags uverbs.SendFlags, remoteAddr uint64, rkey uint32) error {
	if mr == nil {
		return invalid("post_read", "no MR")
	}
	return ep.post("post_read", uverbs.SendWR{ID: wrID, Opcode: uverbs.WRRDMARead, Flags: flags &^ uverbs.SendInline,
		RemoteAddr: remoteAddr, RKey: rkey}, buf, mr)
}

// PostWrite is rdma_post_write(3): an RDMA WRITE of buf (in mr's memory,
// or inline with mr nil) to the peer's remoteAddr (rkey).
func (ep *Endpoint) PostWrite(wrID uint64, buf []byte, mr *uverbs.MR, flags uverbs.SendFlags, remoteAddr uint64, rkey uint32) error {
	return ep.post("post_write", uverbs.SendWR{ID: wrID, Opcode: uverbs.WRRDMAWrite, Flags: flags,
		RemoteAddr: remoteAddr, RKey: rkey}, buf, mr)
}

// post posts wr with buf as its memory: inline when mr is nil and the
// flags ask for it, else buf's SGE in mr.
func (ep *Endpoint) post(op string, wr uverbs.SendWR, buf []byte, mr *uverbs.MR) error {
	if ep == nil || ep.qp == nil {
		return invalid(op, "the endpoint has no QP")
	}
	ep.smu.Lock()
	defer ep.smu.Unlock()
	switch {
	case mr == nil && wr.Flags&uverbs.SendInline != 0:
		wr.Inline = buf
	case mr == nil:
		return invalid(op, "no MR and not inline")
	default:
		sge, err := sgeOf(op, buf, mr)
		if err != nil {
			return err
		}
		wr.Flags &^= uverbs.SendInline
		ep.ssge[0] = sge
		wr.SGL = ep.ssge[:]
	}
	ep.swr[0] = wr
	err := ep.qp.PostSend(ep.swr[:])
	ep.swr[0] = uverbs.SendWR{} // hold no reference to the caller's memory
	return opErr(op, err)
}

// GetSendComp is rdma_get_send_comp(3): the next completion of the send
// CQ, waiting parked on its completion channel (ctx bounds the wait)
// while there is none. It returns 1 and the completion in wc, whose
// status is the caller's to check, or 0 and an error. A send CQ the
// caller gave CreateEP has no channel of the endpoint's: poll it.
func (ep *Endpoint) GetSendComp(ctx context.Context, wc *uverbs.WC) (int, error) {
	if ep == nil {
		return 0, invalid("get_send_comp", "nil Endpoint")
	}
	if ep.destroyed.Load() {
		return 0, opErr("get_send_comp", ErrClosed)
	}
	return getComp(ctx, "get_send_comp", ep.sendCQ, ep.sendCC, ep.swc[:], wc)
}

// GetRecvComp is rdma_get_recv_comp(3), for the receive CQ.
func (ep *Endpoint) GetRecvComp(ctx context.Context, wc *uverbs.WC) (int, error) {
	if ep == nil {
		return 0, invalid("get_recv_comp", "nil Endpoint")
	}
	if ep.destroyed.Load() {
		return 0, opErr("get_recv_comp", ErrClosed)
	}
	return getComp(ctx, "get_recv_comp", ep.recvCQ, ep.recvCC, ep.rwc[:], wc)
}

// getComp polls, arms, polls again and sleeps on the channel, as
// librdmacm's rdma_get_{send,recv}_comp do.
func getComp(ctx context.Context, op string, cq *uverbs.CQ, cc *uverbs.CompChannel, scratch []uverbs.WC, wc *uverbs.WC) (int, error) {
	if cq == nil || cc == nil {
		return 0, invalid(op, "no CQ of the endpoint's with a completion channel")
	}
	if wc == nil {
		return 0, invalid(op, "nil WC")
	}
	if ctx == nil {
		return 0, invalid(op, "nil context.Context")
	}
	poll := func() (int, error) {
		n, err := cq.Poll(scratch)
		if n == 1 {
			*wc = scratch[0]
		}
		return n, opErr(op, err)
	}
	for {
		if n, err := poll(); n != 0 || err != nil {
			return n, err
		}
		if err := cq.ReqNotify(false); err != nil {
			return 0, opErr(op, err)
		}
		if n, err := poll(); n != 0 || err != nil {
			return n, err
		}
		if _, err := cc.GetCQEvent(ctx); err != nil {
			return 0, opErr(op, err)
		}
		if err := cq.AckEvents(1); err != nil {
			return 0, opErr(op, err)
		}
	}
}

// Destroy is rdma_destroy_ep(3): the QP, the SRQ, the CQs, completion
// channels and PD the endpoint made, the ID, and its event channel. A call waiting
// in another goroutine (GetRequest, a completion wait, Connect) returns
// an error wrapping ErrClosed. It returns the first error; everything is
// released whatever happens. Destroying twice is ErrClosed.
//
// Destroying the QP and the endpoint's CQs waits, 10 seconds at most for
// all of them, until every event of theirs that was read has been
// acknowledged: async events read with an async.Reader and not yet passed
// to its Ack, and completion events read from the endpoint's completion
// channels and not acknowledged with CQ.AckEvents (the endpoint's own
// completion waits acknowledge theirs). When the 10 seconds run out,
// Destroy goes on releasing and returns the *uverbs.UnackedError naming
// the events (the objects are destroyed regardless).
func (ep *Endpoint) Destroy() error {
	if ep == nil {
		return invalid("destroy_ep", "nil Endpoint")
	}
	if !ep.destroyed.CompareAndSwap(false, true) {
		return opErr("destroy_ep", ErrClosed)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var errs []error
	if ep.qp != nil {
		errs = append(errs, ep.qp.Destroy(ctx))
	}
	if ep.srq != nil {
		errs = append(errs, ep.srq.Destroy(ctx))
	}
	errs = append(errs, ep.destroyCQs(ctx)...)
	if ep.myPD != nil {
		errs = append(errs, ep.myPD.Dealloc())
	}
	if ep.id != nil {
		errs = append(errs, ep.id.Destroy())
	}
	if ep.ch != nil {
		errs = append(errs, ep.ch.Close())
	}
	return firstErr(errs)
}
