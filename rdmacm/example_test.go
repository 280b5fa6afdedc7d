package rdmacm_test

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/pureverbs/pureverbs/rdmacm"
	"github.com/pureverbs/pureverbs/uverbs"
)

// The active side of a connection, as rdma_client does it: resolve the
// server's address and route, make a QP on the device they resolved to,
// connect, and end with a disconnect.
func Example_client() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ch, err := rdmacm.Open()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ch.Close() // also closes the Context the ID got
	id, err := ch.CreateID(rdmacm.PortSpaceTCP)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer id.Destroy()
	next := func(want rdmacm.EventType) error {
		ev, err := ch.GetEvent(ctx)
		if err == nil && (ev.Type != want || ev.Status != 0) {
			err = fmt.Errorf("%v, want %v", &ev, want)
		}
		return err
	}
	if err := id.ResolveAddr(netip.AddrPort{}, netip.MustParseAddrPort("10.99.0.1:7471"), 2*time.Second); err != nil {
		fmt.Println(err)
		return
	}
	if err := next(rdmacm.EventAddrResolved); err != nil {
		fmt.Println(err)
		return
	}
	if err := id.ResolveRoute(2 * time.Second); err != nil {
		fmt.Println(err)
		return
	}
	if err := next(rdmacm.EventRouteResolved); err != nil {
		fmt.Println(err)
		return
	}
	pd, err := id.Context().AllocPD()
	if err != nil {
		fmt.Println(err)
		return
	}
	cq, err := id.Context().CreateCQ(16, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	qp, err := id.CreateQP(pd, uverbs.QPInitAttr{SendCQ: cq, RecvCQ: cq,
		Cap: uverbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 16}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer qp.Destroy(ctx)
	if err := id.Connect(nil); err != nil {
		fmt.Println(err)
		return
	}
	if err := next(rdmacm.EventEstablished); err != nil {
		fmt.Println(err)
		return
	}
	// ... post receives and sends on qp, poll cq ...
	id.Disconnect()
	next(rdmacm.EventDisconnected) // the server answers with its own Disconnect
}

// The same client with the synchronous Endpoint, as librdmacm's
// rdma_client example does it: rdma_getaddrinfo, rdma_create_ep (which
// resolves and makes the QP, its PD and CQs), a receive posted before the
// connect, one inline send, and each completion waited for.
func ExampleCreateEP() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ai, err := rdmacm.GetAddrInfo(ctx, "10.99.0.1", "7471", &rdmacm.AddrInfo{PortSpace: rdmacm.PortSpaceTCP})
	if err != nil {
		fmt.Println(err)
		return
	}
	attr := uverbs.QPInitAttr{SigAll: true,
		Cap: uverbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 16}}
	ep, err := rdmacm.CreateEP(ctx, ai, nil, &attr)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ep.Destroy()
	recv := make([]byte, 16)
	mr, err := ep.RegMsgs(recv)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer mr.Dereg()
	if err := ep.PostRecv(1, recv, mr); err != nil {
		fmt.Println(err)
		return
	}
	if err := ep.Connect(ctx, nil); err != nil {
		fmt.Println(err) // errors.Is(err, unix.ECONNREFUSED) when nobody listens
		return
	}
	defer ep.Disconnect(ctx) // waits for the server's end
	if err := ep.PostSend(2, []byte("hello, server"), nil, uverbs.SendInline); err != nil {
		fmt.Println(err)
		return
	}
	var wc uverbs.WC
	if _, err := ep.GetSendComp(ctx, &wc); err != nil || wc.Status != uverbs.WCSuccess {
		fmt.Println(err, wc.Status)
		return
	}
	if _, err := ep.GetRecvComp(ctx, &wc); err != nil || wc.Status != uverbs.WCSuccess {
		fmt.Println(err, wc.Status)
		return
	}
	fmt.Printf("%s\n", recv[:wc.ByteLen])
}

// A multicast receiver, as librdmacm's mckey does it: a UD ID bound to
// a local address, its QP, receives posted (each with room for the
// 40-byte GRH), and the join, which attaches the QP to the group; a
// sender joins the same way (send-only if it receives nothing) and posts
// to Event.UD's address vector, QP number and Q_Key.
func ExampleID_JoinMulticast() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ch, err := rdmacm.Open()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ch.Close()
	id, err := ch.CreateID(rdmacm.PortSpaceUDP)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer id.Destroy()
	if err := id.BindAddr(netip.MustParseAddrPort("10.99.0.1:0")); err != nil {
		fmt.Println(err)
		return
	}
	pd, err := id.Context().AllocPD()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pd.Dealloc()
	cq, err := id.Context().CreateCQ(16, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cq.Destroy(ctx)
	qp, err := id.CreateQP(pd, uverbs.QPInitAttr{SendCQ: cq, RecvCQ: cq,
		Cap: uverbs.QPCap{MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer qp.Destroy(ctx)
	buf := make([]byte, 8*(40+1024))
	mr, err := pd.RegMR(buf, uverbs.AccessLocalWrite)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer mr.Dereg()
	for i := range 8 {
		if err := qp.PostRecv([]uverbs.RecvWR{{ID: uint64(i), SGL: []uverbs.SGE{mr.SGE(i*(40+1024), 40+1024)}}}); err != nil {
			fmt.Println(err)
			return
		}
	}
	m, err := id.JoinMulticast(netip.MustParseAddr("239.1.2.3"), false)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Leave() // detaches the QP
	ev, err := ch.GetEvent(ctx)
	if err != nil || ev.Type != rdmacm.EventMulticastJoin {
		fmt.Println(&ev, err)
		return
	}
	// ... poll cq for what the group is sent ...
}
