// Package rdmacm sets up RDMA connections through the kernel's RDMA
// connection manager, as librdmacm does (rdma_cm(7)), in pure Go: the
// commands and events of /dev/infiniband/rdma_cm (the rdma_ucm module)
// drive address and route resolution and the connection handshake, and
// the QPs are pureverbs' own (package uverbs).
//
// It covers reliable connections (PortSpaceTCP or PortSpaceIB, RC QPs),
// datagram exchanges (PortSpaceUDP, or PortSpaceIB through CreateIDType:
// UD QPs; the IB CM's SIDR request and reply give the client the server's
// QP number, Q_Key and address vector, Event.UD) and multicast groups
// (JoinMulticast) over IPv4 and IPv6 addresses, on an asynchronous
// EventChannel as in rdma_create_event_channel(3):
//
//	active side                                 passive side
//	ch.CreateID(PortSpaceTCP)                   ch.CreateID(PortSpaceTCP)
//	id.ResolveAddr(netip.AddrPort{}, dst, 2s)   id.BindAddr(addr); id.Listen(n)
//	  -> EventAddrResolved                      ...
//	id.ResolveRoute(2s)                           -> EventConnectRequest (ev.ID new)
//	  -> EventRouteResolved                     ev.ID.CreateQP(pd, attr)
//	id.CreateQP(pd, attr)                       ev.ID.Accept(nil)
//	id.Connect(nil)                               -> EventEstablished
//	  -> EventEstablished
//	id.Disconnect()  -> EventDisconnected on both sides
//	id.Destroy()
//
// As librdmacm does, the channel moves an ID's QP through INIT, RTR and
// RTS with the attributes the kernel's connection manager gives
// (rdma_init_qp_attr(3)), sends the RTU of an active connection when the
// reply arrives (reporting EventEstablished, not the raw
// CONNECT_RESPONSE, which only an ID without a QP gets: see Connect),
// and moves the QP to ERR on a reject or disconnect.
// Events are values: nothing needs acknowledging (rdma_ack_cm_event).
//
// One uverbs.Context is opened per RDMA device the IDs are bound to
// (ID.Context), shared by every channel of the process and closed with
// the last of them, as librdmacm keeps one ibv_context per device.
//
// Endpoint is the synchronous style of rdma_create_ep(3): CreateEP
// resolves within the call and makes the QP, GetRequest, Connect,
// Accept and Disconnect return once their event has come, and
// rdma_verbs.h's helpers
// post and wait for completions; see ExampleCreateEP.
package rdmacm

import (
	"errors"
	"fmt"
	"strings"

	"github.com/pureverbs/pureverbs/abi"
	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/uverbs"
)

// Sentinel errors: uverbs' own, so that errors.Is works alike for both
// packages. Kernel failures wrap the errno (errors.Is(err, unix.EADDRINUSE)).
var (
	ErrClosed       = uverbs.ErrClosed
	ErrInvalid      = uverbs.ErrInvalid
	ErrNotSupported = uverbs.ErrNotSupported
	ErrNoDevice     = uverbs.ErrNoDevice
)

// OpError records a failed rdma_cm operation.
type OpError struct {
	Op  string // "create_id", "resolve_addr", "connect", ...
	Err error
}

// Error returns "rdmacm: <op>: <error>", the error's own "rdmacm: " or
// "uverbs: " left out ("rdmacm: get_event: use of closed object").
func (e *OpError) Error() string {
	msg := fmt.Sprint(e.Err)
	if m, ok := strings.CutPrefix(msg, "rdmacm: "); ok {
		msg = m
	} else {
		msg = strings.TrimPrefix(msg, "uverbs: ")
	}
	return "rdmacm: " + e.Op + ": " + msg
}

// Unwrap returns Err, so that errors.Is matches the errno.
func (e *OpError) Unwrap() error { return e.Err }

func opErr(op string, err error) error {
	if err == nil {
		return nil
	}
	var oe *OpError
	if errors.As(err, &oe) {
		return err
	}
	return &OpError{Op: op, Err: err}
}

// invalid is an argument refused before any system call: ErrInvalid, and
// EINVAL as librdmacm sets errno for it.
func invalid(op, format string, args ...any) error {
	return &OpError{Op: op, Err: invalidArg(fmt.Sprintf(format, args...))}
}

type invalidArg string

func (e invalidArg) Error() string   { return ErrInvalid.Error() + ": " + string(e) }
func (e invalidArg) Is(t error) bool { return t == ErrInvalid || t == sys.EINVAL }

// PortSpace is an rdma_cm port space (enum rdma_port_space).
type PortSpace uint16

const (
	PortSpaceTCP PortSpace = abi.RDMA_PS_TCP // reliable connections (RC QPs)
	PortSpaceUDP PortSpace = abi.RDMA_PS_UDP // datagrams (UD QPs); "connecting" is the IB CM's SIDR exchange
	PortSpaceIB  PortSpace = abi.RDMA_PS_IB  // the IB port space: RC by default, UD through CreateIDType (rdma_create_id2)
	// PortSpaceIPoIB is IPoIB's (UD QPs). The kernel's connection
	// manager takes the Q_Key of its QPs from the IPoIB broadcast
	// group's SA record, so on RoCE devices (rxe), which have no SA, a
	// QP cannot be made in it; IDs and multicast joins can.
	PortSpaceIPoIB PortSpace = abi.RDMA_PS_IPOIB
)

