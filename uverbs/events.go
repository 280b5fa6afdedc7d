package uverbs

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// EventType is an asynchronous event type (enum ibv_event_type,
// ibv_get_async_event(3)). The numbers are the kernel's IB_EVENT_* values,
// which the uverbs ABI passes through unchanged.
type EventType uint32

// Event types, as listed in ibv_get_async_event(3).
const (
	EventCQErr             EventType = 0
	EventQPFatal           EventType = 1
	EventQPReqErr          EventType = 2
	EventQPAccessErr       EventType = 3
	EventCommEst           EventType = 4
	EventSQDrained         EventType = 5
	EventPathMig           EventType = 6
	EventPathMigErr        EventType = 7
	EventDeviceFatal       EventType = 8
	EventPortActive        EventType = 9
	EventPortErr           EventType = 10
	EventLIDChange         EventType = 11
	EventPKeyChange        EventType = 12
	EventSMChange          EventType = 13
	EventSRQErr            EventType = 14
	EventSRQLimitReached   EventType = 15
	EventQPLastWQEReached  EventType = 16
	EventClientReregister  EventType = 17
	EventGIDChange         EventType = 18
	EventWQFatal           EventType = 19
	EventDeviceSpeedChange EventType = 20
)

var eventNames = [...]string{
	"IBV_EVENT_CQ_ERR",
	"IBV_EVENT_QP_FATAL",
	"IBV_EVENT_QP_REQ_ERR",
	"IBV_EVENT_QP_ACCESS_ERR",
	"IBV_EVENT_COMM_EST",
	"IBV_EVENT_SQ_DRAINED",
	"IBV_EVENT_PATH_MIG",
	"IBV_EVENT_PATH_MIG_ERR",
	"IBV_EVENT_DEVICE_FATAL",
	"IBV_EVENT_PORT_ACTIVE",
	"IBV_EVENT_PORT_ERR",
	"IBV_EVENT_LID_CHANGE",
	"IBV_EVENT_PKEY_CHANGE",
	"IBV_EVENT_SM_CHANGE",
	"IBV_EVENT_SRQ_ERR",
	"IBV_EVENT_SRQ_LIMIT_REACHED",
	"IBV_EVENT_QP_LAST_WQE_REACHED",
	"IBV_EVENT_CLIENT_REREGISTER",
	"IBV_EVENT_GID_CHANGE",
	"IBV_EVENT_WQ_FATAL",
	"IBV_EVENT_DEVICE_SPEED_CHANGE",
}

// String returns the IBV_EVENT_* name, or "IBV_EVENT_UNKNOWN(n)" for a
// type this library does not know (e.g. from a newer kernel).
func (t EventType) String() string {
	if int(t) < len(eventNames) {
		return eventNames[t]
	}
	return "IBV_EVENT_UNKNOWN(" + strconv.FormatUint(uint64(t), 10) + ")"
}

// Known reports whether t is one of the types listed above.
func (t EventType) Known() bool { return int(t) < len(eventNames) }

// ElementKind says what an event's element refers to.
type ElementKind int

const (
	ElementPort   ElementKind = iota // port events: the element is a port number
	ElementDevice                    // DEVICE_FATAL and unknown types
	ElementCQ
	ElementQP
	ElementSRQ
	ElementWQ
)

var elementNames = [...]string{"port", "device", "cq", "qp", "srq", "wq"}

func (k ElementKind) String() string {
	if int(k) < len(elementNames) && k >= 0 {
		return elementNames[k]
	}
	return "element(" + strconv.Itoa(int(k)) + ")"
}

// Element returns the kind of element the kernel reports for t, following
// libibverbs' ibv_get_async_event.
func (t EventType) Element() ElementKind {
	switch t {
	case EventCQErr:
		return ElementCQ
	case EventQPFatal, EventQPReqErr, EventQPAccessErr, EventCommEst,
		EventSQDrained, EventPathMig, EventPathMigErr, EventQPLastWQEReached:
		return ElementQP
	case EventSRQErr, EventSRQLimitReached:
		return ElementSRQ
	case EventWQFatal:
		return ElementWQ
	case EventPortActive, EventPortErr, EventLIDChange, EventPKeyChange,
		EventSMChange, EventClientReregister, EventGIDChange:
		return ElementPort
	}
	return ElementDevice
}

// Affiliated is implemented by the objects that affiliated async events
// (and completion events) refer to: CQ, QP, SRQ and WQ. The kernel
// reports such events with the object's user handle, which the Context
// maps back to the object.
type Affiliated interface {
	// UserHandle is the 64-bit value given to the kernel at creation.
	UserHandle() uint64
	// Kind returns ElementCQ, ElementQP, ElementSRQ or ElementWQ.
	Kind() ElementKind
	// EventCounts returns the object's delivered/acked bookkeeping.
	EventCounts() *EventCounts
}

// CountKind selects one of an object's event counters.
type CountKind int

const (
	AsyncEvents CountKind = iota // affiliated async events
	CompEvents                   // completion-channel events (CQs only)
)

