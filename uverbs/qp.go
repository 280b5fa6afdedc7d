package uverbs

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/pureverbs/pureverbs/abi"
	"github.com/pureverbs/pureverbs/internal/sys"
)

// QPType is the transport of a QP (enum ibv_qp_type).
type QPType uint8

const (
	QPTypeRC QPType = abi.IB_UVERBS_QPT_RC // reliable connected
	QPTypeUC QPType = abi.IB_UVERBS_QPT_UC // unreliable connected
	QPTypeUD QPType = abi.IB_UVERBS_QPT_UD // unreliable datagram
)

// String returns "RC", "UC" or "UD", or "QPType(n)" for other values.
func (t QPType) String() string {
	switch t {
	case QPTypeRC:
		return "RC"
	case QPTypeUC:
		return "UC"
	case QPTypeUD:
		return "UD"
	}
	return "QPType(" + strconv.Itoa(int(t)) + ")"
}

// QPState is a QP state (enum ibv_qp_state).
type QPState uint8

// QP states, the values of enum ibv_qp_state.
const (
	QPStateReset QPState = 0
	QPStateInit  QPState = 1
	QPStateRTR   QPState = 2
	QPStateRTS   QPState = 3
	QPStateSQD   QPState = 4
	QPStateSQE   QPState = 5
	QPStateErr   QPState = 6
)

var qpStateNames = [...]string{"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"}

// String returns the state's name without its prefix ("RTS" for
// IBV_QPS_RTS), or "QPState(n)" for other values.
func (s QPState) String() string {
	if int(s) < len(qpStateNames) {
		return qpStateNames[s]
	}
	return "QPState(" + strconv.Itoa(int(s)) + ")"
}

// QPAttrMask selects the QPAttr fields a Modify applies (enum
// ibv_qp_attr_mask).
type QPAttrMask uint32

// QP attribute mask bits, the values of enum ibv_qp_attr_mask (IBV_QP_*).
const (
	QPAttrState            QPAttrMask = 1 << 0
	QPAttrCurState         QPAttrMask = 1 << 1
	QPAttrEnSQDAsyncNotify QPAttrMask = 1 << 2
	QPAttrAccessFlags      QPAttrMask = 1 << 3
	QPAttrPKeyIndex        QPAttrMask = 1 << 4
	QPAttrPort             QPAttrMask = 1 << 5
	QPAttrQKey             QPAttrMask = 1 << 6
	QPAttrAV               QPAttrMask = 1 << 7
	QPAttrPathMTU          QPAttrMask = 1 << 8
	QPAttrTimeout          QPAttrMask = 1 << 9
	QPAttrRetryCnt         QPAttrMask = 1 << 10
	QPAttrRNRRetry         QPAttrMask = 1 << 11
	QPAttrRQPSN            QPAttrMask = 1 << 12
	QPAttrMaxQPRdAtomic    QPAttrMask = 1 << 13
	QPAttrAltPath          QPAttrMask = 1 << 14
	QPAttrMinRNRTimer      QPAttrMask = 1 << 15
	QPAttrSQPSN            QPAttrMask = 1 << 16
	QPAttrMaxDestRdAtomic  QPAttrMask = 1 << 17
	QPAttrPathMigState     QPAttrMask = 1 << 18
	QPAttrCap              QPAttrMask = 1 << 19
	QPAttrDestQPN          QPAttrMask = 1 << 20
	// Bits 21..24 are reserved; RATE_LIMIT (1<<25) and later need the
	// extended MODIFY_QP, which is not implemented.
	QPAttrRateLimit QPAttrMask = 1 << 25

	// qpAttrMaskWrite is every bit the (non-extended) MODIFY_QP carries.
	qpAttrMaskWrite = QPAttrDestQPN<<1 - 1
)

