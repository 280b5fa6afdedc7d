package rdmacm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/abi"
	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/uverbs"
)

// Host tests of what the package does before, or instead of, talking to
// the kernel: nil and zero values, bad arguments, contexts, and a channel
// whose descriptor is not the rdma_cm device (the tests' stand-in for one,
// fakeChannel) closing under a parked GetEvent.

// mustNotPanic runs f and reports a panic as a test failure.
func mustNotPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s panicked: %v", what, r)
		}
	}()
	f()
}

// wantInvalid checks that err matches ErrInvalid and EINVAL.
func wantInvalid(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, ErrInvalid) || !errors.Is(err, sys.EINVAL) {
		t.Errorf("%s: %v, want ErrInvalid and EINVAL", what, err)
	}
}

// fakeChannel is an EventChannel on a pipe (opened again through
// /proc/self/fd, non-blocking), with the pipe's read end, where the
// commands written to the channel can be read back: they are answered
// with nothing, so an ID made on it has handle 0 and no device; GET_EVENT
// writes fill the pipe, the "events" read are dropped as no ID's, and once
// the pipe is full GetEvent parks on the poller as on an rdma_cm with no
// event queued.
func fakeChannel(t *testing.T) (*EventChannel, *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	u, err := sys.OpenUCM(fmt.Sprintf("/proc/self/fd/%d", w.Fd()))
	w.Close()
	if err != nil {
		r.Close()
		t.Fatal(err)
	}
	ch := newChannel(u)
	t.Cleanup(func() {
		ch.Close()
		r.Close()
	})
	return ch, r
}

// sentCommands reads back the commands written to a fakeChannel: each
// struct rdma_ucm_cmd_hdr's command and the request after it.
func sentCommands(t *testing.T, r *os.File) (cmds []uint32, reqs [][]byte) {
	t.Helper()
	r.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	var all []byte
	buf := make([]byte, 4096)
	for {
		n, err := r.Read(buf)
		all = append(all, buf[:n]...)
		if err != nil {
			break
		}
	}
	for len(all) >= 8 {
		in := int(binary.LittleEndian.Uint16(all[4:]))
		if len(all) < 8+in {
			t.Fatalf("a command of %d bytes cut short", in)
		}
		cmds = append(cmds, binary.LittleEndian.Uint32(all))
		reqs = append(reqs, all[8:8+in])
		all = all[8+in:]
	}
	return cmds, reqs
}

