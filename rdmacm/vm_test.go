package rdmacm_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/rdmacm"
	"github.com/pureverbs/pureverbs/uverbs"
)

var rxeAddr = netip.MustParseAddr(testkit.RxeAddr)

func openChannel(t *testing.T) *rdmacm.EventChannel {
	t.Helper()
	testkit.RequireVM(t)
	ch, err := rdmacm.Open()
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { ch.Close() })
	return ch
}

// want waits for the next event on ch and fails unless it is typ with
// status 0.
func want(ctx context.Context, t *testing.T, ch *rdmacm.EventChannel, typ rdmacm.EventType) rdmacm.Event {
	t.Helper()
	ev, err := ch.GetEvent(ctx)
	if err != nil {
		t.Fatalf("GetEvent, waiting for %v: %v", typ, err)
	}
	if ev.Type != typ || ev.Status != 0 {
		t.Fatalf("event %v, want %v", &ev, typ)
	}
	return ev
}

// listener is an ID of port space ps listening on rxe0's address at port
// (0: any free port).
func listener(t *testing.T, ch *rdmacm.EventChannel, ps rdmacm.PortSpace, port uint16) *rdmacm.ID {
	t.Helper()
	return listenerType(t, ch, ps, 0, port)
}

// newID is ch.CreateID(ps), or with a QP type (not 0)
// ch.CreateIDType(ps, typ).
func newID(t *testing.T, ch *rdmacm.EventChannel, ps rdmacm.PortSpace, typ uverbs.QPType) *rdmacm.ID {
	t.Helper()
	var id *rdmacm.ID
	var err error
	if typ == 0 {
		id, err = ch.CreateID(ps)
	} else {
		id, err = ch.CreateIDType(ps, typ)
	}
	if err != nil {
		t.Fatalf("CreateID: %v", err)
	}
	return id
}

// listenerType is listener for an ID made by newID.
func listenerType(t *testing.T, ch *rdmacm.EventChannel, ps rdmacm.PortSpace, typ uverbs.QPType, port uint16) *rdmacm.ID {
	t.Helper()
	id := newID(t, ch, ps, typ)
	if err := id.BindAddr(netip.AddrPortFrom(rxeAddr, port)); err != nil {
		t.Fatalf("BindAddr: %v", err)
	}
	if err := id.Listen(0); err != nil {
		t.Fatalf("Listen: %v", err)
	}
	return id
}

// end is one side of a connection: its QP and buffers.
type end struct {
	t   *testing.T
	pd  *uverbs.PD
	cq  *uverbs.CQ
	qp  *uverbs.QP
	buf []byte
	mr  *uverbs.MR
}

// newEnd makes the PD, CQ, memory and QP of id's connection.
func newEnd(t *testing.T, id *rdmacm.ID) *end {
	t.Helper()
	e := newBareEnd(t, id)
	var err error
	e.qp, err = id.CreateQP(e.pd, endQPAttr(e.cq))
	if err != nil {
		t.Fatalf("CreateQP: %v", err)
	}
	if a, _, err := e.qp.Query(uverbs.QPAttrState); err != nil || a.State != uverbs.QPStateInit {
		t.Fatalf("a new ID's QP is in %v (%v), want INIT", a.State, err)
	}
	return e
}

// endQPAttr is the QP of an end, on cq.
func endQPAttr(cq *uverbs.CQ) uverbs.QPInitAttr {
	return uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: cq, RecvCQ: cq,
		Cap: uverbs.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 16}}
}

// newBareEnd makes the PD, CQ and memory of id's connection, no QP.
func newBareEnd(t *testing.T, id *rdmacm.ID) *end {
	t.Helper()
	c := id.Context()
	if c == nil {
		t.Fatal("the ID has no Context")
	}
	e := &end{t: t}
	var err error
	if e.pd, err = c.AllocPD(); err != nil {
		t.Fatal(err)
	}
	if e.cq, err = c.CreateCQ(16, nil); err != nil {
		t.Fatal(err)
	}
	e.buf = make([]byte, 4096)
	if e.mr, err = e.pd.RegMR(e.buf, uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite|uverbs.AccessRemoteRead); err != nil {
		t.Fatal(err)
	}
	return e
}

