package bw

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	"github.com/pureverbs/pureverbs/internal/pingpong"
	"github.com/pureverbs/pureverbs/rdmacm"
	"github.com/pureverbs/pureverbs/uverbs"
)

// perftest's rdma_cm data exchange method (-z, and -R, which implies it):
// instead of a TCP connection, an RC QP connected through the RDMA CM on
// the test's port carries every exchange as one SEND, at most a struct
// pingpong_dest long. The client connects once (rdma_client_connect); the
// server listens, accepts the first request and stops listening
// (rdma_server_connect), so that the test's own rdma_cm QPs (-R) can
// listen on the same port afterwards.

// destWireSize is sizeof(struct pingpong_dest) on x86-64: five 32-bit
// fields, 4 bytes of padding, the 64-bit address, the GID, the SRQ number
// and the GID index. It is also the size of each receive.
const destWireSize = 56

// cmResolveTimeout is perftest's timeout for address and route
// resolution (2000 ms).
const cmResolveTimeout = 2 * time.Second

// cmAddrRetries is NUM_OF_RETRIES: how often rdma_client_connect resolves
// again after an ADDR_ERROR or ROUTE_ERROR.
const cmAddrRetries = 10

// encodeDestWire is rdma_write_keys' message: every field big-endian
// (perftest's HAVE_ENDIAN build), the padding zero.
func encodeDestWire(d *Dest, gidIndex int) []byte {
	b := make([]byte, destWireSize)
	be := binary.BigEndian
	be.PutUint32(b[0:], uint32(d.LID))
	be.PutUint32(b[4:], uint32(int32(d.OutReads)))
	be.PutUint32(b[8:], d.QPN)
	be.PutUint32(b[12:], d.PSN)
	be.PutUint32(b[16:], d.RKey)
	be.PutUint64(b[24:], d.VAddr)
	copy(b[32:48], d.GID[:])
	be.PutUint32(b[48:], d.SRQN)
	be.PutUint32(b[52:], uint32(int32(gidIndex)))
	return b
}

// decodeDestWire is rdma_read_keys: it takes the LID, outstanding reads,
// QPN, PSN, rkey, address and GID, and leaves the SRQ number and the GID
// index, which perftest does not read.
func decodeDestWire(b []byte) (Dest, error) {
	if len(b) < 48 {
		return Dest{}, msgError{fmt.Sprintf("a %d-byte key message, want %d", len(b), destWireSize)}
	}
	be := binary.BigEndian
	d := Dest{LID: uint16(be.Uint32(b[0:])), OutReads: int(int32(be.Uint32(b[4:]))), QPN: be.Uint32(b[8:]),
		PSN: be.Uint32(b[12:]), RKey: be.Uint32(b[16:]), VAddr: be.Uint64(b[24:])}
	copy(d.GID[:], b[32:48])
	return d, nil
}

// cmLink is the rdma_cm data exchange: its event channel (which owns
// the verbs Context), ID, and the QP's resources. Each exchange is
// symmetric, as over TCP: the client sends, then receives; the server
// receives, then sends. One receive is posted at a time, again after
// each message is read, which the alternation makes enough.
type cmLink struct {
	ctx context.Context // bounds each wait for a completion
	ch  *rdmacm.EventChannel
	id  *rdmacm.ID
	pd  *uverbs.PD
	buf *uverbs.Buffer
	mr  *uverbs.MR
	cc  *uverbs.CompChannel
	cq  *uverbs.CQ
	qp  *uverbs.QP

	client bool
	// gone: the peer has disconnected (watchCM saw it). Nothing more
	// will come, and what is sent is never acknowledged.
	gone atomic.Bool
	// Completions seen but not yet consumed: a receive may complete
	// while the send before it is awaited.
	sends, recvs int
	recvLen      int
	wcs          [4]uverbs.WC
}

// The link's buffer: what is sent starts at 0, what is received at
// cmRecvOff.
const cmRecvOff = 512

