package rdmacm_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/async"
	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/rdmacm"
	"github.com/pureverbs/pureverbs/uverbs"
)

const (
	srqClients    = 4
	srqSlot       = 4096
	srqCounterOff = srqClients * srqSlot // 8-byte shared counter after the slots
	srqRegion     = srqCounterOff + 8
	srqRecvSize   = 256
	srqDepth      = 64
	srqFetchAdds  = 50
)

// srqServer is an rdma_cm server: one listener, one channel for every
// connection's events, one PD, one SRQ, one send CQ and one receive CQ
// shared by all the connections' QPs.
type srqServer struct {
	t      *testing.T
	ch     *rdmacm.EventChannel
	listen *rdmacm.ID
	pd     *uverbs.PD
	srq    *uverbs.SRQ
	scq    *cq.CQ
	rcq    *cq.CQ
	cch    *cq.Channel // shared by scq and rcq, or nil
	region []byte
	mr     *uverbs.MR
	rbufs  []byte
	rmr    *uverbs.MR
	sbufs  []byte
	smr    *uverbs.MR

	mu       sync.Mutex
	bySlot   map[uint32]*rdmacm.ID
	slotOfQP map[uint32]uint32 // QPN -> slot
	nextSlot uint32
	msgs     map[uint32][]string // slot -> SEND payloads received
	imms     map[uint32][]uint32 // slot -> immediate data received
	live     int                 // connections not yet torn down
	reqs     []rdmacm.ConnParam  // the connect requests' parameters
	qpns     map[uint32]bool     // the server QPs' numbers
	accepted int
	errs     []error
	nrecv    int           // receive completions handled
	recvDone chan struct{} // closed when every client's two have been
}

func (s *srqServer) fail(err error) {
	s.mu.Lock()
	s.errs = append(s.errs, err)
	s.mu.Unlock()
}

func newSRQServer(t *testing.T, shared bool) *srqServer {
	t.Helper()
	s := &srqServer{t: t, recvDone: make(chan struct{}), bySlot: map[uint32]*rdmacm.ID{}, slotOfQP: map[uint32]uint32{},
		msgs: map[uint32][]string{}, imms: map[uint32][]uint32{}}
	var err error
	if s.ch, err = rdmacm.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.ch.Close() }) // on a failed set-up; else ErrClosed
	if s.listen, err = s.ch.CreateID(rdmacm.PortSpaceTCP); err != nil {
		t.Fatal(err)
	}
	if err = s.listen.BindAddr(netip.AddrPortFrom(netip.MustParseAddr(testkit.RxeAddr), 0)); err != nil {
		t.Fatal(err)
	}
	if err = s.listen.Listen(8); err != nil {
		t.Fatal(err)
	}
	vc := s.listen.Context()
	if vc == nil {
		t.Fatal("listener bound to a specific address has no Context")
	}
	if s.pd, err = vc.AllocPD(); err != nil {
		t.Fatal(err)
	}
	s.region = make([]byte, srqRegion)
	if s.mr, err = s.pd.RegMR(s.region, uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite|uverbs.AccessRemoteRead|uverbs.AccessRemoteAtomic); err != nil {
		t.Fatal(err)
	}
	s.rbufs = make([]byte, srqDepth*srqRecvSize)
	if s.rmr, err = s.pd.RegMR(s.rbufs, uverbs.AccessLocalWrite); err != nil {
		t.Fatal(err)
	}
	s.sbufs = make([]byte, srqClients*srqRecvSize)
	if s.smr, err = s.pd.RegMR(s.sbufs, 0); err != nil {
		t.Fatal(err)
	}
	if s.srq, err = s.pd.CreateSRQ(uverbs.SRQAttr{MaxWR: srqDepth, MaxSGE: 1}); err != nil {
		t.Fatal(err)
	}
	var opts *cq.Options
	if shared {
		if s.cch, err = cq.NewChannel(vc); err != nil {
			t.Fatal(err)
		}
		opts = &cq.Options{Channel: s.cch}
	}
	if s.scq, err = cq.New(vc, 128, opts); err != nil {
		t.Fatal(err)
	}
	if s.rcq, err = cq.New(vc, 128, opts); err != nil {
		t.Fatal(err)
	}
	for i := range srqDepth {
		if err := s.srq.PostRecv([]uverbs.RecvWR{{ID: uint64(i), SGL: []uverbs.SGE{s.rmr.SGE(i*srqRecvSize, srqRecvSize)}}}); err != nil {
			t.Fatalf("SRQ PostRecv %d: %v", i, err)
		}
	}
	return s
}