// close destroys the end's objects (the channel closes the Context).
func (e *end) close() {
	e.t.Helper()
	if err := e.qp.Destroy(context.Background()); err != nil {
		e.t.Error(err)
	}
	if err := e.mr.Dereg(); err != nil {
		e.t.Error(err)
	}
	if err := e.cq.Destroy(context.Background()); err != nil {
		e.t.Error(err)
	}
	if err := e.pd.Dealloc(); err != nil {
		e.t.Error(err)
	}
}

func (e *end) recv(off, n int) {
	e.t.Helper()
	if err := e.qp.PostRecv([]uverbs.RecvWR{{ID: uint64(off), SGL: []uverbs.SGE{e.mr.SGE(off, n)}}}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *end) send(off, n int) {
	e.t.Helper()
	if err := e.qp.PostSend([]uverbs.SendWR{{ID: 1, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled, SGL: []uverbs.SGE{e.mr.SGE(off, n)}}}); err != nil {
		e.t.Fatal(err)
	}
}

// wc polls the CQ for one completion until ctx ends.
func (e *end) wc(ctx context.Context) uverbs.WC {
	e.t.Helper()
	wcs := make([]uverbs.WC, 1)
	for ctx.Err() == nil {
		n, err := e.cq.Poll(wcs)
		if err != nil {
			e.t.Fatal(err)
		}
		if n == 1 {
			if wcs[0].Status != uverbs.WCSuccess {
				e.t.Fatalf("completion %+v: %v", wcs[0], wcs[0].Status)
			}
			return wcs[0]
		}
	}
	e.t.Fatalf("no completion: %v", ctx.Err())
	return uverbs.WC{}
}

// sendBothWays sends ping from e to peer and pong back (each received at
// offset 0 of a receive posted before) and checks what arrived.
func (e *end) sendBothWays(ctx context.Context, peer *end, ping, pong string) {
	e.t.Helper()
	copy(e.buf[1024:], ping)
	e.send(1024, len(ping))
	if wc := peer.wc(ctx); int(wc.ByteLen) != len(ping) || string(peer.buf[:len(ping)]) != ping {
		e.t.Fatalf("server received %d bytes %q", wc.ByteLen, peer.buf[:len(ping)])
	}
	e.wc(ctx)
	copy(peer.buf[1024:], pong)
	peer.send(1024, len(pong))
	peer.wc(ctx)
	if wc := e.wc(ctx); int(wc.ByteLen) != len(pong) || string(e.buf[:len(pong)]) != pong {
		e.t.Fatalf("client received %d bytes %q", wc.ByteLen, e.buf[:len(pong)])
	}
}

// writeAndRead RDMA-writes written from e into peer's memory and
// RDMA-reads read back from it, and checks both landed.
func (e *end) writeAndRead(ctx context.Context, peer *end, written, read string) {
	e.t.Helper()
	copy(e.buf[2048:], written)
	if err := e.qp.PostSend([]uverbs.SendWR{{ID: 2, Opcode: uverbs.WRRDMAWrite, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{e.mr.SGE(2048, len(written))}, RemoteAddr: peer.mr.Addr() + 3072, RKey: peer.mr.RKey()}}); err != nil {
		e.t.Fatal(err)
	}
	e.wc(ctx)
	if got := string(peer.buf[3072 : 3072+len(written)]); got != written {
		e.t.Fatalf("RDMA write landed %q", got)
	}
	copy(peer.buf[3584:], read)
	if err := e.qp.PostSend([]uverbs.SendWR{{ID: 3, Opcode: uverbs.WRRDMARead, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{e.mr.SGE(3584, len(read))}, RemoteAddr: peer.mr.Addr() + 3584, RKey: peer.mr.RKey()}}); err != nil {
		e.t.Fatal(err)
	}
	e.wc(ctx)
	if got := string(e.buf[3584 : 3584+len(read)]); got != read {
		e.t.Fatalf("RDMA read brought %q", got)
	}
}

// resolve creates an ID and resolves the address and the route to dst.
func resolve(ctx context.Context, t *testing.T, ch *rdmacm.EventChannel, dst netip.AddrPort) *rdmacm.ID {
	t.Helper()
	return resolvePS(ctx, t, ch, rdmacm.PortSpaceTCP, dst)
}

// resolvePS is resolve in port space ps.
func resolvePS(ctx context.Context, t *testing.T, ch *rdmacm.EventChannel, ps rdmacm.PortSpace, dst netip.AddrPort) *rdmacm.ID {
	t.Helper()
	return resolveType(ctx, t, ch, ps, 0, dst)
}

// resolveType is resolvePS for an ID made by newID.
func resolveType(ctx context.Context, t *testing.T, ch *rdmacm.EventChannel, ps rdmacm.PortSpace, typ uverbs.QPType, dst netip.AddrPort) *rdmacm.ID {
	t.Helper()
	id := newID(t, ch, ps, typ)
	if err := id.ResolveAddr(netip.AddrPort{}, dst, 2*time.Second); err != nil {
		t.Fatalf("ResolveAddr: %v", err)
	}
	want(ctx, t, ch, rdmacm.EventAddrResolved)
	if id.Context() == nil || id.Context().Device().Name != testkit.RxeDev || id.Port() != 1 {
		t.Fatalf("after address resolution: Context %v, port %d; want %s port 1", id.Context(), id.Port(), testkit.RxeDev)
	}
	if err := id.ResolveRoute(2 * time.Second); err != nil {
		t.Fatalf("ResolveRoute: %v", err)
	}
	want(ctx, t, ch, rdmacm.EventRouteResolved)
	if id.RemoteAddr() != dst || id.LocalAddr().Addr() != dst.Addr() {
		t.Fatalf("addresses %v -> %v, want to %v", id.LocalAddr(), id.RemoteAddr(), dst)
	}
	return id
}

// TestVMConnect: a Go client and a Go server, each on its own channel,
// over rxe0's address: address and route resolution bind the client's ID
// to rxe0, the request carries the client's private data and creates the
// server's ID, both QPs reach RTS with the connection manager's
// attributes (each the other's destination), a send goes each way, a
// disconnect reaches both sides and moves both QPs to ERR, and everything
// is released (the package's leak checks).
func TestVMConnect(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sch, cch := openChannel(t), openChannel(t)

	listen, err := sch.CreateID(rdmacm.PortSpaceTCP)
	if err != nil {
		t.Fatal(err)
	}
	if err := listen.BindAddr(netip.AddrPortFrom(rxeAddr, 0)); err != nil {
		t.Fatalf("BindAddr: %v", err)
	}
	addr := listen.LocalAddr()
	if addr.Addr() != rxeAddr || addr.Port() == 0 || listen.Context() == nil {
		t.Fatalf("bound to %v (Context %v), want %v and a port", addr, listen.Context(), rxeAddr)
	}
	if err := listen.Listen(4); err != nil {
		t.Fatalf("Listen: %v", err)
	}

	cid := resolve(ctx, t, cch, addr)
	client := newEnd(t, cid)
	client.recv(0, 64)
	if err := cid.Connect(&rdmacm.ConnParam{PrivateData: []byte("hello"), InitiatorDepth: 1, ResponderResources: 1,
		RetryCount: 7, RNRRetryCount: 7}); err != nil {
		t.Fatalf("Connect: %v", err)
	}

	req := want(ctx, t, sch, rdmacm.EventConnectRequest)
	if req.Listen != listen || req.ID == nil || req.ID == listen {
		t.Fatalf("connect request: listen %p id %p, want listen %p and a new ID", req.Listen, req.ID, listen)
	}
	if !bytes.HasPrefix(req.Param.PrivateData, []byte("hello")) || req.Param.QPNum != client.qp.QPN() {
		t.Fatalf("connect request: private data %q, QPN %d; want \"hello\" and %d", req.Param.PrivateData, req.Param.QPNum, client.qp.QPN())
	}
	sid := req.ID
	if sid.RemoteAddr().Addr() != rxeAddr || sid.LocalAddr() != addr {
		t.Fatalf("server ID %v <- %v", sid.LocalAddr(), sid.RemoteAddr())
	}
	server := newEnd(t, sid)
	server.recv(0, 64)
	if err := sid.Accept(&rdmacm.ConnParam{PrivateData: []byte("world"), InitiatorDepth: 1, ResponderResources: 1}); err != nil {
		t.Fatalf("Accept: %v", err)
	}
	// The client takes its events into one Event (GetEventInto), whose
	// private-data buffer the server's connect request filled first.
	est := req
	if err := cch.GetEventInto(ctx, &est); err != nil || est.Type != rdmacm.EventEstablished || est.Status != 0 {
		t.Fatalf("GetEventInto: %v, %v; want the client's EventEstablished", &est, err)
	}
	if est.ID != cid || !bytes.HasPrefix(est.Param.PrivateData, []byte("world")) || est.Listen != nil {
		t.Fatalf("client's established: id %p private data %q listen %p", est.ID, est.Param.PrivateData, est.Listen)
	}
	if !bytes.HasPrefix(req.Param.PrivateData, []byte("hello")) {
		t.Fatalf("the request's private data became %q with the next event into a copy of it", req.Param.PrivateData)
	}
	want(ctx, t, sch, rdmacm.EventEstablished)

	for _, c := range []struct {
		e    *end
		peer uint32
	}{{client, server.qp.QPN()}, {server, client.qp.QPN()}} {
		a, _, err := c.e.qp.Query(uverbs.QPAttrState | uverbs.QPAttrDestQPN | uverbs.QPAttrAV)
		if err != nil || a.State != uverbs.QPStateRTS || a.DestQPN != c.peer || !a.AH.IsGlobal {
			t.Fatalf("QP after the handshake: %v, dest QPN %d (want %d), global %v: %v", a.State, a.DestQPN, c.peer, a.AH.IsGlobal, err)
		}
	}

	client.sendBothWays(ctx, server, "ping from the client", "pong")

	// The connection manager's INIT attributes (librdmacm modifies the
	// QP to INIT again before RTR): remote writes on both sides, remote
	// reads where the peer asked for responder resources. An RDMA write
	// and an RDMA read from the client then reach the server's memory.
	for _, e := range []*end{client, server} {
		a, _, err := e.qp.Query(uverbs.QPAttrAccessFlags)
		want := uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead
		if err != nil || a.AccessFlags&want != want {
			t.Fatalf("QP access flags %v (%v), want %v", a.AccessFlags, err, want)
		}
	}
	client.writeAndRead(ctx, server, "written by the client", "read by the client")

	// The client's DREQ reaches the server as EventDisconnected; the
	// server's own Disconnect answers it (DREP), which ends the client's.
	if err := cid.Disconnect(); err != nil {
		t.Fatalf("Disconnect: %v", err)
	}
	want(ctx, t, sch, rdmacm.EventDisconnected)
	if err := sid.Disconnect(); err != nil {
		t.Fatalf("the server's Disconnect after the client's: %v", err)
	}
	if err := cch.GetEventInto(ctx, &est); err != nil || est.Type != rdmacm.EventDisconnected || est.ID != cid {
		t.Fatalf("GetEventInto: %v (ID %p), %v; want the client's EventDisconnected", &est, est.ID, err)
	}
	if a, _, err := server.qp.Query(uverbs.QPAttrState); err != nil || a.State != uverbs.QPStateErr {
		t.Fatalf("server QP after Disconnect: %v (%v), want ERR", a.State, err)
	}
	if a, _, err := client.qp.Query(uverbs.QPAttrState); err != nil || a.State != uverbs.QPStateErr {
		t.Fatalf("client QP after Disconnect: %v (%v), want ERR", a.State, err)
	}
	for _, id := range []*rdmacm.ID{cid, sid, listen} {
		if err := id.Destroy(); err != nil {
			t.Fatalf("Destroy: %v", err)
		}
	}
	if err := cid.Destroy(); !errors.Is(err, rdmacm.ErrClosed) {
		t.Fatalf("Destroy twice: %v, want ErrClosed", err)
	}
	client.close()
	server.close()
}

// TestVMRejectAndNoListener: a request the server rejects reaches the
// client as EventRejected with the server's private data and the QP in
// ERR; a connect to a port nobody listens on is rejected too (the IB CM's
// invalid service ID, reason 8), not a hang.
func TestVMRejectAndNoListener(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sch, cch := openChannel(t), openChannel(t)
	listen := listener(t, sch, rdmacm.PortSpaceTCP, 0)
	cid := resolve(ctx, t, cch, listen.LocalAddr())
	client := newEnd(t, cid)
	if err := cid.Connect(nil); err != nil {
		t.Fatal(err)
	}
	req := want(ctx, t, sch, rdmacm.EventConnectRequest)
	if err := req.ID.Reject([]byte("go away")); err != nil {
		t.Fatalf("Reject: %v", err)
	}
	ev, err := cch.GetEvent(ctx)
	if err != nil || ev.Type != rdmacm.EventRejected || !bytes.HasPrefix(ev.Param.PrivateData, []byte("go away")) {
		t.Fatalf("client after a reject: %v %q (%v), want %v with the private data", &ev, ev.Param.PrivateData, err, rdmacm.EventRejected)
	}
	if a, _, err := client.qp.Query(uverbs.QPAttrState); err != nil || a.State != uverbs.QPStateErr {
		t.Fatalf("client QP after a reject: %v (%v), want ERR", a.State, err)
	}
	req.ID.Destroy()
	cid.Destroy()
	client.close()

	// Nobody listens on the listener's port once it is gone.
	dst := listen.LocalAddr()
	listen.Destroy()
	cid = resolve(ctx, t, cch, dst)
	client = newEnd(t, cid)
	if err := cid.Connect(nil); err != nil {
		t.Fatal(err)
	}
	ev, err = cch.GetEvent(ctx)
	if err != nil || (ev.Type != rdmacm.EventRejected && ev.Type != rdmacm.EventUnreachable) {
		t.Fatalf("connect without a listener: %v (%v), want rejected or unreachable", &ev, err)
	}
	t.Logf("connect without a listener: %v", &ev)
	cid.Destroy()
	client.close()
}

// TestVMEventCancelAndClose: GetEvent parks on the poller and returns
// when its context ends or the channel closes; bad arguments are
// ErrInvalid before any system call; a resolve of an address no device
// has fails as an event.
func TestVMEventCancelAndClose(t *testing.T) {
	ch := openChannel(t)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := ch.GetEvent(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("GetEvent with nothing queued: %v, want DeadlineExceeded", err)
	}
	if _, err := ch.TryGetEvent(); !errors.Is(err, sys.EAGAIN) {
		t.Fatalf("TryGetEvent with nothing queued: %v, want EAGAIN", err)
	}
	id, err := ch.CreateID(rdmacm.PortSpaceTCP)
	if err != nil {
		t.Fatal(err)
	}
	if err := id.ResolveAddr(netip.AddrPort{}, netip.AddrPort{}, time.Second); !errors.Is(err, rdmacm.ErrInvalid) {
		t.Errorf("ResolveAddr without a destination: %v", err)
	}
	if err := id.ResolveRoute(0); !errors.Is(err, rdmacm.ErrInvalid) {
		t.Errorf("ResolveRoute with no timeout: %v", err)
	}
	if err := id.Connect(nil); !errors.Is(err, rdmacm.ErrInvalid) {
		t.Errorf("Connect before resolution: %v", err)
	}
	// The kernel refuses a port space it does not know with EINVAL
	// (udaddy -p 21003: "listen request failed: Invalid argument").
	for _, ps := range []rdmacm.PortSpace{0, 0x0003, 21003} {
		if _, err := ch.CreateID(ps); !errors.Is(err, rdmacm.ErrInvalid) || !errors.Is(err, sys.EINVAL) {
			t.Errorf("CreateID(%#x), not a port space: %v, want ErrInvalid and EINVAL", uint16(ps), err)
		}
	}
	for _, c := range []struct {
		ps  rdmacm.PortSpace
		typ uverbs.QPType
	}{{rdmacm.PortSpaceTCP, uverbs.QPTypeUD}, {rdmacm.PortSpaceUDP, uverbs.QPTypeRC}, {rdmacm.PortSpaceIPoIB, uverbs.QPTypeRC},
		{rdmacm.PortSpaceIB, uverbs.QPTypeUC}, {rdmacm.PortSpaceIB, 0}} {
		if _, err := ch.CreateIDType(c.ps, c.typ); !errors.Is(err, rdmacm.ErrInvalid) {
			t.Errorf("CreateIDType(%#x, %v): %v, want ErrInvalid", uint16(c.ps), c.typ, err)
		}
	}
	// 192.0.2.1 (TEST-NET-1) has no route in the guest: the kernel
	// refuses the resolution at once (6.1 and 6.12).
	bctx, bcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer bcancel()
	if err := id.ResolveAddr(netip.AddrPort{}, netip.MustParseAddrPort("192.0.2.1:7471"), 500*time.Millisecond); !errors.Is(err, sys.ENETUNREACH) {
		t.Errorf("resolving an unroutable address: %v, want ENETUNREACH", err)
	}
	// The same ID can still resolve a reachable one.
	if err := id.ResolveAddr(netip.AddrPort{}, netip.AddrPortFrom(rxeAddr, 7471), time.Second); err != nil {
		t.Fatal(err)
	}
	if ev, err := ch.GetEvent(bctx); err != nil || ev.Type != rdmacm.EventAddrResolved || ev.ID != id {
		t.Fatalf("resolving %v after a refusal: %v (%v)", rxeAddr, &ev, err)
	}

	done := make(chan error, 1)
	go func() {
		_, err := ch.GetEvent(context.Background())
		done <- err
	}()
	// The waiter may or may not be parked yet: Close must end it either way.
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, rdmacm.ErrClosed) {
			t.Fatalf("GetEvent across Close: %v, want ErrClosed", err)
		}
	case <-bctx.Done():
		t.Fatal("Close did not wake GetEvent")
	}
	if err := id.Destroy(); !errors.Is(err, rdmacm.ErrClosed) {
		t.Errorf("Destroy after the channel closed: %v", err)
	}
}

