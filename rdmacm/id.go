package rdmacm

import (
	"context"
	"errors"
	"math"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pureverbs/pureverbs/abi"
	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/uverbs"
)

// ID is an rdma_cm identifier (struct rdma_cm_id): one end of a
// connection, or a listener.
type ID struct {
	chp atomic.Pointer[EventChannel] // the channel its events come to (Migrate changes it)
	mig sync.Mutex                   // serialises Migrate and Destroy
	// life is held (read) by every command that names the ID's handle,
	// from the check that the ID lives to the command's end, and taken
	// by Destroy: once DESTROY_ID returns the kernel may give the handle
	// to a new ID of the same file, which a late command would then
	// reach (an ACCEPT would reject an unrelated connection request).
	life   sync.RWMutex
	handle uint32 // the kernel's id
	uid    uint64 // ours, echoed in its events
	ps     PortSpace
	qpType uverbs.QPType // RC in PortSpaceTCP, UD in PortSpaceUDP and PortSpaceIPoIB, either in PortSpaceIB
	// connectError: its connect response could not be completed (the QP's
	// moves or the RTU failed) and EventConnectError was delivered; the
	// REJECTED or DISCONNECTED the peer sends for it are dropped, as
	// librdmacm's connect_error drops them.
	connectError atomic.Bool

	mu        sync.Mutex
	dead      bool // destroyed, or its channel closed
	ctx       *uverbs.Context
	attr      *uverbs.DeviceAttr
	port      int
	local     netip.AddrPort
	remote    netip.AddrPort
	qpp       *uverbs.QP
	qpCQs     cqSet // the CQs CreateQP made for qpp
	qpMaking  bool  // a CreateQP is under way
	respRes   uint8 // responder resources: the request's, then the accept's
	initDepth uint8 // initiator depth, likewise
}

// newID is an ID on ch.
func newID(ch *EventChannel, handle uint32, uid uint64, ps PortSpace, qpType uverbs.QPType) *ID {
	id := &ID{handle: handle, uid: uid, ps: ps, qpType: qpType}
	id.chp.Store(ch)
	return id
}

// channel is the channel the ID is on (nil for an ID not made here).
func (id *ID) channel() *EventChannel { return id.chp.Load() }

// Channel returns the event channel the ID's events come to: the one it
// was created on, or the last Migrate's.
func (id *ID) Channel() *EventChannel {
	if id == nil {
		return nil
	}
	return id.channel()
}

// Context returns the verbs Context of the device the ID is bound to, nil
// until an address is bound or resolved (rdma_cm_id.verbs). The channel
// owns it.
func (id *ID) Context() *uverbs.Context {
	if id == nil {
		return nil
	}
	id.mu.Lock()
	defer id.mu.Unlock()
	return id.ctx
}

// Port returns the device port the ID is bound to (0 before).
func (id *ID) Port() int {
	if id == nil {
		return 0
	}
	id.mu.Lock()
	defer id.mu.Unlock()
	return id.port
}

// LocalAddr and RemoteAddr return the addresses the kernel reports
// (rdma_get_local_addr(3), rdma_get_peer_addr(3)).
func (id *ID) LocalAddr() netip.AddrPort {
	if id == nil {
		return netip.AddrPort{}
	}
	id.mu.Lock()
	defer id.mu.Unlock()
	return id.local
}

// RemoteAddr: see LocalAddr.
func (id *ID) RemoteAddr() netip.AddrPort {
	if id == nil {
		return netip.AddrPort{}
	}
	id.mu.Lock()
	defer id.mu.Unlock()
	return id.remote
}

// QP returns the QP made by CreateQP, or nil.
func (id *ID) QP() *uverbs.QP {
	if id == nil {
		return nil
	}
	return id.qp()
}

func (id *ID) qp() *uverbs.QP {
	id.mu.Lock()
	defer id.mu.Unlock()
	return id.qpp
}

// hold is the check of every method that sends a command naming the
// ID: not destroyed, channel open. On success the caller holds the ID's
// life until drop, so that Destroy waits for its command.
func (id *ID) hold(op string) error {
	if id == nil || id.channel() == nil {
		return invalid(op, "nil ID")
	}
	id.life.RLock()
	id.mu.Lock()
	dead := id.dead
	id.mu.Unlock()
	if dead {
		id.life.RUnlock()
		return opErr(op, ErrClosed)
	}
	return nil
}

// drop ends hold's.
func (id *ID) drop() { id.life.RUnlock() }

