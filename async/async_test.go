package async

import (
	"context"
	"encoding/binary"
	"errors"
	"github.com/pureverbs/pureverbs/internal/testkit"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/core"
	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/uverbs"
)

type fakeObj struct {
	uh     uint64 // assigned by the registry
	kind   uverbs.ElementKind
	counts core.Counts
}

func (f *fakeObj) UserHandle() uint64       { return f.uh }
func (f *fakeObj) Kind() uverbs.ElementKind { return f.kind }

// publish registers objs in reg as uverbs' creates do.
func publish(t testing.TB, reg *core.Registry[uverbs.Affiliated], objs ...*fakeObj) {
	for _, o := range objs {
		uh, err := reg.Reserve(&o.counts)
		if err != nil {
			t.Fatal(err)
		}
		o.uh = uh
		if err := reg.Publish(uh, o); err != nil {
			t.Fatal(err)
		}
	}
}

type harness struct {
	r      *Reader
	w      *sys.FD
	reg    core.Registry[uverbs.Affiliated]
	closed atomic.Bool
}

func newHarness(t *testing.T, objs ...*fakeObj) *harness {
	t.Helper()
	ef, w, err := sys.NewRecordPipe("async test")
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{w: w}
	publish(t, &h.reg, objs...)
	h.r = newReader(ef, &h.reg, h.closed.Load)
	t.Cleanup(func() { ef.Close(); w.Close() })
	return h
}

func (h *harness) send(t *testing.T, typ EventType, elem uint64) {
	t.Helper()
	var rec [RecordSize]byte
	binary.LittleEndian.PutUint64(rec[0:], elem)
	binary.LittleEndian.PutUint32(rec[8:], uint32(typ))
	if _, err := sys.Write(h.w, rec[:]); err != nil {
		t.Fatal(err)
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestDecode(t *testing.T) {
	rec := make([]byte, 16)
	binary.LittleEndian.PutUint64(rec, 0x1122334455667788)
	binary.LittleEndian.PutUint32(rec[8:], 18)
	typ, elem, err := Decode(rec)
	if err != nil || typ != GIDChange || elem != 0x1122334455667788 {
		t.Fatalf("Decode = %v %x %v", typ, elem, err)
	}
	if _, _, err := Decode(rec[:15]); !errors.Is(err, ErrShortRecord) || !errors.Is(err, uverbs.ErrInvalid) || !errors.Is(err, sys.EINVAL) {
		t.Fatalf("short record: %v (want ErrShortRecord, ErrInvalid and EINVAL)", err)
	}
	testkit.NoAllocs(t, 1000, func() { Decode(rec) })
}

func FuzzDecode(f *testing.F) {
	f.Add(make([]byte, 16))
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0})
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, rec []byte) {
		typ, elem, err := Decode(rec)
		if len(rec) < RecordSize {
			if err == nil {
				t.Fatal("short record accepted")
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if uint32(typ) != binary.LittleEndian.Uint32(rec[8:]) || elem != binary.LittleEndian.Uint64(rec) {
			t.Fatal("fields misdecoded")
		}
		s := typ.String()
		if !strings.HasPrefix(s, "IBV_EVENT_") {
			t.Fatalf("String() = %q", s)
		}
		_ = Event{Type: typ, Raw: elem}.String()
	})
}

func TestEventTypeStrings(t *testing.T) {
	for typ, want := range map[EventType]string{
		CQErr: "IBV_EVENT_CQ_ERR", PortActive: "IBV_EVENT_PORT_ACTIVE", PortErr: "IBV_EVENT_PORT_ERR",
		GIDChange: "IBV_EVENT_GID_CHANGE", WQFatal: "IBV_EVENT_WQ_FATAL", DeviceFatal: "IBV_EVENT_DEVICE_FATAL",
		SRQLimitReached: "IBV_EVENT_SRQ_LIMIT_REACHED", QPLastWQEReached: "IBV_EVENT_QP_LAST_WQE_REACHED",
		ClientReregister: "IBV_EVENT_CLIENT_REREGISTER", DeviceSpeedChange: "IBV_EVENT_DEVICE_SPEED_CHANGE",
		EventType(99): "IBV_EVENT_UNKNOWN(99)",
	} {
		if got := typ.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", uint32(typ), got, want)
		}
	}
}