// freePort returns a TCP port for the C tools: the port of a bound and
// destroyed ID, which nothing else here takes.
func freePort(t *testing.T) uint16 {
	ch := openChannel(t)
	id, err := ch.CreateID(rdmacm.PortSpaceTCP)
	if err != nil {
		t.Fatal(err)
	}
	if err := id.BindAddr(netip.AddrPortFrom(rxeAddr, 0)); err != nil {
		t.Fatal(err)
	}
	p := id.LocalAddr().Port()
	id.Destroy()
	ch.Close()
	return p
}

// TestVMAgainstC: librdmacm's rdma_server and rdma_client (rdmacm-utils)
// against this package: the Go client connects to rdma_server, sends its
// 16 bytes and receives the server's 16; the Go server accepts
// rdma_client's connection, receives its 16 bytes and answers. Each C
// tool must exit 0.
func TestVMAgainstC(t *testing.T) {
	t.Run("go-client-c-server", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		port := freePort(t)
		srv := testkit.StartPeer(ctx, t, "rdma_server", "-s", testkit.RxeAddr, "-p", strconv.Itoa(int(port)))
		ch := openChannel(t)
		dst := netip.AddrPortFrom(rxeAddr, port)
		// rdma_server listens a moment after it starts: a connect
		// before that is rejected (no listener), and tried again.
		var cid *rdmacm.ID
		var client *end
		for attempt := 1; ; attempt++ {
			cid = resolve(ctx, t, ch, dst)
			client = newEnd(t, cid)
			client.recv(0, 16)
			if err := cid.Connect(nil); err != nil {
				t.Fatal(err)
			}
			ev, err := ch.GetEvent(ctx)
			if err != nil {
				t.Fatalf("connecting to rdma_server: %v", err)
			}
			if ev.Type == rdmacm.EventEstablished {
				break
			}
			if ev.Type != rdmacm.EventRejected && ev.Type != rdmacm.EventUnreachable {
				t.Fatalf("connecting to rdma_server: %v", &ev)
			}
			t.Logf("attempt %d: %v", attempt, &ev)
			cid.Destroy()
			client.close()
			select {
			case <-srv.Done():
				t.Fatalf("rdma_server exited: %v", srv.Wait())
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			default:
			}
		}
		fill := []byte("0123456789abcdef")
		copy(client.buf[1024:], fill)
		client.send(1024, 16)
		client.wc(ctx)
		if wc := client.wc(ctx); wc.ByteLen != 16 {
			t.Fatalf("received %d bytes from rdma_server, want 16", wc.ByteLen)
		}
		// rdma_server disconnects and waits for the answer.
		want(ctx, t, ch, rdmacm.EventDisconnected)
		if err := cid.Disconnect(); err != nil {
			t.Fatal(err)
		}
		if err := srv.Wait(); err != nil {
			t.Fatalf("rdma_server: %v\n%s", err, srv.Output())
		}
		cid.Destroy()
		client.close()
	})
	t.Run("c-client-go-server", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		ch := openChannel(t)
		listen := listener(t, ch, rdmacm.PortSpaceTCP, 0)
		cl := testkit.StartPeer(ctx, t, "rdma_client", "-s", testkit.RxeAddr, "-p", fmt.Sprint(listen.LocalAddr().Port()))
		req := want(ctx, t, ch, rdmacm.EventConnectRequest)
		server := newEnd(t, req.ID)
		server.recv(0, 16)
		if err := req.ID.Accept(nil); err != nil {
			t.Fatalf("Accept: %v", err)
		}
		want(ctx, t, ch, rdmacm.EventEstablished)
		if wc := server.wc(ctx); wc.ByteLen != 16 {
			t.Fatalf("received %d bytes from rdma_client, want 16", wc.ByteLen)
		}
		server.send(1024, 16)
		server.wc(ctx)
		// rdma_client disconnects and waits for the answer.
		want(ctx, t, ch, rdmacm.EventDisconnected)
		if err := req.ID.Disconnect(); err != nil {
			t.Fatal(err)
		}
		if err := cl.Wait(); err != nil {
			t.Fatalf("rdma_client: %v\n%s", err, cl.Output())
		}
		req.ID.Destroy()
		listen.Destroy()
		server.close()
	})
}