// AHAttr is an address vector (struct ibv_ah_attr). On RoCE devices such
// as rxe IsGlobal must be set and SGIDIndex name a valid GID: the kernel
// resolves the destination MAC from DGID.
type AHAttr struct {
	DGID         GID
	FlowLabel    uint32
	SGIDIndex    uint8
	HopLimit     uint8
	TrafficClass uint8
	IsGlobal     bool
	DLID         uint16
	SL           uint8
	SrcPathBits  uint8
	StaticRate   Rate // RateMax (0): the port's rate
	PortNum      uint8
}

// QPAttr holds the attributes a Modify can change and Query reports
// (struct ibv_qp_attr); Modify sends only the fields selected by the mask.
type QPAttr struct {
	State            QPState
	CurState         QPState
	PathMTU          MTU
	PathMigState     uint8
	QKey             uint32
	RQPSN            uint32
	SQPSN            uint32
	DestQPN          uint32
	AccessFlags      Access // remote access: AccessRemoteWrite, AccessRemoteRead, AccessRemoteAtomic
	AH               AHAttr
	AltAH            AHAttr
	PKeyIndex        uint16
	AltPKeyIndex     uint16
	EnSQDAsyncNotify bool
	MaxRdAtomic      uint8
	MaxDestRdAtomic  uint8
	MinRNRTimer      uint8
	PortNum          uint8
	Timeout          uint8
	// RetryCnt is how often a request that met no response is sent
	// again (0-7) before it completes with IBV_WC_RETRY_EXC_ERR. rxe
	// never counts down 7 (the IB spec gives 7 that meaning for
	// RNRRetry alone), so there a requester whose peer has gone
	// retries for ever: use at most 6 to learn of it.
	RetryCnt   uint8
	RNRRetry   uint8
	AltPortNum uint8
	AltTimeout uint8
	// Filled by Query only (Modify does not send them):
	SQDraining bool  // the send queue is draining (state SQD)
	Cap        QPCap // the work-queue sizes
}

// QPCap are the work-queue sizes of a QP (struct ibv_qp_cap).
type QPCap struct {
	MaxSendWR     int
	MaxRecvWR     int
	MaxSendSGE    int
	MaxRecvSGE    int
	MaxInlineData int
}

// QPInitAttr describes a QP to create (struct ibv_qp_init_attr).
type QPInitAttr struct {
	Type   QPType
	SendCQ *CQ
	RecvCQ *CQ
	// SRQ, if not nil, is the shared receive queue the QP takes its
	// receives from (ibv_create_srq(3)); the QP then has no receive
	// queue of its own and Cap's receive sizes are ignored. The SRQ must
	// belong to the same Context; its Destroy fails with EBUSY while the
	// QP lives.
	SRQ *SRQ
	Cap QPCap
	// SigAll makes every send work request generate a completion.
	SigAll bool
	// CreateFlags are ibv_create_qp_ex(3)'s create_flags. The rxe
	// provider supports none (librxe refuses every one with EOPNOTSUPP,
	// and so does this package: ErrNotSupported and unix.EOPNOTSUPP).
	CreateFlags QPCreateFlags
}

// QPCreateFlags are the flags of a QP's creation (enum
// ibv_qp_create_flags; the kernel's enum ib_uverbs_qp_create_flags has
// the same bits).
type QPCreateFlags uint32

const (
	// QPCreateBlockSelfMcastLB keeps the QP from receiving the multicast
	// packets it sends itself (IBV_QP_CREATE_BLOCK_SELF_MCAST_LB).
	QPCreateBlockSelfMcastLB QPCreateFlags = abi.IB_UVERBS_QP_CREATE_BLOCK_MULTICAST_LOOPBACK
	// QPCreateScatterFCS keeps the Ethernet FCS in received raw packets
	// (IBV_QP_CREATE_SCATTER_FCS).
	QPCreateScatterFCS QPCreateFlags = abi.IB_UVERBS_QP_CREATE_SCATTER_FCS
	// QPCreateCVLANStripping strips the C-VLAN header of received raw
	// packets (IBV_QP_CREATE_CVLAN_STRIPPING).
	QPCreateCVLANStripping QPCreateFlags = abi.IB_UVERBS_QP_CREATE_CVLAN_STRIPPING
	// QPCreatePCIWriteEndPadding pads PCI writes of received data to a
	// cache line (IBV_QP_CREATE_PCI_WRITE_END_PADDING).
	QPCreatePCIWriteEndPadding QPCreateFlags = abi.IB_UVERBS_QP_CREATE_PCI_WRITE_END_PADDING

	qpCreateFlagsKnown = QPCreateBlockSelfMcastLB | QPCreateScatterFCS | QPCreateCVLANStripping | QPCreatePCIWriteEndPadding
)