func TestPortEventAndFormat(t *testing.T) {
	h := newHarness(t)
	if _, err := h.r.TryGet(); !errors.Is(err, ErrNoEvent) || !errors.Is(err, sys.EAGAIN) {
		t.Fatalf("empty TryGet = %v", err)
	}
	h.send(t, PortActive, 1)
	ev, err := h.r.Get(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if ev.Type != PortActive || ev.Port != 1 || ev.Element != nil {
		t.Fatalf("event %+v", ev)
	}
	if got, want := ev.String(), "IBV_EVENT_PORT_ACTIVE (9), port 1"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if h.r.Unacked() != 1 {
		t.Errorf("Unacked = %d", h.r.Unacked())
	}
	if err := h.r.Ack(ev); err != nil {
		t.Fatal(err)
	}
	if err := h.r.Ack(ev); !errors.Is(err, ErrAlreadyAcked) || !errors.Is(err, uverbs.ErrInvalid) {
		t.Fatalf("double ack = %v", err)
	}
	if err := h.r.Ack(Event{}); !errors.Is(err, ErrForeignEvent) {
		t.Fatalf("zero event ack = %v", err)
	}
	other := newHarness(t)
	other.send(t, PortErr, 1)
	oev, _ := other.r.Get(ctxT(t))
	if err := h.r.Ack(oev); !errors.Is(err, ErrForeignEvent) {
		t.Fatalf("foreign ack = %v", err)
	}
	other.r.Ack(oev)
}

func TestUnknownType(t *testing.T) {
	h := newHarness(t)
	h.send(t, EventType(4242), 77)
	ev, err := h.r.Get(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if ev.Type.Known() || ev.Element != nil || ev.Raw != 77 || !strings.Contains(ev.String(), "4242") {
		t.Fatalf("unknown event %+v %q", ev, ev.String())
	}
	if err := h.r.Ack(ev); err != nil {
		t.Fatal(err)
	}
}

func TestAffiliatedMappingAndDestroyWait(t *testing.T) {
	cq := &fakeObj{kind: uverbs.ElementCQ}
	qp := &fakeObj{kind: uverbs.ElementQP}
	h := newHarness(t, cq, qp)
	h.send(t, CQErr, cq.uh)
	h.send(t, SQDrained, qp.uh)
	h.send(t, CQErr, cq.uh)
	h.send(t, QPFatal, 999) // object unknown to this process
	var evs []Event
	for i := 0; i < 4; i++ {
		ev, err := h.r.Get(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	if evs[0].Element != cq || evs[1].Element != qp || evs[2].Element != cq || evs[3].Element != nil {
		t.Fatalf("elements not mapped back: %+v", evs)
	}
	if d, a := cq.counts.Counts(core.AsyncEvents); d != 2 || a != 0 {
		t.Fatalf("cq counts %d/%d", d, a)
	}
	// A destroy that the kernel says saw 2 CQ events must wait for both acks.
	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	u, err := cq.counts.WaitAcked(short, 2, 0)
	if !errors.Is(err, context.DeadlineExceeded) || u.Async != 2 || len(u.Pending) != 2 || EventType(u.Pending[0]) != CQErr {
		t.Fatalf("bounded wait = %+v, %v", u, err)
	}
	// The wait ends after the last of the two acks, not before.
	var lastAck atomic.Int64
	done := make(chan int64)
	go func() {
		if _, err := cq.counts.WaitAcked(ctxT(t), 2, 0); err != nil {
			t.Error(err)
		}
		done <- time.Now().UnixNano()
	}()
	if err := h.r.Ack(evs[0]); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
		t.Fatal("destroy wait returned after one of two acks")
	case <-time.After(100 * time.Millisecond):
	}
	lastAck.Store(time.Now().UnixNano())
	if err := h.r.Ack(evs[2]); err != nil {
		t.Fatal(err)
	}
	if ret := <-done; ret < lastAck.Load() {
		t.Fatalf("destroy wait returned %v before the last ack", time.Duration(lastAck.Load()-ret))
	}
	for _, ev := range evs[1:2] {
		h.r.Ack(ev)
	}
	h.r.Ack(evs[3])
	if h.r.Unacked() != 0 {
		t.Fatalf("Unacked = %d", h.r.Unacked())
	}
	// The counters never exceed what was delivered.
	if err := cq.counts.Ack(core.AsyncEvents, uint32(CQErr), 1); !errors.Is(err, core.ErrOverAck) {
		t.Fatalf("over-ack = %v", err)
	}
}

func TestConcurrentGetAck(t *testing.T) {
	objs := []*fakeObj{{kind: uverbs.ElementCQ}, {kind: uverbs.ElementQP}, {kind: uverbs.ElementSRQ}}
	h := newHarness(t, objs...)
	types := []EventType{CQErr, QPFatal, SRQLimitReached}
	const getters, perObj = 6, 100
	ctx := ctxT(t)
	var wg sync.WaitGroup
	var got atomic.Int64
	errs := make(chan error, getters)
	for i := 0; i < getters; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				ev, err := h.r.Get(ctx)
				if err != nil {
					if !errors.Is(err, uverbs.ErrClosed) {
						errs <- err
					}
					return
				}
				if err := h.r.Ack(ev); err != nil {
					errs <- err
					return
				}
				if got.Add(1) == 3*perObj {
					h.r.file.Close()
				}
			}
		}()
	}
	// Destroy waiters start before the events exist, as in a real race.
	waits := make(chan error, len(objs))
	for _, o := range objs {
		go func() { _, err := o.counts.WaitAcked(ctx, perObj, 0); waits <- err }()
	}
	for i := 0; i < perObj; i++ {
		for j, o := range objs {
			h.send(t, types[j], o.uh)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for range objs {
		if err := <-waits; err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range objs {
		if d, a := o.counts.Counts(core.AsyncEvents); d != perObj || a != perObj {
			t.Fatalf("%v: delivered %d acked %d, want %d", o.kind, d, a, perObj)
		}
	}
}

func TestClosedContext(t *testing.T) {
	h := newHarness(t)
	h.send(t, PortErr, 1)
	ev, err := h.r.Get(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { _, err := h.r.Get(context.Background()); done <- err }()
	h.closed.Store(true)
	h.r.file.Close()
	if err := <-done; !errors.Is(err, uverbs.ErrClosed) {
		t.Fatalf("Get on closed = %v", err)
	}
	if err := h.r.Ack(ev); !errors.Is(err, uverbs.ErrClosed) {
		t.Fatalf("Ack after close = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	h2 := newHarness(t)
	if _, err := h2.r.Get(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Get = %v", err)
	}
}

func TestIterator(t *testing.T) {
	h := newHarness(t)
	for i := 0; i < 3; i++ {
		h.send(t, GIDChange, 1)
	}
	n := 0
	for ev, err := range h.r.All(ctxT(t)) {
		if err != nil {
			t.Fatal(err)
		}
		h.r.Ack(ev)
		if n++; n == 3 {
			break
		}
	}
	if n != 3 || h.r.Unacked() != 0 {
		t.Fatalf("iterated %d, unacked %d", n, h.r.Unacked())
	}
}

// TestGetAckAllocs: reading, decoding and acknowledging a port event and
// an affiliated event (mapped back, counted, acknowledged) allocates
// nothing at all over many calls.
func TestGetAckAllocs(t *testing.T) {
	qp := &fakeObj{kind: uverbs.ElementQP}
	h := newHarness(t, qp)
	ctx := context.Background()
	for _, c := range []struct {
		name string
		typ  EventType
		elem uint64
	}{{"port", PortActive, 1}, {"affiliated", SQDrained, qp.uh}} {
		t.Run(c.name, func(t *testing.T) {
			testkit.NoAllocs(t, 2000, func() {
				h.send(t, c.typ, c.elem)
				ev, err := h.r.Get(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if err := h.r.Ack(ev); err != nil {
					t.Fatal(err)
				}
			})
			// (not reached when NoAllocs skips under -race)
			if d, a := qp.counts.Counts(core.AsyncEvents); c.typ == SQDrained && (d != a || d < 2000) {
				t.Fatalf("affiliated events delivered %d, acked %d", d, a)
			}
		})
	}
}

// BenchmarkGetAck reads, decodes and acknowledges one queued event per
// iteration through a real (SEQPACKET) fd.
func BenchmarkGetAck(b *testing.B) {
	ef, w, err := sys.NewRecordPipe("bench")
	if err != nil {
		b.Fatal(err)
	}
	defer ef.Close()
	defer w.Close()
	obj := &fakeObj{kind: uverbs.ElementQP}
	var reg core.Registry[uverbs.Affiliated]
	publish(b, &reg, obj)
	r := newReader(ef, &reg, func() bool { return false })
	var rec [RecordSize]byte
	binary.LittleEndian.PutUint64(rec[0:], obj.uh)
	binary.LittleEndian.PutUint32(rec[8:], uint32(SQDrained))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		sys.Write(w, rec[:])
		ev, err := r.Get(ctx)
		if err != nil {
			b.Fatal(err)
		}
		r.Ack(ev)
	}
}

func TestNilAndZeroReader(t *testing.T) {
	for _, r := range []*Reader{nil, new(Reader)} {
		if _, err := r.Get(context.Background()); !errors.Is(err, uverbs.ErrInvalid) {
			t.Errorf("Get = %v", err)
		}
		if _, err := r.TryGet(); !errors.Is(err, uverbs.ErrInvalid) {
			t.Errorf("TryGet = %v", err)
		}
		if err := r.Ack(Event{}); !errors.Is(err, ErrForeignEvent) {
			t.Errorf("Ack = %v", err)
		}
		if r.Fd() != -1 || r.Unacked() != 0 {
			t.Errorf("Fd %d Unacked %d", r.Fd(), r.Unacked())
		}
	}
	if _, err := NewReader(nil); !errors.Is(err, uverbs.ErrInvalid) {
		t.Errorf("NewReader(nil) = %v", err)
	}
}

// TestAllNilContext: All with a nil context yields one ErrInvalid and
// ends (it used to panic on the nil ctx after Get refused it).
func TestAllNilContext(t *testing.T) {
	for _, r := range []*Reader{nil, new(Reader), newHarness(t, &fakeObj{kind: uverbs.ElementQP}).r} {
		n := 0
		//lint:ignore SA1012 a nil context is the bad input under test
		for _, err := range r.All(nil) {
			n++
			if !errors.Is(err, uverbs.ErrInvalid) {
				t.Errorf("All(nil) yielded %v", err)
			}
		}
		if n != 1 {
			t.Errorf("All(nil) yielded %d times, want 1", n)
		}
	}
}

// An Ack that the object's counter refuses (here because the caller
// acknowledged through the counter directly) changes nothing.
func TestAckRefusedChangesNothing(t *testing.T) {
	qp := &fakeObj{kind: uverbs.ElementQP}
	h := newHarness(t, qp)
	h.send(t, SQDrained, qp.uh)
	ev, err := h.r.Get(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := qp.counts.Ack(core.AsyncEvents, uint32(SQDrained), 1); err != nil {
		t.Fatal(err)
	}
	if err := h.r.Ack(ev); !errors.Is(err, uverbs.ErrInvalid) {
		t.Fatalf("Ack over the counter = %v", err)
	}
	if h.r.Unacked() != 1 {
		t.Fatalf("refused Ack still removed the event: Unacked = %d", h.r.Unacked())
	}
}