// TestNilAndZeroValues: every exported method on a nil or zero-value
// EventChannel, ID, Multicast, Endpoint and Event returns an error
// matching ErrInvalid (or a zero result for a getter), never panics.
func TestNilAndZeroValues(t *testing.T) {
	ctx := context.Background()
	mustNotPanic(t, "zero OpError", func() {
		if got := (&OpError{}).Error(); got != "rdmacm: : <nil>" {
			t.Errorf("zero OpError: %q", got)
		}
	})
	for name, ch := range map[string]*EventChannel{"nil": nil, "zero": {}} {
		mustNotPanic(t, name+" EventChannel", func() {
			if fd := ch.Fd(); fd != -1 {
				t.Errorf("%s EventChannel: Fd %d, want -1", name, fd)
			}
			_, err := ch.CreateID(PortSpaceTCP)
			wantInvalid(t, name+" EventChannel CreateID", err)
			_, err = ch.CreateIDType(PortSpaceIB, uverbs.QPTypeUD)
			wantInvalid(t, name+" EventChannel CreateIDType", err)
			_, err = ch.GetEvent(ctx)
			wantInvalid(t, name+" EventChannel GetEvent", err)
			_, err = ch.TryGetEvent()
			wantInvalid(t, name+" EventChannel TryGetEvent", err)
			var ev Event
			wantInvalid(t, name+" EventChannel GetEventInto", ch.GetEventInto(ctx, &ev))
			wantInvalid(t, name+" EventChannel TryGetEventInto", ch.TryGetEventInto(&ev))
			_, err = ch.Devices()
			wantInvalid(t, name+" EventChannel Devices", err)
			wantInvalid(t, name+" EventChannel Close", ch.Close())
		})
	}
	for name, id := range map[string]*ID{"nil": nil, "zero": {}} {
		mustNotPanic(t, name+" ID", func() {
			if id.Channel() != nil || id.Context() != nil || id.Port() != 0 || id.QP() != nil ||
				id.LocalAddr().IsValid() || id.RemoteAddr().IsValid() {
				t.Errorf("%s ID: a getter returned something", name)
			}
			ap := netip.MustParseAddrPort("10.0.0.1:1")
			wantInvalid(t, name+" ID BindAddr", id.BindAddr(ap))
			wantInvalid(t, name+" ID ResolveAddr", id.ResolveAddr(netip.AddrPort{}, ap, time.Second))
			wantInvalid(t, name+" ID ResolveRoute", id.ResolveRoute(time.Second))
			wantInvalid(t, name+" ID Listen", id.Listen(1))
			_, err := id.CreateQP(nil, uverbs.QPInitAttr{})
			wantInvalid(t, name+" ID CreateQP", err)
			_, _, err = id.InitQPAttr(uverbs.QPStateInit)
			wantInvalid(t, name+" ID InitQPAttr", err)
			wantInvalid(t, name+" ID Connect", id.Connect(nil))
			wantInvalid(t, name+" ID Establish", id.Establish())
			wantInvalid(t, name+" ID Accept", id.Accept(nil))
			wantInvalid(t, name+" ID Reject", id.Reject(nil))
			wantInvalid(t, name+" ID Disconnect", id.Disconnect())
			wantInvalid(t, name+" ID SetTOS", id.SetTOS(0))
			wantInvalid(t, name+" ID Migrate", id.Migrate(nil))
			_, err = id.JoinMulticast(netip.MustParseAddr("224.0.0.1"), false)
			wantInvalid(t, name+" ID JoinMulticast", err)
			_, err = id.JoinMulticastGID(uverbs.GID{}, false)
			wantInvalid(t, name+" ID JoinMulticastGID", err)
			wantInvalid(t, name+" ID Destroy", id.Destroy())
		})
	}
	for name, m := range map[string]*Multicast{"nil": nil, "zero": {}} {
		mustNotPanic(t, name+" Multicast", func() {
			if m.Addr().IsValid() || m.ID() != nil {
				t.Errorf("%s Multicast: a getter returned something", name)
			}
			wantInvalid(t, name+" Multicast Leave", m.Leave())
		})
	}
	for name, ep := range map[string]*Endpoint{"nil": nil, "zero": {}} {
		mustNotPanic(t, name+" Endpoint", func() {
			if ep.ID() != nil || ep.QP() != nil || ep.PD() != nil || ep.SendCQ() != nil || ep.RecvCQ() != nil ||
				ep.SRQ() != nil || ep.Event().Type != 0 {
				t.Errorf("%s Endpoint: a getter returned something", name)
			}
			wantInvalid(t, name+" Endpoint Listen", ep.Listen(1))
			_, err := ep.GetRequest(ctx)
			wantInvalid(t, name+" Endpoint GetRequest", err)
			wantInvalid(t, name+" Endpoint Accept", ep.Accept(ctx, nil))
			wantInvalid(t, name+" Endpoint Connect", ep.Connect(ctx, nil))
			wantInvalid(t, name+" Endpoint Disconnect", ep.Disconnect(ctx))
			buf := make([]byte, 8)
			for what, reg := range map[string]func([]byte) (*uverbs.MR, error){
				"RegMsgs": ep.RegMsgs, "RegRead": ep.RegRead, "RegWrite": ep.RegWrite} {
				_, err := reg(buf)
				wantInvalid(t, name+" Endpoint "+what, err)
			}
			wantInvalid(t, name+" Endpoint PostRecv", ep.PostRecv(1, buf, nil))
			wantInvalid(t, name+" Endpoint PostSend", ep.PostSend(1, buf, nil, uverbs.SendInline))
			wantInvalid(t, name+" Endpoint PostUDSend", ep.PostUDSend(1, buf, nil, uverbs.SendInline, nil, 1))
			wantInvalid(t, name+" Endpoint PostRead", ep.PostRead(1, buf, nil, 0, 0, 0))
			wantInvalid(t, name+" Endpoint PostWrite", ep.PostWrite(1, buf, nil, uverbs.SendInline, 0, 0))
			var wc uverbs.WC
			_, err = ep.GetSendComp(ctx, &wc)
			wantInvalid(t, name+" Endpoint GetSendComp", err)
			_, err = ep.GetRecvComp(ctx, &wc)
			wantInvalid(t, name+" Endpoint GetRecvComp", err)
			wantInvalid(t, name+" Endpoint CreateQP", ep.CreateQP(nil, &uverbs.QPInitAttr{}))
			wantInvalid(t, name+" Endpoint DestroyQP", ep.DestroyQP(ctx))
			_, err = ep.CreateSRQ(nil, uverbs.SRQAttr{MaxWR: 1, MaxSGE: 1})
			wantInvalid(t, name+" Endpoint CreateSRQ", err)
			wantInvalid(t, name+" Endpoint DestroySRQ", ep.DestroySRQ(ctx))
		})
	}
	mustNotPanic(t, "nil Endpoint Destroy", func() { wantInvalid(t, "nil Endpoint Destroy", (*Endpoint)(nil).Destroy()) })
	mustNotPanic(t, "nil Event String", func() { _ = (*Event)(nil).String() })
}