func (s *srqServer) addr() netip.AddrPort { return s.listen.LocalAddr() }

// close releases everything in reverse order, reporting errors.
func (s *srqServer) close(ctx context.Context) {
	t := s.t
	t.Helper()
	check := func(what string, err error) {
		if err != nil {
			t.Errorf("server %s: %v", what, err)
		}
	}
	check("listen Destroy", s.listen.Destroy())
	check("send CQ Close", s.scq.Close(ctx))
	check("recv CQ Close", s.rcq.Close(ctx))
	if s.cch != nil {
		check("CQ channel Close", s.cch.Close())
	}
	check("SRQ Destroy", s.srq.Destroy(ctx))
	check("MR Dereg", s.mr.Dereg())
	check("rMR Dereg", s.rmr.Dereg())
	check("sMR Dereg", s.smr.Dereg())
	check("PD Dealloc", s.pd.Dealloc())
	check("channel Close", s.ch.Close())
}

// events runs the server's connection manager loop until every accepted
// connection has disconnected and been torn down (after want accepts).
func (s *srqServer) events(ctx context.Context, want int) error {
	for {
		s.mu.Lock()
		done := s.accepted == want && s.live == 0
		s.mu.Unlock()
		if done {
			return nil
		}
		ev, err := s.ch.GetEvent(ctx)
		if err != nil {
			return fmt.Errorf("server GetEvent: %w", err)
		}
		switch ev.Type {
		case rdmacm.EventConnectRequest:
			qp, err := ev.ID.CreateQP(s.pd, uverbs.QPInitAttr{Type: uverbs.QPTypeRC,
				SendCQ: s.scq.Verbs(), RecvCQ: s.rcq.Verbs(), SRQ: s.srq,
				Cap: uverbs.QPCap{MaxSendWR: 16, MaxSendSGE: 1}})
			if err != nil {
				ev.ID.Reject(nil)
				ev.ID.Destroy()
				return fmt.Errorf("server CreateQP: %w", err)
			}
			s.mu.Lock()
			slot := s.nextSlot
			s.nextSlot++
			s.bySlot[slot] = ev.ID
			s.slotOfQP[qp.QPN()] = slot
			s.accepted++
			s.live++
			s.reqs = append(s.reqs, ev.Param)
			if s.qpns == nil {
				s.qpns = map[uint32]bool{}
			}
			s.qpns[qp.QPN()] = true
			s.mu.Unlock()
			pdata := make([]byte, 16)
			binary.LittleEndian.PutUint64(pdata[0:], s.mr.Addr())
			binary.LittleEndian.PutUint32(pdata[8:], s.mr.RKey())
			binary.LittleEndian.PutUint32(pdata[12:], slot)
			if err := ev.ID.Accept(&rdmacm.ConnParam{PrivateData: pdata,
				ResponderResources: 0xff, InitiatorDepth: 0xff, RetryCount: 7, RNRRetryCount: 7}); err != nil {
				return fmt.Errorf("server Accept: %w", err)
			}
		case rdmacm.EventEstablished:
		case rdmacm.EventDisconnected:
			// Answer the peer's DREQ, then tear the connection down.
			if err := ev.ID.Disconnect(); err != nil {
				s.fail(fmt.Errorf("server Disconnect: %w", err))
			}
			if err := ev.ID.DestroyQP(ctx); err != nil {
				s.fail(fmt.Errorf("server DestroyQP: %w", err))
			}
			if err := ev.ID.Destroy(); err != nil {
				s.fail(fmt.Errorf("server ID Destroy: %w", err))
			}
			s.mu.Lock()
			s.live--
			s.mu.Unlock()
		case rdmacm.EventTimewaitExit:
		default:
			return fmt.Errorf("server: unexpected event %v", &ev)
		}
	}
}