// dialCM connects the data exchange QP to the server (rdma_client_connect):
// resolve the address and the route (each again after an error, up to
// NUM_OF_RETRIES times), create the QP, post a receive, connect, and
// wait for ESTABLISHED.
func dialCM(ctx context.Context, host string, port, retry int) (*cmLink, error) {
	dst, err := resolveIPv4(ctx, host, port)
	if err != nil {
		return nil, err
	}
	l := &cmLink{ctx: ctx, client: true}
	if l.ch, err = rdmacm.Open(); err != nil {
		return nil, msgError{" rdma_create_event_channel failed", "  (" + err.Error() + ")"}
	}
	if l.id, err = l.ch.CreateID(rdmacm.PortSpaceTCP); err != nil {
		l.Close()
		return nil, msgError{"rdma_create_id failed", "  (" + err.Error() + ")"}
	}
	fail := func(lines ...string) (*cmLink, error) {
		l.Close()
		return nil, append(msgError(lines), " Unable to perform rdma_client function")
	}
	for tries := cmAddrRetries; ; {
		if tries == 0 {
			return fail(fmt.Sprintf("Received %d times ADDR_ERROR", cmAddrRetries))
		}
		if err := l.id.ResolveAddr(netip.AddrPort{}, dst, cmResolveTimeout); err != nil {
			return fail("rdma_resolve_addr failed", "  ("+err.Error()+")")
		}
		ev, err := l.ch.GetEvent(ctx)
		if err != nil {
			return fail("rdma_get_cm_events failed", "  ("+err.Error()+")")
		}
		if ev.Type == rdmacm.EventAddrError {
			tries--
			continue
		}
		if ev.Type != rdmacm.EventAddrResolved {
			return fail(fmt.Sprintf("unexpected CM event %d", ev.Type), "  ("+ev.String()+")")
		}
		break
	}
	for tries := cmAddrRetries; ; {
		if tries <= 0 {
			return fail(fmt.Sprintf("Received %d times ADDR_ERROR - aborting", cmAddrRetries))
		}
		if err := l.id.ResolveRoute(cmResolveTimeout); err != nil {
			return fail("rdma_resolve_route failed", "  ("+err.Error()+")")
		}
		ev, err := l.ch.GetEvent(ctx)
		if err != nil {
			return fail("rdma_get_cm_events failed", "  ("+err.Error()+")")
		}
		if ev.Type == rdmacm.EventRouteError {
			tries--
			continue
		}
		if ev.Type != rdmacm.EventRouteResolved {
			return fail(fmt.Sprintf("unexpected CM event %d", ev.Type), "  ("+ev.String()+")")
		}
		break
	}
	if err := l.create(l.id); err != nil {
		return fail(" Unable to create the resources needed by comm struct", "  ("+err.Error()+")")
	}
	if err := l.id.Connect(&rdmacm.ConnParam{RetryCount: uint8(retry), RNRRetryCount: 7}); err != nil {
		return fail("Function rdma_connect failed", "  ("+err.Error()+")")
	}
	ev, err := l.ch.GetEvent(ctx)
	if err != nil {
		return fail("rdma_get_cm_events failed", "  ("+err.Error()+")")
	}
	if ev.Type != rdmacm.EventEstablished {
		return fail(fmt.Sprintf("Unexpected CM event bl blka %d", ev.Type), "  ("+ev.String()+")")
	}
	return l, nil
}

// acceptCM listens on port (every IPv4 address), accepts the first
// connection request and stops listening (rdma_server_connect). It does
// not wait for ESTABLISHED: the client sends first, and its RNR retries
// cover a receive the server has not posted yet.
func acceptCM(ctx context.Context, port, retry int) (*cmLink, error) {
	if err := badService("", port, " Unable to perform rdma_server function"); err != nil {
		return nil, err
	}
	l := &cmLink{ctx: ctx}
	var err error
	if l.ch, err = rdmacm.Open(); err != nil {
		return nil, msgError{" rdma_create_event_channel failed", "  (" + err.Error() + ")"}
	}
	fail := func(lines ...string) (*cmLink, error) {
		l.Close()
		return nil, append(msgError(lines), " Unable to perform rdma_server function")
	}
	listen, err := l.ch.CreateID(rdmacm.PortSpaceTCP)
	if err != nil {
		return fail("rdma_create_id failed", "  ("+err.Error()+")")
	}
	if err := listen.BindAddr(netip.AddrPortFrom(netip.IPv4Unspecified(), uint16(port))); err != nil {
		return fail(" rdma_bind_addr failed", "  ("+err.Error()+")")
	}
	if err := listen.Listen(1); err != nil {
		return fail("rdma_listen failed", "  ("+err.Error()+")")
	}
	ev, err := l.ch.GetEvent(ctx)
	if err != nil {
		return fail("rdma_get_cm_events failed", "  ("+err.Error()+")")
	}
	if ev.Type != rdmacm.EventConnectRequest {
		return fail(fmt.Sprintf("bad event waiting for connect request %d", ev.Type), "  ("+ev.String()+")")
	}
	l.id = ev.ID
	if err := l.create(l.id); err != nil {
		l.id.Reject(nil)
		return fail(" Unable to create the resources needed by comm struct", "  ("+err.Error()+")")
	}
	if err := l.id.Accept(&rdmacm.ConnParam{RetryCount: uint8(retry), RNRRetryCount: 7}); err != nil {
		return fail("Function rdma_accept failed", "  ("+err.Error()+")")
	}
	if err := listen.Destroy(); err != nil {
		return fail("rdma_destroy_id failed", "  ("+err.Error()+")")
	}
	return l, nil
}