// TestVMPeerKilled: the peer process dies with the connection up (SIGKILL
// to rdma_client while it waits for the reply the Go server never sends):
// the kernel tears its ID down, the Go server gets EventDisconnected
// within the test's context, not a hang, and its own Disconnect and
// Destroy then succeed.
func TestVMPeerKilled(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ch := openChannel(t)
	listen := listener(t, ch, rdmacm.PortSpaceTCP, 0)
	cl := testkit.StartPeer(ctx, t, "rdma_client", "-s", testkit.RxeAddr, "-p", fmt.Sprint(listen.LocalAddr().Port()))
	req := want(ctx, t, ch, rdmacm.EventConnectRequest)
	server := newEnd(t, req.ID)
	server.recv(0, 16)
	if err := req.ID.Accept(nil); err != nil {
		t.Fatal(err)
	}
	want(ctx, t, ch, rdmacm.EventEstablished)
	if wc := server.wc(ctx); wc.ByteLen != 16 {
		t.Fatalf("received %d bytes, want 16", wc.ByteLen)
	}
	// rdma_client now waits for our 16 bytes, which never come.
	cl.Kill()
	<-cl.Done()
	start := time.Now()
	ev := want(ctx, t, ch, rdmacm.EventDisconnected)
	t.Logf("%v %v after the kill", &ev, time.Since(start).Round(time.Millisecond))
	if ev.ID != req.ID {
		t.Fatalf("disconnect for ID %p, want %p", ev.ID, req.ID)
	}
	if err := req.ID.Disconnect(); err != nil {
		t.Logf("Disconnect after the peer died: %v", err)
	}
	if a, _, err := server.qp.Query(uverbs.QPAttrState); err != nil || a.State != uverbs.QPStateErr {
		t.Fatalf("server QP after the peer died: %v (%v), want ERR", a.State, err)
	}
	if err := req.ID.Destroy(); err != nil {
		t.Fatal(err)
	}
	listen.Destroy()
	server.close()
}