// TestNilContext: a nil context.Context is an argument error (ErrInvalid,
// EINVAL) of every call that waits, checked before anything is opened or
// sent.
func TestNilContext(t *testing.T) {
	ch, r := fakeChannel(t)
	var nilCtx context.Context
	_, err := ch.GetEvent(nilCtx)
	wantInvalid(t, "GetEvent(nil)", err)
	_, err = CreateEP(nilCtx, &AddrInfo{Dst: netip.MustParseAddrPort("10.0.0.1:1")}, nil, nil)
	wantInvalid(t, "CreateEP(nil)", err)
	_, err = GetAddrInfo(nilCtx, "host.invalid", "no-such-service", nil)
	wantInvalid(t, "GetAddrInfo(nil)", err)
	id, err := ch.CreateID(PortSpaceTCP)
	if err != nil {
		t.Fatal(err)
	}
	id.attr = &uverbs.DeviceAttr{} // as if bound: Connect and Accept would send
	sentCommands(t, r)
	ep := &Endpoint{ch: ch, id: id}
	_, err = ep.GetRequest(nilCtx)
	wantInvalid(t, "GetRequest(nil)", err)
	wantInvalid(t, "Endpoint Connect(nil)", ep.Connect(nilCtx, &ConnParam{QPNum: 1}))
	wantInvalid(t, "Endpoint Accept(nil)", ep.Accept(nilCtx, &ConnParam{QPNum: 1}))
	wantInvalid(t, "Endpoint Disconnect(nil)", ep.Disconnect(nilCtx))
	if cmds, _ := sentCommands(t, r); len(cmds) != 0 {
		t.Errorf("commands %v sent before the nil context was refused", cmds)
	}
}

