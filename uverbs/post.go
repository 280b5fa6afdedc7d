package uverbs

// PostSend posts a list of send work requests to the QP's send queue
// (ibv_post_send(3)). The whole list is written to the ring and the
// device is told once (for rxe: one write(2) of the POST_SEND doorbell,
// where librxe rings it). A full queue or an invalid request stops the
// list: the *PostError names its index (bad_wr), the requests before it
// are posted and will complete, the others are not. Errors wrap
// ErrQueueFull (which matches unix.ENOMEM), ErrInvalid, ErrNotReady (QP
// in RESET, INIT or RTR), or ErrClosed. If the doorbell itself fails (a
// Modify below RTS raced the post, or the device is gone), the error
// also wraps the doorbell's errno, and Index (len(wrs) when every request
// was written) still follows the posted requests: they wait in the queue
// for the next doorbell, or are flushed when the QP enters ERR.
//
// ErrInvalid covers, besides malformed requests, opcodes the QP's type
// has no use for (RDMA writes on UD, RDMA reads and atomics off RC,
// SEND_WITH_INV and LOCAL_INV on UC or UD, an inline RDMA read). librxe
// posts those, and the kernel then completes them with
// IBV_WC_LOC_QP_OP_ERR and moves the QP to ERR; here the post fails and
// the QP stays as it was.
//
// PostSend is safe for concurrent use; it allocates nothing, and keeps no
// reference to wrs. Several goroutines posting to one QP are serialised on
// the QP's send queue only.
func (qp *QP) PostSend(wrs []SendWR) error {
	if qp == nil || qp.ctx == nil {
		return invalidErr("qp", "post_send", "nil QP")
	}
	if len(wrs) == 0 {
		return nil
	}
	if !qp.hold() {
		return &PostError{Op: "post_send", Index: 0, Err: ErrClosed}
	}
	// No defer on the data path: a deferred call costs about 15
	// instructions, and nothing between hold and drop panics short of a
	// library bug (a ring offset out of range).
	var err error
	switch QPState(qp.state.Load()) {
	case QPStateReset, QPStateInit, QPStateRTR:
		err = &PostError{Op: "post_send", Index: 0, Err: ErrNotReady}
	default:
		err = qp.drv.postSend(qp, wrs)
	}
	qp.drop()
	return err
}

// PostRecv posts receive work requests to the QP's receive queue
// (ibv_post_recv(3)): ring writes only, no system call. Errors as for
// PostSend; a QP in RESET refuses receives (ErrNotReady), and a QP that
// takes its receives from an SRQ has no receive queue (ErrInvalid).
//
// On rxe, as with rdma-core's librxe, a receive posted after the QP
// entered ERR is not flushed by the kernel on its own: nothing tells it
// the ring moved. Modify to QPStateErr again (what applications do to
// drain a QP) flushes it; so, on 6.12, does a PostSend. docs/rxe.md has
// the measurements.
func (qp *QP) PostRecv(wrs []RecvWR) error {
	if qp == nil || qp.ctx == nil {
		return invalidErr("qp", "post_recv", "nil QP")
	}
	if len(wrs) == 0 {
		return nil
	}
	if !qp.hold() {
		return &PostError{Op: "post_recv", Index: 0, Err: ErrClosed}
	}
	var err error
	if QPState(qp.state.Load()) == QPStateReset {
		err = &PostError{Op: "post_recv", Index: 0, Err: ErrNotReady}
	} else {
		err = qp.drv.postRecv(qp, wrs)
	}
	qp.drop()
	return err
}

// Poll reads up to len(wcs) work completions into wcs and returns how many
// it read (ibv_poll_cq(3)); 0 means the CQ is empty. It makes no system
// call and allocates nothing. It fails only on a destroyed CQ (ErrClosed),
// or one whose Resize could not map the resized ring (ErrInvalid).
// An empty poll, the common case of a busy-polling loop, takes no lock
// and makes no atomic read-modify-write: it compares the ring's producer
// index with the consumer index of the last poll. A goroutine that
// busy-polls should yield every few milliseconds with Yield, not
// runtime.Gosched alone, or the library's waits parked on the runtime
// poller (async events, completion channels, rdma_cm events) can go
// unserved for up to a minute.
func (cq *CQ) Poll(wcs []WC) (int, error) {
	if cq == nil || cq.ctx == nil {
		return 0, invalidErr("cq", "poll", "nil CQ")
	}
	if len(wcs) == 0 {
		return 0, nil
	}
	if !cq.gone.Load() && cq.drv.empty() {
		return 0, nil
	}
	if !cq.hold() {
		return 0, closedErr("cq", "poll")
	}
	n, err := cq.drv.poll(wcs)
	cq.drop()
	if err != nil {
		return 0, &OpError{Object: "cq", Method: "poll", Err: err}
	}
	return n, nil
}

// PostRecv posts receive work requests to the shared receive queue
// (ibv_post_srq_recv(3)): ring writes only, no system call. Every QP
// attached to the SRQ takes its receives from here. Errors as for
// QP.PostSend. It is safe for concurrent use and allocates nothing; a
// resize (Modify with SRQAttrMaxWR) waits for posts in flight.
func (srq *SRQ) PostRecv(wrs []RecvWR) error {
	if srq == nil || srq.ctx == nil {
		return invalidErr("srq", "post_recv", "nil SRQ")
	}
	if len(wrs) == 0 {
		return nil
	}
	if !srq.hold() {
		return &PostError{Op: "post_srq_recv", Index: 0, Err: ErrClosed}
	}
	err := srq.drv.postRecv(srq, wrs)
	srq.drop()
	return err
}
