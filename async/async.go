// Package async reads a device's asynchronous events: the Go counterpart of
// ibv_get_async_event(3) and ibv_ack_async_event(3).
//
// A Reader delivers each event the kernel queues on the context's async
// event fd to exactly one caller of Get (or TryGet), maps the kernel's
// element back to the Go object it concerns (CQ, QP, SRQ), the port
// number, or the device, and tracks acknowledgements: every event returned
// must be passed to Ack, and destroying a CQ, QP or SRQ waits until all
// of its events that were read have been acknowledged. Work queues
// (ibv_create_wq(3)) are not supported yet: an IBV_EVENT_WQ_FATAL could
// only name a WQ this library did not create, and comes with no object.
package async

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"sync"

	"github.com/pureverbs/pureverbs/internal/core"
	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/uverbs"
)

// EventType is enum ibv_event_type; String gives the IBV_EVENT_* name.
type EventType = uverbs.EventType

// Event types (ibv_get_async_event(3)).
const (
	CQErr             = uverbs.EventCQErr
	QPFatal           = uverbs.EventQPFatal
	QPReqErr          = uverbs.EventQPReqErr
	QPAccessErr       = uverbs.EventQPAccessErr
	CommEst           = uverbs.EventCommEst
	SQDrained         = uverbs.EventSQDrained
	PathMig           = uverbs.EventPathMig
	PathMigErr        = uverbs.EventPathMigErr
	DeviceFatal       = uverbs.EventDeviceFatal
	PortActive        = uverbs.EventPortActive
	PortErr           = uverbs.EventPortErr
	LIDChange         = uverbs.EventLIDChange
	PKeyChange        = uverbs.EventPKeyChange
	SMChange          = uverbs.EventSMChange
	SRQErr            = uverbs.EventSRQErr
	SRQLimitReached   = uverbs.EventSRQLimitReached
	QPLastWQEReached  = uverbs.EventQPLastWQEReached
	ClientReregister  = uverbs.EventClientReregister
	GIDChange         = uverbs.EventGIDChange
	WQFatal           = uverbs.EventWQFatal
	DeviceSpeedChange = uverbs.EventDeviceSpeedChange
)

// RecordSize is the size of struct ib_uverbs_async_event_desc, the record
// the kernel returns for each read of the async event fd.
const RecordSize = 16

var (
	// ErrNoEvent is returned by TryGet when no event is queued. It also
	// matches unix.EAGAIN.
	ErrNoEvent error = noEvent{}
	// ErrAlreadyAcked is returned by Ack for an event acknowledged before.
	ErrAlreadyAcked = fmt.Errorf("%w: async event already acknowledged", uverbs.ErrInvalid)
	// ErrForeignEvent is returned by Ack for an event this Reader did not
	// return (the zero Event, or one from another Reader).
	ErrForeignEvent = fmt.Errorf("%w: async event does not belong to this reader", uverbs.ErrInvalid)
	// ErrShortRecord is returned when the kernel hands back fewer bytes
	// than an event record. It matches uverbs.ErrInvalid and unix.EINVAL,
	// as devx.ErrShortRecord does.
	ErrShortRecord error = shortRecord{}
)

type shortRecord struct{}

func (shortRecord) Error() string { return "async: short event record" }
func (shortRecord) Is(target error) bool {
	return target == sys.EINVAL || target == uverbs.ErrInvalid
}

type noEvent struct{}

func (noEvent) Error() string        { return "async: no event queued" }
func (noEvent) Is(target error) bool { return target == sys.EAGAIN }
func (noEvent) Unwrap() error        { return nil }

// Event is one asynchronous event (struct ibv_async_event).
type Event struct {
	// Type is the event type.
	Type EventType
	// Element is the CQ, QP or SRQ an affiliated event concerns, or nil:
	// for port and device events, for WQ events (this library creates no
	// WQs, so their events come with no object), and when the object is
	// unknown to this process (never created through this library, or
	// destroyed).
	Element uverbs.Affiliated
	// Port is the element as a port number, as libibverbs fills
	// element.port_num: the port for port events (Type.Element() ==
	// uverbs.ElementPort), the kernel's value for device-level and
	// unknown events, 0 for affiliated events.
	Port int
	// Raw is the kernel's element value: the object's user handle for
	// affiliated events, the port number for port events.
	Raw uint64

	seq    uint64
	reader *Reader
}