// TestCloseWakesGetEvent: GetEvent parked with no event queued returns
// ctx's error when ctx ends and ErrClosed when the channel closes; after
// Close every call is ErrClosed, Fd is -1, and TryGetEvent on an empty
// channel wraps EAGAIN.
func TestCloseWakesGetEvent(t *testing.T) {
	ch, _ := fakeChannel(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := ch.GetEvent(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("GetEvent with no event: %v, want DeadlineExceeded", err)
	}
	if _, err := ch.TryGetEvent(); !errors.Is(err, sys.EAGAIN) {
		t.Errorf("TryGetEvent with no event: %v, want EAGAIN", err)
	}
	if ch.Fd() < 0 {
		t.Errorf("Fd of an open channel: %d", ch.Fd())
	}
	done := make(chan error, 1)
	go func() {
		_, err := ch.GetEvent(context.Background())
		done <- err
	}()
	testkit.MustBlock(t, "TestCloseWakesGetEvent.") // the wait has begun, not about to
	if err := ch.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Errorf("parked GetEvent after Close: %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not wake a parked GetEvent")
	}
	if fd := ch.Fd(); fd != -1 {
		t.Errorf("Fd after Close: %d, want -1", fd)
	}
	if _, err := ch.CreateID(PortSpaceTCP); !errors.Is(err, ErrClosed) {
		t.Errorf("CreateID after Close: %v, want ErrClosed", err)
	}
	if _, err := ch.GetEvent(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("GetEvent after Close: %v, want ErrClosed", err)
	}
	if err := ch.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close: %v, want ErrClosed", err)
	}
}

// TestOpenNotRDMACM: OpenPath refuses, with ErrInvalid and ENOTTY, a path
// that is not the rdma_cm device, writing nothing to it: a regular file
// (which would take the commands as data) and /dev/null (which would
// answer every command with success and an all-zero reply). A missing
// node is ErrNoDevice as well as ENOENT, as for uverbs.Open.
func TestOpenNotRDMACM(t *testing.T) {
	f := t.TempDir() + "/file"
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// /dev/full answers every write with ENOSPC, which the probe once
	// took for the rdma_cm's EINVAL.
	// A tty (5:0) is refused by its number, before it is opened; the tun
	// device (10:200, a misc device as the rdma_cm is) by sysfs's number
	// for the rdma_cm, or where that is absent by its answer.
	paths := []string{f, "/dev/null", "/dev/full", "/dev/zero", t.TempDir()}
	for _, p := range []string{"/dev/tty", "/dev/net/tun"} {
		if _, err := os.Stat(p); err == nil {
			paths = append(paths, p)
		}
	}
	for _, p := range paths {
		ch, err := OpenPath(p)
		if err == nil {
			ch.Close()
		}
		if !errors.Is(err, ErrInvalid) || !errors.Is(err, sys.ENOTTY) {
			t.Errorf("OpenPath(%s): %v, want ErrInvalid and ENOTTY", p, err)
		}
	}
	if b, err := os.ReadFile(f); err != nil || len(b) != 0 {
		t.Errorf("OpenPath wrote %d bytes into a regular file (%v)", len(b), err)
	}
	_, err := OpenPath(t.TempDir() + "/rdma_cm")
	if !errors.Is(err, ErrNoDevice) || !errors.Is(err, sys.ENOENT) {
		t.Errorf("OpenPath of a missing node: %v, want ErrNoDevice and ENOENT", err)
	}
}

// TestBadArguments: arguments refused before any command, on an ID of a
// channel that would take one: unknown IPv6 zones (a scope id of 0 would
// be sent instead), an Accept of an ID bound to no device (it read the
// device's limits through a nil pointer), and out-of-range timeouts.
func TestBadArguments(t *testing.T) {
	ch, r := fakeChannel(t)
	id, err := ch.CreateID(PortSpaceTCP)
	if err != nil {
		t.Fatal(err)
	}
	sentCommands(t, r)
	for _, s := range []string{"[fe80::1%no-such-if0]:1", "[fe80::1%4294967296]:1", "[fe80::1%-1]:1"} {
		ap := netip.MustParseAddrPort(s)
		wantInvalid(t, "BindAddr "+s, id.BindAddr(ap))
		wantInvalid(t, "ResolveAddr dst "+s, id.ResolveAddr(netip.AddrPort{}, ap, time.Second))
		wantInvalid(t, "ResolveAddr src "+s, id.ResolveAddr(ap, netip.MustParseAddrPort("[fe80::2]:1"), time.Second))
	}
	mustNotPanic(t, "Accept of an ID without a device", func() {
		wantInvalid(t, "Accept of an ID without a device", id.Accept(&ConnParam{QPNum: 1, InitiatorDepth: 0xff}))
	})
	for _, d := range []time.Duration{0, -1, time.Duration(math.MaxInt64)} {
		wantInvalid(t, fmt.Sprint("ResolveRoute ", d), id.ResolveRoute(d))
	}
	if cmds, _ := sentCommands(t, r); len(cmds) != 0 {
		t.Errorf("commands %v sent for refused arguments", cmds)
	}
	if err := id.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := id.Destroy(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Destroy: %v, want ErrClosed", err)
	}
}

