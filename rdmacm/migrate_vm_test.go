package rdmacm_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/rdmacm"
)

// noEvent fails if ch has an event queued.
func noEvent(t *testing.T, ch *rdmacm.EventChannel, where string) {
	t.Helper()
	if ev, err := ch.TryGetEvent(); !errors.Is(err, sys.EAGAIN) {
		t.Fatalf("%s: TryGetEvent = %v, %v; want no event (EAGAIN)", where, &ev, err)
	}
}

// TestVMMigrate: rdma_migrate_id. A listener moves to a second channel and
// its next connect request arrives there; the request's ID moves to a
// third, where its ESTABLISHED comes; an event already queued (the peer's
// DISCONNECTED) moves with the ID to a fourth; the channels the IDs left
// get nothing of theirs and, closed, take nothing with them: with both
// ends moved to the third channel and every other closed, the QPs, made
// on the Context the first channel opened, still carry a send each way.
// Closing the channel an ID is on destroys it.
func TestVMMigrate(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ch1, ch2, ch3, ch4, cch := openChannel(t), openChannel(t), openChannel(t), openChannel(t), openChannel(t)

	listen := listener(t, ch1, rdmacm.PortSpaceTCP, 0)
	if err := listen.Migrate(ch2); err != nil {
		t.Fatalf("Migrate the listener: %v", err)
	}
	if listen.Channel() != ch2 {
		t.Fatalf("the listener's channel is not the one it moved to")
	}
	cid := resolve(ctx, t, cch, listen.LocalAddr())
	client := newEnd(t, cid)
	defer client.close()
	client.recv(0, 64)
	if err := cid.Connect(&rdmacm.ConnParam{InitiatorDepth: 1, ResponderResources: 1, RetryCount: 7, RNRRetryCount: 7}); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	req := want(ctx, t, ch2, rdmacm.EventConnectRequest)
	noEvent(t, ch1, "the listener's first channel")
	sid := req.ID
	if req.Listen != listen || sid.Channel() != ch2 {
		t.Fatalf("request on ch2: listen %p (want %p), its ID on the wrong channel", req.Listen, listen)
	}
	// The same device's Context serves every channel's IDs.
	if sid.Context() != listen.Context() || sid.Context() != cid.Context() {
		t.Fatalf("Contexts %p, %p, %p: want one per device", sid.Context(), listen.Context(), cid.Context())
	}
	if err := sid.Migrate(ch3); err != nil {
		t.Fatalf("Migrate the request: %v", err)
	}
	server := newEnd(t, sid)
	defer server.close()
	server.recv(0, 64)
	if err := sid.Accept(&rdmacm.ConnParam{InitiatorDepth: 1, ResponderResources: 1}); err != nil {
		t.Fatalf("Accept on the moved ID: %v", err)
	}
	want(ctx, t, cch, rdmacm.EventEstablished)
	if ev := want(ctx, t, ch3, rdmacm.EventEstablished); ev.ID != sid {
		t.Fatalf("ESTABLISHED on ch3 names %p, want the moved ID %p", ev.ID, sid)
	}
	noEvent(t, ch2, "the request's first channel")

	// The client moves to ch3 too. Then ch1 (where the Context was
	// first opened, for the listener), ch2 (where the request came) and
	// the client's first channel close: only ch3 holds the Context now,
	// and the QPs made on it live on.
	if err := cid.Migrate(ch3); err != nil {
		t.Fatalf("Migrate the client: %v", err)
	}
	if err := listen.Destroy(); err != nil {
		t.Fatal(err)
	}
	for _, ch := range []*rdmacm.EventChannel{ch1, ch2, cch} {
		if err := ch.Close(); err != nil {
			t.Fatalf("Close a channel the IDs left: %v", err)
		}
	}
	copy(client.buf[1024:], "after the move")
	client.send(1024, 14)
	client.wc(ctx)
	if wc := server.wc(ctx); wc.ByteLen != 14 || string(server.buf[:14]) != "after the move" {
		t.Fatalf("server received %d bytes %q", wc.ByteLen, server.buf[:14])
	}
	copy(server.buf[1024:], "back")
	server.send(1024, 4)
	server.wc(ctx)
	if wc := client.wc(ctx); wc.ByteLen != 4 || string(client.buf[:4]) != "back" {
		t.Fatalf("client received %d bytes %q", wc.ByteLen, client.buf[:4])
	}

	// A queued event moves with its ID: the DISCONNECTED that the
	// client's DREQ queued on ch3 is read from ch4.
	if err := cid.Disconnect(); err != nil {
		t.Fatal(err)
	}
	waitQueued(ctx, t, ch3)
	if err := sid.Migrate(ch4); err != nil {
		t.Fatalf("Migrate with an event queued: %v", err)
	}
	noEvent(t, ch3, "the channel the connection left with an event queued")
	if ev := want(ctx, t, ch4, rdmacm.EventDisconnected); ev.ID != sid {
		t.Fatalf("DISCONNECTED on ch4 names %p, want %p", ev.ID, sid)
	}
	if err := sid.Disconnect(); err != nil {
		t.Fatal(err)
	}
	if ev := want(ctx, t, ch3, rdmacm.EventDisconnected); ev.ID != cid {
		t.Fatalf("DISCONNECTED on ch3 names %p, want the client %p", ev.ID, cid)
	}

	// Migrating to where it is does nothing; closing its channel
	// destroys it.
	if err := sid.Migrate(ch4); err != nil {
		t.Fatalf("Migrate to its own channel: %v", err)
	}
	if err := ch4.Close(); err != nil {
		t.Fatal(err)
	}
	if err := sid.Disconnect(); !errors.Is(err, rdmacm.ErrClosed) {
		t.Fatalf("an ID whose channel closed: %v, want ErrClosed", err)
	}
	if err := cid.Destroy(); err != nil {
		t.Fatal(err)
	}
}

