package rdmacm_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/rdmacm"
	"github.com/pureverbs/pureverbs/uverbs"
)

// newSelfEnd is an end whose QP the test creates and moves itself, as
// rping -q does: pd.CreateQP, then INIT on the ID's port with no remote
// access (the connection manager grants it in the second INIT).
func newSelfEnd(t *testing.T, id *rdmacm.ID) *end {
	t.Helper()
	e := newBareEnd(t, id)
	var err error
	if e.qp, err = e.pd.CreateQP(endQPAttr(e.cq)); err != nil {
		t.Fatalf("CreateQP: %v", err)
	}
	if err := e.qp.Modify(&uverbs.QPAttr{State: uverbs.QPStateInit, PortNum: uint8(id.Port())},
		uverbs.QPAttrState|uverbs.QPAttrPKeyIndex|uverbs.QPAttrPort|uverbs.QPAttrAccessFlags); err != nil {
		t.Fatalf("INIT: %v", err)
	}
	return e
}

// selfModify moves qp through INIT, RTR and RTS with the attributes the
// connection manager gives for id (rping's rping_self_modify_qp).
func selfModify(t *testing.T, id *rdmacm.ID, qp *uverbs.QP) {
	t.Helper()
	for _, st := range []uverbs.QPState{uverbs.QPStateInit, uverbs.QPStateRTR, uverbs.QPStateRTS} {
		a, m, err := id.InitQPAttr(st)
		if err != nil {
			t.Fatalf("InitQPAttr(%v): %v", st, err)
		}
		if err := qp.Modify(&a, m); err != nil {
			t.Fatalf("Modify to %v: %v", st, err)
		}
	}
}

// TestVMSelfManagedQP: both sides create their QPs with the verbs and move
// them themselves with InitQPAttr's attributes (rdma_init_qp_attr, rping
// -q): Connect and Accept name the QPs by number, the client gets
// EventConnectResponse (not EventEstablished) and calls Establish, whose
// ready-to-use gives the server EventEstablished. The QPs then face each
// other with remote access granted, so a send each way, an RDMA write and
// an RDMA read work. The calls that need a QP refuse an ID without one and
// no QP number, and Establish refuses an ID with a QP of CreateQP.
func TestVMSelfManagedQP(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sch, cch := openChannel(t), openChannel(t)
	listen := listener(t, sch, rdmacm.PortSpaceTCP, 0)
	cid := resolve(ctx, t, cch, listen.LocalAddr())

	if err := cid.Connect(nil); !errors.Is(err, rdmacm.ErrInvalid) {
		t.Fatalf("Connect of an ID with no QP and no QP number: %v, want ErrInvalid", err)
	}
	if err := cid.Establish(); !errors.Is(err, sys.EINVAL) {
		t.Fatalf("Establish before any connect: %v, want EINVAL (the kernel's)", err)
	}
	client := newSelfEnd(t, cid)
	client.recv(0, 64)
	if err := cid.Connect(&rdmacm.ConnParam{InitiatorDepth: 1, ResponderResources: 1, RetryCount: 7, RNRRetryCount: 7,
		QPNum: client.qp.QPN()}); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	req := want(ctx, t, sch, rdmacm.EventConnectRequest)
	if req.Param.QPNum != client.qp.QPN() {
		t.Fatalf("the request names QP %d, want the client's %d", req.Param.QPNum, client.qp.QPN())
	}
	sid := req.ID
	if err := sid.Accept(nil); !errors.Is(err, rdmacm.ErrInvalid) {
		t.Fatalf("Accept of an ID with no QP and no QP number: %v, want ErrInvalid", err)
	}
	server := newSelfEnd(t, sid)
	server.recv(0, 64)
	selfModify(t, sid, server.qp)
	if err := sid.Accept(&rdmacm.ConnParam{InitiatorDepth: 1, ResponderResources: 1, QPNum: server.qp.QPN()}); err != nil {
		t.Fatalf("Accept: %v", err)
	}
	resp := want(ctx, t, cch, rdmacm.EventConnectResponse)
	if resp.ID != cid || resp.Param.QPNum != server.qp.QPN() {
		t.Fatalf("connect response for %p naming QP %d, want %p and %d", resp.ID, resp.Param.QPNum, cid, server.qp.QPN())
	}
	selfModify(t, cid, client.qp)
	if err := cid.Establish(); err != nil {
		t.Fatalf("Establish: %v", err)
	}
	want(ctx, t, sch, rdmacm.EventEstablished)
	if ev, err := cch.TryGetEvent(); err == nil {
		t.Fatalf("the client got %v after Establish, want no event", &ev)
	}

	for _, c := range []struct {
		e    *end
		peer uint32
	}{{client, server.qp.QPN()}, {server, client.qp.QPN()}} {
		a, _, err := c.e.qp.Query(uverbs.QPAttrState | uverbs.QPAttrDestQPN | uverbs.QPAttrAccessFlags)
		access := uverbs.AccessRemoteWrite | uverbs.AccessRemoteRead
		if err != nil || a.State != uverbs.QPStateRTS || a.DestQPN != c.peer || a.AccessFlags&access != access {
			t.Fatalf("QP after the handshake: %v, dest QPN %d (want %d), access %v: %v", a.State, a.DestQPN, c.peer, a.AccessFlags, err)
		}
	}
	client.sendBothWays(ctx, server, "ping", "pong")
	client.writeAndRead(ctx, server, "written", "read")

	// The channel leaves a caller's QP alone: Disconnect does not move it
	// to ERR (rping -q moves its own first).
	if err := cid.Disconnect(); err != nil {
		t.Fatalf("Disconnect: %v", err)
	}
	want(ctx, t, sch, rdmacm.EventDisconnected)
	if err := sid.Disconnect(); err != nil {
		t.Fatalf("the server's Disconnect: %v", err)
	}
	want(ctx, t, cch, rdmacm.EventDisconnected)
	if a, _, err := client.qp.Query(uverbs.QPAttrState); err != nil || a.State != uverbs.QPStateRTS {
		t.Fatalf("the client's own QP after Disconnect: %v (%v), want RTS: the channel does not own it", a.State, err)
	}
	for _, id := range []*rdmacm.ID{cid, sid, listen} {
		if err := id.Destroy(); err != nil {
			t.Fatalf("Destroy: %v", err)
		}
	}
	client.close()
	server.close()
}

// TestVMEstablishWithQP: an ID whose QP came from CreateQP is established
// by the channel (EventEstablished); Establish refuses it.
func TestVMEstablishWithQP(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cch := openChannel(t)
	sch := openChannel(t)
	listen := listener(t, sch, rdmacm.PortSpaceTCP, 0)
	cid := resolve(ctx, t, cch, listen.LocalAddr())
	client := newEnd(t, cid)
	if err := cid.Establish(); !errors.Is(err, rdmacm.ErrInvalid) {
		t.Fatalf("Establish of an ID with a QP of CreateQP: %v, want ErrInvalid", err)
	}
	for _, id := range []*rdmacm.ID{cid, listen} {
		if err := id.Destroy(); err != nil {
			t.Fatal(err)
		}
	}
	client.close()
}