// TestVMListenUnbound: rdma_listen on an ID never bound: the kernel binds
// it to the wildcard address and a free port, which LocalAddr reports
// after Listen (rdma_listen queries the address); a client connects to
// that port. A negative backlog is the kernel's limit, as the __u32 C
// passes makes it.
func TestVMListenUnbound(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ch, cch := openChannel(t), openChannel(t)
	listen := newID(t, ch, rdmacm.PortSpaceTCP, 0)
	defer listen.Destroy()
	if err := listen.Listen(-1); err != nil {
		t.Fatalf("Listen(-1) on an unbound ID: %v", err)
	}
	la := listen.LocalAddr()
	if !la.IsValid() || !la.Addr().IsUnspecified() || la.Port() == 0 {
		t.Fatalf("LocalAddr after Listen = %v, want the wildcard address and the port the kernel chose", la)
	}
	client := resolve(ctx, t, cch, netip.AddrPortFrom(rxeAddr, la.Port()))
	defer client.Destroy()
	if err := client.Connect(&rdmacm.ConnParam{QPNum: 0x123, RetryCount: 7, RNRRetryCount: 7}); err != nil {
		t.Fatal(err)
	}
	ev := want(ctx, t, ch, rdmacm.EventConnectRequest)
	if err := ev.ID.Reject(nil); err != nil {
		t.Fatal(err)
	}
	ev.ID.Destroy()
}