// BindAddr binds the ID to a local address and port (rdma_bind_addr(3));
// port 0 takes a free one. A specific address binds the ID to its RDMA
// device (Context), an unspecified one (0.0.0.0, ::) does not.
func (id *ID) BindAddr(addr netip.AddrPort) error {
	const op = "bind_addr"
	if err := id.hold(op); err != nil {
		return err
	}
	defer id.drop()
	if err := checkAddr(op, "local", addr.Addr()); err != nil {
		return err
	}
	req := abi.RdmaUcmBind{Id: id.handle}
	req.AddrSize = putSockaddr(&req.Addr, addr)
	if err := id.channel().command(op, abi.RDMA_USER_CM_CMD_BIND, sys.AsBytes(&req), -1, nil); err != nil {
		return err
	}
	return opErr(op, id.queryAddr())
}

// ResolveAddr resolves dst (and src, if valid) to an RDMA device and
// address (rdma_resolve_addr(3)). It returns at once; EventAddrResolved
// (with the ID's Context set) or EventAddrError follows, within timeout.
func (id *ID) ResolveAddr(src, dst netip.AddrPort, timeout time.Duration) error {
	const op = "resolve_addr"
	if err := id.hold(op); err != nil {
		return err
	}
	defer id.drop()
	if err := checkAddr(op, "destination", dst.Addr()); err != nil {
		return err
	}
	if src.Addr().IsValid() {
		if err := checkAddr(op, "source", src.Addr()); err != nil {
			return err
		}
	}
	ms, err := millis(op, timeout)
	if err != nil {
		return err
	}
	req := abi.RdmaUcmResolveAddr{Id: id.handle, TimeoutMs: ms}
	if src.Addr().IsValid() {
		req.SrcSize = putSockaddr(&req.SrcAddr, src)
	}
	req.DstSize = putSockaddr(&req.DstAddr, dst)
	return id.channel().command(op, abi.RDMA_USER_CM_CMD_RESOLVE_ADDR, sys.AsBytes(&req), -1, nil)
}

// ResolveRoute resolves the route to the resolved destination
// (rdma_resolve_route(3)); EventRouteResolved or EventRouteError follows.
func (id *ID) ResolveRoute(timeout time.Duration) error {
	const op = "resolve_route"
	if err := id.hold(op); err != nil {
		return err
	}
	defer id.drop()
	ms, err := millis(op, timeout)
	if err != nil {
		return err
	}
	req := abi.RdmaUcmResolveRoute{Id: id.handle, TimeoutMs: ms}
	return id.channel().command(op, abi.RDMA_USER_CM_CMD_RESOLVE_ROUTE, sys.AsBytes(&req), -1, nil)
}

func millis(op string, d time.Duration) (uint32, error) {
	if d <= 0 || d > time.Duration(1<<31-1)*time.Millisecond {
		return 0, invalid(op, "timeout %v out of range", d)
	}
	return uint32((d + time.Millisecond - 1) / time.Millisecond), nil
}

// Listen listens for connection requests on the bound address
// (rdma_listen(3)); each arrives as EventConnectRequest with a new ID.
// A backlog of 0 or less, or one at or above the kernel's limit (the
// rdma_ucm module's max_backlog, net.rdma_ucm.max_backlog: 1024 by
// default), is that limit (the kernel reads it as a __u32). An ID not
// bound yet is bound by the kernel to the wildcard address and a free
// port, which LocalAddr then reports, as rdma_listen queries the address
// after the command.
func (id *ID) Listen(backlog int) error {
	const op = "listen"
	if err := id.hold(op); err != nil {
		return err
	}
	defer id.drop()
	if backlog < 0 {
		backlog = 0 // a negative int is a __u32 past the limit: the limit
	}
	req := abi.RdmaUcmListen{Id: id.handle, Backlog: uint32(min(backlog, math.MaxInt32))}
	if err := id.channel().command(op, abi.RDMA_USER_CM_CMD_LISTEN, sys.AsBytes(&req), -1, nil); err != nil {
		return err
	}
	return opErr(op, id.queryAddr())
}

// heldQueryAddr is queryAddr for an ID an event names, which may have
// been destroyed since.
func (id *ID) heldQueryAddr() error {
	if err := id.hold("query_addr"); err != nil {
		return err
	}
	defer id.drop()
	return id.queryAddr()
}

// queryAddr asks the kernel where the ID is bound (RDMA_USER_CM_QUERY_ADDR):
// its device, port and addresses.
func (id *ID) queryAddr() error { return id.queryAddrOn(id.channel()) }