// recvLoop consumes the receive CQ, event-driven, reposting each receive
// to the SRQ; every SEND is answered with a SEND back to its QP.
func (s *srqServer) recvLoop(ctx context.Context) error {
	wcs := make([]uverbs.WC, 8)
	for {
		n, err := s.rcq.GetWC(wcs)
		if err != nil {
			return err
		}
		if n == 0 {
			if err := s.rcq.Wait(ctx); err != nil {
				return err
			}
			continue
		}
		for _, wc := range wcs[:n] {
			if err := s.handleRecv(wc); err != nil {
				return err
			}
		}
	}
}

// sharedLoop consumes both CQs through their shared completion channel.
func (s *srqServer) sharedLoop(ctx context.Context) error {
	wcs := make([]uverbs.WC, 8)
	for {
		q, err := s.cch.Wait(ctx)
		if err != nil {
			return err
		}
		for {
			n, err := q.GetWC(wcs)
			if err != nil {
				return err
			}
			if n == 0 {
				break
			}
			for _, wc := range wcs[:n] {
				switch q {
				case s.rcq:
					err = s.handleRecv(wc)
				case s.scq:
					if wc.Status != uverbs.WCSuccess || wc.Opcode != uverbs.WCSend {
						err = fmt.Errorf("server send completion %+v (%v)", wc, wc.Status)
					}
				default:
					err = fmt.Errorf("Channel.Wait returned an unknown CQ %p", q)
				}
				if err != nil {
					return err
				}
			}
		}
	}
}

// handleRecv handles one receive completion and reposts its buffer.
func (s *srqServer) handleRecv(wc uverbs.WC) error {
	if wc.Status != uverbs.WCSuccess {
		return fmt.Errorf("server recv completion %d: %v", wc.ID, wc.Status)
	}
	s.mu.Lock()
	slot, ok := s.slotOfQP[wc.QPNum]
	id := s.bySlot[slot]
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("recv completion for unknown QP %d", wc.QPNum)
	}
	switch wc.Opcode {
	case uverbs.WCRecv:
		msg := string(s.rbufs[int(wc.ID)*srqRecvSize:][:wc.ByteLen])
		s.mu.Lock()
		s.msgs[slot] = append(s.msgs[slot], msg)
		s.mu.Unlock()
		reply := s.sbufs[int(slot)*srqRecvSize:][:srqRecvSize]
		m := copy(reply, "ack:"+msg)
		if err := id.QP().PostSend([]uverbs.SendWR{{ID: uint64(slot), Opcode: uverbs.WRSend,
			Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{s.smr.SGE(int(slot)*srqRecvSize, m)}}}); err != nil {
			return fmt.Errorf("server reply PostSend: %w", err)
		}
	case uverbs.WCRecvRDMAWithImm:
		if wc.Flags&uverbs.WCWithImm == 0 {
			return fmt.Errorf("write-with-imm completion without WCWithImm: %+v", wc)
		}
		s.mu.Lock()
		s.imms[slot] = append(s.imms[slot], wc.ImmData)
		s.mu.Unlock()
	default:
		return fmt.Errorf("server recv completion opcode %v", wc.Opcode)
	}
	if err := s.srq.PostRecv([]uverbs.RecvWR{{ID: wc.ID, SGL: []uverbs.SGE{s.rmr.SGE(int(wc.ID)*srqRecvSize, srqRecvSize)}}}); err != nil {
		return fmt.Errorf("SRQ repost: %w", err)
	}
	s.mu.Lock()
	if s.nrecv++; s.nrecv == 2*srqClients {
		close(s.recvDone)
	}
	s.mu.Unlock()
	return nil
}