// QP is a queue pair (struct ibv_qp, ibv_create_qp(3)). Its affiliated
// async events map back to it through its user handle; Destroy waits
// until every event of the QP that was read has been acknowledged.
type QP struct {
	ctx    *Context
	pd     *PD
	sendCQ *CQ
	recvCQ *CQ
	srq    *SRQ
	typ    QPType
	sigAll bool
	handle uint32
	qpn    uint32
	uh     uint64
	cap    QPCap
	drv    qpDriver
	state  atomic.Uint32 // QPState last set by Modify or read by Query (for post checks)
	modMu  sync.Mutex    // serialises Modify and Query's state: state is the kernel's last
	mcast  mcastSet      // groups attached (for Destroy's EBUSY)
	life
}

func (c QPCap) toABI() (abi.IbUverbsQpCap, bool) {
	v := []int{c.MaxSendWR, c.MaxRecvWR, c.MaxSendSGE, c.MaxRecvSGE, c.MaxInlineData}
	for _, x := range v {
		if x < 0 || x > math.MaxInt32 {
			return abi.IbUverbsQpCap{}, false
		}
	}
	return abi.IbUverbsQpCap{
		MaxSendWr:     uint32(c.MaxSendWR),
		MaxRecvWr:     uint32(c.MaxRecvWR),
		MaxSendSge:    uint32(c.MaxSendSGE),
		MaxRecvSge:    uint32(c.MaxRecvSGE),
		MaxInlineData: uint32(c.MaxInlineData),
	}, true
}

func capFromABI(a *abi.IbUverbsQpCap) QPCap {
	return QPCap{
		MaxSendWR:     int(a.MaxSendWr),
		MaxRecvWR:     int(a.MaxRecvWr),
		MaxSendSGE:    int(a.MaxSendSge),
		MaxRecvSGE:    int(a.MaxRecvSge),
		MaxInlineData: int(a.MaxInlineData),
	}
}

// validate checks attr against pd before any system call.
func (attr *QPInitAttr) validate(pd *PD) (abi.IbUverbsQpCap, error) {
	switch attr.Type {
	case QPTypeRC, QPTypeUC, QPTypeUD:
	default:
		return abi.IbUverbsQpCap{}, invalidErr("qp", "create", "unsupported QP type %v", attr.Type)
	}
	if attr.SendCQ == nil || attr.RecvCQ == nil {
		return abi.IbUverbsQpCap{}, invalidErr("qp", "create", "nil send or receive CQ")
	}
	if attr.SendCQ.ctx != pd.ctx || attr.RecvCQ.ctx != pd.ctx {
		return abi.IbUverbsQpCap{}, invalidErr("qp", "create", "CQ and PD belong to different contexts")
	}
	if attr.SRQ != nil && attr.SRQ.ctx != pd.ctx {
		return abi.IbUverbsQpCap{}, invalidErr("qp", "create", "SRQ and PD belong to different contexts")
	}
	if attr.CreateFlags&^qpCreateFlagsKnown != 0 {
		return abi.IbUverbsQpCap{}, invalidErr("qp", "create", "unknown create flags %#x", uint32(attr.CreateFlags&^qpCreateFlagsKnown))
	}
	cp, ok := attr.Cap.toABI()
	if !ok {
		return abi.IbUverbsQpCap{}, invalidErr("qp", "create", "capabilities out of range: %+v", attr.Cap)
	}
	return cp, nil
}