// EventCounts tracks, for one object, how many events were handed to the
// application and how many it acknowledged, so that destroying the object
// can wait, as libibverbs does, until every event the kernel reports as
// read has been acknowledged.
type EventCounts struct {
	mu        sync.Mutex
	changed   chan struct{} // closed and replaced on every ack
	delivered [2]uint32
	acked     [2]uint32
	pending   []EventType // async event types delivered but not acked
	abandoned bool
	onAbandon func() // releases the object's mappings when its Context closes
}

// Delivered records that one event of kind k (async events also pass their
// type) was handed to the application.
func (e *EventCounts) Delivered(k CountKind, t EventType) {
	if e == nil || !k.valid() {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.delivered[k]++
	if k == AsyncEvents {
		e.pending = append(e.pending, t)
	}
}

func (k CountKind) valid() bool { return k == AsyncEvents || k == CompEvents }

// Ack records n acknowledgements of kind k. It fails, changing nothing,
// when that would acknowledge more events than were delivered.
func (e *EventCounts) Ack(k CountKind, t EventType, n uint32) error {
	if e == nil || !k.valid() {
		return fmt.Errorf("%w: event counter %d", ErrInvalid, int(k))
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.acked[k]+n > e.delivered[k] || e.acked[k]+n < e.acked[k] {
		return fmt.Errorf("%w: acknowledging %d events but only %d of %d delivered are unacknowledged",
			ErrInvalid, n, e.delivered[k]-e.acked[k], e.delivered[k])
	}
	e.acked[k] += n
	if k == AsyncEvents {
		for m := n; m > 0; m-- {
			i := slices.Index(e.pending, t)
			if i < 0 {
				break
			}
			e.pending = slices.Delete(e.pending, i, i+1)
		}
	}
	if e.changed != nil {
		close(e.changed)
		e.changed = nil
	}
	return nil
}

// Counts returns delivered and acked for kind k.
func (e *EventCounts) Counts(k CountKind) (delivered, acked uint32) {
	if e == nil || !k.valid() {
		return 0, 0
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.delivered[k], e.acked[k]
}

// abandon is called by Context.Close for every live object: waiters are
// released and the object's close hook runs (once).
func (e *EventCounts) abandon() {
	e.mu.Lock()
	e.abandoned = true
	if e.changed != nil {
		close(e.changed)
		e.changed = nil
	}
	f := e.onAbandon
	e.onAbandon = nil
	e.mu.Unlock()
	if f != nil {
		f()
	}
}

// UnackedError is returned when a destroy gives up waiting for events to be
// acknowledged. The object has been destroyed in the kernel regardless.
type UnackedError struct {
	Object  string
	Async   uint32      // async events read but not acknowledged
	Comp    uint32      // completion events read but not acknowledged
	Pending []EventType // their types, oldest first
	Err     error       // the context's error
}

func (u *UnackedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "uverbs: destroy %s: %d async and %d completion events still unacknowledged", u.Object, u.Async, u.Comp)
	if len(u.Pending) > 0 {
		b.WriteString(" (")
		for i, p := range u.Pending {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(p.String())
		}
		b.WriteString(")")
	}
	fmt.Fprintf(&b, ": %v", u.Err)
	return b.String()
}

func (u *UnackedError) Unwrap() error { return u.Err }

// WaitAcked blocks until the application has acknowledged asyncReported
// async and compReported completion events (the counts the kernel returns
// from destroy), or ctx ends, in which case it returns an *UnackedError
// naming what is still outstanding.
func (e *EventCounts) WaitAcked(ctx context.Context, object string, asyncReported, compReported uint32) error {
	for {
		e.mu.Lock()
		if e.abandoned || (e.acked[AsyncEvents] >= asyncReported && e.acked[CompEvents] >= compReported) {
			e.mu.Unlock()
			return nil
		}
		if e.changed == nil {
			e.changed = make(chan struct{})
		}
		ch := e.changed
		e.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			e.mu.Lock()
			u := &UnackedError{Object: object, Err: ctx.Err(), Pending: append([]EventType(nil), e.pending...)}
			if asyncReported > e.acked[AsyncEvents] {
				u.Async = asyncReported - e.acked[AsyncEvents]
			}
			if compReported > e.acked[CompEvents] {
				u.Comp = compReported - e.acked[CompEvents]
			}
			e.mu.Unlock()
			return u
		}
	}
}

// Register assigns obj's user handle space: it returns a fresh non-zero
// user handle under which obj will be found by Lookup. Object constructors
// call it before the create command, and Unregister after destroy.
func (c *Context) NewUserHandle() (uint64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, ErrClosed
	}
	c.nextUH++
	return c.nextUH, nil
}

// Register makes obj findable by its user handle.
func (c *Context) Register(obj Affiliated) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	c.objects[obj.UserHandle()] = obj
	return nil
}

// Unregister forgets obj.
func (c *Context) Unregister(obj Affiliated) {
	c.mu.Lock()
	if c.objects[obj.UserHandle()] == obj {
		delete(c.objects, obj.UserHandle())
	}
	c.mu.Unlock()
}

// Lookup returns the live object registered under a user handle.
func (c *Context) Lookup(userHandle uint64) (Affiliated, bool) {
	c.mu.Lock()
	o, ok := c.objects[userHandle]
	c.mu.Unlock()
	return o, ok
}
