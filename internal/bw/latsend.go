package bw

import (
	"fmt"

	"github.com/pureverbs/pureverbs/uverbs"
)

// latSendLoop is run_iter_lat_send: the two sides take turns sending one
// message, the client first; each waits for the peer's message (a
// receive completion) before sending its own, posts the receive again
// while the run still needs more than the rx depth, and asks for a send
// completion every cqMod messages (and for the last), which it waits
// for. Nothing is allocated per message.
//
// With -e both CQs report to one completion channel and each wait polls
// its CQ first and sleeps on the channel only while the CQ is empty: an
// event taken for one CQ while the loop waited for the other is then
// never waited for again. (perftest sleeps first and polls once, and
// carries on even if that poll found nothing.) With -D the clock starts
// at the first receive, as perftest's set_on_first_rx_packet does, and
// the loop runs until it ends.
type latSendLoop struct {
	qp       sender
	rqp      receiver
	scq, rcq poller
	events   waiter // -e; nil polls
	client   bool
	iters    uint64
	depth    uint64 // receives posted before the run
	cqMod    uint64
	wr       [1]uverbs.SendWR
	sge      [1]uverbs.SGE
	rwr      [1]uverbs.RecvWR
	rsge     [1]uverbs.SGE
	wc       [1]uverbs.WC
	posted   []int64
	scnt     uint64
	rcnt     uint64
	gap      int64 // --latency_gap in stamp units
	y        yielder
	// -D: the clock, whose timing receives the measured stretch's ends,
	// and the receives within it (perftest's iters).
	dur     *duration
	tm      timing
	sampled uint64
}

// setup prepares a run of messages of size from my (an address of
// local, the registered memory at base), receiving into recv. A UD
// message goes to the peer's QP remQPN through ah, and its receive
// leaves room for the GRH (grh bytes) before it.
func (l *latSendLoop) setup(size uint64, local []byte, base, my, recv uint64, lkey uint32, inline int, ah *uverbs.AH, remQPN, remQKey uint32, grh uint64) {
	l.sge[0] = uverbs.SGE{Addr: my, Length: uint32(size), LKey: lkey}
	l.wr[0] = uverbs.SendWR{SGL: l.sge[:], Opcode: uverbs.WRSend}
	if ah != nil {
		l.wr[0].AH, l.wr[0].RemoteQPN, l.wr[0].RemoteQKey = ah, remQPN, remQKey
	}
	if size <= uint64(inline) {
		off := my - base
		l.wr[0].Flags |= uverbs.SendInline
		l.wr[0].SGL = nil
		l.wr[0].Inline = local[off : off+size]
	}
	l.rsge[0] = uverbs.SGE{Addr: recv, Length: uint32(size + grh), LKey: lkey}
	l.rwr[0] = uverbs.RecvWR{SGL: l.rsge[:]}
}

// prepost posts the run's first receives (ctx_set_recv_wqes).
func (l *latSendLoop) prepost() error {
	for j := uint64(0); j < l.depth; j++ {
		if err := l.rqp.PostRecv(l.rwr[:]); err != nil {
			return msgError{fmt.Sprintf("Couldn't post recv Qp = 0: counter=%d", j), "  (" + err.Error() + ")"}
		}
	}
	return nil
}

// pollOne polls cq until it returns a completion, or until the -D clock
// ends the run when ends is set (false then). With -e it sleeps on the
// channel while cq is empty.
func (l *latSendLoop) pollOne(cq poller, ends bool) (bool, error) {
	for {
		if ends && l.dur.phase.Load() == phaseEnd {
			return false, nil
		}
		n, err := cq.Poll(l.wc[:])
		if err != nil {
			return false, msgError{"poll CQ failed: " + err.Error()}
		}
		if n > 0 {
			return true, nil
		}
		if l.events != nil {
			if err := l.events.wait(); err != nil {
				if l.y.peerLost() {
					return false, errPeerGone
				}
				return false, msgError{" Failed to notify events to CQ", "  (" + err.Error() + ")"}
			}
			continue
		}
		if l.y.check() && l.y.peerLost() {
			return false, errPeerGone
		}
	}
}

