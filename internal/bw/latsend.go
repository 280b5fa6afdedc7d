package bw

import (
	"fmt"
	"io"

	"github.com/pureverbs/pureverbs/uverbs"
)

// latSendLoop is run_iter_lat_send: the two sides take turns sending one
// message, the client first; each waits for the peer's message (a
// receive completion) before sending its own, posts the receive again
// while the run still needs more than the rx depth, and asks for a send
// completion every cqMod messages (and for the last), which it waits
// for. Nothing is allocated per message.
type latSendLoop struct {
	qp       sender
	rqp      receiver
	scq, rcq poller
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
	y        yielder
}

// setup prepares a run of messages of size from my (an address of
// local, the registered memory at base), receiving into recv.
func (l *latSendLoop) setup(size uint64, local []byte, base, my, recv uint64, lkey uint32, inline int) {
	l.sge[0] = uverbs.SGE{Addr: my, Length: uint32(size), LKey: lkey}
	l.wr[0] = uverbs.SendWR{SGL: l.sge[:], Opcode: uverbs.WRSend}
	if size <= uint64(inline) {
		off := my - base
		l.wr[0].Flags |= uverbs.SendInline
		l.wr[0].SGL = nil
		l.wr[0].Inline = local[off : off+size]
	}
	l.rsge[0] = uverbs.SGE{Addr: recv, Length: uint32(size), LKey: lkey}
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

// pollOne polls cq until it returns a completion.
func (l *latSendLoop) pollOne(cq poller) error {
	for {
		n, err := cq.Poll(l.wc[:])
		if err != nil {
			return msgError{"poll CQ failed: " + err.Error()}
		}
		if n > 0 {
			return nil
		}
		l.y.check()
	}
}

// run runs iters turns and stamps each post.
func (l *latSendLoop) run() error {
	l.scnt, l.rcnt = 0, 0
	l.y.reset()
	for l.scnt < l.iters || l.rcnt < l.iters {
		if l.rcnt < l.iters && !(l.scnt < 1 && l.client) {
			if err := l.pollOne(l.rcq); err != nil {
				return err
			}
			if wc := &l.wc[0]; wc.Status != uverbs.WCSuccess {
				return msgError{" Completion with error at server",
					fmt.Sprintf(" Failed status %d: wr_id %d syndrom 0x%x", wc.Status, int(wc.ID), wc.VendorErr),
					fmt.Sprintf(" rcnt=%d", l.rcnt)}
			}
			l.rcnt++
			if l.rcnt+l.depth <= l.iters {
				if err := l.rqp.PostRecv(l.rwr[:]); err != nil {
					return msgError{fmt.Sprintf("Couldn't post recv: rcnt=%d", l.rcnt), "  (" + err.Error() + ")"}
				}
			}
		}
		if l.scnt < l.iters {
			l.posted[l.scnt] = stamp()
			l.scnt++
			signaled := l.scnt%l.cqMod == 0 || l.scnt == l.iters
			if signaled {
				l.wr[0].Flags |= uverbs.SendSignaled
			}
			if err := l.qp.PostSend(l.wr[:]); err != nil {
				return msgError{fmt.Sprintf("Couldn't post send: scnt=%d ", l.scnt), "  (" + err.Error() + ")"}
			}
			if signaled {
				if err := l.pollOne(l.scq); err != nil {
					return err
				}
				if wc := &l.wc[0]; wc.Status != uverbs.WCSuccess {
					return msgError{" Completion with error at client",
						fmt.Sprintf(" Failed status %d: wr_id %d syndrom 0x%x", wc.Status, int(wc.ID), wc.VendorErr),
						fmt.Sprintf("scnt=%d, ccnt=%d", l.scnt, l.scnt)}
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
	if t.verbose() {
		io.WriteString(t.stdout, resultLine+resultFmtLat)
	}
	l := &latSendLoop{qp: t.qps[0], rqp: t.qps[0], scq: t.sendCQ, rcq: t.recvCQ, client: t.client, iters: o.Iters,
		depth: uint64(o.RxDepth), cqMod: uint64(max(o.CQMod, 1)), posted: make([]int64, o.Iters)}
	delta := make([]uint64, o.Iters)
	lo := latOptions{unsorted: o.Unsorted, histogram: o.Histogram, verbose: t.verbose(), units: "usec"}
	if o.Cycles {
		lo.units = "cycles"
	}
	for _, size := range t.sizes() {
		l.setup(size, t.mem, t.mr.Addr(), t.localSlice(0), t.recvArea(0), t.mr.LKey(), o.Inline)
		if err := l.prepost(); err != nil {
			return withLines(err, " Failed to post receive recv_wqes")
		}
		if _, err := t.c.handshake(&t.my[0], withGID); err != nil {
			return err
		}
		if err := l.run(); err != nil {
			return sendFailed(err)
		}
		t.writeLat(size, l.posted, delta, lo)
	}
	t.rule()
	if err := t.c.closeConn(&t.my[0], withGID); err != nil {
		return withLines(err, " Failed to close connection between server and client")
	}
	t.c = nil
	return nil
}