// String formats the event for people: port events as ibv_asyncwatch
// prints them ("IBV_EVENT_PORT_ACTIVE (9), port 1"), affiliated events with
// the object kind and user handle (a QP's with its number too:
// "IBV_EVENT_QP_FATAL (1), QP 0x11 (qp handle 19)"), device events with the
// type alone.
// (cmd/asyncwatch reproduces the C tool's exact output, including its
// "unexpected" names.)
func (e Event) String() string {
	switch e.Type.Element() {
	case uverbs.ElementPort:
		return fmt.Sprintf("%s (%d), port %d", e.Type, uint32(e.Type), e.Port)
	case uverbs.ElementCQ, uverbs.ElementQP, uverbs.ElementSRQ, uverbs.ElementWQ:
		if qp, ok := e.Element.(*uverbs.QP); ok && qp != nil {
			return fmt.Sprintf("%s (%d), QP %#x (qp handle %d)", e.Type, uint32(e.Type), qp.QPN(), e.Raw)
		}
		return fmt.Sprintf("%s (%d), %s handle %d", e.Type, uint32(e.Type), e.Type.Element(), e.Raw)
	}
	return fmt.Sprintf("%s (%d)", e.Type, uint32(e.Type))
}

// Decode parses one ib_uverbs_async_event_desc record. It allocates
// nothing and never panics; a record shorter than RecordSize is an error.
func Decode(rec []byte) (typ EventType, element uint64, err error) {
	if len(rec) < RecordSize {
		return 0, 0, fmt.Errorf("%w: %d bytes, want %d", ErrShortRecord, len(rec), RecordSize)
	}
	element = binary.LittleEndian.Uint64(rec[0:8])
	typ = EventType(binary.LittleEndian.Uint32(rec[8:12]))
	return typ, element, nil
}

// Reader reads the async events of one Context.
type Reader struct {
	file    *sys.EventFile
	objects *core.Registry[uverbs.Affiliated]
	closed  func() bool

	mu          sync.Mutex
	seq         uint64
	outstanding map[uint64]*core.Counts // unacknowledged events
}

// NewReader returns a reader of c's asynchronous events. Create one per
// Context: each event goes to one Reader, and must be acknowledged there.
func NewReader(c *uverbs.Context) (*Reader, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: nil *uverbs.Context", uverbs.ErrInvalid)
	}
	sh, ok := core.Of(c)
	if !ok || c.Closed() {
		return nil, uverbs.ErrClosed
	}
	reg, ok := sh.Objects.(*core.Registry[uverbs.Affiliated])
	if !ok {
		return nil, fmt.Errorf("%w: context has no object registry", uverbs.ErrInvalid)
	}
	f, err := sh.AsyncFile()
	if err != nil {
		return nil, err
	}
	return newReader(f, reg, sh.Closed), nil
}

func newReader(f *sys.EventFile, objects *core.Registry[uverbs.Affiliated], closed func() bool) *Reader {
	return &Reader{file: f, objects: objects, closed: closed, outstanding: map[uint64]*core.Counts{}}
}

var recPool = sync.Pool{New: func() any { return new([RecordSize]byte) }}

// Fd returns the async event descriptor for the caller's own poll/epoll
// loop, as ctx->async_fd in the ibv_get_async_event(3) example, or -1
// after the Context closed. It is already non-blocking (libibverbs' is
// blocking until the application sets O_NONBLOCK, as the man page's
// example does); when it polls readable, call TryGet. Do not switch it to
// blocking with fcntl(2): TryGet would then block an OS thread, and Get
// and Context.Close could wait for a read that never returns.
func (r *Reader) Fd() int {
	if r == nil || r.file == nil {
		return -1
	}
	return r.file.Fd()
}

// errNilReader is returned by the methods of a nil or zero Reader.
var errNilReader = fmt.Errorf("%w: nil async.Reader (use NewReader)", uverbs.ErrInvalid)