// resolveIPv4 is check_add_port's getaddrinfo: the host's first IPv4
// address ("*" is the loopback, "" no host, as getaddrinfo reads them).
func resolveIPv4(ctx context.Context, host string, port int) (netip.AddrPort, error) {
	if err := badService(host, port, " Unable to perform rdma_client function"); err != nil {
		return netip.AddrPort{}, err
	}
	h, err := pingpong.NetHost(host)
	if err == nil && h == "" { // glibc's NULL node, not passive
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), uint16(port)), nil
	}
	var addrs []netip.Addr
	if err == nil {
		addrs, err = net.DefaultResolver.LookupNetIP(ctx, "ip4", h)
	}
	if err != nil || len(addrs) == 0 {
		msg := "no IPv4 address"
		var dnsErr *net.DNSError
		if errors.As(err, &dnsErr) {
			msg = pingpong.GAIText(dnsErr)
		} else if err != nil {
			msg = err.Error()
		}
		lines := msgError{fmt.Sprintf("%s for %s:%d", msg, host, port), "Problem in resolving basic address and port",
			" Unable to perform rdma_client function"}
		if err != nil {
			lines = append(lines, "  ("+err.Error()+")")
		}
		return netip.AddrPort{}, lines
	}
	return netip.AddrPortFrom(addrs[0].Unmap(), uint16(port)), nil
}