// sendLoop consumes the server's send CQ.
func (s *srqServer) sendLoop(ctx context.Context) error {
	for wc, err := range s.scq.All(ctx, nil) {
		if err != nil {
			return err
		}
		if wc.Status != uverbs.WCSuccess || wc.Opcode != uverbs.WCSend {
			return fmt.Errorf("server send completion %+v (%v)", wc, wc.Status)
		}
	}
	return nil
}

// srqClient is one connection's active side, with an event channel, a PD, a
// send and a receive CQ of its own.
type srqClient struct {
	ch       *rdmacm.EventChannel
	id       *rdmacm.ID
	pd       *uverbs.PD
	scq, rcq *cq.CQ
	buf      []byte
	mr       *uverbs.MR
	raddr    uint64
	rkey     uint32
	slot     uint32
	est      rdmacm.Event // the EventEstablished
}

// srqConnect is the client's connection set-up, as rdma_client does it.
func srqConnect(ctx context.Context, dst netip.AddrPort, sendDepth int) (c *srqClient, err error) {
	c = &srqClient{}
	defer func() {
		if err != nil {
			c.close(ctx)
			c = nil
		}
	}()
	if c.ch, err = rdmacm.Open(); err != nil {
		return
	}
	if c.id, err = c.ch.CreateID(rdmacm.PortSpaceTCP); err != nil {
		return
	}
	next := func(want rdmacm.EventType) (rdmacm.Event, error) {
		ev, err := c.ch.GetEvent(ctx)
		if err == nil && (ev.Type != want || ev.Status != 0) {
			err = fmt.Errorf("event %v, want %v", &ev, want)
		}
		return ev, err
	}
	if err = c.id.ResolveAddr(netip.AddrPort{}, dst, 2*time.Second); err != nil {
		return
	}
	if _, err = next(rdmacm.EventAddrResolved); err != nil {
		return
	}
	if err = c.id.ResolveRoute(2 * time.Second); err != nil {
		return
	}
	if _, err = next(rdmacm.EventRouteResolved); err != nil {
		return
	}
	vc := c.id.Context()
	if c.pd, err = vc.AllocPD(); err != nil {
		return
	}
	if c.scq, err = cq.New(vc, 32, nil); err != nil {
		return
	}
	if c.rcq, err = cq.New(vc, 32, nil); err != nil {
		return
	}
	c.buf = make([]byte, 3*srqSlot)
	if c.mr, err = c.pd.RegMR(c.buf, uverbs.AccessLocalWrite); err != nil {
		return
	}
	if _, err = c.id.CreateQP(c.pd, uverbs.QPInitAttr{Type: uverbs.QPTypeRC,
		SendCQ: c.scq.Verbs(), RecvCQ: c.rcq.Verbs(),
		Cap: uverbs.QPCap{MaxSendWR: sendDepth, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		return
	}
	if err = c.id.Connect(&rdmacm.ConnParam{ResponderResources: 0xff, InitiatorDepth: 0xff, RetryCount: 7, RNRRetryCount: 7}); err != nil {
		return
	}
	ev, err := next(rdmacm.EventEstablished)
	if err != nil {
		return
	}
	if len(ev.Param.PrivateData) < 16 {
		return c, fmt.Errorf("established event private data %d bytes: %x", len(ev.Param.PrivateData), ev.Param.PrivateData)
	}
	c.est = ev
	c.raddr = binary.LittleEndian.Uint64(ev.Param.PrivateData[0:])
	c.rkey = binary.LittleEndian.Uint32(ev.Param.PrivateData[8:])
	c.slot = binary.LittleEndian.Uint32(ev.Param.PrivateData[12:])
	return c, nil
}

// disconnect ends the connection and waits for EventDisconnected.
func (c *srqClient) disconnect(ctx context.Context) error {
	if err := c.id.Disconnect(); err != nil {
		return fmt.Errorf("Disconnect: %w", err)
	}
	for {
		ev, err := c.ch.GetEvent(ctx)
		if err != nil {
			return fmt.Errorf("waiting for DISCONNECTED: %w", err)
		}
		if ev.Type == rdmacm.EventDisconnected {
			return nil
		}
		if ev.Type != rdmacm.EventTimewaitExit {
			return fmt.Errorf("waiting for DISCONNECTED: %v", &ev)
		}
	}
}

// close releases what connect made; it tolerates a partial set-up.
func (c *srqClient) close(ctx context.Context) []error {
	var errs []error
	add := func(what string, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("client %s: %w", what, err))
		}
	}
	if c.id != nil {
		if c.id.QP() != nil {
			add("DestroyQP", c.id.DestroyQP(ctx))
		}
		add("ID Destroy", c.id.Destroy())
	}
	if c.mr != nil {
		add("MR Dereg", c.mr.Dereg())
	}
	if c.scq != nil {
		add("send CQ Close", c.scq.Close(ctx))
	}
	if c.rcq != nil {
		add("recv CQ Close", c.rcq.Close(ctx))
	}
	if c.pd != nil {
		add("PD Dealloc", c.pd.Dealloc())
	}
	if c.ch != nil {
		add("channel Close", c.ch.Close())
	}
	return errs
}