// TestScopeID: the sin6_scope_id of a zone, by interface name or number.
func TestScopeID(t *testing.T) {
	for _, c := range []struct {
		zone string
		want uint32
		ok   bool
	}{{"", 0, true}, {"7", 7, true}, {"lo", 1, true}, {"4294967295", math.MaxUint32, true},
		{"4294967296", 0, false}, {"no-such-if0", 0, false}, {"-1", 0, false}} {
		a := netip.MustParseAddr("fe80::1").WithZone(c.zone)
		got, err := scopeID(a)
		if c.zone == "lo" && err == nil && got != 0 {
			continue // lo's index is 1 on Linux, but need not be
		}
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("scopeID(%s) = %d, %v; want %d, ok %v", a, got, err, c.want, c.ok)
		}
	}
}

// TestListenBacklog: a backlog above what the kernel's 32-bit field holds
// asks for the kernel's maximum (as any value above its max_backlog
// does), instead of being truncated to its low 32 bits.
func TestListenBacklog(t *testing.T) {
	if math.MaxInt == math.MaxInt32 {
		t.Skip("int is 32 bits")
	}
	ch, r := fakeChannel(t)
	id, err := ch.CreateID(PortSpaceTCP)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []int{0, 5, 1<<32 + 5} {
		if err := id.Listen(b); err != nil {
			t.Fatal(err)
		}
	}
	var got []uint32
	cmds, reqs := sentCommands(t, r)
	for i, c := range cmds {
		if c == abi.RDMA_USER_CM_CMD_LISTEN {
			got = append(got, binary.LittleEndian.Uint32(reqs[i][4:]))
		}
	}
	if want := []uint32{0, 5, math.MaxInt32}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("backlogs sent %v, want %v", got, want)
	}
}

// TestPrivateDataLimits: the private data a connect, accept and reject
// carry, by the IB CM's limits less the rdma_cm header a connect over IP
// carries: a REQ's 92 bytes (56), a REP's 196, a REJ's 148; a UD ID's
// SIDR REQ 216 (180) and SIDR REP 136.
func TestPrivateDataLimits(t *testing.T) {
	for _, c := range []struct {
		qpType                  uverbs.QPType
		connect, accept, reject int
	}{{uverbs.QPTypeRC, 56, 196, 148}, {uverbs.QPTypeUD, 180, 136, 136}} {
		id := newID(nil, 0, 0, PortSpaceIB, c.qpType)
		connect, accept, reject := id.privateLimits()
		if connect != c.connect || accept != c.accept || reject != c.reject {
			t.Errorf("%v: at most %d, %d, %d bytes on a connect, accept, reject; want %d, %d, %d",
				c.qpType, connect, accept, reject, c.connect, c.accept, c.reject)
		}
		if _, err := id.connParamToKern("connect", &ConnParam{PrivateData: make([]byte, c.connect)}, c.connect); err != nil {
			t.Errorf("%v: %d bytes of connect private data: %v", c.qpType, c.connect, err)
		}
		_, err := id.connParamToKern("connect", &ConnParam{PrivateData: make([]byte, c.connect+1)}, c.connect)
		wantInvalid(t, fmt.Sprintf("%v: %d bytes of connect private data", c.qpType, c.connect+1), err)
	}
}

