package rdmacm_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/rdmacm"
	"github.com/pureverbs/pureverbs/uverbs"
)

// mcEnd is a UD ID bound to rxe0's address with its QP (as newEnd's,
// with room for 16 receives), for multicast.
func mcEnd(t *testing.T, ch *rdmacm.EventChannel) (*rdmacm.ID, *end) {
	t.Helper()
	id, err := ch.CreateID(rdmacm.PortSpaceUDP)
	if err != nil {
		t.Fatal(err)
	}
	if err := id.BindAddr(netip.AddrPortFrom(rxeAddr, 0)); err != nil {
		t.Fatalf("BindAddr: %v", err)
	}
	c := id.Context()
	e := &end{t: t, buf: make([]byte, 4096)}
	if e.pd, err = c.AllocPD(); err != nil {
		t.Fatal(err)
	}
	if e.cq, err = c.CreateCQ(64, nil); err != nil {
		t.Fatal(err)
	}
	if e.mr, err = e.pd.RegMR(e.buf, uverbs.AccessLocalWrite); err != nil {
		t.Fatal(err)
	}
	if e.qp, err = id.CreateQP(e.pd, uverbs.QPInitAttr{SendCQ: e.cq, RecvCQ: e.cq,
		Cap: uverbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		t.Fatalf("CreateQP: %v", err)
	}
	t.Cleanup(e.close)
	return id, e
}

// joined joins group on id and waits for the join: the event names the
// membership and carries the group's address vector (its GID the
// IPv4-mapped group address), QP number 0xffffff and a Q_Key.
func joined(ctx context.Context, t *testing.T, ch *rdmacm.EventChannel, id *rdmacm.ID, group netip.Addr, sendOnly bool) (*rdmacm.Multicast, rdmacm.UDParam) {
	t.Helper()
	m, err := id.JoinMulticast(group, sendOnly)
	if err != nil {
		t.Fatalf("JoinMulticast: %v", err)
	}
	ev := want(ctx, t, ch, rdmacm.EventMulticastJoin)
	want16 := netip.AddrFrom16(group.As16()).As16()
	if ev.Multicast != m || ev.ID != id || ev.UD.QPNum != 0xffffff || ev.UD.QKey == 0 || !ev.UD.AH.IsGlobal ||
		ev.UD.AH.DGID != uverbs.GID(want16) || m.Addr() != group {
		t.Fatalf("join event: membership %p (want %p), ID %p, QPN %#x, Q_Key %#x, global %v, GID %v (want %v)",
			ev.Multicast, m, ev.ID, ev.UD.QPNum, ev.UD.QKey, ev.UD.AH.IsGlobal, ev.UD.AH.DGID, group)
	}
	return m, ev.UD
}

// mcSend sends n bytes at offset off of e's buffer to the group.
func mcSend(ctx context.Context, t *testing.T, e *end, ah *uverbs.AH, ud rdmacm.UDParam, off, n int) {
	t.Helper()
	if err := e.qp.PostSend([]uverbs.SendWR{{ID: 9, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{e.mr.SGE(off, n)}, AH: ah, RemoteQPN: ud.QPNum, RemoteQKey: ud.QKey}}); err != nil {
		t.Fatal(err)
	}
	if wc := e.wc(ctx); wc.Opcode != uverbs.WCSend {
		t.Fatalf("the sender's first completion is %v, not its send (a send-only member got the group's message)", wc.Opcode)
	}
}

// TestVMMulticast: two receivers join a group (each UD QP attached on
// the join, as librdmacm's ucma_process_join does), a send-only member
// sends to the group's address vector, and both get the message; after
// one leaves (which detaches its QP), the next message reaches the other
// and not it; the send-only member's QP is not attached (its receive
// gets a unicast reply, not its own message to the group); leaving twice
// is ErrClosed; a TCP ID or no address fail before any system call, and
// the kernel fails a unicast "group" with EventMulticastError.
func TestVMMulticast(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	group := netip.MustParseAddr("239.1.2.3")
	rch, sch := openChannel(t), openChannel(t)
	rid, recv := mcEnd(t, rch)
	rid2, recv2 := mcEnd(t, rch)
	sid, send := mcEnd(t, sch)
	for i := range 2 {
		recv.recv(i*256, 40+100) // the GRH, then the message
		recv2.recv(i*256, 40+100)
	}
	rm, _ := joined(ctx, t, rch, rid, group, false)
	rm2, _ := joined(ctx, t, rch, rid2, group, false)
	send.recv(0, 40+100)
	sm, ud := joined(ctx, t, sch, sid, group, true)
	ah, err := send.pd.CreateAH(ud.AH)
	if err != nil {
		t.Fatalf("CreateAH for the group: %v", err)
	}
	defer ah.Destroy()
	copy(send.buf[2048:], "to the group")
	mcSend(ctx, t, send, ah, ud, 2048, 12)
	for _, r := range []*end{recv, recv2} {
		wc := r.wc(ctx)
		if wc.Opcode != uverbs.WCRecv || wc.ByteLen != 40+12 || string(r.buf[40:52]) != "to the group" || wc.SrcQP != send.qp.QPN() {
			t.Fatalf("receiver got %+v, %q; want 12 bytes from QP %d", wc, r.buf[40:52], send.qp.QPN())
		}
	}
	// A unicast reply to the send-only member: the first message its QP
	// receives (one attached to the group would have had its own
	// message queued before it). The group's address vector, to rxe0's
	// own RoCE v2 GID.
	toSender := ud.AH
	toSender.DGID = uverbs.GID(rxeAddr.As16())
	reply, err := recv.pd.CreateAH(toSender)
	if err != nil {
		t.Fatal(err)
	}
	defer reply.Destroy()
	qa, _, err := send.qp.Query(uverbs.QPAttrQKey)
	if err != nil {
		t.Fatal(err)
	}
	copy(recv.buf[3072:], "unicast")
	if err := recv.qp.PostSend([]uverbs.SendWR{{ID: 7, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
		SGL: []uverbs.SGE{recv.mr.SGE(3072, 7)}, AH: reply, RemoteQPN: send.qp.QPN(), RemoteQKey: qa.QKey}}); err != nil {
		t.Fatal(err)
	}
	if wc := recv.wc(ctx); wc.Opcode != uverbs.WCSend {
		t.Fatalf("the reply's completion: %v", wc.Opcode)
	}
	if wc := send.wc(ctx); wc.Opcode != uverbs.WCRecv || wc.ByteLen != 40+7 || string(send.buf[40:47]) != "unicast" {
		t.Fatalf("the send-only member received %d bytes %q (%v), want the 7-byte reply", wc.ByteLen, send.buf[40:47], wc.Opcode)
	}

	if err := rm.Leave(); err != nil {
		t.Fatalf("Leave: %v", err)
	}
	if err := rm.Leave(); !errors.Is(err, rdmacm.ErrClosed) {
		t.Fatalf("Leave twice: %v, want ErrClosed", err)
	}
	mcSend(ctx, t, send, ah, ud, 2048, 12)
	// Once the member still joined has the message, a QP still attached
	// would have it too: the one that left has nothing.
	recv2.wc(ctx)
	if n, err := recv.cq.Poll(make([]uverbs.WC, 1)); err != nil || n != 0 {
		t.Fatalf("after Leave the receiver's CQ has %d completions (%v)", n, err)
	}
	for _, m := range []*rdmacm.Multicast{rm2, sm} {
		if err := m.Leave(); err != nil {
			t.Fatal(err)
		}
	}

	tcp, err := sch.CreateID(rdmacm.PortSpaceTCP)
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Destroy()
	if _, err := tcp.JoinMulticast(group, false); !errors.Is(err, rdmacm.ErrInvalid) {
		t.Errorf("JoinMulticast on a TCP ID: %v, want ErrInvalid", err)
	}
	if _, err := sid.JoinMulticast(netip.Addr{}, false); !errors.Is(err, rdmacm.ErrInvalid) {
		t.Errorf("JoinMulticast of no address: %v, want ErrInvalid", err)
	}
	// A unicast address goes to the kernel, as with librdmacm. The join
	// succeeds there but rxe refuses to attach the QP to a unicast GID:
	// an error event with librdmacm's status -1 and the errno in Err
	// (mckey -m <unicast> prints "error: -1").
	um, err := sid.JoinMulticast(rxeAddr, false)
	if err != nil {
		t.Fatalf("JoinMulticast of a unicast address: %v", err)
	}
	if ev, err := sch.GetEvent(ctx); err != nil || ev.Type != rdmacm.EventMulticastError || ev.Multicast != um || ev.ID != sid ||
		ev.Status != -1 || !errors.Is(ev.Err, sys.EINVAL) {
		t.Errorf("the unicast join's event: %v (%v), membership %p (want %p), ID %p, %v; want MULTICAST_ERROR status -1, EINVAL",
			&ev, err, ev.Multicast, um, ev.ID, ev.Err)
	}
	if err := um.Leave(); err != nil {
		t.Errorf("leaving the failed join: %v", err)
	}
	for _, id := range []*rdmacm.ID{rid, rid2, sid} {
		if err := id.Destroy(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestVMMulticastAgainstC: librdmacm's mckey receives what a Go member
// sends to the group (ten 100-byte messages), and a Go member receives
// what mckey sends (-s; on 6.1 only: on 6.12 mckey's sends reach no
// member, mckey's own receiver included).
func TestVMMulticastAgainstC(t *testing.T) {
	t.Run("c-receiver", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		group := netip.MustParseAddr("239.1.2.4")
		rx := testkit.StartPeer(ctx, t, "mckey", "-m", group.String(), "-b", testkit.RxeAddr, "-C", "10", "-S", "100")
		if err := rx.WaitForOutput(ctx, "receiving data transfers"); err != nil {
			t.Fatalf("mckey did not join: %v\n%s", err, rx.Output())
		}
		ch := openChannel(t)
		id, e := mcEnd(t, ch)
		m, ud := joined(ctx, t, ch, id, group, true)
		ah, err := e.pd.CreateAH(ud.AH)
		if err != nil {
			t.Fatal(err)
		}
		defer ah.Destroy()
		for i := range 10 {
			copy(e.buf[1024:], fmt.Sprintf("message %d", i))
			mcSend(ctx, t, e, ah, ud, 1024, 100)
		}
		if err := rx.Wait(); err != nil || !strings.Contains(rx.Output(), "data transfers complete") {
			t.Fatalf("mckey: %v\n%s", err, rx.Output())
		}
		m.Leave()
		id.Destroy()
	})
	t.Run("c-sender", func(t *testing.T) {
		if strings.HasPrefix(testkit.KernelRelease(), "6.12") {
			// Measured 2026-12-03: three runs of mckey -s to a Go member
			// and three to mckey's receiver delivered nothing.
			t.Skip("on 6.12 mckey's multicast sends reach no receiver, C or Go")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		group := netip.MustParseAddr("239.1.2.5")
		ch := openChannel(t)
		id, e := mcEnd(t, ch)
		for i := range 10 {
			e.recv(i*256, 40+100)
		}
		m, _ := joined(ctx, t, ch, id, group, false)
		tx := testkit.StartPeer(ctx, t, "mckey", "-m", group.String(), "-b", testkit.RxeAddr, "-s", "-C", "10", "-S", "100")
		for i := range 10 {
			wc := e.wc(ctx)
			if wc.ByteLen != 140 || wc.Opcode != uverbs.WCRecv {
				t.Fatalf("message %d: %d bytes (%v), want 40+100", i, wc.ByteLen, wc.Opcode)
			}
		}
		if err := tx.Wait(); err != nil {
			t.Fatalf("mckey -s: %v\n%s", err, tx.Output())
		}
		m.Leave()
		id.Destroy()
	})
}