// waitWCs returns the next n completions of q, sleeping on its channel.
func waitWCs(ctx context.Context, q *cq.CQ, n int) ([]uverbs.WC, error) {
	out := make([]uverbs.WC, 0, n)
	wcs := make([]uverbs.WC, n)
	for len(out) < n {
		k, err := q.GetWC(wcs[:n-len(out)])
		if err != nil {
			return out, err
		}
		if k == 0 {
			if err := q.Wait(ctx); err != nil {
				return out, err
			}
			continue
		}
		out = append(out, wcs[:k]...)
	}
	return out, nil
}

// one signaled work request, waited for; the completion must succeed.
func (c *srqClient) do(ctx context.Context, wr uverbs.SendWR) (uverbs.WC, error) {
	wr.Flags |= uverbs.SendSignaled
	if err := c.id.QP().PostSend([]uverbs.SendWR{wr}); err != nil {
		return uverbs.WC{}, err
	}
	wcs, err := waitWCs(ctx, c.scq, 1)
	if err != nil {
		return uverbs.WC{}, err
	}
	if wcs[0].Status != uverbs.WCSuccess || wcs[0].ID != wr.ID {
		return wcs[0], fmt.Errorf("%v completion %d: %v", wr.Opcode, wcs[0].ID, wcs[0].Status)
	}
	return wcs[0], nil
}

