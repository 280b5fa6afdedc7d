package rdmacm

import (
	"context"
	"errors"
	"testing"

	"github.com/pureverbs/pureverbs/abi"
	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/uverbs"
)

// nullChannel is a channel whose commands go to /dev/null: every write
// succeeds and every response reads as zeros.
func nullChannel(tb testing.TB) *EventChannel {
	tb.Helper()
	u, err := sys.OpenUCM("/dev/null")
	if err != nil {
		tb.Fatal(err)
	}
	ch := newChannel(u)
	tb.Cleanup(func() { ch.Close() })
	return ch
}

// TestCommandNoAllocs: an rdma_cm command (with a response, and with an
// input argument) allocates nothing: it is built in the channel's buffer
// and written through a callback made once.
func TestCommandNoAllocs(t *testing.T) {
	ch := nullChannel(t)
	req := abi.RdmaUcmDestroyId{Id: 1}
	var resp abi.RdmaUcmDestroyIdResp
	testkit.NoAllocs(t, 200, func() {
		if err := ch.command("destroy_id", abi.RDMA_USER_CM_CMD_DESTROY_ID, sys.AsBytes(&req), 0, sys.AsBytes(&resp)); err != nil {
			t.Fatal(err)
		}
	})
	opt := abi.RdmaUcmSetOption{Id: 1, Level: abi.RDMA_OPTION_ID, Optname: abi.RDMA_OPTION_ID_TOS, Optlen: 1}
	val := []byte{1}
	testkit.NoAllocs(t, 200, func() {
		if err := ch.commandIn("set_option", abi.RDMA_USER_CM_CMD_SET_OPTION, sys.AsBytes(&opt), 0, val); err != nil {
			t.Fatal(err)
		}
	})
}

// BenchmarkCreateDestroyID: an ID's create and destroy, commands to
// /dev/null: what the library adds to the kernel's two commands (one
// allocation: the ID).
func BenchmarkCreateDestroyID(b *testing.B) {
	ch := nullChannel(b)
	b.ReportAllocs()
	for b.Loop() {
		id, err := ch.CreateID(PortSpaceTCP)
		if err != nil {
			b.Fatal(err)
		}
		if err := id.Destroy(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestEventPrivateDataInto: an event's private data is decoded into the
// Event's own buffer, which processInto (GetEventInto's decode) reuses: no
// allocation per event once the buffer exists, each event's bytes and
// length exact, nil for an event without any, and an append to the slice
// does not write into the buffer. GetEvent's events (a new Event each) do
// not share their bytes.
func TestEventPrivateDataInto(t *testing.T) {
	ch, _ := fakeChannel(t)
	const h = 7
	id := register(newID(ch, h, newUID(), PortSpaceTCP, uverbs.QPTypeRC))
	defer unregister(id)
	resp := func(typ EventType, data string) *abi.RdmaUcmEventResp {
		r := &abi.RdmaUcmEventResp{Uid: id.uid, Id: h, Event: uint32(typ)}
		var c abi.RdmaUcmConnParam
		c.PrivateDataLen = uint8(copy(c.PrivateData[:], data))
		c.QpNum = 0x1234
		r.Param.SetConn(c)
		return r
	}
	var ev Event
	if !ch.processInto(resp(EventEstablished, "first"), &ev) {
		t.Fatal("ESTABLISHED not delivered")
	}
	if string(ev.Param.PrivateData) != "first" || ev.Param.QPNum != 0x1234 || ev.ID != id {
		t.Fatalf("event %+v", ev)
	}
	_ = append(ev.Param.PrivateData, 'X')
	if ev.buf[5] == 'X' {
		t.Fatal("an append to PrivateData wrote into the event's buffer")
	}
	if !ch.processInto(resp(EventDisconnected, "2nd"), &ev) {
		t.Fatal("DISCONNECTED not delivered")
	}
	if string(ev.Param.PrivateData) != "2nd" || ev.Type != EventDisconnected {
		t.Fatalf("second event %v %q", ev.Type, ev.Param.PrivateData)
	}
	if got := string(ev.buf[:5]); got != "2ndst" {
		t.Fatalf("buffer %q, want the second event's bytes over the first's", got)
	}
	r := resp(EventEstablished, "reused")
	testkit.NoAllocs(t, 200, func() {
		if !ch.processInto(r, &ev) || string(ev.Param.PrivateData) != "reused" {
			t.Fatalf("event %v %q", ev.Type, ev.Param.PrivateData)
		}
	})
	if !ch.processInto(resp(EventEstablished, ""), &ev) || ev.Param.PrivateData != nil {
		t.Fatalf("no private data: %q (nil %v)", ev.Param.PrivateData, ev.Param.PrivateData == nil)
	}
	kept := ev
	if !ch.processInto(resp(EventEstablished, "mine"), &kept) || string(kept.Param.PrivateData) != "mine" {
		t.Fatalf("the copy's event %q", kept.Param.PrivateData)
	}
	if !ch.processInto(resp(EventEstablished, "orig"), &ev) {
		t.Fatal("not delivered")
	}
	copied := ev
	if !ch.processInto(resp(EventEstablished, "next"), &copied) || string(ev.Param.PrivateData) != "orig" {
		t.Fatalf("an event into a copy overwrote the original's private data: %q", ev.Param.PrivateData)
	}
	a, _ := ch.process(resp(EventEstablished, "one"))
	b, _ := ch.process(resp(EventEstablished, "two"))
	if string(a.Param.PrivateData) != "one" || string(b.Param.PrivateData) != "two" {
		t.Fatalf("process's events share their bytes: %q %q", a.Param.PrivateData, b.Param.PrivateData)
	}
}

// TestGetEventIntoNil: a nil *Event is ErrInvalid, nothing read.
func TestGetEventIntoNil(t *testing.T) {
	ch, _ := fakeChannel(t)
	if err := ch.GetEventInto(context.Background(), nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("GetEventInto(nil) = %v", err)
	}
	if err := ch.TryGetEventInto(nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("TryGetEventInto(nil) = %v", err)
	}
}
