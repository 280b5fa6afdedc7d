package rdmacm_test

// VM tests of the synchronous Endpoint, Go against Go; against
// librdmacm's examples it is tested through cmd/rdmaserver and
// cmd/rdmaclient.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/rdmacm"
	"github.com/pureverbs/pureverbs/uverbs"
)

func epAttr() uverbs.QPInitAttr {
	return uverbs.QPInitAttr{SigAll: true,
		Cap: uverbs.QPCap{MaxSendWR: 2, MaxRecvWR: 2, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 16}}
}

// listenEP is a passive endpoint for ai, listening, destroyed when the
// test ends (a second Destroy is only ErrClosed).
func listenEP(ctx context.Context, t *testing.T, ai *rdmacm.AddrInfo, attr *uverbs.QPInitAttr) *rdmacm.Endpoint {
	t.Helper()
	listen, err := rdmacm.CreateEP(ctx, ai, nil, attr)
	if err != nil {
		t.Fatalf("passive CreateEP: %v", err)
	}
	t.Cleanup(func() { listen.Destroy() })
	if listen.QP() != nil {
		t.Errorf("a passive endpoint has a QP")
	}
	if err := listen.Listen(0); err != nil {
		t.Fatalf("Listen: %v", err)
	}
	return listen
}

func epAddr(t *testing.T, ctx context.Context, passive bool, port int) *rdmacm.AddrInfo {
	t.Helper()
	hints := &rdmacm.AddrInfo{PortSpace: rdmacm.PortSpaceTCP}
	if passive {
		hints.Flags = rdmacm.AIPassive
	}
	ai, err := rdmacm.GetAddrInfo(ctx, testkit.RxeAddr, strconv.Itoa(port), hints)
	if err != nil {
		t.Fatalf("GetAddrInfo: %v", err)
	}
	return ai
}

