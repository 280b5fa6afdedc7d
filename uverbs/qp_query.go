package uverbs

import (
	"fmt"

	"github.com/pureverbs/pureverbs/abi"
	"github.com/pureverbs/pureverbs/internal/sys"
)

// Query returns the QP's current attributes and its creation attributes
// (ibv_query_qp(3)): attr has the state (State, CurState, SQDraining),
// the path, PSNs, keys, timers, access flags and the granted capacities
// (Cap); init has the type, CQs, SRQ, SigAll and the same capacities.
//
// The capacities are the rings' actual sizes: on 6.1, whose rxe echoes
// the requested sizes to CreateQP, they can exceed Cap().
//
// mask names the attributes the caller needs, as with ibv_query_qp; the
// kernel may fill more (rxe fills them all). Bits from QPAttrRateLimit up
// need the extended command and return ErrNotSupported, as libibverbs
// does. It sends the write command QUERY_QP and holds the QP (a
// concurrent Destroy waits for it). With QPAttrState in mask, the state
// read becomes the one PostSend and PostRecv check, as with
// ibv_query_qp: after the kernel moved the QP to ERR, say.
func (qp *QP) Query(mask QPAttrMask) (attr QPAttr, init QPInitAttr, err error) {
	if qp == nil || qp.ctx == nil {
		return attr, init, invalidErr("qp", "query", "nil QP")
	}
	if mask&^qpAttrMaskWrite != 0 {
		// ibv_cmd_query_qp refuses bits from IBV_QP_RATE_LIMIT up with
		// EOPNOTSUPP, and the kernel answers the rest no differently.
		return attr, init, &OpError{Object: "qp", Method: "query", Err: fmt.Errorf("attribute mask bits %#x: %w", uint32(mask&^qpAttrMaskWrite), notSupported{sys.EOPNOTSUPP})}
	}
	if !qp.hold() {
		return attr, init, closedErr("qp", "query")
	}
	defer qp.drop()
	req := abi.IbUverbsQueryQp{QpHandle: qp.handle, AttrMask: uint32(mask)}
	var resp abi.IbUverbsQueryQpResp
	w := sys.WriteCmd{Cmd: abi.IB_USER_VERBS_CMD_QUERY_QP, Req: sys.AsBytes(&req), Resp: sys.AsBytes(&resp)}
	qp.modMu.Lock()
	if err := qp.ctx.execWrite(&w, "qp", "query"); err != nil {
		qp.modMu.Unlock()
		return attr, init, err
	}
	attr, caps, sigAll := decodeQueryQP(&resp)
	if mask&QPAttrState != 0 {
		// As ibv_query_qp: the kernel's state (ERR after a failed
		// request, say) becomes the one the data path checks.
		qp.state.Store(uint32(attr.State))
	}
	qp.modMu.Unlock()
	init = QPInitAttr{Type: qp.typ, SendCQ: qp.sendCQ, RecvCQ: qp.recvCQ, SRQ: qp.srq, Cap: caps, SigAll: sigAll}
	return attr, init, nil
}

func decodeDest(d *abi.IbUverbsQpDest) AHAttr {
	return AHAttr{
		DGID:         d.Dgid,
		FlowLabel:    d.FlowLabel,
		SGIDIndex:    d.SgidIndex,
		HopLimit:     d.HopLimit,
		TrafficClass: d.TrafficClass,
		IsGlobal:     d.IsGlobal != 0,
		DLID:         d.Dlid,
		SL:           d.Sl,
		SrcPathBits:  d.SrcPathBits,
		StaticRate:   Rate(d.StaticRate),
		PortNum:      d.PortNum,
	}
}

// decodeQueryQP maps the QUERY_QP response onto ibv_qp_attr's fields, as
// libibverbs' ibv_cmd_query_qp does.
func decodeQueryQP(r *abi.IbUverbsQueryQpResp) (attr QPAttr, caps QPCap, sigAll bool) {
	caps = QPCap{
		MaxSendWR:     int(r.MaxSendWr),
		MaxRecvWR:     int(r.MaxRecvWr),
		MaxSendSGE:    int(r.MaxSendSge),
		MaxRecvSGE:    int(r.MaxRecvSge),
		MaxInlineData: int(r.MaxInlineData),
	}
	attr = QPAttr{
		State:           QPState(r.QpState),
		CurState:        QPState(r.CurQpState),
		PathMTU:         MTU(r.PathMtu),
		PathMigState:    r.PathMigState,
		QKey:            r.Qkey,
		RQPSN:           r.RqPsn,
		SQPSN:           r.SqPsn,
		DestQPN:         r.DestQpNum,
		AccessFlags:     Access(r.QpAccessFlags),
		AH:              decodeDest(&r.Dest),
		AltAH:           decodeDest(&r.AltDest),
		PKeyIndex:       r.PkeyIndex,
		AltPKeyIndex:    r.AltPkeyIndex,
		MaxRdAtomic:     r.MaxRdAtomic,
		MaxDestRdAtomic: r.MaxDestRdAtomic,
		MinRNRTimer:     r.MinRnrTimer,
		PortNum:         r.PortNum,
		Timeout:         r.Timeout,
		RetryCnt:        r.RetryCnt,
		RNRRetry:        r.RnrRetry,
		AltPortNum:      r.AltPortNum,
		AltTimeout:      r.AltTimeout,
		SQDraining:      r.SqDraining != 0,
		Cap:             caps,
	}
	return attr, caps, r.SqSigAll != 0
}