// EventType is an rdma_cm event (enum rdma_cm_event_type, librdmacm's
// rdma_cma.h; the kernel's include/rdma/rdma_cm.h has the same values).
type EventType uint32

// Event types, the values of enum rdma_cm_event_type (RDMA_CM_EVENT_*).
const (
	EventAddrResolved    EventType = 0
	EventAddrError       EventType = 1
	EventRouteResolved   EventType = 2
	EventRouteError      EventType = 3
	EventConnectRequest  EventType = 4
	EventConnectResponse EventType = 5 // returned only for an ID without a QP: with one the channel completes it (EventEstablished)
	EventConnectError    EventType = 6
	EventUnreachable     EventType = 7
	EventRejected        EventType = 8
	EventEstablished     EventType = 9
	EventDisconnected    EventType = 10
	EventDeviceRemoval   EventType = 11
	EventMulticastJoin   EventType = 12
	EventMulticastError  EventType = 13
	EventAddrChange      EventType = 14
	EventTimewaitExit    EventType = 15
)

var eventNames = [...]string{
	"RDMA_CM_EVENT_ADDR_RESOLVED", "RDMA_CM_EVENT_ADDR_ERROR", "RDMA_CM_EVENT_ROUTE_RESOLVED",
	"RDMA_CM_EVENT_ROUTE_ERROR", "RDMA_CM_EVENT_CONNECT_REQUEST", "RDMA_CM_EVENT_CONNECT_RESPONSE",
	"RDMA_CM_EVENT_CONNECT_ERROR", "RDMA_CM_EVENT_UNREACHABLE", "RDMA_CM_EVENT_REJECTED",
	"RDMA_CM_EVENT_ESTABLISHED", "RDMA_CM_EVENT_DISCONNECTED", "RDMA_CM_EVENT_DEVICE_REMOVAL",
	"RDMA_CM_EVENT_MULTICAST_JOIN", "RDMA_CM_EVENT_MULTICAST_ERROR", "RDMA_CM_EVENT_ADDR_CHANGE",
	"RDMA_CM_EVENT_TIMEWAIT_EXIT",
}

// String returns librdmacm's name (rdma_event_str(3)).
func (t EventType) String() string {
	if int(t) < len(eventNames) {
		return eventNames[t]
	}
	return fmt.Sprintf("RDMA_CM_EVENT_%d", uint32(t))
}

// ConnParam is what a Connect or Accept offers (struct rdma_conn_param).
// ResponderResources and InitiatorDepth of 0xff mean the device's
// maximum, as RDMA_MAX_RESP_RES and RDMA_MAX_INIT_DEPTH do; a nil
// *ConnParam means those maxima, 7 retries of each kind and no private
// data, as a NULL conn_param does.
type ConnParam struct {
	PrivateData        []byte // at most 56 bytes on a connect, 196 on an accept (IB CM limits); for a UD ID 180 and 136 (SIDR's)
	ResponderResources uint8
	InitiatorDepth     uint8
	FlowControl        uint8
	RetryCount         uint8
	RNRRetryCount      uint8
	// In a received event: the peer's QP number and whether it uses an
	// SRQ. On Connect or Accept of an ID without a QP: the caller's own
	// QP, which it moves itself (see Establish).
	SRQ   bool
	QPNum uint32
}

// UDParam is what a UD ID's connect request or established
// event carries (struct rdma_ud_param): on EventEstablished the peer's QP
// number and Q_Key and the address vector to reach it (pd.CreateAH(AH)).
type UDParam struct {
	PrivateData []byte
	AH          uverbs.AHAttr
	QPNum       uint32
	QKey        uint32
}

// Event is one rdma_cm event (struct rdma_cm_event).
type Event struct {
	Type EventType
	// Status is the kernel's status: 0, a negative errno (EventAddrError:
	// -ETIMEDOUT, ...), or for EventRejected the IB CM reject reason
	// (28: consumer reject, 8: invalid service ID, no listener). It is -1
	// when the kernel's event succeeded but what the channel does with it
	// failed (the address query of a resolution, the QP's moves of a
	// connect response, the QP's attach of a multicast join), as
	// librdmacm's status is its return with errno set; Err then says why.
	Status int32
	// Err is the failure behind a Status of -1 (it wraps the errno).
	Err    error
	ID     *ID // the ID the event is for; for EventConnectRequest a new ID
	Listen *ID // for EventConnectRequest: the listening ID
	Param  ConnParam
	UD     UDParam // instead of Param for UD IDs
	// Multicast is the membership of EventMulticastJoin and
	// EventMulticastError.
	Multicast *Multicast

	buf   []byte // what Param.PrivateData or UD.PrivateData is a prefix of
	bufOf *Event // the Event buf belongs to: a copy's is not its own
}

// String returns the event's type and status, e.g.
// "RDMA_CM_EVENT_ESTABLISHED status 0".
func (e *Event) String() string {
	if e == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%v status %d", e.Type, e.Status)
}
