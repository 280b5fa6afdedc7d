package cmsync

// VM tests (KERNEL=6.12 make vmtest VMPKGS=./internal/cmsync): the
// synchronous calls Go against Go; against librdmacm's examples they are
// tested through cmd/rdmaserver and cmd/rdmaclient.

import (
	"context"
	"errors"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/internal/testkit/leakmain"
	"github.com/pureverbs/pureverbs/rdmacm"
	"github.com/pureverbs/pureverbs/uverbs"
)

// TestMain traces every fd and mapping the tests create and fails the run
// when any is left open.
func TestMain(m *testing.M) {
	os.Exit(leakmain.Run(m))
}

func epAttr() uverbs.QPInitAttr {
	return uverbs.QPInitAttr{SigAll: true,
		Cap: uverbs.QPCap{MaxSendWR: 2, MaxRecvWR: 2, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 16}}
}

func addr(t *testing.T, ctx context.Context, passive bool, port int) *rdmacm.AddrInfo {
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
	listen, err := CreateEP(ctx, addr(t, ctx, true, port), &attr)
	if err != nil {
		t.Fatalf("passive CreateEP: %v", err)
	}
	defer listen.Destroy()
	if listen.QP != nil {
		t.Errorf("a passive endpoint has a QP")
	}
	if err := listen.Listen(0); err != nil {
		t.Fatalf("Listen: %v", err)
	}

	serverDone := make(chan error, 1)
	go func() {
		serverDone <- func() error {
			id, err := listen.GetRequest(ctx)
			if err != nil {
				return err
			}
			defer id.Destroy()
			if id.ch == listen.ch || id.ID.Channel() != id.ch {
				return errors.New("the request is not on a channel of its own")
			}
			buf := make([]byte, 16)
			mr, err := id.RegMsgs(buf)
			if err != nil {
				return err
			}
			defer mr.Dereg()
			if err := id.PostRecv(7, mr); err != nil {
				return err
			}
			if err := id.Accept(ctx, nil); err != nil {
				return err
			}
			defer id.Disconnect()
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
			return nil
		}()
	}()

	attr = epAttr()
	ep, err := CreateEP(ctx, addr(t, ctx, false, port), &attr)
	if err != nil {
		t.Fatalf("active CreateEP: %v", err)
	}
	defer ep.Destroy()
	if ep.QP == nil || attr.Cap.MaxSendWR < 2 || attr.Cap.MaxRecvWR < 2 {
		t.Fatalf("active endpoint: QP %v, capabilities %+v", ep.QP, attr.Cap)
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
	if err := ep.PostRecv(1, rmr); err != nil {
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
	if err := <-serverDone; err != nil {
		t.Fatalf("server: %v", err)
	}
	if err := ep.Disconnect(); err != nil {
		t.Errorf("Disconnect: %v", err)
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
	ep, err := CreateEP(ctx, addr(t, ctx, false, 17421), &attr)
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
	if err := ep.PostRecv(1, nil); !errors.Is(err, sys.EINVAL) {
		t.Errorf("PostRecv with no MR: %v, want EINVAL", err)
	}

	listen, err := CreateEP(ctx, addr(t, ctx, true, 17422), nil)
	if err != nil {
		t.Fatalf("passive CreateEP: %v", err)
	}
	defer listen.Destroy()
	if _, err := listen.RegMsgs(make([]byte, 8)); !errors.Is(err, sys.EINVAL) {
		t.Errorf("RegMsgs on an endpoint without a QP: %v, want EINVAL", err)
	}
	if err := listen.PostRecv(1, nil); !errors.Is(err, sys.EINVAL) {
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
