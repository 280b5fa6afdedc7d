package rdmacm_test

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/rdmacm"
	"github.com/pureverbs/pureverbs/uverbs"
)

// TestVMEndpointSRQ: a listener whose requests' QPs take their receives
// from a shared receive queue still gets a receive CQ of its own for each
// request, as librdmacm's rdma_create_qp_ex makes one whenever
// cap.max_recv_wr is set and no recv_cq given (an SRQ's receives complete
// on the CQ of the QP that consumed them): GetRecvComp returns the
// receive, GetSendComp the send, neither the other's completion.
func TestVMEndpointSRQ(t *testing.T) {
	testkit.RequireVM(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// The device's shared Context, through an ID bound to its address,
	// for the PD and SRQ the listener's requests use.
	ch := openChannel(t)
	anchor, err := ch.CreateID(rdmacm.PortSpaceTCP)
	if err != nil {
		t.Fatal(err)
	}
	defer anchor.Destroy()
	if err := anchor.BindAddr(netip.AddrPortFrom(rxeAddr, 0)); err != nil {
		t.Fatal(err)
	}
	pd, err := anchor.Context().AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Dealloc()
	srq, err := pd.CreateSRQ(uverbs.SRQAttr{MaxWR: 8, MaxSGE: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer srq.Destroy(ctx)
	rbuf := make([]byte, 16)
	rmr, err := pd.RegMR(rbuf, uverbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	defer rmr.Dereg()
	if err := srq.PostRecv([]uverbs.RecvWR{{ID: 7, SGL: []uverbs.SGE{rmr.SGE(0, len(rbuf))}}}); err != nil {
		t.Fatal(err)
	}

	const port = 17427
	lattr := uverbs.QPInitAttr{SRQ: srq,
		Cap: uverbs.QPCap{MaxSendWR: 2, MaxRecvWR: 2, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 16}}
	listen, err := rdmacm.CreateEP(ctx, epAddr(t, ctx, true, port), pd, &lattr)
	if err != nil {
		t.Fatalf("passive CreateEP: %v", err)
	}
	defer listen.Destroy()
	if err := listen.Listen(0); err != nil {
		t.Fatal(err)
	}

	serverDone := make(chan error, 1)
	go func() {
		serverDone <- func() error {
			req, err := listen.GetRequest(ctx)
			if err != nil {
				return err
			}
			defer req.Destroy()
			if req.QP().SRQ() != srq {
				return fmt.Errorf("the request's QP does not use the SRQ")
			}
			if req.RecvCQ() == nil || req.RecvCQ() == req.SendCQ() {
				return fmt.Errorf("the request's receive CQ %p is its send CQ %p", req.RecvCQ(), req.SendCQ())
			}
			if err := req.Accept(ctx, nil); err != nil {
				return err
			}
			var wc uverbs.WC
			if _, err := req.GetRecvComp(ctx, &wc); err != nil {
				return fmt.Errorf("GetRecvComp: %w", err)
			}
			if wc.Status != uverbs.WCSuccess || wc.ID != 7 || wc.Opcode != uverbs.WCRecv || string(rbuf[:wc.ByteLen]) != "to the SRQ" {
				return fmt.Errorf("server's receive: id %d %v %v %q", wc.ID, wc.Opcode, wc.Status, rbuf[:wc.ByteLen])
			}
			if err := req.PostSend(8, []byte("reply"), nil, uverbs.SendInline|uverbs.SendSignaled); err != nil {
				return err
			}
			if _, err := req.GetSendComp(ctx, &wc); err != nil {
				return fmt.Errorf("GetSendComp: %w", err)
			}
			if wc.Status != uverbs.WCSuccess || wc.ID != 8 || wc.Opcode != uverbs.WCSend {
				return fmt.Errorf("server's send: id %d %v %v", wc.ID, wc.Opcode, wc.Status)
			}
			return req.Disconnect(ctx)
		}()
	}()

	cattr := epAttr()
	ep, err := rdmacm.CreateEP(ctx, epAddr(t, ctx, false, port), nil, &cattr)
	if err != nil {
		t.Fatalf("active CreateEP: %v", err)
	}
	defer ep.Destroy()
	buf := make([]byte, 16)
	mr, err := ep.RegMsgs(buf)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Dereg()
	if err := ep.PostRecv(1, buf, mr); err != nil {
		t.Fatal(err)
	}
	if err := ep.Connect(ctx, nil); err != nil {
		t.Fatalf("Connect: %v (server: %v)", err, <-serverDone)
	}
	if err := ep.PostSend(2, []byte("to the SRQ"), nil, uverbs.SendInline); err != nil {
		t.Fatal(err)
	}
	var wc uverbs.WC
	if _, err := ep.GetSendComp(ctx, &wc); err != nil || wc.Status != uverbs.WCSuccess {
		t.Fatalf("client's send: %v %v", err, wc.Status)
	}
	if _, err := ep.GetRecvComp(ctx, &wc); err != nil || wc.Status != uverbs.WCSuccess || string(buf[:wc.ByteLen]) != "reply" {
		t.Fatalf("client's receive: %v %v %q", err, wc.Status, buf[:wc.ByteLen])
	}
	if err := ep.Disconnect(ctx); err != nil {
		t.Errorf("client's Disconnect: %v", err)
	}
	if err := <-serverDone; err != nil {
		t.Errorf("server: %v", err)
	}
}