// CreateQP creates a queue pair in pd (ibv_create_qp(3)), in the RESET
// state. It sends the QP/CREATE ioctl with the context's async event fd
// and maps the provider's send queue, and its receive queue unless
// attr.SRQ is set; if the mapping fails the QP is destroyed. Cap returns
// what the device granted.
func (pd *PD) CreateQP(attr QPInitAttr) (*QP, error) {
	if pd == nil || pd.ctx == nil {
		return nil, invalidErr("qp", "create", "nil PD")
	}
	c := pd.ctx
	capIn, err := attr.validate(pd)
	if err != nil {
		return nil, err
	}
	if c.Closed() {
		return nil, closedErr("qp", "create")
	}
	// The PD, CQs and SRQ are held from before their handles are read
	// until the QP is published: a concurrent destroy of one of them
	// waits, and then fails with the kernel's EBUSY, instead of freeing a
	// handle the kernel could give to a new object that this QP would then
	// be bound to.
	parents := [...]*life{&pd.life, &attr.SendCQ.life, &attr.RecvCQ.life, nil}
	if attr.SRQ != nil {
		parents[3] = &attr.SRQ.life
	}
	if !holdAll(parents[:]...) {
		return nil, closedErr("qp", "create")
	}
	defer dropAll(parents[:]...)
	p, err := c.provider("qp")
	if err != nil {
		return nil, err
	}
	if f := attr.CreateFlags &^ p.qpCreateFlags(); f != 0 {
		// As librxe's check_qp_init_attr, before the kernel sees them.
		return nil, &OpError{Object: "qp", Method: "create", Err: fmt.Errorf("%w: the %s provider has no QP create flags %#x",
			notSupported{sys.EOPNOTSUPP}, p.name(), uint32(f))}
	}
	qp, drv := p.newQP()
	*qp = QP{ctx: c, pd: pd, sendCQ: attr.SendCQ, recvCQ: attr.RecvCQ, srq: attr.SRQ, typ: attr.Type, sigAll: attr.SigAll, drv: drv}
	uh, err := c.reg.Reserve(&qp.counts)
	if err != nil {
		return nil, closedErr("qp", "create")
	}
	qp.uh = uh
	hook("qp:before-create")

	var capOut abi.IbUverbsQpCap
	var qpn uint32
	cmd := c.get()
	cmd.Reset(abi.UVERBS_OBJECT_QP, abi.UVERBS_METHOD_QP_CREATE, c.driverID)
	ha := cmd.IDRNew(abi.UVERBS_ATTR_CREATE_QP_HANDLE)
	cmd.IDRIn(abi.UVERBS_ATTR_CREATE_QP_PD_HANDLE, pd.handle, true)
	cmd.IDRIn(abi.UVERBS_ATTR_CREATE_QP_SEND_CQ_HANDLE, attr.SendCQ.handle, true)
	cmd.IDRIn(abi.UVERBS_ATTR_CREATE_QP_RECV_CQ_HANDLE, attr.RecvCQ.handle, true)
	if attr.SRQ != nil {
		cmd.IDRIn(abi.UVERBS_ATTR_CREATE_QP_SRQ_HANDLE, attr.SRQ.handle, true)
	}
	cmd.InlineIn(abi.UVERBS_ATTR_CREATE_QP_USER_HANDLE, uh, 8, true)
	sys.PtrIn(cmd, abi.UVERBS_ATTR_CREATE_QP_CAP, &capIn, true)
	cmd.ConstIn(abi.UVERBS_ATTR_CREATE_QP_TYPE, uint64(attr.Type), true)
	if flags := uint64(attr.CreateFlags); attr.SigAll || flags != 0 {
		if attr.SigAll {
			flags |= abi.IB_UVERBS_QP_CREATE_SQ_SIG_ALL
		}
		cmd.FlagsIn(abi.UVERBS_ATTR_CREATE_QP_FLAGS, flags, true)
	}
	cmd.FDIn(abi.UVERBS_ATTR_CREATE_QP_EVENT_FD, c.asyncRaw, false)
	sys.PtrOut(cmd, abi.UVERBS_ATTR_CREATE_QP_RESP_CAP, &capOut, true)
	sys.PtrOut(cmd, abi.UVERBS_ATTR_CREATE_QP_RESP_QP_NUM, &qpn, true)
	if in := drv.udataIn(); len(in) > 0 {
		cmd.BytesIn(abi.UVERBS_ATTR_UHW_IN, in, true)
	}
	if out := drv.udataOut(); len(out) > 0 {
		cmd.BytesOut(abi.UVERBS_ATTR_UHW_OUT, out, true)
	}
	err = cmd.Exec(c.cmd)
	qp.handle = cmd.Handle(ha)
	c.put(cmd)
	if err != nil {
		c.reg.Abort(uh)
		return nil, c.limitErr(c.opErr("qp", "create", err), "qp", func(a *DeviceAttr) string {
			return c.overLimit(
				limitCheck{"max_send_wr", attr.Cap.MaxSendWR, a.MaxQPWR, "max_qp_wr", "DeviceAttr.MaxQPWR"},
				limitCheck{"max_recv_wr", attr.Cap.MaxRecvWR, a.MaxQPWR, "max_qp_wr", "DeviceAttr.MaxQPWR"},
				limitCheck{"max_send_sge", attr.Cap.MaxSendSGE, a.MaxSGE, "max_sge", "DeviceAttr.MaxSGE"},
				limitCheck{"max_recv_sge", attr.Cap.MaxRecvSGE, a.MaxSGE, "max_sge", "DeviceAttr.MaxSGE"})
		})
	}
	qp.qpn = qpn
	qp.cap = capFromABI(&capOut)

	if err := drv.created(c, qp.handle, attr.SRQ != nil); err != nil {
		qp.destroyCmd()
		drv.release()
		c.reg.Abort(uh)
		return nil, err
	}
	qp.release = drv
	hook("qp:created")
	if err := c.reg.Publish(uh, qp); err != nil {
		drv.release()
		return nil, closedErr("qp", "create")
	}
	pd.users.qp.Add(1)
	if attr.SRQ != nil {
		attr.SRQ.users.qp.Add(1)
	}
	return qp, nil
}

