package devx

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/uverbs"
)

// TestNilContextRefused: a nil context.Context is an argument error
// (uverbs.ErrInvalid), not a panic, and the object still works after.
func TestNilContextRefused(t *testing.T) {
	var nilCtx context.Context
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, uverbs.ErrInvalid) || !strings.Contains(err.Error(), "nil context.Context") {
			t.Errorf("%s with a nil context: %v, want ErrInvalid", what, err)
		}
	}
	ch, w := seqChannel(t, true)
	_, err := ch.GetEvent(nilCtx)
	check("EventChannel.GetEvent", err)
	write(t, w, eventRec(3, false, 0, 0))
	mustEvent(t, ch, 3, 0)

	e, err := NewEventFD()
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	_, err = e.Wait(nilCtx)
	check("EventFD.Wait", err)

	cc, _ := seqCmdComp(t)
	_, err = cc.Get(nilCtx, make([]byte, 64))
	check("CmdComp.Get", err)
}

// TestEventAccessorsOutOfRange: Data clamps an exported Len that is out
// of range instead of panicking; a nil *Event has no data and no type.
func TestEventAccessorsOutOfRange(t *testing.T) {
	for _, c := range []struct{ len, want int }{{-1, 0}, {math.MinInt, 0}, {0, 0}, {5, 5}, {EQESize, EQESize}, {EQESize + 1, EQESize}, {math.MaxInt, EQESize}} {
		ev := Event{Len: c.len}
		ev.EQE[1], ev.EQE[3] = 7, 9
		if got := len(ev.Data()); got != c.want {
			t.Errorf("Len %d: Data has %d bytes, want %d", c.len, got, c.want)
		}
		if c.len >= 4 && (ev.Type() != 7 || ev.SubType() != 9) {
			t.Errorf("Len %d: type %d sub %d", c.len, ev.Type(), ev.SubType())
		}
		if c.len < 2 && ev.Type() != 0 {
			t.Errorf("Len %d: type %d without data", c.len, ev.Type())
		}
	}
	var nilEv *Event
	if nilEv.Data() != nil || nilEv.Type() != 0 || nilEv.SubType() != 0 {
		t.Error("nil *Event accessors")
	}
}

// TestEventNumbers: the event lists SUBSCRIBE_EVENT refuses (EINVAL)
// whatever the device: none, more than 16, a number above 255 (the PRM's
// event types are 8 bits; such a number was sent).
func TestEventNumbers(t *testing.T) {
	for _, ev := range [][]uint16{nil, make([]uint16, MaxEvents+1), {1, 256}, {0xffff}} {
		if err := checkEvents("subscribe_event", ev); !errors.Is(err, uverbs.ErrInvalid) {
			t.Errorf("%v: %v, want ErrInvalid", ev, err)
		}
	}
	for _, ev := range [][]uint16{{0}, {255}, make([]uint16, MaxEvents)} {
		if err := checkEvents("subscribe_event", ev); err != nil {
			t.Errorf("%v: %v", ev, err)
		}
	}
}

// TestEventFDRange: SubscribeFd's fd travels as the kernel's s32; an fd
// beyond it is refused, not truncated to another descriptor.
func TestEventFDRange(t *testing.T) {
	for _, fd := range []int{-1, math.MinInt32, math.MaxInt32 + 1, 1<<32 + 5, math.MaxInt} {
		if err := checkEventFD("subscribe_event_fd", fd); !errors.Is(err, uverbs.ErrInvalid) {
			t.Errorf("fd %d: %v, want ErrInvalid", fd, err)
		}
	}
	for _, fd := range []int{0, 5, math.MaxInt32} {
		if err := checkEventFD("subscribe_event_fd", fd); err != nil {
			t.Errorf("fd %d: %v", fd, err)
		}
	}
}

// TestNilResponseBuffer: GeneralCmd, CreateObj, Query and Modify refuse a
// nil response buffer as they refuse an empty one; QueryAsync takes none.
func TestNilResponseBuffer(t *testing.T) {
	in := make([]byte, MinCmdIn)
	for _, out := range [][]byte{nil, {}, make([]byte, MinCmdOut-1), make([]byte, MaxCmdLen+1)} {
		if err := checkCmd("devx", "general_cmd", in, out); !errors.Is(err, uverbs.ErrInvalid) {
			t.Errorf("response buffer of %d bytes (nil %v): %v", len(out), out == nil, err)
		}
	}
	if err := checkCmd("devx", "general_cmd", in, make([]byte, MinCmdOut)); err != nil {
		t.Errorf("good buffers: %v", err)
	}
	if err := checkCmdIn("devx_obj", "query_async", in); err != nil {
		t.Errorf("QueryAsync's command alone: %v", err)
	}
	if err := checkCmdIn("devx_obj", "query_async", in[:MinCmdIn-1]); !errors.Is(err, uverbs.ErrInvalid) {
		t.Errorf("short QueryAsync command: %v", err)
	}
}

// TestFdAfterClose: Fd is -1 once closed (the number may belong to
// another file by then), and getters of nil objects do not panic.
func TestFdAfterClose(t *testing.T) {
	ch, _ := seqChannel(t, false)
	cc, _ := seqCmdComp(t)
	e, err := NewEventFD()
	if err != nil {
		t.Fatal(err)
	}
	if ch.Fd() < 0 || cc.Fd() < 0 || e.Fd() < 0 {
		t.Fatalf("open: Fd %d %d %d", ch.Fd(), cc.Fd(), e.Fd())
	}
	ch.Close()
	cc.Close()
	e.Close()
	if ch.Fd() != -1 || cc.Fd() != -1 || e.Fd() != -1 {
		t.Errorf("after Close: Fd %d %d %d, want -1", ch.Fd(), cc.Fd(), e.Fd())
	}
	// The context's Close takes the same path (close, not Close).
	ch2, _ := seqChannel(t, true)
	cc2, _ := seqCmdComp(t)
	ch2.close()
	cc2.close()
	if ch2.Fd() != -1 || cc2.Fd() != -1 {
		t.Errorf("after the context's close: Fd %d %d, want -1", ch2.Fd(), cc2.Fd())
	}
	var o *Obj
	var u *Umem
	if o.Handle() != 0 || o.Context() != nil || u.ID() != 0 || u.Handle() != 0 {
		t.Error("getters of nil objects")
	}
}

// TestCmdCompTryGetBesideGet: TryGet does not wait for a Get parked with
// nothing queued ("Get without waiting"); the Get takes the next record.
func TestCmdCompTryGetBesideGet(t *testing.T) {
	cc, w := seqCmdComp(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	type result struct {
		r   CmdResp
		err error
	}
	got := make(chan result, 1)
	go func() {
		r, err := cc.Get(ctx, make([]byte, 64))
		got <- result{r, err}
	}()
	buf := make([]byte, 64)
	for i := 0; i < 200; i++ {
		done := make(chan error, 1)
		go func() { _, err := cc.TryGet(buf); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, ErrNoEvent) || !errors.Is(err, sys.EAGAIN) {
				t.Fatalf("TryGet beside a parked Get: %v, want ErrNoEvent", err)
			}
		case <-ctx.Done():
			t.Fatal("TryGet waited for the parked Get")
		}
	}
	write(t, w, cmdRec(42, []byte{1}))
	if res := <-got; res.err != nil || res.r.WrID != 42 {
		t.Fatalf("parked Get: %+v %v", res.r, res.err)
	}
}