// run runs iters turns and stamps each post; with -D (dur) it runs
// until the time is up and counts the receives of the measured stretch
// in sampled.
func (l *latSendLoop) run() error {
	l.scnt, l.rcnt, l.sampled = 0, 0, 0
	l.y.reset()
	timed := l.dur != nil
	if timed {
		// Not started until the first receive: no end yet.
		l.dur.phase.Store(phaseWarmUp)
		defer l.dur.halt()
	}
	end := func() bool { return timed && l.dur.phase.Load() == phaseEnd }
	first := true
	for l.scnt < l.iters || l.rcnt < l.iters || (timed && !end()) {
		if (l.rcnt < l.iters || timed) && !(l.scnt < 1 && l.client) {
			got, err := l.pollOne(l.rcq, timed)
			if err != nil {
				return err
			}
			if !got {
				break // the time is up
			}
			if first {
				first = false
				if timed {
					l.dur.start(&l.tm)
				}
			}
			if wc := &l.wc[0]; wc.Status != uverbs.WCSuccess {
				return recvCompError(wc, l.rcnt)
			}
			l.rcnt++
			if timed && l.dur.phase.Load() == phaseSample {
				l.sampled++
			}
			if timed || l.rcnt+l.depth <= l.iters {
				if err := l.rqp.PostRecv(l.rwr[:]); err != nil {
					return msgError{fmt.Sprintf("Couldn't post recv: rcnt=%d", l.rcnt), "  (" + err.Error() + ")"}
				}
			}
		}
		if l.scnt < l.iters || (timed && !end()) {
			gapSpin(l.gap, &l.y)
			if !timed {
				l.posted[l.scnt] = stamp()
			}
			l.scnt++
			signaled := l.scnt%l.cqMod == 0 || (!timed && l.scnt == l.iters)
			if end() {
				break
			}
			if signaled {
				l.wr[0].Flags |= uverbs.SendSignaled
			}
			if err := l.qp.PostSend(l.wr[:]); err != nil {
				return msgError{fmt.Sprintf("Couldn't post send: scnt=%d ", l.scnt), "  (" + err.Error() + ")"}
			}
			if signaled {
				if _, err := l.pollOne(l.scq, false); err != nil {
					return err
				}
				if wc := &l.wc[0]; wc.Status != uverbs.WCSuccess {
					return sendCompError(wc, l.scnt, l.scnt)
				}
				l.wr[0].Flags &^= uverbs.SendSignaled
			}
		}
	}
	return nil
}

// runLatSend is the rest of ib_send_lat: per size, the receives posted,
// a handshake (so that no message finds the peer without receives), a
// run and a line on both sides; the closing rule and handshake. A failed
// run ends with perftest's status 17.
func (t *test) runLatSend() error {
	o := &t.o
	withGID := t.gidIndex != -1
	l := &latSendLoop{qp: t.qps[0], rqp: t.qps[0], scq: t.sendCQ, rcq: t.recvCQ, client: t.client, iters: o.Iters,
		depth: uint64(o.RxDepth), cqMod: uint64(max(o.CQMod, 1)), posted: make([]int64, o.Iters), gap: gapStamps(o.LatencyGap)}
	if t.srq != nil {
		l.rqp = t.srq // --use-srq: the QP takes its receives from the SRQ
	}
	l.dur, l.tm = t.latClock()
	if t.ch != nil {
		// send_lat arms both CQs, on one channel, before the heading.
		w, err := t.armEvents(t.sendCQ, t.recvCQ)
		if err != nil {
			return err
		}
		l.events = w
	}
	t.latHeading()
	var ah *uverbs.AH
	var remQPN, remQKey uint32
	var g uint64
	if o.Conn == UD {
		ah, g = t.ahs[0], grh
		remQPN, remQKey = t.udPeer(0)
	}
	delta := make([]uint64, o.Iters)
	lo := t.latOptions()
	for _, size := range t.sizes() {
		l.setup(size, t.mem, t.base(), t.localSlice(0), t.recvArea(0), t.mrOf(0).LKey(), o.Inline, ah, remQPN, remQKey, g)
		if err := l.prepost(); err != nil {
			return withLines(err, " Failed to post receive recv_wqes")
		}
		if _, err := t.c.handshake(&t.my[0], withGID); err != nil {
			return err
		}
		// Watched while it runs; the next size's handshake or the
		// closing one may come early.
		unwatch := t.watchPeer(&l.y, l.events)
		err := l.run()
		if uerr := unwatch(); err == nil && uerr != nil {
			err = msgError{"  (" + uerr.Error() + ")"}
		}
		if err != nil {
			return failed17(err)
		}
		t.reportLat(size, l.dur, l.sampled, &l.tm, l.posted, delta, lo)
	}
	t.rule()
	if err := t.c.closeConn(&t.my[0], withGID); err != nil {
		// send_lat goes on to free its side and exits 0 (unlike the
		// other latency tools, which fail).
		t.closeFailed(err, "Failed to close connection between server and client")
		return nil
	}
	t.c = nil
	return nil
}