// run is one client's workload: SEND and its reply, WRITE_WITH_IMM into
// its slot, READ back, fetch-adds on the shared counter.
func (c *srqClient) run(ctx context.Context, olds *[]uint64) error {
	qp := c.id.QP()
	// Post the receive for the server's reply before the SEND.
	rsge := c.mr.SGE(2*srqSlot, srqRecvSize)
	if err := qp.PostRecv([]uverbs.RecvWR{{ID: 100, SGL: []uverbs.SGE{rsge}}}); err != nil {
		return fmt.Errorf("PostRecv: %w", err)
	}
	msg := fmt.Sprintf("hello from slot %d", c.slot)
	n := copy(c.buf, msg)
	if _, err := c.do(ctx, uverbs.SendWR{ID: 1, Opcode: uverbs.WRSend, SGL: []uverbs.SGE{c.mr.SGE(0, n)}}); err != nil {
		return err
	}
	rwc, err := waitWCs(ctx, c.rcq, 1)
	if err != nil {
		return fmt.Errorf("reply: %w", err)
	}
	if rwc[0].Status != uverbs.WCSuccess || rwc[0].Opcode != uverbs.WCRecv {
		return fmt.Errorf("reply completion %+v (%v)", rwc[0], rwc[0].Status)
	}
	if got := string(c.buf[2*srqSlot:][:rwc[0].ByteLen]); got != "ack:"+msg {
		return fmt.Errorf("reply %q", got)
	}

	// WRITE_WITH_IMM a pattern into the slot, then READ it back.
	pat := c.buf[:srqSlot]
	for i := range pat {
		pat[i] = byte(int(c.slot)*31 + i)
	}
	remote := c.raddr + uint64(c.slot)*srqSlot
	if _, err := c.do(ctx, uverbs.SendWR{ID: 2, Opcode: uverbs.WRRDMAWriteWithImm, ImmData: 0xabc00 + c.slot,
		SGL: []uverbs.SGE{c.mr.SGE(0, srqSlot)}, RemoteAddr: remote, RKey: c.rkey}); err != nil {
		return err
	}
	back := c.buf[srqSlot : 2*srqSlot]
	clear(back)
	if _, err := c.do(ctx, uverbs.SendWR{ID: 3, Opcode: uverbs.WRRDMARead,
		SGL: []uverbs.SGE{c.mr.SGE(srqSlot, srqSlot)}, RemoteAddr: remote, RKey: c.rkey}); err != nil {
		return err
	}
	if !bytes.Equal(back, pat) {
		return fmt.Errorf("READ back differs from what was written")
	}

	// Fetch-adds on the shared counter; the old values go to olds.
	for i := range srqFetchAdds {
		wc, err := c.do(ctx, uverbs.SendWR{ID: uint64(1000 + i), Opcode: uverbs.WRAtomicFetchAndAdd,
			SGL: []uverbs.SGE{c.mr.SGE(2*srqSlot+srqRecvSize, 8)}, RemoteAddr: c.raddr + srqCounterOff, RKey: c.rkey, CompareAdd: 1})
		if err != nil {
			return err
		}
		if wc.Opcode != uverbs.WCFetchAdd || wc.ByteLen != 8 {
			return fmt.Errorf("fetch-add completion opcode %v len %d", wc.Opcode, wc.ByteLen)
		}
		*olds = append(*olds, binary.NativeEndian.Uint64(c.buf[2*srqSlot+srqRecvSize:]))
	}
	return nil
}

// TestVMSRQServer is an rdma_cm server as an application writes one:
// several clients connect at once, each to a QP of its own; the server's
// QPs take their receives from one SRQ and complete on one send and one
// receive cq.CQ (each with its own completion channel, or both on one
// shared cq.Channel), consumed event-driven under a context. Each client
// sends a message (answered by a send), writes with immediate into its
// slot of the memory region advertised in the accept's private data,
// reads the slot back, and fetch-adds on a counter shared by all; then
// it disconnects, and both ends take everything down (the leak checks).
// The server reads async events meanwhile: on 6.12, QPs attached to an
// SRQ that enter ERR report IBV_EVENT_QP_LAST_WQE_REACHED, which must
// name the server's QP.
func TestVMSRQServer(t *testing.T) {
	testkit.RequireVM(t)
	t.Run("separate", func(t *testing.T) { srqServerClients(t, false) })
	t.Run("shared-channel", func(t *testing.T) { srqServerClients(t, true) })
}