func (qp *QP) destroyCmd() (resp abi.IbUverbsDestroyQpResp, err error) {
	c := qp.ctx
	cmd := c.get()
	cmd.Reset(abi.UVERBS_OBJECT_QP, abi.UVERBS_METHOD_QP_DESTROY, c.driverID)
	cmd.IDRIn(abi.UVERBS_ATTR_DESTROY_QP_HANDLE, qp.handle, true)
	out := sys.Scratch[abi.IbUverbsDestroyQpResp](cmd) // in the command: no allocation
	sys.PtrOut(cmd, abi.UVERBS_ATTR_DESTROY_QP_RESP, out, true)
	err = cmd.Exec(c.cmd)
	resp = *out
	c.put(cmd)
	if err != nil {
		return resp, c.opErr("qp", "destroy", err)
	}
	return resp, nil
}

// Destroy destroys the QP (ibv_destroy_qp(3)). After the kernel destroyed
// it, Destroy waits until every async event of the QP that was read has
// been acknowledged (async.Reader.Ack), as libibverbs does, but only
// until ctx ends: then it returns an *UnackedError naming the
// unacknowledged events (the QP is destroyed and its queues unmapped
// regardless). Destroy waits for uses of the QP in flight (a Modify, and
// with the data path posts and doorbells) before it sends the command.
// Destroying twice returns an error wrapping ErrClosed; a nil ctx is an
// error wrapping ErrInvalid.
func (qp *QP) Destroy(ctx context.Context) error {
	if qp == nil || qp.ctx == nil {
		return invalidErr("qp", "destroy", "nil QP")
	}
	return qp.destroy(ctx, qp.ctx, qp, "qp", func() (uint32, uint32, error) {
		resp, err := qp.destroyCmd()
		if err != nil {
			err = qp.mcast.busyErr(err)
		}
		if err == nil {
			qp.pd.users.qp.Add(-1)
			if qp.srq != nil {
				qp.srq.users.qp.Add(-1)
			}
		}
		return resp.EventsReported, 0, err
	}, nil)
}