// queryAddrOn is queryAddr through channel ch.
func (id *ID) queryAddrOn(ch *EventChannel) error {
	req := abi.RdmaUcmQuery{Id: id.handle, Option: abi.RDMA_USER_CM_QUERY_ADDR}
	var resp abi.RdmaUcmQueryAddrResp
	if err := ch.command("query_addr", abi.RDMA_USER_CM_CMD_QUERY, sys.AsBytes(&req), 0, sys.AsBytes(&resp)); err != nil {
		return err
	}
	var ctx *uverbs.Context
	var attr *uverbs.DeviceAttr
	if resp.NodeGuid != 0 {
		var err error
		if ctx, attr, err = ch.context(resp.NodeGuid, resp.IbdevIndex); err != nil {
			return err
		}
	}
	id.mu.Lock()
	id.local, id.remote = getSockaddr(&resp.SrcAddr), getSockaddr(&resp.DstAddr)
	if ctx != nil {
		id.ctx, id.attr, id.port = ctx, attr, int(resp.PortNum)
	}
	id.mu.Unlock()
	return nil
}

// CreateQP creates the ID's QP in pd, which must be of the ID's Context,
// and moves it to INIT with the connection manager's attributes
// (rdma_create_qp(3)). attr.Type must be the ID's (CreateIDType) or
// zero; another is refused (ErrInvalid) once the QP is made, as
// librdmacm's move to INIT fails then, so that the device's own refusals
// come first. An RC QP then goes to RTR and RTS in Connect or
// Accept, to ERR in Disconnect or on a reject; a UD QP goes to RTS at
// once (with the port space's Q_Key). The caller destroys the QP after
// the ID's connection ends with DestroyQP (Destroy does not); a QP
// destroyed through QP().Destroy stays the ID's, and a second CreateQP is
// refused.
//
// Given no PD (nil), the QP is made in the device's default PD, as
// rdma_create_qp(3) does: one PD per device, shared by every ID of the
// process on that device (librdmacm's), allocated on first use and
// released with the device's Context when the last channel closes. Its
// QPs' PD() is that PD, for registering their memory; it is not the
// caller's to deallocate.
//
// Given no send or receive CQ, CreateQP makes one with a completion
// channel of its own (QP().SendCQ().Channel()) for each direction that
// has work requests (Cap.MaxSendWR, Cap.MaxRecvWR), as rdma_create_qp(3)
// does; a direction with neither CQ nor depth shares the other's CQ.
// DestroyQP destroys them with the QP; Destroy leaves them, as it leaves
// the QP.
func (id *ID) CreateQP(pd *uverbs.PD, attr uverbs.QPInitAttr) (*uverbs.QP, error) {
	const op = "create_qp"
	if err := id.hold(op); err != nil {
		return nil, err
	}
	defer id.drop()
	ctx := id.Context()
	if ctx == nil {
		return nil, invalid(op, "the ID is not bound to a device yet (bind or resolve an address first)")
	}
	if pd == nil {
		var err error
		if pd, err = defaultPD(ctx); err != nil {
			return nil, opErr(op, err)
		}
	} else if pd.Context() != ctx {
		return nil, invalid(op, "the PD is not of the ID's Context")
	}
	if attr.Type == 0 {
		attr.Type = id.qpType
	}
	mismatch := attr.Type != id.qpType
	id.mu.Lock()
	busy := id.qpp != nil || id.qpMaking
	if !busy {
		id.qpMaking = true // a concurrent CreateQP is refused, not a second QP made
	}
	id.mu.Unlock()
	if busy {
		return nil, invalid(op, "the ID already has a QP")
	}
	defer func() {
		id.mu.Lock()
		id.qpMaking = false
		id.mu.Unlock()
	}()
	cqs, err := makeCQs(ctx, &attr)
	if err != nil {
		return nil, opErr(op, err)
	}
	qp, err := pd.CreateQP(attr)
	if err != nil {
		cqs.release(context.Background())
		return nil, opErr(op, err)
	}
	fail := func(err error) (*uverbs.QP, error) {
		qp.Destroy(context.Background())
		cqs.release(context.Background())
		return nil, err
	}
	if mismatch {
		// librdmacm creates the QP before it moves it to INIT the port
		// space's way, which then fails: the device's refusals of attr
		// (a create flag rxe lacks: mckey -l -p 0x106) come first.
		return fail(invalid(op, "QP type %v in port space %#x (want %v)", attr.Type, uint16(id.ps), id.qpType))
	}
	if err := id.modify(qp, uverbs.QPStateInit, 0xff, 0xff); err != nil {
		return fail(opErr(op, err))
	}
	if attr.Type == uverbs.QPTypeUD {
		// A UD QP needs no peer: ready at once, as librdmacm's
		// ucma_init_ud_qp makes it.
		err := qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateRTR}, uverbs.QPAttrState)
		if err == nil {
			err = qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateRTS}, uverbs.QPAttrState|uverbs.QPAttrSQPSN)
		}
		if err != nil {
			return fail(opErr(op, err))
		}
	}
	id.mu.Lock()
	id.qpp, id.qpCQs = qp, cqs
	id.mu.Unlock()
	return qp, nil
}

