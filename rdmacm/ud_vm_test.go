package rdmacm_test

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/rdmacm"
	"github.com/pureverbs/pureverbs/uverbs"
)

// udEnd is one side of a UD exchange: udaddy's messages are 100 bytes,
// each receive with room for the 40-byte GRH.
type udEnd struct {
	*end
	ah *uverbs.AH
}

const udMsg, udCount = 100, 10

func newUDEnd(t *testing.T, id *rdmacm.ID) *udEnd {
	t.Helper()
	c := id.Context()
	e := &end{t: t}
	var err error
	if e.pd, err = c.AllocPD(); err != nil {
		t.Fatal(err)
	}
	if e.cq, err = c.CreateCQ(2*udCount, nil); err != nil {
		t.Fatal(err)
	}
	e.buf = make([]byte, (udCount+1)*(udMsg+40))
	if e.mr, err = e.pd.RegMR(e.buf, uverbs.AccessLocalWrite); err != nil {
		t.Fatal(err)
	}
	e.qp, err = id.CreateQP(e.pd, uverbs.QPInitAttr{Type: uverbs.QPTypeUD, SendCQ: e.cq, RecvCQ: e.cq,
		Cap: uverbs.QPCap{MaxSendWR: udCount, MaxRecvWR: udCount, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatalf("CreateQP(UD): %v", err)
	}
	if a, _, err := e.qp.Query(uverbs.QPAttrState | uverbs.QPAttrQKey); err != nil || a.State != uverbs.QPStateRTS || a.QKey == 0 {
		t.Fatalf("a UD ID's QP: %v, Q_Key %#x (%v); want RTS with the port space's Q_Key", a.State, a.QKey, err)
	}
	for i := range udCount {
		if err := e.qp.PostRecv([]uverbs.RecvWR{{ID: uint64(100 + i), SGL: []uverbs.SGE{e.mr.SGE((i+1)*(udMsg+40), udMsg+40)}}}); err != nil {
			t.Fatal(err)
		}
	}
	return &udEnd{end: e}
}

func (u *udEnd) close() {
	if u.ah != nil {
		u.ah.Destroy()
	}
	u.end.close()
}

// sends posts udCount sends of udMsg bytes with the QPN as immediate data
// (as udaddy does), to qpn/qkey through u.ah.
func (u *udEnd) sends(qpn, qkey uint32, signaled bool) {
	u.t.Helper()
	var f uverbs.SendFlags
	if signaled {
		f = uverbs.SendSignaled
	}
	for range udCount {
		if err := u.qp.PostSend([]uverbs.SendWR{{ID: 1, Opcode: uverbs.WRSendWithImm, Flags: f, ImmData: u.qp.QPN(),
			SGL: []uverbs.SGE{u.mr.SGE(0, udMsg)}, AH: u.ah, RemoteQPN: qpn, RemoteQKey: qkey}}); err != nil {
			u.t.Fatal(err)
		}
	}
}

// recvs polls n completions, which must be receives of udMsg bytes with
// the sender's QPN as immediate data when from is not 0; it returns the
// first receive's completion.
func (u *udEnd) recvs(ctx context.Context, n int, from uint32) uverbs.WC {
	u.t.Helper()
	var first uverbs.WC
	for i := range n {
		wc := u.wc(ctx)
		if wc.ID < 100 {
			continue // a send's
		}
		if wc.ByteLen != udMsg+40 || (from != 0 && (wc.Flags&uverbs.WCWithImm == 0 || wc.ImmData != from)) {
			u.t.Fatalf("receive %d: %+v, want %d bytes from QPN %d", i, wc, udMsg+40, from)
		}
		if first.ID == 0 {
			first = wc
		}
	}
	return first
}

// TestVMUD: UD IDs between two Go ends, in PortSpaceUDP (CreateID) and
// in PortSpaceIB (CreateIDType, rdma_create_id2): a UD ID's QP is RTS as
// soon as CreateQP returns; the connect (the IB CM's SIDR exchange) carries the
// client's private data to the server, whose Accept answers with its QP
// number and Q_Key, which the client's EventEstablished reports with an
// address vector; messages then go both ways, the server answering
// through an AH made from a received completion, as udaddy does.
func TestVMUD(t *testing.T) {
	t.Run("udp", func(t *testing.T) { testUD(t, rdmacm.PortSpaceUDP, 0) })
	t.Run("ib", func(t *testing.T) { testUD(t, rdmacm.PortSpaceIB, uverbs.QPTypeUD) })
}

func testUD(t *testing.T, ps rdmacm.PortSpace, typ uverbs.QPType) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sch, cch := openChannel(t), openChannel(t)
	listen := listenerType(t, sch, ps, typ, 0)
	cid := resolveType(ctx, t, cch, ps, typ, listen.LocalAddr())
	client := newUDEnd(t, cid)
	if _, err := cid.CreateQP(client.pd, uverbs.QPInitAttr{Type: uverbs.QPTypeRC}); err == nil {
		t.Fatal("a second QP, of type RC, on a UD ID was accepted")
	}
	// A SIDR REQ carries 216 bytes of private data, 36 of them the
	// kernel's header: 180 are the user's.
	priv := bytes.Repeat([]byte("hi"), 90)
	if err := cid.Connect(&rdmacm.ConnParam{PrivateData: append(priv, 0)}); !errors.Is(err, uverbs.ErrInvalid) {
		t.Fatalf("Connect with 181 bytes of private data: %v, want ErrInvalid", err)
	}
	if err := cid.Connect(&rdmacm.ConnParam{PrivateData: priv}); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	req := want(ctx, t, sch, rdmacm.EventConnectRequest)
	if !bytes.HasPrefix(req.UD.PrivateData, priv) {
		t.Fatalf("UD connect request private data %q, want the 180 bytes sent", req.UD.PrivateData)
	}
	server := newUDEnd(t, req.ID)
	if err := req.ID.Accept(nil); err != nil {
		t.Fatalf("Accept: %v", err)
	}
	est := want(ctx, t, cch, rdmacm.EventEstablished)
	sa, _, _ := server.qp.Query(uverbs.QPAttrQKey)
	if est.UD.QPNum != server.qp.QPN() || est.UD.QKey != sa.QKey || !est.UD.AH.IsGlobal {
		t.Fatalf("established: QPN %d Q_Key %#x global %v; want %d, %#x, global", est.UD.QPNum, est.UD.QKey, est.UD.AH.IsGlobal, server.qp.QPN(), sa.QKey)
	}
	var err error
	if client.ah, err = client.pd.CreateAH(est.UD.AH); err != nil {
		t.Fatalf("CreateAH from the established event: %v", err)
	}
	client.sends(est.UD.QPNum, est.UD.QKey, false)
	wc := server.recvs(ctx, udCount, client.qp.QPN())
	grh := server.buf[(int(wc.ID)-100+1)*(udMsg+40):][:40]
	if server.ah, err = server.pd.CreateAHFromWC(req.ID.Port(), &wc, grh); err != nil {
		t.Fatalf("CreateAHFromWC: %v", err)
	}
	server.sends(wc.ImmData, sa.QKey, true)
	server.recvs(ctx, udCount, 0) // its sends' completions
	client.recvs(ctx, udCount, server.qp.QPN())
	for _, id := range []*rdmacm.ID{cid, req.ID, listen} {
		if err := id.Destroy(); err != nil {
			t.Fatal(err)
		}
	}
	client.close()
	server.close()
}

// udaddyPort is udaddy's port, which it has no option to change.
const udaddyPort = 7174

// TestVMUDAgainstC: librdmacm's udaddy against this package, both ways:
// the Go server answers udaddy's ten messages with ten of its own, and
// the Go client sends udaddy's server ten and gets ten back; udaddy must
// exit 0.
func TestVMUDAgainstC(t *testing.T) {
	t.Run("c-client-go-server", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		ch := openChannel(t)
		listen := listener(t, ch, rdmacm.PortSpaceUDP, udaddyPort)
		cl := testkit.StartPeer(ctx, t, "udaddy", "-s", testkit.RxeAddr)
		req := want(ctx, t, ch, rdmacm.EventConnectRequest)
		server := newUDEnd(t, req.ID)
		if err := req.ID.Accept(nil); err != nil {
			t.Fatalf("Accept: %v", err)
		}
		wc := server.recvs(ctx, udCount, 0)
		if wc.Flags&uverbs.WCWithImm == 0 {
			t.Fatalf("udaddy's message without its QPN: %+v", wc)
		}
		grh := server.buf[(int(wc.ID)-100+1)*(udMsg+40):][:40]
		var err error
		if server.ah, err = server.pd.CreateAHFromWC(req.ID.Port(), &wc, grh); err != nil {
			t.Fatal(err)
		}
		sa, _, _ := server.qp.Query(uverbs.QPAttrQKey)
		server.sends(wc.ImmData, sa.QKey, true)
		server.recvs(ctx, udCount, 0)
		if err := cl.Wait(); err != nil {
			t.Fatalf("udaddy: %v\n%s", err, cl.Output())
		}
		req.ID.Destroy()
		listen.Destroy()
		server.close()
	})
	t.Run("go-client-c-server", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		port := uint16(udaddyPort)
		srv := testkit.StartPeer(ctx, t, "udaddy", "-b", testkit.RxeAddr)
		ch := openChannel(t)
		for attempt := 1; ; attempt++ {
			cid := resolvePS(ctx, t, ch, rdmacm.PortSpaceUDP, netip.AddrPortFrom(rxeAddr, port))
			client := newUDEnd(t, cid)
			if err := cid.Connect(nil); err != nil {
				t.Fatal(err)
			}
			ev, err := ch.GetEvent(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if ev.Type != rdmacm.EventEstablished {
				// Before udaddy listens the SIDR request is refused.
				if ev.Type != rdmacm.EventUnreachable && ev.Type != rdmacm.EventRejected {
					t.Fatalf("connecting to udaddy: %v", &ev)
				}
				t.Logf("attempt %d: %v", attempt, &ev)
				cid.Destroy()
				client.close()
				select {
				case <-srv.Done():
					t.Fatalf("udaddy exited: %v\n%s", srv.Wait(), srv.Output())
				case <-ctx.Done():
					t.Fatal(ctx.Err())
				default:
				}
				continue
			}
			if client.ah, err = client.pd.CreateAH(ev.UD.AH); err != nil {
				t.Fatal(err)
			}
			client.sends(ev.UD.QPNum, ev.UD.QKey, false)
			client.recvs(ctx, udCount, ev.UD.QPNum)
			if err := srv.Wait(); err != nil {
				t.Fatalf("udaddy: %v\n%s", err, srv.Output())
			}
			cid.Destroy()
			client.close()
			return
		}
	})
}
