package rdmacm_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/sys"
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

	serverDone := serveRequest(ctx, listen, func(req *rdmacm.Endpoint) error {
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
	})

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
		t.Fatalf("client's send: %v %v (%s; server: %v)", err, wc.Status, qpState(ep.QP()), <-serverDone)
	}
	if _, err := ep.GetRecvComp(ctx, &wc); err != nil || wc.Status != uverbs.WCSuccess || string(buf[:wc.ByteLen]) != "reply" {
		t.Fatalf("client's receive: %v %v %q (%s; server: %v)", err, wc.Status, buf[:wc.ByteLen], qpState(ep.QP()), <-serverDone)
	}
	if err := ep.Disconnect(ctx); err != nil {
		t.Errorf("client's Disconnect: %v", err)
	}
	if err := <-serverDone; err != nil {
		t.Errorf("server: %v", err)
	}
}

// TestVMEndpointCreateSRQ: rdma_create_srq and rdma_create_qp on
// endpoints made without QP attributes, as librdmacm's rdma_create_ep(3)
// with a NULL qp_init_attr leaves them. The request's SRQ is made in a PD
// of the endpoint's own and its QP in the same PD takes its receives from
// it (rdma_create_qp_ex's id->srq); PostRecv goes to the SRQ
// (rdma_post_recv's id->srq), the receive completes on the QP's own
// receive CQ. The SRQ cannot go while its QP lives (EBUSY, nothing
// released); after DestroyQP a second QP can be made on it, and it can
// go once the QPs are gone. The misuses are refused with nothing made,
// and the leak checks see everything released.
func TestVMEndpointCreateSRQ(t *testing.T) {
	testkit.RequireVM(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const port = 17428
	listen := listenEP(ctx, t, epAddr(t, ctx, true, port), nil)
	qattr := func() *uverbs.QPInitAttr {
		return &uverbs.QPInitAttr{Cap: uverbs.QPCap{MaxSendWR: 2, MaxRecvWR: 2, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 16}}
	}

	serverDone := serveRequest(ctx, listen, func(req *rdmacm.Endpoint) error {
		if req.QP() != nil || req.SRQ() != nil {
			return fmt.Errorf("a request of a listener without attributes has QP %v, SRQ %v", req.QP(), req.SRQ())
		}
		if err := req.PostRecv(1, make([]byte, 1), nil); !errors.Is(err, rdmacm.ErrInvalid) {
			return fmt.Errorf("PostRecv with no QP or SRQ: %v, want ErrInvalid", err)
		}
		if err := req.DestroySRQ(ctx); !errors.Is(err, rdmacm.ErrInvalid) {
			return fmt.Errorf("DestroySRQ with no SRQ: %v, want ErrInvalid", err)
		}
		srq, err := req.CreateSRQ(nil, uverbs.SRQAttr{MaxWR: 8, MaxSGE: 1})
		if err != nil {
			return fmt.Errorf("CreateSRQ: %w", err)
		}
		if req.SRQ() != srq || req.PD() == nil || srq.PD() != req.PD() {
			return fmt.Errorf("SRQ %p (endpoint's %p) in PD %p, endpoint's PD %p", srq, req.SRQ(), srq.PD(), req.PD())
		}
		if _, err := req.CreateSRQ(nil, uverbs.SRQAttr{MaxWR: 8, MaxSGE: 1}); !errors.Is(err, rdmacm.ErrInvalid) {
			return fmt.Errorf("a second CreateSRQ: %v, want ErrInvalid", err)
		}
		a := qattr()
		if err := req.CreateQP(nil, a); err != nil {
			return fmt.Errorf("CreateQP: %w", err)
		}
		if req.QP().SRQ() != srq || req.QP().PD() != req.PD() {
			return fmt.Errorf("the QP's SRQ %p, want the endpoint's %p; its PD %p, want %p", req.QP().SRQ(), srq, req.QP().PD(), req.PD())
		}
		if req.RecvCQ() == nil || req.RecvCQ() == req.SendCQ() {
			return fmt.Errorf("the request's receive CQ %p is its send CQ %p", req.RecvCQ(), req.SendCQ())
		}
		if a.Cap.MaxSendWR < 2 {
			return fmt.Errorf("CreateQP gave back Cap %+v", a.Cap)
		}
		if err := req.CreateQP(nil, qattr()); !errors.Is(err, rdmacm.ErrInvalid) {
			return fmt.Errorf("a second CreateQP: %v, want ErrInvalid", err)
		}
		// The SRQ while its QP lives: the kernel's EBUSY, and
		// both stay; then the QP is destroyed and made again on
		// the same SRQ, before the connection (after a
		// disconnect the kernel's CM gives a new QP no
		// attributes, EINVAL, to librdmacm too).
		if err := req.DestroySRQ(ctx); !errors.Is(err, sys.EBUSY) || req.SRQ() != srq {
			return fmt.Errorf("DestroySRQ under a live QP: %v (SRQ %p), want EBUSY", err, req.SRQ())
		}
		if err := req.DestroyQP(ctx); err != nil {
			return fmt.Errorf("DestroyQP: %w", err)
		}
		if req.QP() != nil || req.SendCQ() != nil || req.RecvCQ() != nil || req.ID().QP() != nil {
			return fmt.Errorf("after DestroyQP: QP %v, CQs %v %v, ID's QP %v", req.QP(), req.SendCQ(), req.RecvCQ(), req.ID().QP())
		}
		if err := req.DestroyQP(ctx); !errors.Is(err, rdmacm.ErrInvalid) {
			return fmt.Errorf("a second DestroyQP: %v, want ErrInvalid", err)
		}
		if err := req.CreateQP(nil, qattr()); err != nil || req.QP().SRQ() != srq {
			return fmt.Errorf("CreateQP after DestroyQP: %v", err)
		}
		rbuf := make([]byte, 32)
		rmr, err := req.RegMsgs(rbuf)
		if err != nil {
			return err
		}
		defer rmr.Dereg()
		if err := req.PostRecv(7, rbuf, rmr); err != nil {
			return fmt.Errorf("PostRecv to the SRQ: %w", err)
		}
		if err := req.Accept(ctx, nil); err != nil {
			return err
		}
		var wc uverbs.WC
		if _, err := req.GetRecvComp(ctx, &wc); err != nil {
			return fmt.Errorf("GetRecvComp: %w", err)
		}
		if wc.Status != uverbs.WCSuccess || wc.ID != 7 || wc.Opcode != uverbs.WCRecv || wc.QPNum != req.QP().QPN() || string(rbuf[:wc.ByteLen]) != "through the SRQ" {
			return fmt.Errorf("server's receive: id %d %v %v qpn %#x (QP %#x) %q", wc.ID, wc.Opcode, wc.Status, wc.QPNum, req.QP().QPN(), rbuf[:wc.ByteLen])
		}
		if err := req.Disconnect(ctx); err != nil {
			return err
		}
		if err := req.DestroyQP(ctx); err != nil {
			return err
		}
		if err := req.DestroySRQ(ctx); err != nil || req.SRQ() != nil {
			return fmt.Errorf("DestroySRQ: %v (SRQ %p)", err, req.SRQ())
		}
		return nil
	})

	ep, err := rdmacm.CreateEP(ctx, epAddr(t, ctx, false, port), nil, nil)
	if err != nil {
		t.Fatalf("active CreateEP: %v", err)
	}
	defer ep.Destroy()
	if err := ep.CreateQP(nil, nil); !errors.Is(err, rdmacm.ErrInvalid) {
		t.Errorf("CreateQP(nil attr): %v, want ErrInvalid", err)
	}
	// Inline data beyond rxe's QPs' (the CQs are made first): the CQs,
	// their channels and the PD CreateQP made go again.
	// (The kernel's counts while the device's Context is open: closing
	// it would release whatever was left.)
	dev := ep.ID().Context().Device().Name
	before := testkit.Resources(t, dev)
	big := qattr()
	big.Cap.MaxInlineData = 1 << 20
	if err := ep.CreateQP(nil, big); !errors.Is(err, sys.EINVAL) {
		t.Errorf("CreateQP with 1 MiB of inline data: %v, want EINVAL", err)
	}
	if ep.QP() != nil || ep.PD() != nil || ep.SendCQ() != nil || ep.RecvCQ() != nil {
		t.Fatalf("a failed CreateQP left QP %v, PD %v, CQs %v %v", ep.QP(), ep.PD(), ep.SendCQ(), ep.RecvCQ())
	}
	if after := testkit.Resources(t, dev); !maps.Equal(before, after) {
		t.Errorf("a failed CreateQP left kernel objects: %v, before it %v", after, before)
	}
	a := qattr()
	if err := ep.CreateQP(nil, a); err != nil {
		t.Fatalf("CreateQP: %v", err)
	}
	if ep.QP() == nil || ep.QP().SRQ() != nil || ep.QP().Type() != uverbs.QPTypeRC {
		t.Fatalf("client's QP %v", ep.QP())
	}
	if err := ep.Connect(ctx, nil); err != nil {
		t.Fatalf("Connect: %v (server: %v)", err, <-serverDone)
	}
	if err := ep.PostSend(2, []byte("through the SRQ"), nil, uverbs.SendInline|uverbs.SendSignaled); err != nil {
		t.Fatal(err)
	}
	var wc uverbs.WC
	if _, err := ep.GetSendComp(ctx, &wc); err != nil || wc.Status != uverbs.WCSuccess {
		t.Fatalf("client's send: %v %v (%s; server: %v)", err, wc.Status, qpState(ep.QP()), <-serverDone)
	}
	if err := ep.Disconnect(ctx); err != nil {
		t.Errorf("client's Disconnect: %v", err)
	}
	if err := <-serverDone; err != nil {
		t.Fatalf("server: %v", err)
	}
	if err := ep.Destroy(); err != nil {
		t.Errorf("Destroy: %v", err)
	}
	if err := ep.CreateQP(nil, qattr()); !errors.Is(err, rdmacm.ErrClosed) {
		t.Errorf("CreateQP after Destroy: %v, want ErrClosed", err)
	}
	if _, err := ep.CreateSRQ(nil, uverbs.SRQAttr{MaxWR: 1, MaxSGE: 1}); !errors.Is(err, rdmacm.ErrClosed) {
		t.Errorf("CreateSRQ after Destroy: %v, want ErrClosed", err)
	}
}

// qpState is the QP's state as the kernel has it, for a failure's message.
func qpState(qp *uverbs.QP) string {
	attr, _, err := qp.Query(uverbs.QPAttrState)
	if err != nil {
		return fmt.Sprintf("QP query: %v", err)
	}
	return fmt.Sprintf("QP %#x in %v", qp.QPN(), attr.State)
}

// TestVMEndpointPDs: the PD an endpoint allocates for itself (CreateSRQ
// given none) is the one its Destroy deallocates, not a caller's PD its
// later QP was made in: the caller's stays usable after the endpoint is
// gone, and the endpoint's own is released (the leak checks).
func TestVMEndpointPDs(t *testing.T) {
	testkit.RequireVM(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Another channel holds the devices' Contexts, so that the caller's
	// PD outlives the endpoint's channel.
	if _, err := openChannel(t).Devices(); err != nil {
		t.Fatal(err)
	}
	ep, err := rdmacm.CreateEP(ctx, epAddr(t, ctx, false, 17429), nil, nil)
	if err != nil {
		t.Fatalf("CreateEP: %v", err)
	}
	defer ep.Destroy()
	if _, err := ep.CreateSRQ(nil, uverbs.SRQAttr{MaxWR: 2, MaxSGE: 1}); err != nil {
		t.Fatal(err)
	}
	own := ep.PD()
	if own == nil {
		t.Fatal("CreateSRQ with no PD left the endpoint without one")
	}
	if err := ep.DestroySRQ(ctx); err != nil {
		t.Fatal(err)
	}
	mine, err := ep.ID().Context().AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	a := &uverbs.QPInitAttr{Cap: uverbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}}
	if err := ep.CreateQP(mine, a); err != nil {
		t.Fatal(err)
	}
	if ep.PD() != mine || ep.QP().PD() != mine {
		t.Fatalf("the endpoint's PD %p, its QP's %p; want the caller's %p", ep.PD(), ep.QP().PD(), mine)
	}
	if err := ep.Destroy(); err != nil {
		t.Fatal(err)
	}
	mr, err := mine.RegMR(make([]byte, 64), uverbs.AccessLocalWrite)
	if err != nil {
		t.Fatalf("the caller's PD after the endpoint's Destroy: %v", err)
	}
	if err := mr.Dereg(); err != nil {
		t.Error(err)
	}
	if err := mine.Dealloc(); err != nil {
		t.Errorf("the caller's PD: %v", err)
	}
	if err := own.Dealloc(); !errors.Is(err, rdmacm.ErrClosed) {
		t.Errorf("the endpoint's own PD after Destroy: Dealloc gave %v, want ErrClosed (already deallocated)", err)
	}
}