// Modify changes the QP's attributes selected by mask (ibv_modify_qp(3)),
// e.g. the RESET→INIT→RTR→RTS transitions. It sends the write command
// MODIFY_QP, as libibverbs does for rxe. Mask bits past QPAttrDestQPN
// (QPAttrRateLimit needs the extended command) return an error matching
// ErrNotSupported and unix.EOPNOTSUPP, as with libibverbs.
func (qp *QP) Modify(attr *QPAttr, mask QPAttrMask) error {
	if qp == nil || qp.ctx == nil || attr == nil {
		return invalidErr("qp", "modify", "nil QP or attributes")
	}
	if mask&^qpAttrMaskWrite != 0 {
		// ibv_cmd_modify_qp refuses bits from IBV_QP_RATE_LIMIT up, and the
		// kernel those past IB_QP_ATTR_STANDARD_BITS, with EOPNOTSUPP.
		return &OpError{Object: "qp", Method: "modify", Err: fmt.Errorf("attribute mask bits %#x: %w", uint32(mask&^qpAttrMaskWrite), notSupported{sys.EOPNOTSUPP})}
	}
	for _, p := range []struct {
		bit QPAttrMask
		ah  *AHAttr
	}{{QPAttrAV, &attr.AH}, {QPAttrAltPath, &attr.AltAH}} {
		if mask&p.bit != 0 && p.ah.FlowLabel >= 1<<20 { // as CreateAH; the kernel passes it on
			return invalidErr("qp", "modify", "flow label %#x has more than 20 bits", p.ah.FlowLabel)
		}
	}
	if !qp.hold() {
		return closedErr("qp", "modify")
	}
	defer qp.drop()
	req := attr.encode(qp.handle, mask)
	// The command and the cached state change together: two Modifys at
	// once could otherwise store their states in the other order than the
	// kernel applied them, and the data path would trust the wrong one.
	qp.modMu.Lock()
	defer qp.modMu.Unlock()
	if err := qp.ctx.execWrite(&sys.WriteCmd{Cmd: abi.IB_USER_VERBS_CMD_MODIFY_QP, Req: sys.AsBytes(&req)}, "qp", "modify"); err != nil {
		return err
	}
	if mask&QPAttrState != 0 {
		qp.state.Store(uint32(attr.State))
	}
	return nil
}