// cqSet is the CQs and completion channels CreateQP made for a QP whose
// attributes named none (librdmacm's ucma_create_cqs): by direction,
// send then receive.
type cqSet struct {
	cq [2]*uverbs.CQ
	cc [2]*uverbs.CompChannel
}

// makeCQs makes a CQ with a completion channel of its own for each
// direction attr names no CQ for and has work requests for (receive
// first, as ucma_create_cqs), sized by the direction's depth, and puts
// them in attr; a direction with neither shares the other's CQ, as the
// kernel's QP create does with a missing receive CQ.
func makeCQs(ctx *uverbs.Context, attr *uverbs.QPInitAttr) (cqSet, error) {
	var s cqSet
	have := [2]*uverbs.CQ{attr.SendCQ, attr.RecvCQ}
	depth := [2]int{attr.Cap.MaxSendWR, attr.Cap.MaxRecvWR}
	for _, i := range [2]int{1, 0} {
		if have[i] != nil || depth[i] <= 0 {
			continue
		}
		cc, err := ctx.CreateCompChannel()
		if err != nil {
			s.release(context.Background())
			return cqSet{}, err
		}
		s.cc[i] = cc
		cq, err := ctx.CreateCQ(depth[i], &uverbs.CQOptions{Channel: cc})
		if err != nil {
			s.release(context.Background())
			return cqSet{}, err
		}
		s.cq[i], have[i] = cq, cq
	}
	if have[1] == nil {
		have[1] = have[0]
	}
	if have[0] == nil {
		have[0] = have[1]
	}
	attr.SendCQ, attr.RecvCQ = have[0], have[1]
	return s, nil
}

// release destroys the set's CQs and closes their channels (ctx bounds
// the wait for their events' acknowledgement), returning the first error.
func (s *cqSet) release(ctx context.Context) error {
	var first error
	for i := range s.cq {
		if s.cq[i] != nil {
			if err := s.cq[i].Destroy(ctx); err != nil && first == nil {
				first = err
			}
		}
		if s.cc[i] != nil {
			if err := s.cc[i].Close(); err != nil && first == nil {
				first = err
			}
		}
	}
	*s = cqSet{}
	return first
}

// DestroyQP destroys the ID's QP and forgets it (rdma_destroy_qp(3)), so
// that CreateQP may make another; ctx bounds the destroy's wait for the
// QP's unacknowledged async events (uverbs.QP.Destroy). An ID without a
// QP gives an error wrapping ErrInvalid. A destroy that failed leaves the
// QP the ID's. The CQs and completion channels CreateQP made go with the
// QP.
func (id *ID) DestroyQP(ctx context.Context) error {
	const op = "destroy_qp"
	if id == nil || id.channel() == nil {
		return invalid(op, "nil ID")
	}
	qp := id.qp()
	if qp == nil {
		return invalid(op, "the ID has no QP")
	}
	err := qp.Destroy(ctx)
	var unacked *uverbs.UnackedError
	if err != nil && !errors.Is(err, uverbs.ErrClosed) && !errors.As(err, &unacked) {
		return opErr(op, err) // the QP lives: so do its CQs
	}
	// Destroyed, or destroyed with events left unacknowledged (the QP
	// is gone all the same): the ID has no QP any more, nor the CQs
	// CreateQP made for it (rdma_destroy_qp's ucma_destroy_cqs).
	id.mu.Lock()
	var cqs cqSet
	if id.qpp == qp {
		id.qpp, cqs, id.qpCQs = nil, id.qpCQs, cqSet{}
	}
	id.mu.Unlock()
	if cerr := cqs.release(ctx); cerr != nil && err == nil {
		err = cerr
	}
	if err != nil && !errors.Is(err, uverbs.ErrClosed) {
		return opErr(op, err)
	}
	return nil
}

