package twohost

import (
	"context"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/rdmacm"
	"github.com/pureverbs/pureverbs/uverbs"
)

// cmEnd is one side of an rdma_cm connection on host A.
type cmEnd struct {
	pd *uverbs.PD
	cq *uverbs.CQ
	qp *uverbs.QP
	mr *uverbs.MR
}

func newCMEnd(t *testing.T, id *rdmacm.ID) *cmEnd {
	t.Helper()
	c := id.Context()
	if c == nil || c.Device().Name != testkit.WireDev {
		t.Fatalf("the ID's Context is %v, want %s", c, testkit.WireDev)
	}
	e := &cmEnd{}
	var err error
	if e.pd, err = c.AllocPD(); err != nil {
		t.Fatal(err)
	}
	if e.cq, err = c.CreateCQ(8, nil); err != nil {
		t.Fatal(err)
	}
	if e.mr, err = e.pd.RegMR(make([]byte, 64), uverbs.AccessLocalWrite); err != nil {
		t.Fatal(err)
	}
	if e.qp, err = id.CreateQP(e.pd, uverbs.QPInitAttr{SendCQ: e.cq, RecvCQ: e.cq,
		Cap: uverbs.QPCap{MaxSendWR: 2, MaxRecvWR: 2, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.qp.Destroy(context.Background())
		e.mr.Dereg()
		e.cq.Destroy(context.Background())
		e.pd.Dealloc()
	})
	if err := e.qp.PostRecv([]uverbs.RecvWR{{ID: 1, SGL: []uverbs.SGE{e.mr.SGE(0, 16)}}}); err != nil {
		t.Fatal(err)
	}
	return e
}

// exchange is the Go side of rdma_client's and rdma_server's 16-byte
// exchange: send when sendFirst, receive, send otherwise.
func (e *cmEnd) exchange(ctx context.Context, t *testing.T, sendFirst bool) {
	t.Helper()
	send := func() {
		if err := e.qp.PostSend([]uverbs.SendWR{{ID: 2, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
			SGL: []uverbs.SGE{e.mr.SGE(32, 16)}}}); err != nil {
			t.Fatal(err)
		}
	}
	if sendFirst {
		send()
	}
	wcs := make([]uverbs.WC, 1)
	for got := map[uint64]bool{}; len(got) < 2; {
		if ctx.Err() != nil {
			t.Fatalf("completions: %v (have %v)", ctx.Err(), got)
		}
		n, err := e.cq.Poll(wcs)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			continue
		}
		if wcs[0].Status != uverbs.WCSuccess || (wcs[0].ID == 1 && wcs[0].ByteLen != 16) {
			t.Fatalf("completion %+v (%v)", wcs[0], wcs[0].Status)
		}
		got[wcs[0].ID] = true
		if wcs[0].ID == 1 && !sendFirst {
			send()
		}
	}
}

func cmEvent(ctx context.Context, t *testing.T, ch *rdmacm.EventChannel, want rdmacm.EventType) rdmacm.Event {
	t.Helper()
	ev, err := ch.GetEvent(ctx)
	if err != nil || ev.Type != want || ev.Status != 0 {
		t.Fatalf("event %v (%v), want %v", &ev, err, want)
	}
	return ev
}

// TestTwoHostRDMACM: connections set up by the kernel's connection
// manager across the wire, between this package's rdmacm on host A and
// librdmacm's rdma_client and rdma_server on host B: address and route
// resolution over the wire bind A's IDs to WireDev, 16 bytes go each way,
// the disconnect handshake completes and the C tool exits 0.
func TestTwoHostRDMACM(t *testing.T) {
	a, b := testkit.ThisHost(t), testkit.PeerHost(t)
	aAddr, bAddr := netip.MustParseAddr(a.Addr), netip.MustParseAddr(b.Addr)
	t.Run("c-client-on-B", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		ch, err := rdmacm.Open()
		if err != nil {
			t.Fatal(err)
		}
		defer ch.Close()
		listen, err := ch.CreateID(rdmacm.PortSpaceTCP)
		if err != nil {
			t.Fatal(err)
		}
		if err := listen.BindAddr(netip.AddrPortFrom(aAddr, 0)); err != nil {
			t.Fatal(err)
		}
		if err := listen.Listen(0); err != nil {
			t.Fatal(err)
		}
		cl := b.Start(ctx, t, "rdma_client", "-s", a.Addr, "-p", strconv.Itoa(int(listen.LocalAddr().Port())))
		req := cmEvent(ctx, t, ch, rdmacm.EventConnectRequest)
		if req.ID.RemoteAddr().Addr() != bAddr {
			t.Fatalf("request from %v, want host B (%v)", req.ID.RemoteAddr(), bAddr)
		}
		e := newCMEnd(t, req.ID)
		if err := req.ID.Accept(nil); err != nil {
			t.Fatal(err)
		}
		cmEvent(ctx, t, ch, rdmacm.EventEstablished)
		e.exchange(ctx, t, false)
		cmEvent(ctx, t, ch, rdmacm.EventDisconnected)
		if err := req.ID.Disconnect(); err != nil {
			t.Fatal(err)
		}
		if err := cl.Wait(); err != nil {
			t.Fatalf("rdma_client on B: %v\n%s", err, cl.Output())
		}
		req.ID.Destroy()
		listen.Destroy()
	})
	t.Run("c-server-on-B", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		port := int(nextPort.Add(1))
		srv := b.Start(ctx, t, "rdma_server", "-s", b.Addr, "-p", strconv.Itoa(port))
		ch, err := rdmacm.Open()
		if err != nil {
			t.Fatal(err)
		}
		defer ch.Close()
		// rdma_server listens a moment after it starts: a connect before
		// that is rejected (no listener) and tried again with a new ID.
		for attempt := 1; ; attempt++ {
			id, err := ch.CreateID(rdmacm.PortSpaceTCP)
			if err != nil {
				t.Fatal(err)
			}
			if err := id.ResolveAddr(netip.AddrPort{}, netip.AddrPortFrom(bAddr, uint16(port)), 5*time.Second); err != nil {
				t.Fatal(err)
			}
			cmEvent(ctx, t, ch, rdmacm.EventAddrResolved)
			if err := id.ResolveRoute(5 * time.Second); err != nil {
				t.Fatal(err)
			}
			cmEvent(ctx, t, ch, rdmacm.EventRouteResolved)
			e := newCMEnd(t, id)
			if err := id.Connect(nil); err != nil {
				t.Fatal(err)
			}
			ev, err := ch.GetEvent(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if ev.Type != rdmacm.EventEstablished {
				if ev.Type != rdmacm.EventRejected && ev.Type != rdmacm.EventUnreachable {
					t.Fatalf("connecting to rdma_server on B: %v", &ev)
				}
				t.Logf("attempt %d: %v", attempt, &ev)
				id.Destroy()
				select {
				case <-srv.Done():
					t.Fatalf("rdma_server on B exited: %v\n%s", srv.Wait(), srv.Output())
				default:
				}
				continue
			}
			e.exchange(ctx, t, true)
			cmEvent(ctx, t, ch, rdmacm.EventDisconnected)
			if err := id.Disconnect(); err != nil {
				t.Fatal(err)
			}
			if err := srv.Wait(); err != nil {
				t.Fatalf("rdma_server on B: %v\n%s", err, srv.Output())
			}
			id.Destroy()
			return
		}
	})
}
