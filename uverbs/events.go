package uverbs

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/pureverbs/pureverbs/internal/core"
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
// type this library does not know (e.g. from a newer kernel). These are
// the names ibv_asyncwatch prints; libibverbs' ibv_event_type_str(3)
// returns a description ("port active") instead.
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

// Element kinds: what the element of struct ibv_async_event names for
// each event type.
const (
	ElementPort   ElementKind = iota // port events: the element is a port number
	ElementDevice                    // DEVICE_FATAL and unknown types
	ElementCQ
	ElementQP
	ElementSRQ
	ElementWQ
)

var elementNames = [...]string{"port", "device", "cq", "qp", "srq", "wq"}

// String returns "port", "device", "cq", "qp", "srq" or "wq", or
// "element(n)" for other values.
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
// (and completion events) refer to: CQ, QP and SRQ (ibv_create_wq(3)'s
// WQ is not supported yet; ElementWQ names the kind of element an
// IBV_EVENT_WQ_FATAL carries). The kernel reports such events with the
// object's user handle, which the Context maps back to the object.
type Affiliated interface {
	// UserHandle is the 64-bit value given to the kernel at creation.
	UserHandle() uint64
	// Kind returns ElementCQ, ElementQP or ElementSRQ.
	Kind() ElementKind
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

// Error names the object, the counts of unacknowledged events and their
// types, and the context's error.
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

// Unwrap returns the context's error (ctx.Err():
// context.DeadlineExceeded or context.Canceled).
func (u *UnackedError) Unwrap() error { return u.Err }

// waitAcked waits, bounded by ctx, until the events the kernel reported
// for a destroyed object are acknowledged.
func waitAcked(ctx context.Context, counts *core.Counts, object string, asyncReported, compReported uint32) error {
	u, err := counts.WaitAcked(ctx, asyncReported, compReported)
	if err == nil {
		return nil
	}
	ue := &UnackedError{Object: object, Async: u.Async, Comp: u.Comp, Err: err}
	for _, t := range u.Pending {
		ue.Pending = append(ue.Pending, EventType(t))
	}
	return ue
}