// TestQPNumWidth: a caller's QP number is 24 bits on the wire; a wider
// one is refused, not masked into another QP's (0x1000000 went out as QP
// 0).
func TestQPNumWidth(t *testing.T) {
	id := newID(nil, 0, 0, PortSpaceTCP, uverbs.QPTypeRC)
	k, err := id.connParamToKern("connect", &ConnParam{QPNum: 0xffffff}, maxConnectPrivate)
	if err != nil || k.QpNum != 0xffffff {
		t.Fatalf("QP number 0xffffff: %#x, %v", k.QpNum, err)
	}
	_, err = id.connParamToKern("accept", &ConnParam{QPNum: 0x1000000}, maxConnectPrivate)
	wantInvalid(t, "QP number 0x1000000", err)
}

// TestStaleEventNotMisdelivered: an event read for ID A, processed after A
// was destroyed and a new ID B got A's handle (the kernel reuses the
// lowest free one), is dropped: B never sees A's event. An event whose
// uid is 0 (an ID of a connect request before Accept) is still found by
// its handle if it is ESTABLISHED (older kernels' bug, which librdmacm
// allows for), and dropped otherwise, as librdmacm drops it. (A's event
// once went to B through the handle.)
func TestStaleEventNotMisdelivered(t *testing.T) {
	ch, _ := fakeChannel(t)
	const h = 5
	a := register(newID(ch, h, newUID(), PortSpaceTCP, uverbs.QPTypeRC))
	stale := a.uid
	unregister(a)
	b := register(newID(ch, h, newUID(), PortSpaceTCP, uverbs.QPTypeRC))
	defer unregister(b)
	for _, typ := range []EventType{EventDisconnected, EventRejected, EventEstablished} {
		r := abi.RdmaUcmEventResp{Uid: stale, Id: h, Event: uint32(typ)}
		if ev, ok := ch.process(&r); ok {
			t.Errorf("%v of a destroyed ID delivered, to %p (B is %p)", typ, ev.ID, b)
		}
	}
	r := abi.RdmaUcmEventResp{Uid: 0, Id: h, Event: uint32(EventEstablished)}
	if ev, ok := ch.process(&r); !ok || ev.ID != b {
		t.Errorf("ESTABLISHED with uid 0 is not found by its handle: %v %p", ok, ev.ID)
	}
	r = abi.RdmaUcmEventResp{Uid: 0, Id: h, Event: uint32(EventDisconnected)}
	if ev, ok := ch.process(&r); ok {
		t.Errorf("DISCONNECTED with uid 0 delivered, to %p", ev.ID)
	}
	r = abi.RdmaUcmEventResp{Uid: b.uid, Id: h, Event: uint32(EventDisconnected)}
	if ev, ok := ch.process(&r); !ok || ev.ID != b {
		t.Errorf("B's own event: %v %p", ok, ev.ID)
	}
}

// TestConnectErrorEndsConnect: once an ID's connect response could not be
// completed (EventConnectError delivered), the REJECTED the peer sends when
// its wait for the RTU times out, and a DISCONNECTED, are not delivered a
// second time for the same connect (librdmacm's connect_error); other IDs'
// are.
func TestConnectErrorEndsConnect(t *testing.T) {
	ch, _ := fakeChannel(t)
	a := register(newID(ch, 1, newUID(), PortSpaceTCP, uverbs.QPTypeUD)) // UD: no QP to move to ERR
	defer unregister(a)
	b := register(newID(ch, 2, newUID(), PortSpaceTCP, uverbs.QPTypeUD))
	defer unregister(b)
	a.connectError.Store(true)
	for _, typ := range []EventType{EventRejected, EventDisconnected} {
		if ev, ok := ch.process(&abi.RdmaUcmEventResp{Uid: a.uid, Id: a.handle, Event: uint32(typ)}); ok {
			t.Errorf("%v after the connect error delivered: %+v", typ, ev)
		}
		if ev, ok := ch.process(&abi.RdmaUcmEventResp{Uid: b.uid, Id: b.handle, Event: uint32(typ)}); !ok || ev.ID != b {
			t.Errorf("%v of another ID: %v %+v", typ, ok, ev)
		}
	}
	if ev, ok := ch.process(&abi.RdmaUcmEventResp{Uid: a.uid, Id: a.handle, Event: uint32(EventUnreachable)}); !ok || ev.ID != a {
		t.Errorf("UNREACHABLE after the connect error: %v %+v", ok, ev)
	}
}