func srqServerClients(t *testing.T, shared bool) {
	testkit.LeakCheck(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	s := newSRQServer(t, shared)
	loopCtx, stopLoops := context.WithCancel(ctx)
	var loops sync.WaitGroup
	loopErrs := make(chan error, 4)
	if shared {
		loops.Go(func() { loopErrs <- s.sharedLoop(loopCtx) })
	} else {
		loops.Go(func() { loopErrs <- s.recvLoop(loopCtx) })
		loops.Go(func() { loopErrs <- s.sendLoop(loopCtx) })
	}
	evDone := make(chan error, 1)
	go func() { evDone <- s.events(ctx, srqClients) }()
	// Async events of the server's device, acknowledged at once.
	ar, err := async.NewReader(s.listen.Context())
	if err != nil {
		t.Fatal(err)
	}
	var asyncEvs []async.Event
	loops.Go(func() {
		for ev, err := range ar.All(loopCtx) {
			if err != nil {
				loopErrs <- fmt.Errorf("async: %w", err)
				return
			}
			asyncEvs = append(asyncEvs, ev)
			if err := ar.Ack(ev); err != nil {
				loopErrs <- fmt.Errorf("async Ack: %w", err)
				return
			}
		}
	})

	var wg sync.WaitGroup
	olds := make([][]uint64, srqClients)
	cerrs := make([]error, srqClients)
	slots := make([]uint32, srqClients)
	for i := range srqClients {
		wg.Go(func() {
			c, err := srqConnect(ctx, s.addr(), 16)
			if err != nil {
				cerrs[i] = fmt.Errorf("connect: %w", err)
				return
			}
			slots[i] = c.slot
			// librdmacm fills conn_param.srq from the QP: the server's QP has one.
			if !c.est.Param.SRQ {
				t.Errorf("client %d: EventEstablished Param.SRQ false, the server's QP uses an SRQ", i)
			}
			s.mu.Lock()
			known := s.qpns[c.est.Param.QPNum]
			s.mu.Unlock()
			if !known {
				t.Errorf("client %d: EventEstablished Param.QPNum %d is not a server QP", i, c.est.Param.QPNum)
			}
			err = c.run(ctx, &olds[i])
			if err == nil {
				err = c.disconnect(ctx)
			}
			cerrs[i] = errors.Join(append([]error{err}, c.close(ctx)...)...)
		})
	}
	wg.Wait()
	for i, err := range cerrs {
		if err != nil {
			t.Errorf("client %d: %v", i, err)
		}
	}
	if err := <-evDone; err != nil {
		t.Errorf("server events: %v", err)
	}
	// A write-with-imm's receive completion may still be on its way to
	// the loop when its writer has disconnected.
	select {
	case <-s.recvDone:
	case <-ctx.Done():
		t.Errorf("server: not every receive completion was handled: %v", ctx.Err())
	}
	stopLoops()
	loops.Wait()
	close(loopErrs)
	lastWQE := 0
	for _, ev := range asyncEvs {
		t.Logf("server async event: %v (element %T)", ev, ev.Element)
		if ev.Type == async.QPLastWQEReached {
			lastWQE++
			if qp, ok := ev.Element.(*uverbs.QP); !ok || !s.qpns[qp.QPN()] {
				t.Errorf("%v: element %v, want a server QP", ev, ev.Element)
			}
		}
	}
	t.Logf("%d server async events, %d LAST_WQE_REACHED", len(asyncEvs), lastWQE)
	for err := range loopErrs {
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("server loop: %v", err)
		}
	}
	s.mu.Lock()
	for i, p := range s.reqs {
		if p.SRQ || p.QPNum == 0 {
			t.Errorf("connect request %d: Param.SRQ %v QPNum %d, want false and the client's QP", i, p.SRQ, p.QPNum)
		}
	}
	for _, err := range s.errs {
		t.Errorf("server: %v", err)
	}
	for i := range srqClients {
		slot := slots[i]
		if want := []string{fmt.Sprintf("hello from slot %d", slot)}; !slices.Equal(s.msgs[slot], want) {
			t.Errorf("slot %d: messages %q, want %q", slot, s.msgs[slot], want)
		}
		if want := []uint32{0xabc00 + slot}; !slices.Equal(s.imms[slot], want) {
			t.Errorf("slot %d: immediates %x, want %x", slot, s.imms[slot], want)
		}
		for j, b := range s.region[int(slot)*srqSlot:][:srqSlot] {
			if b != byte(int(slot)*31+j) {
				t.Errorf("slot %d byte %d: %d", slot, j, b)
				break
			}
		}
	}
	s.mu.Unlock()
	if got := binary.NativeEndian.Uint64(s.region[srqCounterOff:]); got != srqClients*srqFetchAdds {
		t.Errorf("counter %d, want %d", got, srqClients*srqFetchAdds)
	}
	all := slices.Concat(olds...)
	slices.Sort(all)
	for i, v := range all {
		if v != uint64(i) {
			t.Errorf("fetch-add old values are not 0..%d: %v", srqClients*srqFetchAdds-1, all)
			break
		}
	}
	s.close(ctx)
}