// create makes the link's QP and what it needs on the ID's device, and
// posts the first receive.
func (l *cmLink) create(id *rdmacm.ID) error {
	dev := id.Context()
	var err error
	if l.buf, err = uverbs.AllocBuffer(4096); err != nil {
		return err
	}
	if l.pd, err = dev.AllocPD(); err != nil {
		return err
	}
	if l.mr, err = l.pd.RegMR(l.buf.Bytes(), uverbs.AccessLocalWrite); err != nil {
		return err
	}
	if l.cc, err = dev.CreateCompChannel(); err != nil {
		return err
	}
	if l.cq, err = dev.CreateCQ(4, &uverbs.CQOptions{Channel: l.cc}); err != nil {
		return err
	}
	if l.qp, err = id.CreateQP(l.pd, uverbs.QPInitAttr{SendCQ: l.cq, RecvCQ: l.cq,
		Cap: uverbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		return err
	}
	return l.postRecv()
}

func (l *cmLink) postRecv() error {
	return l.qp.PostRecv([]uverbs.RecvWR{{ID: syncSpecID, SGL: []uverbs.SGE{l.mr.SGE(cmRecvOff, destWireSize)}}})
}

// syncSpecID is perftest's SYNC_SPEC_ID, the exchange's work request ID.
const syncSpecID = 5

// send is rdma_write_data: one signaled SEND, awaited.
func (l *cmLink) send(my []byte) error {
	if len(my) > cmRecvOff {
		return fmt.Errorf("a %d-byte message", len(my))
	}
	copy(l.buf.Bytes(), my)
	if err := l.qp.PostSend([]uverbs.SendWR{{ID: syncSpecID, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{l.mr.SGE(0, len(my))}}}); err != nil {
		return fmt.Errorf("ibv_post_send failed: %w", err)
	}
	for l.sends == 0 {
		if err := l.wait(); err != nil {
			return err
		}
	}
	l.sends--
	return nil
}

// recv is rdma_read_data: wait for the peer's message, copy it out and
// post the next receive.
func (l *cmLink) recv(rem []byte) error {
	for l.recvs == 0 {
		if err := l.wait(); err != nil {
			return err
		}
	}
	l.recvs--
	copy(rem, l.buf.Bytes()[cmRecvOff:cmRecvOff+min(l.recvLen, len(rem))])
	if err := l.postRecv(); err != nil {
		return fmt.Errorf("couldn't post receive: %w", err)
	}
	return nil
}

// wait takes the completions there are, or blocks on the completion
// channel until one comes (or the run's context ends, or the peer
// disconnects: perftest's exchange polls for ever once the peer has
// gone, at the retry count of 7 that rxe never exhausts). After the
// disconnect it waits peerGoneGrace more for what the peer sent (or
// acknowledged) before it went.
func (l *cmLink) wait() error {
	armed, graceUsed := false, false
	for {
		n, err := l.cq.Poll(l.wcs[:])
		if err != nil {
			return err
		}
		if n > 0 {
			for _, wc := range l.wcs[:n] {
				if err := l.count(&wc); err != nil {
					return err
				}
			}
			return nil
		}
		if !armed {
			// Poll once more after arming: a completion that came
			// before it raises no event.
			if err := l.cq.ReqNotify(false); err != nil {
				return err
			}
			armed = true
			continue
		}
		var ctx context.Context
		var cancel context.CancelFunc
		stop := func() {}
		if l.gone.Load() {
			if graceUsed {
				return errCMGone
			}
			graceUsed = true
			ctx, cancel = context.WithTimeout(l.ctx, peerGoneGrace)
		} else {
			ctx, cancel = context.WithCancel(l.ctx)
			stop = l.watchCM(cancel)
		}
		cq, err := l.cc.GetCQEvent(ctx)
		stop()
		cancel()
		if err != nil {
			if l.gone.Load() && l.ctx.Err() == nil {
				continue // poll again, then the grace
			}
			return err
		}
		cq.AckEvents(1)
		armed = false
	}
}

// errCMGone is the exchange's error once the peer has disconnected.
var errCMGone = errors.New("the peer has disconnected (RDMA_CM_EVENT_DISCONNECTED)")

// watchCM reads the link's event channel until stop is called: if the
// peer disconnects first (its process ended, and the kernel destroyed
// its ID), or the channel fails, it sets gone and calls onGone. The
// channel carries nothing else once the link is up. Nothing is watched
// once gone is set.
func (l *cmLink) watchCM(onGone func()) (stop func()) {
	if l.gone.Load() {
		onGone()
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			ev, err := l.ch.GetEvent(ctx)
			// An event taken as stop came is still seen: it is not
			// on the channel any more.
			lost := err == nil && (ev.Type == rdmacm.EventDisconnected || ev.Type == rdmacm.EventDeviceRemoval)
			if !lost && ctx.Err() != nil {
				return
			}
			if lost || err != nil {
				l.gone.Store(true)
				onGone()
				return
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// count takes one completion of the link's QP.
func (l *cmLink) count(wc *uverbs.WC) error {
	if wc.Status != uverbs.WCSuccess || wc.ID != syncSpecID {
		return fmt.Errorf("bad wc status -- %d -- %d (%v)", int(wc.Status), wc.ID, wc.Status)
	}
	if wc.Opcode == uverbs.WCRecv {
		l.recvs++
		l.recvLen = int(wc.ByteLen)
	} else {
		l.sends++
	}
	return nil
}

// Close ends the connection and releases everything: the QP and what it
// needs, then the channel, which destroys the ID and closes the verbs
// Context it opened.
func (l *cmLink) Close() error {
	var err error
	if l.id != nil {
		l.id.Disconnect()
	}
	if l.qp != nil {
		err = errors.Join(err, l.qp.Destroy(context.Background()))
	}
	if l.mr != nil {
		err = errors.Join(err, l.mr.Dereg())
	}
	if l.cq != nil {
		err = errors.Join(err, l.cq.Destroy(context.Background()))
	}
	if l.cc != nil {
		err = errors.Join(err, l.cc.Close())
	}
	if l.pd != nil {
		err = errors.Join(err, l.pd.Dealloc())
	}
	if l.ch != nil {
		err = errors.Join(err, l.ch.Close())
	}
	if l.buf != nil {
		err = errors.Join(err, l.buf.Close())
	}
	*l = cmLink{}
	return err
}

// exchangeMethod is ctx_print_test_info's "Data ex. method".
func exchangeMethod(cm bool) string {
	if cm {
		return "rdma_cm"
	}
	return "Ethernet"
}

// cmTest is the test's side of -R: the event channel of its QPs'
// connections and one ID per QP. The verbs Context the run's resources
// live on is the channel's (t.dev); ownDev is the one the run opened
// for its checks, closed with it.
type cmTest struct {
	ch     *rdmacm.EventChannel
	ps     rdmacm.PortSpace // UDP for UD, else TCP
	ids    []*rdmacm.ID
	ownDev *uverbs.Context
	// UD: the QP number and Q_Key each QP sends to (udPeer).
	remQPN, remQKey []uint32
}

// cmClientAttempts and cmClientDelay are rdma_cm_client_connection's
// retries: the server listens only after the first sync, so an early
// request finds no listener and is rejected.
const (
	cmClientAttempts = 10
	cmClientDelay    = 100 * time.Millisecond
)

// cmConnect connects the test's QPs through the RDMA CM
// (create_rdma_cm_connection): a sync over the data exchange, the
// connections, a second sync. The first connection (a route resolved on
// the client, a request on the server) creates the run's resources on
// the CM's device, each connection its QP.
func (t *test) cmConnect() error {
	const failed = "Failed to create RDMA CM connection with resources."
	ch, err := rdmacm.Open()
	if err != nil {
		return msgError{"Failed to create RDMA CM event channel.", "  (" + err.Error() + ")", failed}
	}
	n := t.o.QPs
	t.cm = &cmTest{ch: ch, ps: rdmacm.PortSpaceTCP, ids: make([]*rdmacm.ID, n), ownDev: t.dev}
	if t.o.Conn == UD {
		t.cm.ps = rdmacm.PortSpaceUDP
		t.cm.remQPN, t.cm.remQKey = make([]uint32, n), make([]uint32, n)
		if t.udSends() {
			t.ahs = make([]*uverbs.AH, n)
		}
	}
	t.qps = make([]*uverbs.QP, n)
	// The server listens before the sync, not after it as perftest's
	// does: a client's first request may follow the sync at once, and a
	// UD client (SIDR) does not retry a request that found no listener
	// (RDMA_CM_EVENT_UNREACHABLE), which a C server only rarely loses.
	var listen *rdmacm.ID
	if !t.client {
		if listen, err = t.cmListen(); err != nil {
			return withLines(err, "Failed to create RDMA CM connection.", failed)
		}
		defer listen.Destroy()
	}
	if _, err := t.c.shake(&Dest{}, false); err != nil {
		return withLines(err, "Failed to sync between client and server before creating RDMA CM connection.", failed)
	}
	if t.client {
		err = t.cmClient()
	} else {
		err = t.cmServer(listen)
	}
	if err != nil {
		return withLines(err, "Failed to create RDMA CM connection.", failed)
	}
	if _, err := t.c.shake(&Dest{}, false); err != nil {
		return withLines(err, "Failed to sync between client and server after creating RDMA CM connection.", failed)
	}
	return nil
}

// cmConnParam is what both sides offer (rdma_cm_route_handler,
// rdma_cm_connection_request_handler): --retry_count for both retry
// counts, and for a read test the outstanding reads each way.
func (t *test) cmConnParam() *rdmacm.ConnParam {
	p := &rdmacm.ConnParam{RetryCount: uint8(t.o.retryCount), RNRRetryCount: uint8(t.o.retryCount)}
	if t.v.ReadsBack() {
		p.ResponderResources, p.InitiatorDepth = uint8(t.outReads), uint8(t.outReads)
	}
	return p
}

// cmResources creates the run's resources on id's device once.
func (t *test) cmResources(id *rdmacm.ID) error {
	if t.pd != nil {
		return nil
	}
	t.dev = id.Context()
	if err := t.createResources(); err != nil {
		return withLines(err, "Failed to initialize RDMA contexts.")
	}
	return nil
}

// cmQP creates QP i on id (rdma_create_qp: INIT with the CM's
// attributes).
func (t *test) cmQP(i int, id *rdmacm.ID) error {
	qp, err := id.CreateQP(t.pd, t.qpInitAttr())
	if err != nil {
		return msgError{fmt.Sprintf("Couldn't create rdma QP - %v", err), "Failed to create QP."}
	}
	t.cm.ids[i], t.qps[i] = id, qp
	t.checkInline(qp)
	return nil
}

// cmEventError is rdma_cm_event_error_handler's message.
func cmEventError(ev *rdmacm.Event) error {
	return msgError{"RDMA CM event error:", fmt.Sprintf("Event: %s; error: %d.\n", ev.Type, ev.Status)}
}

// cmClient connects each QP: resolve the address, then the route, create
// the QP, connect, until every connection is ESTABLISHED; a failed
// attempt is dropped and made again after 100 ms, ten times at most.
func (t *test) cmClient() error {
	dst, err := resolveIPv4(t.ctx, t.o.Server, t.o.Port)
	if err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		err := t.cmClientAttempt(dst)
		if err == nil {
			return nil
		}
		t.cmDrop()
		if attempt == cmClientAttempts || t.ctx.Err() != nil {
			return withLines(err, "Failed to connect RDMA CM events.", fmt.Sprintf("Failed to connect RDMA CM client, tried %d times.", attempt))
		}
		select {
		case <-time.After(cmClientDelay):
		case <-t.ctx.Done():
		}
	}
}

// cmClientAttempt connects the QPs one after the other: perftest's
// client resolves every address at once, so that with -q N its requests
// race the server's listen (which comes after the sync): when the first
// is refused (no listener yet) the attempt is dropped, and a request
// that got through meanwhile is cancelled under the server, which
// perftest's server does not survive ("Couldn't create rdma old QP -
// Invalid argument"). Connecting the next QP only once the previous one
// is ESTABLISHED means a refused attempt has nothing else in flight;
// the server sees the same requests, in the same order.
func (t *test) cmClientAttempt(dst netip.AddrPort) error {
	start := func(i int) error {
		id, err := t.cm.ch.CreateID(t.cm.ps)
		if err != nil {
			return msgError{"Failed to create RDMA CM ID.", "  (" + err.Error() + ")"}
		}
		t.cm.ids[i] = id
		if err := id.ResolveAddr(netip.AddrPort{}, dst, cmResolveTimeout); err != nil {
			return msgError{"Failed to resolve RDMA CM address.", "  (" + err.Error() + ")"}
		}
		return nil
	}
	if err := start(0); err != nil {
		return err
	}
	for established := 0; established < len(t.cm.ids); {
		ev, err := t.cm.ch.GetEvent(t.ctx)
		if err != nil {
			return msgError{"Failed to get RDMA CM event.", "  (" + err.Error() + ")"}
		}
		i := slices.Index(t.cm.ids, ev.ID)
		if i < 0 {
			continue
		}
		switch ev.Type {
		case rdmacm.EventAddrResolved:
			// rdma_cm_address_handler: the TOS before the route.
			if t.o.tos != defTOS {
				if err := ev.ID.SetTOS(uint8(t.o.tos)); err != nil {
					return msgError{"Failed to set ToS(Type of Service) option for RDMA CM connection.", "  (" + err.Error() + ")"}
				}
			}
			if err := ev.ID.ResolveRoute(cmResolveTimeout); err != nil {
				return msgError{"Failed to resolve RDMA CM route.", "  (" + err.Error() + ")"}
			}
		case rdmacm.EventRouteResolved:
			if err := t.cmResources(ev.ID); err != nil {
				return err
			}
			if err := t.cmQP(i, ev.ID); err != nil {
				return err
			}
			if err := ev.ID.Connect(t.cmConnParam()); err != nil {
				return msgError{"Failed to connect through RDMA CM.", "  (" + err.Error() + ")"}
			}
		case rdmacm.EventEstablished:
			if t.o.Conn == UD {
				if err := t.cmUDClient(i, &ev.UD); err != nil {
					return withLines(err, "Failed to establish UD connection for RDMA CM.")
				}
			}
			established++
			if established < len(t.cm.ids) {
				if err := start(established); err != nil {
					return err
				}
			}
		case rdmacm.EventAddrError, rdmacm.EventRouteError, rdmacm.EventConnectError, rdmacm.EventUnreachable, rdmacm.EventRejected:
			return cmEventError(&ev)
		}
	}
	return nil
}

// udSends says whether this side sends UD messages, and so needs an
// address handle per QP: the client, and the server of -b and of a
// latency test.
func (t *test) udSends() bool { return t.client || t.o.Duplex || t.o.Tst == LAT }

// udParamsLen is what perftest's server receives of the client's QP
// number message: the GRH (UD_ADDITION) and the 4 bytes.
const udParamsLen = 40 + 4

// cmUDClient takes the server's QP number, Q_Key and address from the
// UD exchange's ESTABLISHED (rdma_cm_establish_ud_connection) and, when
// the server sends too, tells it this QP's number: a SEND with
// immediate data carrying it, whose receive gives the server the
// address back (rdma_cm_send_ud_connection_parameters).
func (t *test) cmUDClient(i int, ud *rdmacm.UDParam) error {
	t.cm.remQPN[i], t.cm.remQKey[i] = ud.QPNum, ud.QKey
	ah, err := t.pd.CreateAH(ud.AH)
	if err != nil {
		return msgError{"Failed to create AH for RDMA CM connection.", "  (" + err.Error() + ")"}
	}
	t.ahs[i] = ah
	if !(t.o.Duplex || t.o.Tst == LAT) {
		return nil
	}
	qp := t.qps[i]
	if err := qp.PostSend([]uverbs.SendWR{{ID: 0, Opcode: uverbs.WRSendWithImm, Flags: uverbs.SendSignaled, ImmData: qp.QPN(),
		SGL: []uverbs.SGE{t.mrOf(i).SGE(0, 4)}, AH: ah, RemoteQPN: ud.QPNum, RemoteQKey: ud.QKey}}); err != nil {
		return msgError{fmt.Sprintf("Failed to post send for connection %d for RDMA CM UD send connection parameters.", i), "  (" + err.Error() + ")"}
	}
	wc, err := t.cmPollOne(t.sendCQ)
	if err != nil || wc.Status != uverbs.WCSuccess || wc.Opcode != uverbs.WCSend {
		return msgError{"Failed to poll CQ.", fmt.Sprintf("Bad WQE status when trying to send UD connection parameters in RDMA CM:\n Status: %d ; ID: %d.", wc.Status, wc.ID),
			fmt.Sprintf("  (%v)", err)}
	}
	return nil
}

// cmPollOne waits for one completion of cq, polling (perftest's loop),
// for at most a minute and while the run lasts.
func (t *test) cmPollOne(cq *uverbs.CQ) (uverbs.WC, error) {
	ctx, cancel := context.WithTimeout(t.ctx, time.Minute)
	defer cancel()
	wcs := make([]uverbs.WC, 1)
	for {
		n, err := cq.Poll(wcs)
		if err != nil {
			return uverbs.WC{}, err
		}
		if n == 1 {
			return wcs[0], nil
		}
		if err := ctx.Err(); err != nil {
			return uverbs.WC{}, err
		}
		runtime.Gosched()
	}
}

// cmDrop destroys a failed attempt's IDs, QPs and address handles; the
// other resources stay for the next.
func (t *test) cmDrop() {
	for i, id := range t.cm.ids {
		if id != nil {
			id.Destroy()
			t.cm.ids[i] = nil
		}
		if qp := t.qps[i]; qp != nil {
			qp.Destroy(context.Background())
			t.qps[i] = nil
		}
		if i < len(t.ahs) && t.ahs[i] != nil {
			t.ahs[i].Destroy()
			t.ahs[i] = nil
		}
	}
}

// cmListen is the server's listener on the test's port (every IPv4
// address), with a backlog of a request per QP.
func (t *test) cmListen() (*rdmacm.ID, error) {
	listen, err := t.cm.ch.CreateID(t.cm.ps)
	if err != nil {
		return nil, msgError{"Failed to create RDMA CM server control ID.", "  (" + err.Error() + ")"}
	}
	if err := listen.BindAddr(netip.AddrPortFrom(netip.IPv4Unspecified(), uint16(t.o.Port))); err != nil {
		listen.Destroy()
		return nil, msgError{"Failed to bind RDMA CM address on the server.", "  (" + err.Error() + ")"}
	}
	if err := listen.Listen(len(t.cm.ids)); err != nil {
		listen.Destroy()
		return nil, msgError{"Failed to listen on RDMA CM server listen ID.", "  (" + err.Error() + ")"}
	}
	return listen, nil
}

// cmServer accepts a connection per QP on cmListen's listener, then
// stops listening (rdma_cm_server_connection). It does not wait for the
// connections' ESTABLISHED: the second sync comes after the client saw
// its own.
func (t *test) cmServer(listen *rdmacm.ID) error {
	defer listen.Destroy()
	// A request whose client gave up before it was accepted (its
	// attempt failed on a request that came before this listener, and
	// it dropped the attempt's IDs: perftest's retry) cannot be
	// accepted; nor can a connection the client dropped be used. Either
	// is forgotten and its slot waits for the client's next attempt.
	drop := func(i int) {
		if qp := t.qps[i]; qp != nil {
			qp.Destroy(context.Background())
			t.qps[i] = nil
		}
		if id := t.cm.ids[i]; id != nil {
			id.Reject(nil)
			id.Destroy()
			t.cm.ids[i] = nil
		}
	}
	for accepted := 0; accepted < len(t.cm.ids); {
		ev, err := t.cm.ch.GetEvent(t.ctx)
		if err != nil {
			return msgError{"Failed to get RDMA CM event.", "  (" + err.Error() + ")"}
		}
		switch ev.Type {
		case rdmacm.EventConnectRequest:
			if err := t.cmResources(ev.ID); err != nil {
				ev.ID.Reject(nil)
				ev.ID.Destroy()
				return err
			}
			i := slices.Index(t.cm.ids, nil)
			if err := t.cmQP(i, ev.ID); err != nil {
				ev.ID.Reject(nil)
				ev.ID.Destroy()
				continue
			}
			recv := t.o.Conn == UD && t.udSends()
			if recv {
				// rdma_cm_request_ud_connection_parameters: a receive
				// for the client's QP number.
				if err := t.qps[i].PostRecv([]uverbs.RecvWR{{ID: 0, SGL: []uverbs.SGE{t.mrOf(i).SGE(0, udParamsLen)}}}); err != nil {
					return msgError{fmt.Sprintf("Failed to post receive for connection %d for RDMA CM UD request connection parameters.", i), "  (" + err.Error() + ")"}
				}
			}
			if err := ev.ID.Accept(t.cmConnParam()); err != nil {
				drop(i)
				continue
			}
			if t.o.Conn == RC {
				// perftest's RNR timer, after the accept (RTS to RTS).
				t.qps[i].Modify(&uverbs.QPAttr{MinRNRTimer: 12}, uverbs.QPAttrMinRNRTimer)
			}
			if t.o.Conn == UD {
				if err := t.cmUDServer(i, recv); err != nil {
					return withLines(err, "Failed to initialize UD connection parameters for RDMA CM.")
				}
			}
			accepted++
		case rdmacm.EventConnectError, rdmacm.EventUnreachable, rdmacm.EventRejected, rdmacm.EventDisconnected:
			if i := slices.Index(t.cm.ids, ev.ID); i >= 0 && ev.ID != nil {
				drop(i)
				accepted--
			}
		case rdmacm.EventAddrError, rdmacm.EventRouteError:
			return cmEventError(&ev)
		}
	}
	return nil
}

// cmUDServer records QP i's peer for UD (rdma_cm_initialize_ud_connection_parameters):
// with recv, the client's QP number arrives as immediate data, and its
// receive (with the GRH) is the address to answer to; the Q_Key is the
// QP's own, the CM's.
func (t *test) cmUDServer(i int, recv bool) error {
	a, _, err := t.qps[i].Query(uverbs.QPAttrQKey)
	if err != nil {
		return msgError{"Failed to query the QP's Q_Key", "  (" + err.Error() + ")"}
	}
	t.cm.remQKey[i] = a.QKey
	if !recv {
		return nil
	}
	wc, err := t.cmPollOne(t.recvCQ)
	if err != nil || wc.Status != uverbs.WCSuccess || wc.Opcode != uverbs.WCRecv || wc.ID != 0 {
		return msgError{"Failed to poll CQ.", fmt.Sprintf("Bad WQE status when trying to create AH for UD connection in RDMA CM:\n Status: %d ; ID: %d.", wc.Status, wc.ID),
			fmt.Sprintf("  (%v)", err)}
	}
	off := t.mrOf(i).Addr() - t.base()
	ah, err := t.pd.CreateAHFromWC(t.cm.ids[i].Port(), &wc, t.mem[off:off+40])
	if err != nil {
		return msgError{"Failed to create AH from the client's message", "  (" + err.Error() + ")"}
	}
	t.ahs[i] = ah
	t.cm.remQPN[i] = wc.ImmData
	return nil
}

// cmDisconnect ends the connections (rdma_cm_disconnect_nodes): both
// sides disconnect each one, and the client, whose connections perftest
// counts, waits for each to report DISCONNECTED.
func (t *test) cmDisconnect() error {
	ctx, cancel := context.WithTimeout(t.ctx, time.Minute)
	defer cancel()
	if t.cm.ps == rdmacm.PortSpaceUDP {
		return nil // nothing to end
	}
	left := 0
	for _, id := range t.cm.ids {
		if id == nil {
			continue
		}
		if err := id.Disconnect(); err != nil {
			return err
		}
		left++
	}
	for t.client && left > 0 {
		ev, err := t.cm.ch.GetEvent(ctx)
		if err != nil {
			return err
		}
		if ev.Type == rdmacm.EventDisconnected && slices.Contains(t.cm.ids, ev.ID) {
			left--
		}
	}
	return nil
}

// cmClose destroys the IDs and the channel, which closes the Context the
// run's resources were on (those still there with it), and makes the
// run's own Context t.dev again.
func (t *test) cmClose() error {
	var err error
	for _, id := range t.cm.ids {
		if id != nil {
			err = errors.Join(err, id.Destroy())
		}
	}
	err = errors.Join(err, t.cm.ch.Close())
	t.dev = t.cm.ownDev
	t.cm = nil
	return err
}