// InitQPAttr returns the attributes and mask that move a QP of the ID's
// connection to state (rdma_init_qp_attr(3)), for callers that manage
// their QP themselves.
func (id *ID) InitQPAttr(state uverbs.QPState) (uverbs.QPAttr, uverbs.QPAttrMask, error) {
	const op = "init_qp_attr"
	if err := id.hold(op); err != nil {
		return uverbs.QPAttr{}, 0, err
	}
	defer id.drop()
	return id.initQPAttr(state)
}

// initQPAttr is InitQPAttr under the caller's hold.
func (id *ID) initQPAttr(state uverbs.QPState) (uverbs.QPAttr, uverbs.QPAttrMask, error) {
	const op = "init_qp_attr"
	req := abi.RdmaUcmInitQpAttr{Id: id.handle, QpState: uint32(state)}
	var resp abi.IbUverbsQpAttr
	if err := id.channel().command(op, abi.RDMA_USER_CM_CMD_INIT_QP_ATTR, sys.AsBytes(&req), 0, sys.AsBytes(&resp)); err != nil {
		return uverbs.QPAttr{}, 0, err
	}
	a, m := qpAttrFromKern(&resp)
	return a, m, nil
}

// modify moves qp to state with the connection manager's attributes;
// respRes and initDepth other than 0xff replace the RTR's
// max_dest_rd_atomic and the RTS's max_rd_atomic, as librdmacm does.
func (id *ID) modify(qp *uverbs.QP, state uverbs.QPState, respRes, initDepth uint8) error {
	a, m, err := id.initQPAttr(state)
	if err != nil {
		return err
	}
	if state == uverbs.QPStateRTR && respRes != 0xff {
		a.MaxDestRdAtomic = respRes
	}
	if state == uverbs.QPStateRTS && initDepth != 0xff {
		a.MaxRdAtomic = initDepth
	}
	return qp.Modify(&a, m)
}

// modifyRTR moves an RC QP to INIT again and then to RTR, as librdmacm's
// ucma_modify_qp_rtr does: before the connection exists the connection
// manager's INIT attributes grant no remote access, and only once the
// request or reply has been exchanged does it grant remote writes (and
// reads and atomics when the side accepts RDMA reads).
func (id *ID) modifyRTR(qp *uverbs.QP, respRes uint8) error {
	if err := id.modify(qp, uverbs.QPStateInit, 0xff, 0xff); err != nil {
		return err
	}
	return id.modify(qp, uverbs.QPStateRTR, respRes, 0xff)
}

// qpAttrFromKern converts the kernel's struct ib_uverbs_qp_attr. The
// mask keeps the bits a MODIFY_QP carries: librdmacm clears bits 21-24,
// which old kernels set for RoCE.
func qpAttrFromKern(k *abi.IbUverbsQpAttr) (uverbs.QPAttr, uverbs.QPAttrMask) {
	ah := ahFromKern
	a := uverbs.QPAttr{
		State: uverbs.QPState(k.QpState), CurState: uverbs.QPState(k.CurQpState), PathMTU: uverbs.MTU(k.PathMtu),
		PathMigState: uint8(k.PathMigState), QKey: k.Qkey, RQPSN: k.RqPsn, SQPSN: k.SqPsn, DestQPN: k.DestQpNum,
		AccessFlags: uverbs.Access(k.QpAccessFlags), AH: ah(&k.AhAttr), AltAH: ah(&k.AltAhAttr),
		PKeyIndex: k.PkeyIndex, AltPKeyIndex: k.AltPkeyIndex, EnSQDAsyncNotify: k.EnSqdAsyncNotify != 0,
		MaxRdAtomic: k.MaxRdAtomic, MaxDestRdAtomic: k.MaxDestRdAtomic, MinRNRTimer: k.MinRnrTimer,
		PortNum: k.PortNum, Timeout: k.Timeout, RetryCnt: k.RetryCnt, RNRRetry: k.RnrRetry,
		AltPortNum: k.AltPortNum, AltTimeout: k.AltTimeout,
	}
	return a, uverbs.QPAttrMask(k.QpAttrMask) & (uverbs.QPAttrDestQPN<<1 - 1)
}

// ahFromKern converts the kernel's struct ib_uverbs_ah_attr.
func ahFromKern(x *abi.IbUverbsAhAttr) uverbs.AHAttr {
	return uverbs.AHAttr{DGID: uverbs.GID(x.Grh.Dgid), FlowLabel: x.Grh.FlowLabel, SGIDIndex: x.Grh.SgidIndex,
		HopLimit: x.Grh.HopLimit, TrafficClass: x.Grh.TrafficClass, IsGlobal: x.IsGlobal != 0, DLID: x.Dlid,
		SL: x.Sl, SrcPathBits: x.SrcPathBits, StaticRate: uverbs.Rate(x.StaticRate), PortNum: x.PortNum}
}