// TestJoinEventAfterLeave: a join event looked up just before a Leave ran
// (Leave found nothing attached, so detached nothing) is dropped when it
// is completed, and attaches nothing for the QP's life; a membership not
// left still gets its event.
func TestJoinEventAfterLeave(t *testing.T) {
	ch, _ := fakeChannel(t)
	id := register(newID(ch, 3, newUID(), PortSpaceUDP, uverbs.QPTypeUD))
	defer unregister(id)
	for _, left := range []bool{true, false} {
		m := &Multicast{id: id, uid: newUID(), left: left}
		reg.mu.Lock()
		reg.mcasts[m.uid] = m // Leave unregisters first, then marks: this is between
		reg.mu.Unlock()
		ev, ok := ch.process(&abi.RdmaUcmEventResp{Uid: m.uid, Id: id.handle, Event: uint32(EventMulticastJoin)})
		if ok == left || (ok && ev.Multicast != m) || m.attached {
			t.Errorf("left %v: delivered %v (%+v), attached %v", left, ok, ev, m.attached)
		}
		reg.mu.Lock()
		delete(reg.mcasts, m.uid)
		reg.mu.Unlock()
	}
}

// TestDepthsTCP: in the TCP port space an initiator depth or a number of
// responder resources above the device's limit is refused (librdmacm's
// ucma_valid_param: EINVAL; they were clamped); 0xff means the device's
// maximum, and other port spaces take what they are given.
func TestDepthsTCP(t *testing.T) {
	attr := &uverbs.DeviceAttr{MaxQPRdAtom: 16, MaxQPInitRdAtom: 8}
	tcp := newID(nil, 0, 0, PortSpaceTCP, uverbs.QPTypeRC)
	ib := newID(nil, 0, 0, PortSpaceIB, uverbs.QPTypeRC)
	for _, c := range []struct {
		id         *ID
		init, resp uint8
		ok         bool
	}{
		{tcp, 8, 16, true}, {tcp, 0xff, 0xff, true}, {tcp, 9, 16, false}, {tcp, 8, 17, false}, {tcp, 0xfe, 1, false},
		{ib, 9, 17, true},
	} {
		err := c.id.validDepths("connect", &ConnParam{InitiatorDepth: c.init, ResponderResources: c.resp}, attr)
		if c.ok && err != nil {
			t.Errorf("%v: depth %d, resources %d: %v", c.id.ps, c.init, c.resp, err)
		}
		if !c.ok {
			wantInvalid(t, fmt.Sprintf("%v: depth %d, resources %d", c.id.ps, c.init, c.resp), err)
		}
	}
	if tcp.validDepths("connect", nil, attr) != nil {
		t.Error("no ConnParam refused")
	}
	if d := depth(0xff, 300); d != 0xff {
		t.Errorf("0xff against a limit of 300: %d", d)
	}
	if d := depth(0xff, 8); d != 8 {
		t.Errorf("0xff against a limit of 8: %d", d)
	}
}

