package bw

import (
	"fmt"

	"github.com/pureverbs/pureverbs/uverbs"
)

// latReadLoop is run_iter_lat for RDMA READ and the atomics: only the
// client works. It stamps a post, reads size bytes of the server's memory
// (or runs an 8-byte atomic on it), waits for the request's completion
// (spinning on the CQ, or with -e sleeping on the completion channel)
// and posts the next. The sample is the time from
// one post to the next: one read, request and response, so perftest's
// rtt factor is 1. Nothing is allocated per message.
type latReadLoop struct {
	qp     sender
	cq     poller
	events waiter // -e: sleep until the CQ's next event; nil polls
	iters  uint64
	atomic bool // the atomic test: atomics (op) instead of reads
	op     AtomicOp
	wr     [1]uverbs.SendWR
	sge    [1]uverbs.SGE
	wc     [1]uverbs.WC
	posted []int64
	scnt   uint64
	gap    int64 // --latency_gap in stamp units
	y      yielder
	// -D: the clock, whose timing receives the measured stretch's ends,
	// and the completions within it (perftest's iters).
	dur     *duration
	tm      timing
	sampled uint64
}

// setup prepares a run of reads of size bytes from the peer's rem into
// my (or of atomics on rem, with perftest's operands: add 1, or compare
// with 0 and swap in 0).
func (l *latReadLoop) setup(size, my, rem uint64, rkey, lkey uint32) {
	l.sge[0] = uverbs.SGE{Addr: my, Length: uint32(size), LKey: lkey}
	l.wr[0] = uverbs.SendWR{SGL: l.sge[:], Opcode: uverbs.WRRDMARead, Flags: uverbs.SendSignaled, RemoteAddr: rem, RKey: rkey}
	switch {
	case l.atomic && l.op == CmpAndSwap:
		l.wr[0].Opcode = uverbs.WRAtomicCmpAndSwp
	case l.atomic:
		l.wr[0].Opcode, l.wr[0].CompareAdd = uverbs.WRAtomicFetchAndAdd, 1
	}
}

// run runs iters reads and stamps each post; with -D (dur) it runs until
// the time is up and counts the completions of the measured stretch in
// sampled.
func (l *latReadLoop) run() error {
	l.scnt, l.sampled = 0, 0
	l.y.reset()
	timed := l.dur != nil
	if timed {
		l.dur.start(&l.tm)
		defer l.dur.halt()
	}
	for l.scnt < l.iters || (timed && l.dur.phase.Load() != phaseEnd) {
		gapSpin(l.gap, &l.y)
		if !timed {
			// perftest counts posts only when it stamps them: with
			// -D its failure lines say scnt=0.
			l.posted[l.scnt] = stamp()
			l.scnt++
		}
		if err := l.qp.PostSend(l.wr[:]); err != nil {
			return msgError{fmt.Sprintf("Couldn't post send: scnt=%d", l.scnt), "  (" + err.Error() + ")"}
		}
		if timed && l.dur.phase.Load() == phaseEnd {
			// perftest leaves the last read to the teardown.
			break
		}
		if err := l.complete(); err != nil {
			return err
		}
		if wc := &l.wc[0]; wc.Status != uverbs.WCSuccess {
			return sendCompError(wc, l.scnt, l.scnt)
		}
		if timed && l.dur.phase.Load() == phaseSample {
			l.sampled++
		}
	}
	return nil
}

// complete waits for the read's completion: polls until it comes, or
// with -e sleeps on the channel and polls after each event. (perftest
// polls once after an event and would post the next read even if that
// poll found nothing; an event here always precedes a completion, and
// the loop never posts before the last read completed.)
func (l *latReadLoop) complete() error {
	for {
		if l.events != nil {
			if err := l.events.wait(); err != nil {
				if l.y.peerLost() {
					return errPeerGone
				}
				return msgError{"Couldn't request CQ notification", "  (" + err.Error() + ")"}
			}
		}
		n, err := l.cq.Poll(l.wc[:])
		if err != nil {
			return msgError{"poll CQ failed: " + err.Error()}
		}
		if n > 0 {
			return nil
		}
		// A server that has gone never answers the read, and rxe
		// retries it for ever at the retry count of 7 that perftest
		// sets: perftest's client waits for ever.
		if l.events == nil && l.y.check() && l.y.peerLost() {
			return errPeerGone
		}
	}
}

// runLatRead is the rest of ib_read_lat. Only the client reads: the
// server closes the connection (a handshake it waits in until the client
// has finished) and prints the closing rule. The client prints the
// table's heading, a line per size and the rule, then closes the
// connection. A failed run ends with perftest's status 17.
func (t *test) runLatRead() error {
	o := &t.o
	withGID := t.gidIndex != -1
	if !t.client {
		if err := t.c.closeConn(&t.my[0], withGID); err != nil {
			return withLines(err, "Failed to close connection between server and client")
		}
		t.c = nil
		t.rule()
		return nil
	}
	l := &latReadLoop{qp: t.qps[0], cq: t.sendCQ, iters: o.Iters, posted: make([]int64, o.Iters), gap: gapStamps(o.LatencyGap)}
	l.atomic, l.op = t.v == Atomic, o.AtomicOp
	if t.ch != nil {
		w, err := t.armEvents(t.sendCQ)
		if err != nil {
			return err
		}
		l.events = w
	}
	t.latHeading()
	delta := make([]uint64, o.Iters)
	l.dur, l.tm = t.latClock()
	lo := t.latOptions()
	// The server sends nothing until the client's closing handshake:
	// its connection is watched throughout, unless a read to a server
	// that has gone fails by itself (watched).
	sizes := func() error {
		for _, size := range t.sizes() {
			l.setup(size, t.localSlice(0), t.rem[0].VAddr, t.rem[0].RKey, t.mrOf(0).LKey())
			if err := l.run(); err != nil {
				return err
			}
			t.reportLat(size, l.dur, l.sampled, &l.tm, l.posted, delta, lo)
		}
		return nil
	}
	if err := t.watched(&l.y, l.events, sizes)(); err != nil {
		return failed17(err)
	}
	if err := t.c.closeConn(&t.my[0], withGID); err != nil {
		return withLines(err, "Failed to close connection between server and client")
	}
	t.c = nil
	t.rule()
	return nil
}