// TestVMExchange: a passive endpoint gets a request, moved to a channel
// of its own, with a QP of the listener's attributes; a message goes each way, one from registered
// memory and one inline, each completion is got by waiting on its
// channel; the endpoints take everything down (the leak checks).
func TestVMExchange(t *testing.T) {
	testkit.RequireVM(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const port = 17420
	attr := epAttr()
	listen := listenEP(ctx, t, epAddr(t, ctx, true, port), &attr)

	serverDone := make(chan error, 1)
	exchanged := make(chan struct{}, 1)
	go func() {
		serverDone <- func() error {
			id, err := listen.GetRequest(ctx)
			if err != nil {
				return err
			}
			defer id.Destroy()
			if id.ID().Channel() == listen.ID().Channel() {
				return errors.New("the request is not on a channel of its own")
			}
			buf := make([]byte, 16)
			mr, err := id.RegMsgs(buf)
			if err != nil {
				return err
			}
			defer mr.Dereg()
			if err := id.PostRecv(7, buf, mr); err != nil {
				return err
			}
			if err := id.Accept(ctx, nil); err != nil {
				return err
			}
			var wc uverbs.WC
			if _, err := id.GetRecvComp(ctx, &wc); err != nil {
				return err
			}
			if wc.Status != uverbs.WCSuccess || wc.ID != 7 || wc.ByteLen != 16 || string(buf) != "client to server" {
				return errors.New("server's receive: " + wc.Status.String() + " " + strconv.Quote(string(buf)))
			}
			if err := id.PostSend(8, []byte("server to client"), nil, uverbs.SendInline); err != nil {
				return err
			}
			if _, err := id.GetSendComp(ctx, &wc); err != nil {
				return err
			}
			if wc.Status != uverbs.WCSuccess || wc.ID != 8 {
				return errors.New("server's send: " + wc.Status.String())
			}
			exchanged <- struct{}{}
			// Both ends disconnect at about the same time, as
			// rdma_server and rdma_client do: each waits for its
			// EventDisconnected.
			if err := id.Disconnect(ctx); err != nil {
				return fmt.Errorf("server's Disconnect: %w", err)
			}
			if ev := id.Event(); ev.Type != rdmacm.EventDisconnected {
				return fmt.Errorf("server's Disconnect returned on %v", ev)
			}
			return nil
		}()
	}()

	attr = epAttr()
	ep, err := rdmacm.CreateEP(ctx, epAddr(t, ctx, false, port), nil, &attr)
	if err != nil {
		t.Fatalf("active CreateEP: %v", err)
	}
	defer ep.Destroy()
	if ep.QP() == nil || attr.Cap.MaxSendWR < 2 || attr.Cap.MaxRecvWR < 2 {
		t.Fatalf("active endpoint: QP %v, capabilities %+v", ep.QP(), attr.Cap)
	}
	recv, send := make([]byte, 16), []byte("client to server")
	rmr, err := ep.RegMsgs(recv)
	if err != nil {
		t.Fatal(err)
	}
	defer rmr.Dereg()
	smr, err := ep.RegMsgs(send)
	if err != nil {
		t.Fatal(err)
	}
	defer smr.Dereg()
	if err := ep.PostRecv(1, recv, rmr); err != nil {
		t.Fatal(err)
	}
	if err := ep.Connect(ctx, nil); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	if err := ep.PostSend(2, send, smr, 0); err != nil {
		t.Fatal(err)
	}
	var wc uverbs.WC
	if n, err := ep.GetSendComp(ctx, &wc); n != 1 || err != nil || wc.Status != uverbs.WCSuccess || wc.ID != 2 {
		t.Fatalf("GetSendComp: %d %v, %v id %d", n, err, wc.Status, wc.ID)
	}
	if n, err := ep.GetRecvComp(ctx, &wc); n != 1 || err != nil || wc.Status != uverbs.WCSuccess || wc.ID != 1 {
		t.Fatalf("GetRecvComp: %d %v, %v id %d", n, err, wc.Status, wc.ID)
	}
	if string(recv) != "server to client" {
		t.Errorf("client got %q", recv)
	}
	select {
	case <-exchanged:
	case err := <-serverDone:
		t.Fatalf("server: %v", err)
	}
	if err := ep.Disconnect(ctx); err != nil {
		t.Errorf("Disconnect: %v", err)
	}
	if ev := ep.Event(); ev.Type != rdmacm.EventDisconnected {
		t.Errorf("Disconnect returned on %v, want EventDisconnected", ev)
	}
	if err := <-serverDone; err != nil {
		t.Fatalf("server: %v", err)
	}
	// Sent, and no connection to wait for: it returns.
	if err := ep.Disconnect(ctx); err != nil {
		t.Errorf("second Disconnect: %v", err)
	}
}

// TestVMRefusedAndBadInput: a connect nobody listens for fails with
// ECONNREFUSED (what rdma_connect sets for a reject), and the calls that
// need a QP or memory refuse an endpoint or argument without one with
// EINVAL instead of panicking.
func TestVMRefusedAndBadInput(t *testing.T) {
	testkit.RequireVM(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	attr := epAttr()
	ep, err := rdmacm.CreateEP(ctx, epAddr(t, ctx, false, 17421), nil, &attr)
	if err != nil {
		t.Fatalf("CreateEP: %v", err)
	}
	defer ep.Destroy()
	if err := ep.Connect(ctx, nil); !errors.Is(err, sys.ECONNREFUSED) {
		t.Errorf("Connect without a listener: %v, want ECONNREFUSED", err)
	}
	if err := ep.PostSend(1, []byte("x"), nil, 0); !errors.Is(err, sys.EINVAL) {
		t.Errorf("PostSend with no MR and no inline: %v, want EINVAL", err)
	}
	if err := ep.PostRecv(1, make([]byte, 8), nil); !errors.Is(err, sys.EINVAL) || !errors.Is(err, rdmacm.ErrInvalid) {
		t.Errorf("PostRecv with no MR: %v, want EINVAL", err)
	}

	listen, err := rdmacm.CreateEP(ctx, epAddr(t, ctx, true, 17422), nil, nil)
	if err != nil {
		t.Fatalf("passive CreateEP: %v", err)
	}
	defer listen.Destroy()
	if _, err := listen.RegMsgs(make([]byte, 8)); !errors.Is(err, sys.EINVAL) {
		t.Errorf("RegMsgs on an endpoint without a QP: %v, want EINVAL", err)
	}
	if err := listen.PostRecv(1, nil, nil); !errors.Is(err, sys.EINVAL) {
		t.Errorf("PostRecv on an endpoint without a QP: %v, want EINVAL", err)
	}
	var wc uverbs.WC
	if _, err := listen.GetSendComp(ctx, &wc); !errors.Is(err, sys.EINVAL) {
		t.Errorf("GetSendComp without a CQ: %v, want EINVAL", err)
	}
	if err := listen.Listen(0); err != nil {
		t.Fatal(err)
	}
	short, stop := context.WithTimeout(ctx, 50*time.Millisecond)
	defer stop()
	if _, err := listen.GetRequest(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("GetRequest with no request: %v, want the context's deadline", err)
	}
}

// TestVMEndpointRDMA: the one-sided helpers. The client writes into a
// server buffer registered by RegWrite and reads one registered by
// RegRead (PostWrite, PostRead; each completion got by GetSendComp),
// tells the server with an inline send, and the server finds the bytes.
// A buffer outside its MR and a nil WC are ErrInvalid; a write and the
// wait for its completion, repeated, allocate nothing.
func TestVMEndpointRDMA(t *testing.T) {
	testkit.RequireVM(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const port = 17423
	attr := epAttr()
	attr.Cap.MaxSendWR = 4
	listen := listenEP(ctx, t, epAddr(t, ctx, true, port), &attr)
	type area struct {
		addr uint64
		rkey uint32
	}
	areas := make(chan [2]area, 1)
	wbuf, rbuf := make([]byte, 64), []byte("read me, client")
	serverDone := serveRequest(ctx, listen, func(id *rdmacm.Endpoint) error {
		wmr, err := id.RegWrite(wbuf)
		if err != nil {
			return err
		}
		defer wmr.Dereg()
		rmr, err := id.RegRead(rbuf)
		if err != nil {
			return err
		}
		defer rmr.Dereg()
		msg := make([]byte, 16)
		mmr, err := id.RegMsgs(msg)
		if err != nil {
			return err
		}
		defer mmr.Dereg()
		if err := id.PostRecv(1, msg, mmr); err != nil {
			return err
		}
		if err := id.Accept(ctx, nil); err != nil {
			return err
		}
		defer id.Disconnect(ctx)
		areas <- [2]area{{wmr.Addr(), wmr.RKey()}, {rmr.Addr(), rmr.RKey()}}
		var wc uverbs.WC
		if _, err := id.GetRecvComp(ctx, &wc); err != nil {
			return err
		}
		if wc.Status != uverbs.WCSuccess || string(msg[:4]) != "done" || string(wbuf[8:16]) != "written!" {
			return fmt.Errorf("server: %v, message %q, written %q", wc.Status, msg[:4], wbuf[8:16])
		}
		return nil
	})

	attr = epAttr()
	attr.Cap.MaxSendWR = 4
	ep, err := rdmacm.CreateEP(ctx, epAddr(t, ctx, false, port), nil, &attr)
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Destroy()
	if err := ep.Connect(ctx, nil); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	a := <-areas
	lbuf := make([]byte, 64)
	lmr, err := ep.RegMsgs(lbuf)
	if err != nil {
		t.Fatal(err)
	}
	defer lmr.Dereg()
	var wc uverbs.WC
	comp := func(what string, id uint64) {
		t.Helper()
		if n, err := ep.GetSendComp(ctx, &wc); n != 1 || err != nil || wc.Status != uverbs.WCSuccess || wc.ID != id {
			t.Fatalf("%s: %d %v, %v id %d", what, n, err, wc.Status, wc.ID)
		}
	}
	copy(lbuf, "written!")
	if err := ep.PostWrite(1, lbuf[:8], lmr, 0, a[0].addr+8, a[0].rkey); err != nil {
		t.Fatalf("PostWrite: %v", err)
	}
	comp("write", 1)
	if err := ep.PostRead(2, lbuf[16:31], lmr, 0, a[1].addr, a[1].rkey); err != nil {
		t.Fatalf("PostRead: %v", err)
	}
	comp("read", 2)
	if string(lbuf[16:31]) != "read me, client" {
		t.Errorf("read %q", lbuf[16:31])
	}
	if err := ep.PostSend(3, make([]byte, 8), lmr, 0); !errors.Is(err, rdmacm.ErrInvalid) || !errors.Is(err, sys.EINVAL) {
		t.Errorf("PostSend of a buffer outside its MR: %v, want ErrInvalid and EINVAL", err)
	}
	if _, err := ep.GetSendComp(ctx, nil); !errors.Is(err, rdmacm.ErrInvalid) {
		t.Errorf("GetSendComp into a nil WC: %v, want ErrInvalid", err)
	}
	t.Run("no-allocs", func(t *testing.T) {
		testkit.NoAllocs(t, 50, func() {
			if err := ep.PostWrite(4, lbuf[:8], lmr, 0, a[0].addr, a[0].rkey); err != nil {
				t.Fatal(err)
			}
			if n, err := ep.GetSendComp(ctx, &wc); n != 1 || err != nil || wc.Status != uverbs.WCSuccess {
				t.Fatal(n, err, wc.Status)
			}
		})
	})
	if err := ep.PostSend(3, []byte("done"), nil, uverbs.SendInline); err != nil {
		t.Fatal(err)
	}
	comp("send", 3)
	if err := ep.Disconnect(ctx); err != nil { // the server's waits for it
		t.Errorf("Disconnect: %v", err)
	}
	if err := <-serverDone; err != nil {
		t.Fatal(err)
	}
}

// TestVMEndpointUD: UD endpoints (rdma_getaddrinfo's UDP port space):
// the request GetRequest returns is answered by Accept without a wait;
// after Connect the client's Event().UD holds the server's QP number,
// UDPQKey and address vector, through which PostUDSend reaches the
// server, which answers the sender of its completion.
func TestVMEndpointUD(t *testing.T) {
	testkit.RequireVM(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const port = "17424"
	udAddr := func(flags rdmacm.AIFlags) *rdmacm.AddrInfo {
		ai, err := rdmacm.GetAddrInfo(ctx, testkit.RxeAddr, port, &rdmacm.AddrInfo{Flags: flags, PortSpace: rdmacm.PortSpaceUDP})
		if err != nil || ai.QPType != uverbs.QPTypeUD {
			t.Fatalf("GetAddrInfo: %+v, %v", ai, err)
		}
		return ai
	}
	udAttr := func() *uverbs.QPInitAttr {
		return &uverbs.QPInitAttr{SigAll: true, Cap: uverbs.QPCap{MaxSendWR: 2, MaxRecvWR: 2, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 16}}
	}
	listen := listenEP(ctx, t, udAddr(rdmacm.AIPassive), udAttr())
	serverDone := serveRequest(ctx, listen, func(req *rdmacm.Endpoint) error {
		if ev := req.Event(); ev.Type != rdmacm.EventConnectRequest || req.QP() == nil || req.QP().Type() != uverbs.QPTypeUD {
			return fmt.Errorf("request: %v, QP %v", &ev, req.QP())
		}
		buf := make([]byte, 40+16)
		mr, err := req.RegMsgs(buf)
		if err != nil {
			return err
		}
		defer mr.Dereg()
		if err := req.PostRecv(1, buf, mr); err != nil {
			return err
		}
		if err := req.Accept(ctx, nil); err != nil {
			return err
		}
		var wc uverbs.WC
		if _, err := req.GetRecvComp(ctx, &wc); err != nil {
			return err
		}
		if wc.Status != uverbs.WCSuccess || wc.ByteLen != 40+13 || string(buf[40:53]) != "hello over UD" {
			return fmt.Errorf("server received %v, %d bytes %q", wc.Status, wc.ByteLen, buf[40:53])
		}
		ah, err := req.PD().CreateAHFromWC(req.ID().Port(), &wc, buf[:40])
		if err != nil {
			return err
		}
		defer ah.Destroy()
		if err := req.PostUDSend(2, []byte("reply"), nil, uverbs.SendInline, ah, wc.SrcQP); err != nil {
			return err
		}
		_, err = req.GetSendComp(ctx, &wc)
		return err
	})

	ep, err := rdmacm.CreateEP(ctx, udAddr(0), nil, udAttr())
	if err != nil {
		t.Fatal(err)
	}
	defer ep.Destroy()
	rbuf := make([]byte, 40+16)
	rmr, err := ep.RegMsgs(rbuf)
	if err != nil {
		t.Fatal(err)
	}
	defer rmr.Dereg()
	if err := ep.PostRecv(1, rbuf, rmr); err != nil {
		t.Fatal(err)
	}
	if err := ep.Connect(ctx, nil); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	ud := ep.Event().UD
	if ev := ep.Event(); ev.Type != rdmacm.EventEstablished || ud.QKey != rdmacm.UDPQKey || ud.QPNum == 0 {
		t.Fatalf("after Connect: %v, QPN %d, Q_Key %#x", &ev, ud.QPNum, ud.QKey)
	}
	ah, err := ep.PD().CreateAH(ud.AH)
	if err != nil {
		t.Fatal(err)
	}
	defer ah.Destroy()
	if err := ep.PostUDSend(3, []byte("hello over UD"), nil, uverbs.SendInline, ah, ud.QPNum); err != nil {
		t.Fatal(err)
	}
	var wc uverbs.WC
	if n, err := ep.GetSendComp(ctx, &wc); n != 1 || err != nil || wc.Status != uverbs.WCSuccess {
		t.Fatalf("GetSendComp: %d %v %v", n, err, wc.Status)
	}
	if n, err := ep.GetRecvComp(ctx, &wc); n != 1 || err != nil || wc.Status != uverbs.WCSuccess || string(rbuf[40:45]) != "reply" {
		t.Fatalf("GetRecvComp: %d %v %v, %q", n, err, wc.Status, rbuf[40:45])
	}
	if err := <-serverDone; err != nil {
		t.Fatal(err)
	}
	if err := ep.PostUDSend(4, []byte("x"), nil, uverbs.SendInline, nil, ud.QPNum); !errors.Is(err, rdmacm.ErrInvalid) {
		t.Errorf("PostUDSend without an AH: %v, want ErrInvalid", err)
	}
}

// TestVMEndpointDestroyWhileWaiting: a GetRecvComp parked on the
// receive CQ's channel, and a GetRequest parked on the listener's event
// channel, return an error wrapping ErrClosed when another goroutine
// destroys their endpoint, instead of hanging; destroying twice is
// ErrClosed.
func TestVMEndpointDestroyWhileWaiting(t *testing.T) {
	testkit.RequireVM(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const port = 17425
	attr := epAttr()
	listen := listenEP(ctx, t, epAddr(t, ctx, true, port), &attr)
	requested := make(chan error, 1)
	go func() {
		_, err := listen.GetRequest(ctx)
		requested <- err
	}()
	attr = epAttr()
	ep, err := rdmacm.CreateEP(ctx, epAddr(t, ctx, false, port+1), nil, &attr)
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() {
		var wc uverbs.WC
		_, err := ep.GetRecvComp(ctx, &wc)
		waited <- err
	}()
	// Whether each goroutine is parked yet or not, nothing will come but
	// the destroy: either way the call must end with ErrClosed.
	if err := ep.Destroy(); err != nil {
		t.Errorf("Destroy: %v", err)
	}
	if err := listen.Destroy(); err != nil {
		t.Errorf("Destroy of the listener: %v", err)
	}
	if err := ep.Destroy(); !errors.Is(err, rdmacm.ErrClosed) {
		t.Errorf("Destroy twice: %v, want ErrClosed", err)
	}
	for what, ch := range map[string]chan error{"GetRecvComp": waited, "GetRequest": requested} {
		select {
		case err := <-ch:
			if !errors.Is(err, rdmacm.ErrClosed) {
				t.Errorf("%s after Destroy: %v, want ErrClosed", what, err)
			}
		case <-ctx.Done():
			t.Fatalf("%s still waits after Destroy", what)
		}
	}
}

// serveRequest runs a listener's side in a goroutine: the next request,
// given to serve, then destroyed; the channel gets serve's error (or
// GetRequest's).
func serveRequest(ctx context.Context, listen *rdmacm.Endpoint, serve func(req *rdmacm.Endpoint) error) <-chan error {
	done := make(chan error, 1)
	go func() {
		done <- func() error {
			req, err := listen.GetRequest(ctx)
			if err != nil {
				return err
			}
			defer req.Destroy()
			return serve(req)
		}()
	}()
	return done
}
