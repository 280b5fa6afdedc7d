package cq_test

import (
	"context"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/uverbs"
)

// Example_send is the README's data-path example: register memory, post a
// send, and sleep on the CQ's file descriptor until it completes. (It has
// no output to check, so go test compiles it without running it.)
func Example_send() {
	send := func(ctx context.Context, c *uverbs.Context, buf []byte) error {
		pd, err := c.AllocPD() // ibv_alloc_pd
		if err != nil {
			return err
		}
		mr, err := pd.RegMR(buf, uverbs.AccessLocalWrite) // ibv_reg_mr; keeps buf alive
		if err != nil {
			return err
		}
		q, err := cq.New(c, 64, nil) // a CQ with its own completion channel
		if err != nil {
			return err
		}
		qp, err := pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeRC,
			SendCQ: q.Verbs(), RecvCQ: q.Verbs(),
			Cap: uverbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			return err
		}
		// ... qp.Modify through INIT, RTR, RTS with the peer's QPN and GID ...
		err = qp.PostSend([]uverbs.SendWR{{ID: 1, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
			SGL: []uverbs.SGE{{Addr: mr.Addr(), Length: uint32(len(buf)), LKey: mr.LKey()}}}})
		if err != nil {
			return err // *uverbs.PostError names the request that failed
		}
		for wc, err := range q.All(ctx, nil) { // GetWC, and Wait on the fd when empty
			if err != nil {
				return err
			}
			if wc.ID == 1 {
				break // wc.Status.String() is ibv_wc_status_str's text
			}
		}
		return nil
	}
	_ = send
}

// ExampleCQ_Fd shows the seed's pattern (rpma_cq_get_fd(3)): a user's own
// event loop watches the descriptor; when it polls readable, Wait (which
// returns at once: it reads and acknowledges the event and re-arms the
// CQ), then GetWC until it finds nothing.
func ExampleCQ_Fd() {
	var q *cq.CQ // from cq.New
	fd, err := q.Fd()
	if err != nil {
		return // a nil or closed CQ: errors.Is(err, uverbs.ErrInvalid) or ErrClosed
	}
	_ = fd // add to epoll; when readable:
	ctx := context.Background()
	if err := q.Wait(ctx); err != nil {
		return
	}
	wcs := make([]uverbs.WC, 16)
	for {
		n, err := q.GetWC(wcs)
		if err != nil || n == 0 {
			break
		}
		_ = wcs[:n]
	}
}