// Get waits for the next event, parking the goroutine on the runtime
// poller, and returns it (ibv_get_async_event(3)). It returns ctx.Err()
// when ctx ends (once an event is read, it is returned even if ctx ends
// while it waits for the create of the object it names, as TryGet
// says), and an error matching uverbs.ErrClosed once the Context is
// closed. Several goroutines may call Get at once; each event is
// returned to exactly one of them.
func (r *Reader) Get(ctx context.Context) (Event, error) {
	if r == nil || r.file == nil {
		return Event{}, errNilReader
	}
	if ctx == nil {
		return Event{}, fmt.Errorf("%w: nil context", uverbs.ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return Event{}, err // an ended context takes nothing, even if queued
	}
	buf := recPool.Get().(*[RecordSize]byte)
	defer recPool.Put(buf)
	n, err := r.file.Read(ctx, buf[:])
	if err != nil {
		return Event{}, r.readErr(err)
	}
	return r.deliver(buf[:n])
}

// TryGet returns the next queued event without blocking, or ErrNoEvent
// (which matches unix.EAGAIN) when there is none (ibv_get_async_event(3)
// on a non-blocking async_fd). It does not wait for an event, but an
// event that names an object whose create is still in flight in another
// goroutine (its handle reserved, the object not yet published) waits
// for that create to finish or fail, as Get does: one kernel command and
// its ring mapping, not an unbounded wait.
func (r *Reader) TryGet() (Event, error) {
	if r == nil || r.file == nil {
		return Event{}, errNilReader
	}
	buf := recPool.Get().(*[RecordSize]byte)
	defer recPool.Put(buf)
	n, err := r.file.TryRead(buf[:])
	if err != nil {
		return Event{}, r.readErr(err)
	}
	return r.deliver(buf[:n])
}

func (r *Reader) readErr(err error) error {
	switch {
	case err == sys.EAGAIN:
		return ErrNoEvent
	case errors.Is(err, sys.ErrFileClosed):
		return fmt.Errorf("async: get event: %w", uverbs.ErrClosed)
	case err == context.Canceled || err == context.DeadlineExceeded:
		return err
	}
	return &uverbs.OpError{Object: "async_event", Method: "read", Err: err}
}

func (r *Reader) deliver(rec []byte) (Event, error) {
	typ, elem, err := Decode(rec)
	if err != nil {
		return Event{}, err
	}
	ev := Event{Type: typ, Raw: elem, reader: r}
	var counts *core.Counts
	switch typ.Element() {
	case uverbs.ElementPort, uverbs.ElementDevice:
		ev.Port = int(uint32(elem))
	case uverbs.ElementCQ, uverbs.ElementQP, uverbs.ElementSRQ, uverbs.ElementWQ:
		// Lookup waits while the object is still being created, so an
		// event of a new object is never dropped uncounted.
		if obj, c, ok := r.objects.Lookup(elem); ok {
			ev.Element = obj
			counts = c
			counts.Delivered(core.AsyncEvents, uint32(typ))
		}
	}
	r.mu.Lock()
	r.seq++
	ev.seq = r.seq
	r.outstanding[ev.seq] = counts
	r.mu.Unlock()
	return ev, nil
}

// Ack acknowledges ev (ibv_ack_async_event(3)). Every event returned by Get
// or TryGet must be acknowledged exactly once; destroying the object an
// event concerns waits for it. Acknowledging an event twice, an event from
// another Reader, or after the Context was closed, returns an error and
// changes nothing.
func (r *Reader) Ack(ev Event) error {
	if r == nil || ev.reader != r || ev.seq == 0 {
		return ErrForeignEvent
	}
	if r.closed() {
		return fmt.Errorf("async: ack: %w", uverbs.ErrClosed)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	counts, ok := r.outstanding[ev.seq]
	if !ok {
		return ErrAlreadyAcked
	}
	if counts != nil {
		if err := counts.Ack(core.AsyncEvents, uint32(ev.Type), 1); err != nil {
			// nothing changed: the event stays outstanding
			return fmt.Errorf("%w: %w", uverbs.ErrInvalid, err)
		}
	}
	delete(r.outstanding, ev.seq)
	return nil
}

// Unacked returns how many events this reader returned that were not yet
// acknowledged.
func (r *Reader) Unacked() int {
	if r == nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.outstanding)
}

// All returns an iterator over events as they arrive; it stops when ctx
// ends or the Context closes, yielding that error last (ctx ending ends the
// iteration quietly). The caller still acknowledges each event.
func (r *Reader) All(ctx context.Context) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		for {
			ev, err := r.Get(ctx)
			if err != nil {
				if ctx == nil || ctx.Err() == nil { // Get refused a nil ctx
					yield(Event{}, err)
				}
				return
			}
			if !yield(ev, nil) {
				return
			}
		}
	}
}