func b2u8(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

func (ah *AHAttr) encode(d *abi.IbUverbsQpDest) {
	d.Dgid = ah.DGID
	d.FlowLabel = ah.FlowLabel
	d.Dlid = ah.DLID
	d.SgidIndex = ah.SGIDIndex
	d.HopLimit = ah.HopLimit
	d.TrafficClass = ah.TrafficClass
	d.Sl = ah.SL
	d.SrcPathBits = ah.SrcPathBits
	d.StaticRate = uint8(ah.StaticRate)
	d.IsGlobal = b2u8(ah.IsGlobal)
	d.PortNum = ah.PortNum
}

// encode builds the MODIFY_QP request: the fields selected by mask, the
// others zero.
func (attr *QPAttr) encode(handle uint32, mask QPAttrMask) abi.IbUverbsModifyQp {
	r := abi.IbUverbsModifyQp{QpHandle: handle, AttrMask: uint32(mask)}
	if mask&QPAttrState != 0 {
		r.QpState = uint8(attr.State)
	}
	if mask&QPAttrCurState != 0 {
		r.CurQpState = uint8(attr.CurState)
	}
	if mask&QPAttrEnSQDAsyncNotify != 0 {
		r.EnSqdAsyncNotify = b2u8(attr.EnSQDAsyncNotify)
	}
	if mask&QPAttrAccessFlags != 0 {
		r.QpAccessFlags = uint32(attr.AccessFlags)
	}
	if mask&QPAttrPKeyIndex != 0 {
		r.PkeyIndex = attr.PKeyIndex
	}
	if mask&QPAttrPort != 0 {
		r.PortNum = attr.PortNum
	}
	if mask&QPAttrQKey != 0 {
		r.Qkey = attr.QKey
	}
	if mask&QPAttrAV != 0 {
		attr.AH.encode(&r.Dest)
	}
	if mask&QPAttrPathMTU != 0 {
		r.PathMtu = uint8(attr.PathMTU)
	}
	if mask&QPAttrTimeout != 0 {
		r.Timeout = attr.Timeout
	}
	if mask&QPAttrRetryCnt != 0 {
		r.RetryCnt = attr.RetryCnt
	}
	if mask&QPAttrRNRRetry != 0 {
		r.RnrRetry = attr.RNRRetry
	}
	if mask&QPAttrRQPSN != 0 {
		r.RqPsn = attr.RQPSN
	}
	if mask&QPAttrMaxQPRdAtomic != 0 {
		r.MaxRdAtomic = attr.MaxRdAtomic
	}
	if mask&QPAttrAltPath != 0 {
		attr.AltAH.encode(&r.AltDest)
		r.AltPkeyIndex = attr.AltPKeyIndex
		r.AltPortNum = attr.AltPortNum
		r.AltTimeout = attr.AltTimeout
	}
	if mask&QPAttrMinRNRTimer != 0 {
		r.MinRnrTimer = attr.MinRNRTimer
	}
	if mask&QPAttrSQPSN != 0 {
		r.SqPsn = attr.SQPSN
	}
	if mask&QPAttrMaxDestRdAtomic != 0 {
		r.MaxDestRdAtomic = attr.MaxDestRdAtomic
	}
	if mask&QPAttrPathMigState != 0 {
		r.PathMigState = attr.PathMigState
	}
	if mask&QPAttrDestQPN != 0 {
		r.DestQpNum = attr.DestQPN
	}
	return r
}

// QPN returns the QP number.
func (qp *QP) QPN() uint32 {
	if qp == nil {
		return 0
	}
	return qp.qpn
}

// Cap returns the work-queue sizes the device granted (at least those
// requested).
func (qp *QP) Cap() QPCap {
	if qp == nil {
		return QPCap{}
	}
	return qp.cap
}

// Type returns the QP's transport type.
func (qp *QP) Type() QPType {
	if qp == nil {
		return 0
	}
	return qp.typ
}

// PD returns the protection domain the QP was created in.
func (qp *QP) PD() *PD {
	if qp == nil {
		return nil
	}
	return qp.pd
}

// SendCQ returns the completion queue of the QP's send queue.
func (qp *QP) SendCQ() *CQ {
	if qp == nil {
		return nil
	}
	return qp.sendCQ
}

// RecvCQ returns the completion queue of the QP's receive queue.
func (qp *QP) RecvCQ() *CQ {
	if qp == nil {
		return nil
	}
	return qp.recvCQ
}

// SRQ returns the shared receive queue the QP was created with, or nil.
func (qp *QP) SRQ() *SRQ {
	if qp == nil {
		return nil
	}
	return qp.srq
}

// Handle returns the kernel's handle of the QP.
func (qp *QP) Handle() uint32 {
	if qp == nil {
		return 0
	}
	return qp.handle
}

// UserHandle returns the value the kernel echoes in the QP's events.
func (qp *QP) UserHandle() uint64 {
	if qp == nil {
		return 0
	}
	return qp.uh
}

// Kind returns ElementQP.
func (qp *QP) Kind() ElementKind { return ElementQP }