// TestServiceNumber: services read as glibc's getaddrinfo reads them
// (strtoul over the whole string, then an int that must not be negative,
// of which htons keeps 16 bits). " 80" and "+80" were names before.
func TestServiceNumber(t *testing.T) {
	for _, c := range []struct {
		s    string
		port uint16
		ok   bool
	}{
		{"80", 80, true}, {" 80", 80, true}, {"\t+80", 80, true}, {"0", 0, true}, {"65616", 80, true},
		{"2147483647", 0xffff, true}, {"4294967376", 80, true}, {"-4294967216", 80, true},
		{"-80", 0, false}, {"-1", 0, false}, {"2147483648", 0, false}, {"4294967295", 0, false},
		{"99999999999999999999", 0, false}, {"-99999999999999999999", 0, false},
		{"80 ", 0, false}, {"+", 0, false}, {" ", 0, false}, {"x80", 0, false}, {"0x50", 0, false}, {"ssh", 0, false},
	} {
		port, ok := serviceNumber(c.s)
		if port != c.port || ok != c.ok {
			t.Errorf("serviceNumber(%q) = %d, %v; want %d, %v", c.s, port, ok, c.port, c.ok)
		}
	}
}

// TestDestroyWaitsForCommands: Destroy waits for a command in flight on
// the ID (its DESTROY_ID is sent after it), so that no command names the
// handle once the kernel may have given it to a new ID; later commands
// fail with ErrClosed and send nothing.
func TestDestroyWaitsForCommands(t *testing.T) {
	ch, r := fakeChannel(t)
	id := register(newID(ch, 7, newUID(), PortSpaceTCP, uverbs.QPTypeRC))
	if err := id.hold("resolve_addr"); err != nil { // a command in flight
		t.Fatal(err)
	}
	destroyed := make(chan error, 1)
	go func() { destroyed <- id.Destroy() }()
	select {
	case err := <-destroyed:
		t.Fatalf("Destroy returned during a command on the ID: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	if cmds, _ := sentCommands(t, r); len(cmds) != 0 {
		t.Fatalf("commands %v sent while a command on the ID was in flight", cmds)
	}
	id.drop()
	<-destroyed // the fake file answers nothing: the error is the pipe's
	if cmds, _ := sentCommands(t, r); len(cmds) != 1 || cmds[0] != abi.RDMA_USER_CM_CMD_DESTROY_ID {
		t.Fatalf("commands after the command in flight ended: %v, want DESTROY_ID", cmds)
	}
	if err := id.SetTOS(1); !errors.Is(err, ErrClosed) {
		t.Fatalf("a command after Destroy = %v, want ErrClosed", err)
	}
	if cmds, _ := sentCommands(t, r); len(cmds) != 0 {
		t.Fatalf("commands %v sent for a destroyed ID", cmds)
	}
}

// TestUnregisterKeepsNewerHandle: forgetting an ID whose handle the kernel
// has since given to a newer ID leaves the newer one findable.
func TestUnregisterKeepsNewerHandle(t *testing.T) {
	ch, _ := fakeChannel(t)
	a := register(newID(ch, 9, newUID(), PortSpaceTCP, uverbs.QPTypeRC))
	b := register(newID(ch, 9, newUID(), PortSpaceTCP, uverbs.QPTypeRC))
	defer unregister(b)
	unregister(a)
	if got := lookup(EventEstablished, 0, 9); got != b {
		t.Fatalf("handle 9 after the older ID was forgotten: %p, want the newer %p", got, b)
	}
}

// TestOpErrorText: an rdmacm OpError names the library once: the
// wrapped error's own "rdmacm: " or "uverbs: " is left out.
func TestOpErrorText(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{&OpError{Op: "get_event", Err: ErrClosed}, "rdmacm: get_event: use of closed object"},
		{&OpError{Op: "create_qp", Err: &uverbs.OpError{Object: "qp", Method: "create", Err: sys.ENOMEM}}, "rdmacm: create_qp: qp create: cannot allocate memory"},
		{&OpError{Op: "connect", Err: &OpError{Op: "resolve_route", Err: sys.ETIMEDOUT}}, "rdmacm: connect: resolve_route: connection timed out"},
		{&OpError{Op: "listen", Err: sys.EBUSY}, "rdmacm: listen: device or resource busy"},
	} {
		if got := c.err.Error(); got != c.want {
			t.Errorf("Error() = %q, want %q", got, c.want)
		}
	}
}