// TestVMDestroyQP: rdma_destroy_qp. The ID forgets its QP, so a second
// CreateQP makes a new one (the old code kept the destroyed QP and refused
// it), and the connection uses the new QP: a Connect advertises its
// number. An ID without a QP refuses DestroyQP; a QP destroyed directly is
// forgotten by DestroyQP too.
func TestVMDestroyQP(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ch, cch := openChannel(t), openChannel(t)
	listen := listener(t, ch, rdmacm.PortSpaceTCP, 0)
	defer listen.Destroy()
	cid := resolve(ctx, t, cch, listen.LocalAddr())
	defer cid.Destroy()
	if err := cid.DestroyQP(ctx); !errors.Is(err, rdmacm.ErrInvalid) {
		t.Errorf("DestroyQP without a QP: %v, want ErrInvalid", err)
	}
	e := newEnd(t, cid)
	if err := cid.DestroyQP(ctx); err != nil {
		t.Fatalf("DestroyQP: %v", err)
	}
	if cid.QP() != nil {
		t.Fatal("the ID still has its QP after DestroyQP")
	}
	qp, err := cid.CreateQP(e.pd, endQPAttr(e.cq))
	if err != nil {
		t.Fatalf("CreateQP after DestroyQP: %v", err)
	}
	e.qp = qp
	defer e.close()
	if err := cid.Connect(&rdmacm.ConnParam{RetryCount: 7, RNRRetryCount: 7}); err != nil {
		t.Fatal(err)
	}
	ev := want(ctx, t, ch, rdmacm.EventConnectRequest)
	if ev.Param.QPNum != qp.QPN() {
		t.Errorf("the request carries QP %#x, want the new QP %#x", ev.Param.QPNum, qp.QPN())
	}
	if err := ev.ID.Reject(nil); err != nil {
		t.Fatal(err)
	}
	ev.ID.Destroy()
	if ev, err := cch.GetEvent(ctx); err != nil || ev.Type != rdmacm.EventRejected {
		t.Fatalf("client event %v (%v), want a reject", &ev, err)
	}
	// Destroyed directly, the QP is still forgotten by DestroyQP.
	other := resolve(ctx, t, cch, listen.LocalAddr())
	defer other.Destroy()
	f := newEnd(t, other)
	if err := f.qp.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if err := other.DestroyQP(ctx); err != nil {
		t.Errorf("DestroyQP of a QP destroyed directly: %v", err)
	}
	if other.QP() != nil {
		t.Error("the ID still has the QP destroyed directly")
	}
	f.qp, err = other.CreateQP(f.pd, endQPAttr(f.cq))
	if err != nil {
		t.Fatalf("CreateQP after that: %v", err)
	}
	f.close()
}
