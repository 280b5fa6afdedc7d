package pingpong

import (
	"fmt"

	"github.com/pureverbs/pureverbs/uverbs"
)

// poller is what the loop needs of a CQ (*uverbs.CQ; a fake in tests).
type poller interface {
	Poll(wcs []uverbs.WC) (int, error)
}

// loop is the ping-pong itself, shared by the four tools: busy-poll the
// CQ; count send and receive completions; refill the receive queue when
// it runs low; and as soon as a QP has both its send and its receive
// completed, send again, until iters of each are done. The client starts
// with a send in flight on every QP, the server only waits.
type loop struct {
	cq       poller
	wc       []uverbs.WC // completions read per poll (2; srq: QPs + rx depth)
	iters    uint32
	rxDepth  int
	refillAt int // refill when the posted receives drop to this (1; srq: the QP count)
	routs    int // receives posted and not yet completed
	scnt     uint32
	rcnt     uint32
	pending  []int // per QP: the wr ids (recvWRID|sendWRID) still awaited
	postRecv func(n int) int
	postSend func(qp int) error
	qpIndex  func(qpn uint32) int // srq: the QP a completion belongs to; nil: QP 0
	// parseFailed adds rc_pingpong's "parse WC failed" line to errors
	// about a completion.
	parseFailed bool
	// waitEvent, with -e, sleeps until a completion event arrives and
	// re-arms the CQ; the loop then polls once (which may find nothing)
	// instead of polling until it finds a completion.
	waitEvent func() error
}

// run loops until iters sends and iters receives completed, or a
// completion fails.
func (l *loop) run() error {
	for l.rcnt < l.iters || l.scnt < l.iters {
		if l.waitEvent != nil {
			if err := l.waitEvent(); err != nil {
				return err
			}
		}
		var ne int
		for {
			n, err := l.cq.Poll(l.wc)
			if err != nil {
				return msgError{"poll CQ failed: " + err.Error()}
			}
			ne = n
			if ne > 0 || l.waitEvent != nil {
				break
			}
		}
		for i := 0; i < ne; i++ {
			if err := l.complete(&l.wc[i]); err != nil {
				if l.parseFailed {
					err = withLines(err, fmt.Sprintf("parse WC failed %d", ne))
				}
				return err
			}
		}
	}
	return nil
}

// complete handles one completion (parse_single_wc).
func (l *loop) complete(wc *uverbs.WC) error {
	id := int(int32(wc.ID)) // the C tools switch on (int) wr_id
	if wc.Status != uverbs.WCSuccess {
		return msgError{fmt.Sprintf("Failed status %s (%d) for wr_id %d", wc.Status, int(wc.Status), id)}
	}
	qi := 0
	if l.qpIndex != nil {
		if qi = l.qpIndex(wc.QPNum); qi < 0 {
			return msgError{fmt.Sprintf("Couldn't find QPN %06x", wc.QPNum)}
		}
	}
	switch id {
	case sendWRID:
		l.scnt++
	case recvWRID:
		l.routs--
		if l.routs <= l.refillAt {
			l.routs += l.postRecv(l.rxDepth - l.routs)
			if l.routs < l.rxDepth {
				return msgError{fmt.Sprintf("Couldn't post receive (%d)", l.routs)}
			}
		}
		l.rcnt++
	default:
		return msgError{fmt.Sprintf("Completion for unknown wr_id %d", id)}
	}
	l.pending[qi] &^= id
	if l.scnt < l.iters && l.pending[qi] == 0 {
		if err := l.postSend(qi); err != nil {
			return fail("Couldn't post send", err)
		}
		l.pending[qi] = recvWRID | sendWRID
	}
	return nil
}