// waitQueued waits, bounded by ctx, until ch's fd is readable (an event is
// queued) without reading it.
func waitQueued(ctx context.Context, t *testing.T, ch *rdmacm.EventChannel) {
	t.Helper()
	for {
		ready, err := sys.WaitReadable(ch.Fd(), 10*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if ready {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("no event queued: %v", ctx.Err())
		}
	}
}

// TestVMMigrateBadInput: a nil channel is ErrInvalid, a destroyed ID or
// a closed target channel ErrClosed, and a failed move leaves the ID
// where it was, working.
func TestVMMigrateBadInput(t *testing.T) {
	ch, other := openChannel(t), openChannel(t)
	id, err := ch.CreateID(rdmacm.PortSpaceTCP)
	if err != nil {
		t.Fatal(err)
	}
	if err := id.Migrate(nil); !errors.Is(err, rdmacm.ErrInvalid) {
		t.Errorf("Migrate(nil): %v, want ErrInvalid", err)
	}
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	if err := id.Migrate(other); !errors.Is(err, rdmacm.ErrClosed) {
		t.Errorf("Migrate to a closed channel: %v, want ErrClosed", err)
	}
	if id.Channel() != ch {
		t.Errorf("a failed Migrate moved the ID")
	}
	// The kernel still takes the ID's commands on ch.
	if err := id.BindAddr(netip.AddrPortFrom(rxeAddr, 0)); err != nil {
		t.Errorf("BindAddr after a failed Migrate: %v", err)
	}
	if err := id.Destroy(); err != nil {
		t.Fatalf("Destroy after a failed Migrate: %v", err)
	}
	if err := id.Migrate(ch); !errors.Is(err, rdmacm.ErrClosed) {
		t.Errorf("Migrate a destroyed ID: %v, want ErrClosed", err)
	}
}

// TestVMMigrateWhileReading: a listener moves back and forth between two
// channels, each read by its own goroutine, while clients connect: every
// request is delivered exactly once, on one channel or the other (the
// kernel moves the queued ones with the listener; one its old channel had
// already read is delivered there).
func TestVMMigrateWhileReading(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ch1, ch2, cch := openChannel(t), openChannel(t), openChannel(t)
	listen := listener(t, ch1, rdmacm.PortSpaceTCP, 0)
	const n = 24

	seen := make(chan byte, 2*n)
	readCtx, stopReading := context.WithCancel(ctx)
	defer stopReading()
	readers := make(chan error, 2)
	for _, ch := range []*rdmacm.EventChannel{ch1, ch2} {
		go func() {
			for {
				ev, err := ch.GetEvent(readCtx)
				if err != nil {
					if readCtx.Err() != nil {
						err = nil
					}
					readers <- err
					return
				}
				if ev.Type != rdmacm.EventConnectRequest || len(ev.Param.PrivateData) == 0 {
					readers <- errors.New("unexpected " + ev.String())
					return
				}
				seen <- ev.Param.PrivateData[0]
				ev.ID.Reject(nil)
				ev.ID.Destroy()
			}
		}()
	}

	clients := make([]*rdmacm.ID, n)
	for i := range clients {
		clients[i] = resolve(ctx, t, cch, listen.LocalAddr())
	}
	for i := range clients {
		if err := clients[i].Connect(&rdmacm.ConnParam{QPNum: uint32(0x100 + i), PrivateData: []byte{byte(i)},
			RetryCount: 7, RNRRetryCount: 7}); err != nil {
			t.Fatalf("Connect %d: %v", i, err)
		}
		to := ch2
		if i%2 == 1 {
			to = ch1
		}
		if err := listen.Migrate(to); err != nil {
			t.Fatalf("Migrate %d: %v", i, err)
		}
	}
	got := map[byte]int{}
	for len(got) < n {
		select {
		case b := <-seen:
			got[b]++
		case err := <-readers:
			t.Fatalf("reader: %v", err)
		case <-ctx.Done():
			t.Fatalf("%d of %d requests delivered: %v", len(got), n, ctx.Err())
		}
	}
	// Every client hears its reject: nothing was left on a channel.
	for range n {
		ev, err := cch.GetEvent(ctx)
		if err != nil || ev.Type != rdmacm.EventRejected || ev.Status != 28 {
			// 28: IB_CM_REJ_CONSUMER_DEFINED, the server's Reject.
			t.Fatalf("client event %v (%v), want a consumer-defined reject (28)", &ev, err)
		}
	}
	stopReading()
	for range 2 {
		if err := <-readers; err != nil {
			t.Fatalf("reader: %v", err)
		}
	}
	close(seen)
	for b := range seen {
		got[b]++
	}
	for i := range n {
		if got[byte(i)] != 1 {
			t.Errorf("request %d delivered %d times", i, got[byte(i)])
		}
	}
	for _, id := range append(clients, listen) {
		if err := id.Destroy(); err != nil {
			t.Error(err)
		}
	}
}

// TestVMMigrateQueuedRequest: a connect request queued when its listener
// moves is read from the new channel, but the kernel made its ID on the
// old one, where the ID's commands and events stay (the channel finds
// it): the request is delivered, not dropped, and accepting it works.
func TestVMMigrateQueuedRequest(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ch1, ch2, cch := openChannel(t), openChannel(t), openChannel(t)
	listen := listener(t, ch1, rdmacm.PortSpaceTCP, 0)
	cid := resolve(ctx, t, cch, listen.LocalAddr())
	client := newEnd(t, cid)
	defer client.close()
	if err := cid.Connect(&rdmacm.ConnParam{InitiatorDepth: 1, ResponderResources: 1, RetryCount: 7, RNRRetryCount: 7}); err != nil {
		t.Fatal(err)
	}
	waitQueued(ctx, t, ch1)
	if err := listen.Migrate(ch2); err != nil {
		t.Fatal(err)
	}
	noEvent(t, ch1, "the listener's old channel")
	req := want(ctx, t, ch2, rdmacm.EventConnectRequest)
	sid := req.ID
	if sid.Channel() != ch1 {
		t.Fatalf("the request's ID is on %p, want the channel the kernel made it on (%p)", sid.Channel(), ch1)
	}
	server := newEnd(t, sid)
	defer server.close()
	if err := sid.Accept(&rdmacm.ConnParam{InitiatorDepth: 1, ResponderResources: 1}); err != nil {
		t.Fatalf("Accept: %v", err)
	}
	want(ctx, t, cch, rdmacm.EventEstablished)
	want(ctx, t, ch1, rdmacm.EventEstablished)
	if err := cid.Disconnect(); err != nil {
		t.Fatal(err)
	}
	want(ctx, t, ch1, rdmacm.EventDisconnected)
	for _, id := range []*rdmacm.ID{sid, cid, listen} {
		if err := id.Destroy(); err != nil {
			t.Error(err)
		}
	}
}

// TestVMMigrateWakesParkedReader: the kernel moves a listener's queued
// connect request to the new channel without waking that channel's
// waiters (ucma_migrate_id splices the event list, no wake_up), so a
// GetEvent already parked on the new channel's fd would sleep through it.
// Migrate makes such a reader look again: the request is delivered there.
func TestVMMigrateWakesParkedReader(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ch1, ch2, cch := openChannel(t), openChannel(t), openChannel(t)
	listen := listener(t, ch1, rdmacm.PortSpaceTCP, 0)

	type result struct {
		ev  rdmacm.Event
		err error
	}
	got := make(chan result, 1)
	go func() {
		ev, err := ch2.GetEvent(ctx)
		got <- result{ev, err}
	}()
	if err := testkit.WaitParked(ctx, "rdmacm.(*EventChannel).GetEvent"); err != nil {
		t.Fatal(err)
	}
	client := resolve(ctx, t, cch, listen.LocalAddr())
	if err := client.Connect(&rdmacm.ConnParam{QPNum: 0x100, PrivateData: []byte{7}, RetryCount: 7, RNRRetryCount: 7}); err != nil {
		t.Fatalf("Connect: %v", err)
	}
	// The request is queued on ch1, which nobody reads: poll(2) says so
	// without taking it.
	for {
		ok, err := sys.WaitReadable(ch1.Fd(), 100*time.Millisecond)
		if err != nil {
			t.Fatalf("poll ch1: %v", err)
		}
		if ok {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("no connect request queued on the listener's channel")
		}
	}
	if err := listen.Migrate(ch2); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	r := <-got
	if r.err != nil {
		t.Fatalf("GetEvent parked on the new channel: %v (it slept through the moved request)", r.err)
	}
	if r.ev.Type != rdmacm.EventConnectRequest || len(r.ev.Param.PrivateData) == 0 || r.ev.Param.PrivateData[0] != 7 {
		t.Fatalf("GetEvent on the new channel = %v, want the client's connect request", &r.ev)
	}
	r.ev.ID.Reject(nil)
	r.ev.ID.Destroy()
	ev, err := cch.GetEvent(ctx)
	if err != nil || ev.Type != rdmacm.EventRejected {
		t.Fatalf("client event %v (%v), want its reject", &ev, err)
	}
	noEvent(t, ch1, "the channel the listener left")
}

// TestVMDestroyRacesMigrate: a Destroy racing a Migrate of the same ID
// destroys it, whichever runs first. rdma_destroy_id finds the ID on the
// file it was sent on (ucma_destroy_id), so a DESTROY_ID sent on the old
// file after the kernel moved the ID fails with EINVAL and leaves the ID
// alive until its new channel closes.
func TestVMDestroyRacesMigrate(t *testing.T) {
	ch1, ch2 := openChannel(t), openChannel(t)
	const rounds = 1000
	for i := range rounds {
		from, to := ch1, ch2
		if i%2 == 1 {
			from, to = ch2, ch1
		}
		id, err := from.CreateID(rdmacm.PortSpaceTCP)
		if err != nil {
			t.Fatal(err)
		}
		start := make(chan struct{})
		migrated, destroyed := make(chan error, 1), make(chan error, 1)
		go func() { <-start; migrated <- id.Migrate(to) }()
		go func() { <-start; destroyed <- id.Destroy() }()
		close(start)
		derr, merr := <-destroyed, <-migrated
		if derr != nil {
			t.Fatalf("round %d: Destroy racing Migrate: %v (Migrate: %v)", i, derr, merr)
		}
		if merr != nil && !errors.Is(merr, rdmacm.ErrClosed) {
			t.Fatalf("round %d: Migrate racing Destroy: %v, want nil or ErrClosed", i, merr)
		}
	}
}