// validDepths refuses, in the TCP port space, an initiator depth or a
// number of responder resources above the device's limit (0xff, "the
// device's maximum", aside), as librdmacm's ucma_valid_param does with
// EINVAL; other port spaces take them as given.
func (id *ID) validDepths(op string, p *ConnParam, attr *uverbs.DeviceAttr) error {
	if id.ps != PortSpaceTCP || p == nil {
		return nil
	}
	if p.ResponderResources != 0xff && int(p.ResponderResources) > attr.MaxQPRdAtom {
		return invalid(op, "%d responder resources, the device allows %d (max_qp_rd_atom)", p.ResponderResources, attr.MaxQPRdAtom)
	}
	if p.InitiatorDepth != 0xff && int(p.InitiatorDepth) > attr.MaxQPInitRdAtom {
		return invalid(op, "initiator depth %d, the device allows %d (max_qp_init_rd_atom)", p.InitiatorDepth, attr.MaxQPInitRdAtom)
	}
	return nil
}

// depth resolves a ConnParam's 0xff ("the device's maximum") against the
// device's limit.
func depth(v uint8, max int) uint8 {
	if v == 0xff {
		return uint8(min(max, 0xff))
	}
	return v // above max only outside the TCP port space: as librdmacm, taken as given
}

// connParamToKern builds the kernel's struct rdma_ucm_conn_param.
func (id *ID) connParamToKern(op string, p *ConnParam, maxPriv int) (abi.RdmaUcmConnParam, error) {
	k := abi.RdmaUcmConnParam{ResponderResources: id.respRes, InitiatorDepth: id.initDepth, Valid: 1}
	if qp := id.qp(); qp != nil {
		k.QpNum = qp.QPN()
		k.Srq = b2u(qp.SRQ() != nil)
	} else if p != nil {
		// A QP the caller created and moves itself (as librdmacm
		// takes conn_param's qp_num and srq when id->qp is NULL).
		if p.QPNum > 0xffffff { // the CM's messages carry 24 bits: it would name another QP
			return k, invalid(op, "QP number %#x is wider than 24 bits", p.QPNum)
		}
		k.QpNum = p.QPNum
		k.Srq = b2u(p.SRQ)
	}
	if p == nil {
		k.RetryCount, k.RnrRetryCount = 7, 7
		return k, nil
	}
	if len(p.PrivateData) > maxPriv {
		return k, invalid(op, "%d bytes of private data, at most %d", len(p.PrivateData), maxPriv)
	}
	k.FlowControl, k.RetryCount, k.RnrRetryCount = p.FlowControl, p.RetryCount, p.RNRRetryCount
	k.PrivateDataLen = uint8(copy(k.PrivateData[:], p.PrivateData))
	return k, nil
}

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// Private data limits of the IB CM's messages (rdma_connect(3),
// rdma_accept(3), rdma_reject(3)): a connect's REQ (92 bytes) or SIDR REQ
// (216) also carries the kernel's 36-byte header of the IP addresses
// (struct cma_hdr); an accept's REP (196) or SIDR REP (136) and a reject's
// REJ (148) or SIDR REP carry none.
const (
	maxConnectPrivate   = 92 - 36
	maxAcceptPrivate    = 196
	maxRejectPrivate    = 148
	maxUDConnectPrivate = 216 - 36
	maxUDReplyPrivate   = 136
)

// privateLimits returns the private data limits of the ID's connect,
// accept and reject: an RC ID's CM exchange, or a UD ID's SIDR.
func (id *ID) privateLimits() (connect, accept, reject int) {
	if id.qpType == uverbs.QPTypeUD {
		return maxUDConnectPrivate, maxUDReplyPrivate, maxUDReplyPrivate
	}
	return maxConnectPrivate, maxAcceptPrivate, maxRejectPrivate
}

