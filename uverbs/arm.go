package uverbs

// Arm bookkeeping: when may a completion channel hold an event?
//
// The runtime poller is edge-triggered, and RawConn.Read forgets a
// readiness it saw before the read began (internal/poll's prepareRead).
// So GetCQEvent normally reads once before it parks, and when nothing is
// queued that read fails with EAGAIN: a system call per wait that librxe,
// whose blocking read simply sleeps, does not make (docs/performance.md,
// "System calls per operation").
//
// The read can be left out when the channel provably holds no event: the
// kernel queues one only for a CQ that was armed (ReqNotify) and then had
// a completion written to its ring (rxe_cq_post advances the producer
// index before it calls the completion handler), and each arm queues at
// most one. The channel keeps, under armMu:
//
//   - armed: the CQs armed since their last event, each with a snapshot of
//     its ring taken before the arm's command (a completion between the
//     snapshot and the command counts as one after the arm: erring towards
//     "maybe");
//   - queued: how many events may be queued and not yet read, an upper
//     bound: an armed CQ whose ring moved since its snapshot leaves armed
//     and adds one here, as does every arm of a CQ whose ring cannot be
//     watched; each event read takes one off.
//
// mayHaveEvent (the reader's hint, asked once per wait after the poller
// has forgotten past readiness) says no only when queued is 0 and no armed
// CQ's ring moved. Any event queued later wakes the parked reader through
// the poller, since its edge comes after the hint looked. The bound can
// stay above the truth (an arm that never fires: a solicited-only arm
// without a solicited completion, or two arms that the kernel merged); the
// channel then reads before it parks, as it always did. Destroying a CQ
// takes its share off: the kernel drops the unread events of a destroyed
// CQ.

// ringSnap is a CQ ring's state before an arm (cqDriver.snap).
type ringSnap struct {
	polled  uint64 // completions polled so far
	prod    uint32 // the producer index
	waiting uint32 // completions in the ring between the two
}

// cqArm is a CQ's part in its channel's bookkeeping, guarded by the
// channel's armMu.
type cqArm struct {
	at     int // index in the channel's armed list, -1 when not there
	snap   ringSnap
	queued int // this CQ's share of the channel's queued
}

// armScan bounds the armed CQs mayHaveEvent looks at: with more, it says
// "maybe" at once and the reader reads first, as without the hint (a
// failed read costs less than scanning many rings).
const armScan = 8

// arming records that cq is about to be armed; it runs before the
// REQ_NOTIFY_CQ command, so that an event of this arm is never queued
// before the channel knows the arm. When cq was armed already, it returns
// the new snapshot and true: the caller hands them to rearmed after the
// command.
func (ch *CompChannel) arming(cq *CQ) (ringSnap, bool) {
	s, ok := cq.drv.snap()
	ch.armMu.Lock()
	defer ch.armMu.Unlock()
	a := &cq.arm
	switch {
	case !ok:
		a.queued++
		ch.queued++
	case a.at >= 0:
		// Armed before and not seen to fire: if the ring moved, the
		// earlier arm may have queued its event.
		if cq.drv.moved(a.snap) {
			a.queued++
			ch.queued++
		}
		a.snap = s
		return s, true
	default:
		a.snap = s
		a.at = len(ch.armed)
		ch.armed = append(ch.armed, cq)
	}
	return ringSnap{}, false
}

// rearmed runs after the REQ_NOTIFY_CQ command of a CQ that arming found
// armed already, with arming's snapshot s. The earlier arm stayed live
// until the command: a completion written after s and before the command
// fired it (one event), and the new arm then waits for the next
// completion (a second); the armed list counts only the second. So a ring
// that moved since s counts one possible event more, erring towards
// "maybe" when the completion came after the command (the kernel then
// merged the two arms into one event).
func (ch *CompChannel) rearmed(cq *CQ, s ringSnap) {
	if !cq.drv.moved(s) {
		return
	}
	ch.armMu.Lock()
	cq.arm.queued++
	ch.queued++
	ch.armMu.Unlock()
}

// unarm takes cq out of the armed list (armMu held).
func (ch *CompChannel) unarm(cq *CQ) {
	i := cq.arm.at
	if i < 0 {
		return
	}
	last := len(ch.armed) - 1
	if i != last {
		ch.armed[i] = ch.armed[last]
		ch.armed[i].arm.at = i
	}
	ch.armed[last] = nil
	ch.armed = ch.armed[:last]
	cq.arm.at = -1
}

// delivered accounts for an event of cq read from the channel.
func (ch *CompChannel) delivered(cq *CQ) {
	ch.armMu.Lock()
	if a := &cq.arm; a.queued > 0 {
		a.queued--
		ch.queued--
	} else {
		// Its arm fired before mayHaveEvent saw the ring move.
		ch.unarm(cq)
	}
	ch.armMu.Unlock()
}

// resizing runs before the RESIZE_CQ command of cq (whose exclusive hold
// keeps ReqNotify out until the new ring is in place): if cq is armed, its
// arm may fire at any time, and the snapshot describes a ring the kernel is
// about to replace, so the arm counts as a possible event from now on.
func (ch *CompChannel) resizing(cq *CQ) {
	ch.armMu.Lock()
	if cq.arm.at >= 0 {
		ch.unarm(cq)
		cq.arm.queued++
		ch.queued++
	}
	ch.armMu.Unlock()
}

// forget drops cq's share after the kernel destroyed it (and with it the
// CQ's unread events).
func (ch *CompChannel) forget(cq *CQ) {
	ch.armMu.Lock()
	ch.queued -= cq.arm.queued
	cq.arm.queued = 0
	ch.unarm(cq)
	ch.armMu.Unlock()
}

// mayHaveEvent reports whether an event may be queued on the channel
// (false only when none can be). It is the channel reader's hint.
func (ch *CompChannel) mayHaveEvent() bool {
	ch.armMu.Lock()
	may := ch.queued > 0 || len(ch.armed) > armScan
	for i := 0; !may && i < len(ch.armed); i++ {
		cq := ch.armed[i]
		if cq.drv.moved(cq.arm.snap) {
			ch.unarm(cq)
			cq.arm.queued++
			ch.queued++
			may = true
		}
	}
	ch.armMu.Unlock()
	if !may {
		// The reader parks next without reading: an event queued from here
		// on must wake it (the VM tests queue one here).
		hook("comp_channel:park")
	}
	return may
}