// Connect starts connecting to the resolved destination (rdma_connect(3)):
// after EventRouteResolved, with the QP of CreateQP. EventEstablished
// follows (the channel moves the QP to RTR and RTS when the reply comes),
// or EventRejected, EventUnreachable or EventConnectError.
//
// An ID without a QP connects a QP the caller created and moves itself,
// named by p.QPNum (and p.SRQ): then EventConnectResponse follows
// instead of EventEstablished, and the caller moves its QP to RTR and
// RTS with InitQPAttr's attributes and calls Establish.
func (id *ID) Connect(p *ConnParam) error {
	const op = "connect"
	if err := id.hold(op); err != nil {
		return err
	}
	defer id.drop()
	if id.qpType != uverbs.QPTypeUD && id.qp() == nil && (p == nil || p.QPNum == 0) {
		return invalid(op, "the ID has no QP: create one with CreateQP, or name the caller's QP in ConnParam.QPNum")
	}
	id.mu.Lock()
	attr := id.attr
	id.mu.Unlock()
	if attr == nil {
		return invalid(op, "the ID has no device: resolve the address and route first")
	}
	if err := id.validDepths(op, p, attr); err != nil {
		return err
	}
	init, resp := uint8(0xff), uint8(0xff)
	if p != nil {
		init, resp = p.InitiatorDepth, p.ResponderResources
	}
	id.mu.Lock()
	id.initDepth = depth(init, attr.MaxQPInitRdAtom)
	id.respRes = depth(resp, attr.MaxQPRdAtom)
	id.mu.Unlock()
	maxPriv, _, _ := id.privateLimits()
	k, err := id.connParamToKern(op, p, maxPriv)
	if err != nil {
		return err
	}
	req := abi.RdmaUcmConnect{ConnParam: k, Id: id.handle}
	return id.channel().command(op, abi.RDMA_USER_CM_CMD_CONNECT, sys.AsBytes(&req), -1, nil)
}

// Establish completes a connection whose QP the caller manages
// (rdma_establish(3)): after EventConnectResponse on an ID without a QP,
// once the caller has moved its QP to RTR and RTS, it sends the
// connection manager's ready-to-use to the passive side, which then gets
// EventEstablished. No event follows on this side. An ID with a QP of
// CreateQP is established by the channel itself, and Establish fails
// with ErrInvalid.
func (id *ID) Establish() error {
	const op = "establish"
	if err := id.hold(op); err != nil {
		return err
	}
	defer id.drop()
	if id.qp() != nil {
		return invalid(op, "the ID has a QP of CreateQP: the connection is established when EventEstablished arrives")
	}
	if id.qpType == uverbs.QPTypeUD {
		return invalid(op, "a UD ID has no connection to establish")
	}
	req := abi.RdmaUcmAccept{Id: id.handle}
	return id.channel().command(op, abi.RDMA_USER_CM_CMD_ACCEPT, sys.AsBytes(&req), -1, nil)
}

// completeConnect is the active side's end of the handshake when the
// reply arrives: RTR, RTS, then ACCEPT, which sends the RTU.
func (id *ID) completeConnect() error {
	if err := id.hold("connect"); err != nil {
		return err // destroyed since its event was read
	}
	defer id.drop()
	qp := id.qp()
	if err := id.modifyRTR(qp, 0xff); err != nil {
		id.toErr()
		return err
	}
	if err := id.modify(qp, uverbs.QPStateRTS, 0xff, 0xff); err != nil {
		id.toErr()
		return err
	}
	req := abi.RdmaUcmAccept{Id: id.handle}
	if err := id.channel().command("connect", abi.RDMA_USER_CM_CMD_ACCEPT, sys.AsBytes(&req), -1, nil); err != nil {
		id.toErr()
		return err
	}
	return nil
}

// Accept accepts the connection request that created this ID
// (rdma_accept(3)): it moves the QP of CreateQP to RTR and RTS and sends
// the reply; EventEstablished follows when the peer's RTU arrives. For a
// UD ID it sends the SIDR reply with the QP's number and Q_Key, and no
// event follows on this side.
//
// An ID without a QP accepts for a QP the caller created and moves
// itself, named by p.QPNum (and p.SRQ): the caller moves it to RTR and
// RTS with InitQPAttr's attributes before Accept.
func (id *ID) Accept(p *ConnParam) error {
	const op = "accept"
	if err := id.hold(op); err != nil {
		return err
	}
	defer id.drop()
	qp := id.qp()
	if qp == nil && (p == nil || p.QPNum == 0) {
		return invalid(op, "the ID has no QP: create one with CreateQP, or name the caller's QP in ConnParam.QPNum")
	}
	id.mu.Lock()
	attr := id.attr
	if attr == nil {
		id.mu.Unlock()
		return invalid(op, "the ID has no device: accept the ID of a connect request")
	}
	if err := id.validDepths(op, p, attr); err != nil {
		id.mu.Unlock()
		return err
	}
	if p == nil || p.InitiatorDepth == 0xff {
		id.initDepth = min(id.initDepth, uint8(min(attr.MaxQPInitRdAtom, 0xff)))
	} else {
		id.initDepth = p.InitiatorDepth
	}
	if p == nil || p.ResponderResources == 0xff {
		id.respRes = min(id.respRes, uint8(min(attr.MaxQPRdAtom, 0xff)))
	} else {
		id.respRes = p.ResponderResources
	}
	respRes, initDepth := id.respRes, id.initDepth
	id.mu.Unlock()
	_, maxPriv, _ := id.privateLimits()
	k, err := id.connParamToKern(op, p, maxPriv)
	if err != nil {
		return err
	}
	if qp != nil && id.qpType != uverbs.QPTypeUD {
		if err := id.modifyRTR(qp, respRes); err != nil {
			return opErr(op, err)
		}
		if err := id.modify(qp, uverbs.QPStateRTS, 0xff, initDepth); err != nil {
			return opErr(op, err)
		}
	}
	req := abi.RdmaUcmAccept{Uid: id.uid, ConnParam: k, Id: id.handle}
	if err := id.channel().command(op, abi.RDMA_USER_CM_CMD_ACCEPT, sys.AsBytes(&req), -1, nil); err != nil {
		id.toErr()
		return err
	}
	return nil
}

// Reject refuses the connection request that created this ID
// (rdma_reject(3)), with up to 148 bytes of private data (136 for a UD
// ID's SIDR reply); the peer gets EventRejected.
func (id *ID) Reject(private []byte) error {
	const op = "reject"
	if err := id.hold(op); err != nil {
		return err
	}
	defer id.drop()
	if _, _, maxPriv := id.privateLimits(); len(private) > maxPriv {
		return invalid(op, "%d bytes of private data, at most %d", len(private), maxPriv)
	}
	req := abi.RdmaUcmReject{Id: id.handle}
	req.PrivateDataLen = uint8(copy(req.PrivateData[:], private))
	return id.channel().command(op, abi.RDMA_USER_CM_CMD_REJECT, sys.AsBytes(&req), -1, nil)
}

// Disconnect ends the connection (rdma_disconnect(3)): the QP goes to ERR
// (its outstanding work requests complete flushed) and the peer gets
// EventDisconnected. As with librdmacm, the side that gets
// EventDisconnected first calls Disconnect too: that answers the peer's
// request (the IB CM's DREP), which the peer's own EventDisconnected
// waits for (without it, only after the CM's DREQ timeout).
func (id *ID) Disconnect() error {
	const op = "disconnect"
	if err := id.hold(op); err != nil {
		return err
	}
	defer id.drop()
	id.toErr()
	req := abi.RdmaUcmDisconnect{Id: id.handle}
	return id.channel().command(op, abi.RDMA_USER_CM_CMD_DISCONNECT, sys.AsBytes(&req), -1, nil)
}

// toErr moves the ID's QP, if any, to ERR; a destroyed QP is left alone.
func (id *ID) toErr() {
	if qp := id.qp(); qp != nil {
		qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateErr}, uverbs.QPAttrState)
	}
}

// Destroy destroys the ID (rdma_destroy_id(3)); events of it still queued
// are dropped by the kernel. Its QP is not destroyed. Destroying twice
// returns ErrClosed. A call on the ID from another goroutine that is
// under way (including the channel's completion of a connect response in
// GetEvent) finishes first; calls after fail with ErrClosed.
func (id *ID) Destroy() error {
	const op = "destroy_id"
	if id == nil || id.channel() == nil {
		return invalid(op, "nil ID")
	}
	// Not while a Migrate moves the ID: the kernel finds an ID on the file
	// its command came through (ucma_destroy_id), so a DESTROY_ID sent on
	// the old file after the move would fail and leave the ID alive.
	id.mig.Lock()
	defer id.mig.Unlock()
	id.life.Lock()
	defer id.life.Unlock()
	id.mu.Lock()
	if id.dead {
		id.mu.Unlock()
		return opErr(op, ErrClosed)
	}
	id.dead = true
	id.mu.Unlock()
	unregister(id)
	ch := id.channel()
	req := abi.RdmaUcmDestroyId{Id: id.handle}
	var resp abi.RdmaUcmDestroyIdResp
	return ch.command(op, abi.RDMA_USER_CM_CMD_DESTROY_ID, sys.AsBytes(&req), 0, sys.AsBytes(&resp))
}
