package rdmacm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"net"
	"net/netip"
	"strconv"
	"sync"

	"github.com/pureverbs/pureverbs/abi"
	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/uverbs"
)

// EventChannel is an open /dev/infiniband/rdma_cm: the IDs created on it
// and their events (rdma_create_event_channel(3)). Its methods are safe
// for concurrent use; GetEvent takes one caller at a time.
type EventChannel struct {
	ucm *sys.UCM

	mu     sync.Mutex
	closed bool
	devs   map[string]*sharedDev // the device Contexts this channel's IDs use, by name
	byDev  map[devKey]string     // the device name of a GUID and index seen before
}

// Open opens an event channel (rdma_create_event_channel(3)): the rdma_cm
// device, O_CLOEXEC and non-blocking, on the Go runtime poller. Without
// the rdma_ucm module the error matches ErrNoDevice and ENOENT. Close it
// when done: the process keeps every open channel and its IDs in a
// registry (an ID can move between channels, see Migrate), so the
// garbage collector never closes a forgotten one.
func Open() (*EventChannel, error) { return OpenPath(sys.UCMPath) }

// OpenPath is Open on another device node (a container's bind mount). A
// path that is not the rdma_cm device (a regular file, /dev/null, a tty)
// is refused with an error matching ErrInvalid and ENOTTY. Nothing is
// written to a node whose device number is not a misc device's, nor, where
// sysfs names the rdma_cm's number, the rdma_cm's.
func OpenPath(path string) (*EventChannel, error) {
	// A regular file would take the commands as data, a tty would echo
	// them: look before opening. (A missing node gets open's own error
	// below.)
	if sys.NotUCMNode(path) {
		return nil, notUCM(path)
	}
	u, err := sys.OpenUCM(path)
	if err != nil {
		switch {
		case errors.Is(err, sys.ENOENT):
			err = fmt.Errorf("%w: %w (load the rdma_ucm module: modprobe rdma_ucm; in a container, pass the device with --device %s)", ErrNoDevice, err, path)
		case errors.Is(err, sys.EACCES):
			err = fmt.Errorf("%w (run as root, or give the user read/write access to %s)", err, path)
		}
		return nil, opErr("open", err)
	}
	// Another misc device, where sysfs does not say which is the
	// rdma_cm, is told apart by its answer: the rdma_cm refuses a
	// command number past its table with EINVAL before anything else.
	if err := u.Command(^uint32(0), nil, -1, nil); !errors.Is(err, sys.EINVAL) {
		u.Close()
		return nil, notUCM(path)
	}
	return newChannel(u), nil
}

// notUCM is OpenPath's error for a path that is not the rdma_cm device.
func notUCM(path string) error {
	return opErr("open", fmt.Errorf("%w: %s is not the rdma_cm device: %w", ErrInvalid, path, sys.ENOTTY))
}

// newChannel makes an open channel of u (owned).
func newChannel(u *sys.UCM) *EventChannel {
	ch := &EventChannel{ucm: u, devs: map[string]*sharedDev{}, byDev: map[devKey]string{}}
	reg.mu.Lock()
	reg.chans[ch] = struct{}{}
	reg.mu.Unlock()
	return ch
}

// valid is the check of every method: a channel of Open.
func (ch *EventChannel) valid(op string) error {
	if ch == nil || ch.ucm == nil {
		return invalid(op, "nil EventChannel (use Open)")
	}
	return nil
}

// Fd returns the channel's descriptor (non-blocking), readable when an
// event is queued, for the caller's own poll loop (then TryGetEvent); -1
// after Close (the number may name another file by then).
func (ch *EventChannel) Fd() int {
	if ch.valid("fd") != nil {
		return -1
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.closed {
		return -1
	}
	return ch.ucm.Fd()
}

// Close destroys the channel (rdma_destroy_event_channel(3)): the kernel
// destroys every ID still on it (not those migrated away), a blocked
// GetEvent returns ErrClosed, and the verbs Contexts of its IDs' devices
// are closed (their PDs, CQs and QPs with them) unless another open
// channel's IDs use them too: a device's Context is shared by every
// channel, as librdmacm shares one per device. Closing twice returns
// ErrClosed.
func (ch *EventChannel) Close() error {
	if err := ch.valid("close"); err != nil {
		return err
	}
	ch.mu.Lock()
	if ch.closed {
		ch.mu.Unlock()
		return opErr("close", ErrClosed)
	}
	ch.closed = true
	held := ch.devs
	ch.devs = nil
	ch.mu.Unlock()
	reg.mu.Lock()
	delete(reg.chans, ch)
	reg.mu.Unlock()
	// The fd first: its Close waits for a Migrate from this channel
	// that holds it, so that the IDs left here are the kernel's view.
	err := ch.ucm.Close()
	var mine []*ID
	reg.mu.Lock()
	for _, id := range reg.byUID { // by uid: a handle may be a newer ID's
		if id.channel() == ch {
			mine = append(mine, id)
		}
	}
	reg.mu.Unlock()
	for _, id := range mine {
		id.mu.Lock()
		id.dead = true
		id.mu.Unlock()
		unregister(id)
	}
	for _, d := range held {
		if derr := d.release(); err == nil {
			err = derr
		}
	}
	return opErr("close", err)
}

// commandIn sends one rdma_cm command whose request names an input
// buffer at argOff (sys.UCM.CommandIn).
func (ch *EventChannel) commandIn(op string, cmd uint32, req []byte, argOff int, arg []byte) error {
	err := ch.ucm.CommandIn(cmd, req, argOff, arg)
	if errors.Is(err, sys.ErrFileClosed) {
		err = ErrClosed
	}
	return opErr(op, err)
}

// command sends one rdma_cm command on the channel.
func (ch *EventChannel) command(op string, cmd uint32, req []byte, respOff int, resp []byte) error {
	err := ch.ucm.Command(cmd, req, respOff, resp)
	if errors.Is(err, sys.ErrFileClosed) {
		err = ErrClosed
	}
	return opErr(op, err)
}

// CreateID creates an ID in port space ps (rdma_create_id(3)) with the
// port space's QP type: RC in PortSpaceTCP and PortSpaceIB (whose service
// IDs differ from TCP's, so it reaches only PortSpaceIB listeners), UD in
// PortSpaceUDP and PortSpaceIPoIB. Other port spaces are ErrInvalid
// (EINVAL), as the kernel refuses them (ucma_get_qp_type).
func (ch *EventChannel) CreateID(ps PortSpace) (*ID, error) {
	if err := ch.valid("create_id"); err != nil {
		return nil, err
	}
	qpType := uverbs.QPTypeRC
	if ps == PortSpaceUDP || ps == PortSpaceIPoIB {
		qpType = uverbs.QPTypeUD
	}
	return ch.CreateIDType(ps, qpType)
}

// CreateIDType creates an ID in port space ps for QPs of type qpType
// (librdmacm's rdma_create_id2, which rdma_create_ep uses with
// rdma_getaddrinfo's result). Only PortSpaceIB lets the type be chosen
// (RC or UD, as the kernel's ucma_get_qp_type does); in the others it
// must be the port space's (RC for TCP, UD for UDP and IPoIB). A UD ID
// "connects" by the IB CM's SIDR exchange whatever its port space.
func (ch *EventChannel) CreateIDType(ps PortSpace, qpType uverbs.QPType) (*ID, error) {
	if err := ch.valid("create_id"); err != nil {
		return nil, err
	}
	switch ps {
	case PortSpaceTCP:
		if qpType != uverbs.QPTypeRC {
			return nil, invalid("create_id", "QP type %v in PortSpaceTCP (want RC)", qpType)
		}
	case PortSpaceUDP, PortSpaceIPoIB:
		if qpType != uverbs.QPTypeUD {
			return nil, invalid("create_id", "QP type %v in port space %#x (want UD)", qpType, uint16(ps))
		}
	case PortSpaceIB:
		if qpType != uverbs.QPTypeRC && qpType != uverbs.QPTypeUD {
			return nil, invalid("create_id", "QP type %v in PortSpaceIB (want RC or UD)", qpType)
		}
	default:
		return nil, invalid("create_id", "port space %#x (TCP 0x106, UDP 0x111, IPoIB 0x2 or IB 0x13F)", uint16(ps))
	}
	ch.mu.Lock()
	closed := ch.closed
	ch.mu.Unlock()
	if closed {
		return nil, opErr("create_id", ErrClosed)
	}
	uid := newUID()
	req := abi.RdmaUcmCreateId{Uid: uid, Ps: uint16(ps), QpType: uint8(qpType)}
	var resp abi.RdmaUcmCreateIdResp
	if err := ch.command("create_id", abi.RDMA_USER_CM_CMD_CREATE_ID, sys.AsBytes(&req), 8, sys.AsBytes(&resp)); err != nil {
		return nil, err
	}
	id, ok := ch.adopt(newID(ch, resp.Id, uid, ps, qpType))
	if !ok {
		return nil, opErr("create_id", ErrClosed)
	}
	return id, nil
}

// adopt registers an ID the kernel made on ch; false if ch closed
// meanwhile (the kernel destroyed the ID with the channel's file). Close
// marks the IDs registered before its scan dead, adopt those after.
func (ch *EventChannel) adopt(id *ID) (*ID, bool) {
	register(id)
	ch.mu.Lock()
	closed := ch.closed
	ch.mu.Unlock()
	if closed {
		id.abandon()
		return id, false
	}
	return id, true
}

// abandon marks an ID the kernel destroyed with a closed channel's file
// dead, and forgets it.
func (id *ID) abandon() {
	id.mu.Lock()
	id.dead = true
	id.mu.Unlock()
	unregister(id)
}

// GetEvent waits, parked on the runtime poller, for the next event on
// the channel (rdma_get_cm_event(3)); ctx bounds the wait. The channel
// handles what librdmacm handles before the caller sees the event: a
// connect request gets a new ID (Event.ID, with its device's Context),
// an address or route resolution updates the ID, a connect response on
// an ID with a QP moves the QP to RTR and RTS and completes the handshake
// (EventEstablished, or EventConnectError if that failed), a reject moves
// the QP to ERR. A nil ctx is refused (ErrInvalid); Close wakes the wait
// (ErrClosed).
func (ch *EventChannel) GetEvent(ctx context.Context) (Event, error) {
	var ev Event
	err := ch.GetEventInto(ctx, &ev)
	return ev, err
}

// GetEventInto is GetEvent into ev, reusing what ev holds: the private
// data of ev.Param or ev.UD is copied into a buffer of ev's own, allocated
// by the first event into ev that carries any and overwritten by the next
// GetEventInto or TryGetEventInto into ev (as librdmacm's private_data is
// valid until the event's ack); a copy of ev made before (ev2 := ev) keeps
// its bytes, as the copy gets a buffer of its own when it is reused. An
// event that needs no new ID allocates nothing. After an error ev holds
// nothing of use.
func (ch *EventChannel) GetEventInto(ctx context.Context, ev *Event) error {
	if err := ch.valid("get_event"); err != nil {
		return err
	}
	if ctx == nil {
		return invalid("get_event", "nil context.Context")
	}
	if ev == nil {
		return invalid("get_event", "nil *Event")
	}
	var resp abi.RdmaUcmEventResp
	for {
		if _, err := ch.ucm.GetEvent(ctx, sys.AsBytes(&resp)); err != nil {
			if errors.Is(err, sys.ErrFileClosed) {
				err = ErrClosed
			}
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return err
			}
			return opErr("get_event", err)
		}
		if ch.processInto(&resp, ev) {
			return nil
		}
	}
}

// TryGetEvent is GetEvent without the wait (rdma_get_cm_event(3) on a
// non-blocking channel): an error wrapping EAGAIN when no event is
// queued.
func (ch *EventChannel) TryGetEvent() (Event, error) {
	var ev Event
	err := ch.TryGetEventInto(&ev)
	return ev, err
}

// TryGetEventInto is TryGetEvent into ev, reusing its buffer as
// GetEventInto does.
func (ch *EventChannel) TryGetEventInto(ev *Event) error {
	if err := ch.valid("get_event"); err != nil {
		return err
	}
	if ev == nil {
		return invalid("get_event", "nil *Event")
	}
	var resp abi.RdmaUcmEventResp
	for {
		if _, err := ch.ucm.TryGetEvent(sys.AsBytes(&resp)); err != nil {
			if errors.Is(err, sys.ErrFileClosed) {
				err = ErrClosed
			}
			return opErr("get_event", err)
		}
		if ch.processInto(&resp, ev) {
			return nil
		}
	}
}

// process turns a kernel event into the caller's, as librdmacm's
// rdma_get_cm_event does; false drops it (an event for an ID this channel
// does not know).
func (ch *EventChannel) process(r *abi.RdmaUcmEventResp) (Event, bool) {
	var ev Event
	ok := ch.processInto(r, &ev)
	return ev, ok
}

// processInto is process into ev, whose private-data buffer it keeps.
func (ch *EventChannel) processInto(r *abi.RdmaUcmEventResp, ev *Event) bool {
	*ev = Event{Type: EventType(r.Event), Status: int32(r.Status), buf: ev.buf, bufOf: ev.bufOf}
	if ev.Type == EventConnectRequest {
		// The kernel names the listener by its uid only (resp.id is
		// the new ID's handle).
		reg.mu.Lock()
		listen := reg.byUID[r.Uid]
		reg.mu.Unlock()
		if listen == nil || r.Uid == 0 {
			ch.destroyHandle(r.Id)
			return false
		}
		id, ok := ch.adopt(newID(ch, r.Id, newUID(), listen.ps, listen.qpType))
		if !ok {
			return false
		}
		ev.ID, ev.Listen = id, listen
		id.param(ev, r)
		id.respRes, id.initDepth = ev.Param.ResponderResources, ev.Param.InitiatorDepth
		err := id.queryAddr()
		if errors.Is(err, sys.EINVAL) {
			// The kernel made the request's ID on the file the
			// listener was on when the request came; a Migrate of the
			// listener since moved the queued request, not its ID,
			// which takes commands only there.
			err = id.findChannel(ch)
		}
		if err != nil {
			// As librdmacm: the request is dropped and its ID destroyed.
			id.Destroy()
			return false
		}
		return true
	}
	if ev.Type == EventMulticastJoin || ev.Type == EventMulticastError {
		// Named by the membership's uid and handle.
		return ch.mcastEvent(ev, r)
	}
	id := lookup(ev.Type, r.Uid, r.Id)
	if id == nil {
		return false
	}
	ev.ID = id
	switch ev.Type {
	case EventAddrResolved:
		if err := id.heldQueryAddr(); err != nil {
			ev.failed(EventAddrError, err)
		}
	case EventRouteResolved:
		if err := id.heldQueryAddr(); err != nil {
			ev.failed(EventRouteError, err)
		}
	case EventConnectResponse:
		id.param(ev, r)
		if id.qp() != nil {
			if err := id.completeConnect(); err != nil {
				ev.failed(EventConnectError, err)
				id.connectError.Store(true)
			} else {
				ev.Type = EventEstablished
			}
		}
	case EventEstablished, EventDisconnected:
		if ev.Type == EventDisconnected && id.connectError.Load() {
			return false // the EventConnectError was its end
		}
		id.param(ev, r)
	case EventRejected, EventUnreachable, EventConnectError:
		if ev.Type == EventRejected && id.connectError.Load() {
			return false
		}
		id.param(ev, r)
		// Only a reject moves the QP to ERR, as rdma_get_cm_event does
		// (ucma_modify_qp_err); after UNREACHABLE or the kernel's
		// CONNECT_ERROR the QP stays as it was, its receives posted.
		if ev.Type == EventRejected && id.qpType != uverbs.QPTypeUD {
			id.toErr()
		}
	}
	return true
}

// findChannel finds the open channel other than ch whose file the
// kernel put the ID on, by asking each where the ID is bound, and leaves
// the ID on it.
func (id *ID) findChannel(ch *EventChannel) error {
	reg.mu.Lock()
	chans := make([]*EventChannel, 0, len(reg.chans))
	for c := range reg.chans {
		if c != ch {
			chans = append(chans, c)
		}
	}
	reg.mu.Unlock()
	for _, c := range chans {
		// Asked through c without moving the ID there first: a Close of
		// a channel tried in vain would otherwise take the ID for its own.
		if err := id.queryAddrOn(c); err == nil {
			// Moved under c.mu: a Close of c either comes after and
			// finds the ID there, or came before and the kernel
			// destroyed the ID with c's file.
			c.mu.Lock()
			closed := c.closed
			if !closed {
				id.chp.Store(c)
			}
			c.mu.Unlock()
			if closed {
				id.abandon()
				return opErr("query_addr", ErrClosed)
			}
			return nil
		}
	}
	return opErr("query_addr", sys.EINVAL)
}

// param decodes an event's parameters: a UD ID's as UDParam, others'
// as ConnParam. The private data is copied into ev's buffer, allocated
// once per Event (GetEventInto reuses it).
func (id *ID) param(ev *Event, r *abi.RdmaUcmEventResp) {
	if id.qpType != uverbs.QPTypeUD {
		c := r.Param.Conn()
		ev.Param = ConnParam{ResponderResources: c.ResponderResources, InitiatorDepth: c.InitiatorDepth,
			FlowControl: c.FlowControl, RetryCount: c.RetryCount, RNRRetryCount: c.RnrRetryCount,
			SRQ: c.Srq != 0, QPNum: c.QpNum}
		ev.Param.PrivateData = ev.private(c.PrivateData[:], c.PrivateDataLen)
		return
	}
	u := r.Param.Ud()
	ev.UD = UDParam{AH: ahFromKern(&u.AhAttr), QPNum: u.QpNum, QKey: u.Qkey}
	ev.UD.PrivateData = ev.private(u.PrivateData[:], u.PrivateDataLen)
}

// private copies the first n bytes of an event's private data into ev's
// buffer and returns them (nil for none).
func (ev *Event) private(data []byte, n uint8) []byte {
	if n == 0 {
		return nil
	}
	if ev.bufOf != ev {
		// No buffer yet, or a copy's: an Event copied from another
		// (ev2 := ev) must not overwrite the original's bytes.
		ev.buf, ev.bufOf = make([]byte, abi.RDMA_MAX_PRIVATE_DATA), ev
	}
	k := copy(ev.buf, data[:min(int(n), len(data))])
	return ev.buf[:k:k] // an append by the caller copies
}

// failed turns ev into a failure of the channel's own processing, as
// librdmacm reports one: Status -1 (its return, with errno set) and, here,
// the error in Err.
func (ev *Event) failed(typ EventType, err error) {
	ev.Type, ev.Status, ev.Err = typ, -1, err
}

// destroyHandle destroys a kernel ID this channel does not track.
func (ch *EventChannel) destroyHandle(h uint32) {
	req := abi.RdmaUcmDestroyId{Id: h}
	var resp abi.RdmaUcmDestroyIdResp
	ch.command("destroy_id", abi.RDMA_USER_CM_CMD_DESTROY_ID, sys.AsBytes(&req), 0, sys.AsBytes(&resp))
}

// context returns the Context on the device with node GUID guid (as the
// kernel reports it: big-endian) and index idx, shared by every channel,
// opening it on first use; the channel holds it until it closes.
func (ch *EventChannel) context(guid uint64, idx uint32) (*uverbs.Context, *uverbs.DeviceAttr, error) {
	key := devKey{guid, idx}
	ch.mu.Lock()
	if name, ok := ch.byDev[key]; ok && ch.devs != nil {
		if d := ch.devs[name]; d != nil {
			ch.mu.Unlock()
			return d.ctx, d.attr, nil
		}
	}
	ch.mu.Unlock()
	// First use of the device on this channel: list the devices (sysfs
	// and RDMA netlink), as librdmacm does once per process.
	list, err := uverbs.Devices()
	if err != nil {
		return nil, nil, err
	}
	want := bits.ReverseBytes64(guid)
	var dev *uverbs.Device
	for i := range list {
		if list[i].NodeGUID != want {
			continue
		}
		if dev == nil || list[i].Index == int(idx) {
			dev = &list[i]
		}
	}
	if dev == nil {
		return nil, nil, ErrNoDevice
	}
	d, err := acquireDev(*dev)
	if err != nil {
		return nil, nil, err
	}
	ch.mu.Lock()
	if ch.closed {
		ch.mu.Unlock()
		d.release()
		return nil, nil, ErrClosed
	}
	ch.byDev[key] = dev.Name
	if held := ch.devs[dev.Name]; held != nil {
		ch.mu.Unlock()
		d.release() // another call got there first
		return held.ctx, held.attr, nil
	}
	ch.devs[dev.Name] = d
	ch.mu.Unlock()
	return d.ctx, d.attr, nil
}

// Devices returns the verbs Context of every RDMA device, in the order
// uverbs.Devices lists them (rdma_get_devices(3)): the Contexts the IDs
// bound to those devices use (ID.Context), shared by every channel of the
// process, so that a PD, MR, CQ or SRQ made on one before any ID is bound
// serves the connections of a listener on that device. The channel holds
// them until its Close (rdma_free_devices: nothing to free here); a
// device that cannot be opened is left out, as librdmacm leaves it out.
// ErrNoDevice when there is none.
func (ch *EventChannel) Devices() ([]*uverbs.Context, error) {
	if err := ch.valid("get_devices"); err != nil {
		return nil, err
	}
	list, err := uverbs.Devices()
	if err != nil {
		return nil, opErr("get_devices", err)
	}
	var out []*uverbs.Context
	for _, dev := range list {
		ch.mu.Lock()
		closed := ch.closed
		held := ch.devs[dev.Name]
		ch.mu.Unlock()
		if closed {
			return nil, opErr("get_devices", ErrClosed)
		}
		if held != nil {
			out = append(out, held.ctx)
			continue
		}
		d, err := acquireDev(dev)
		if err != nil {
			continue
		}
		ch.mu.Lock()
		if ch.closed {
			ch.mu.Unlock()
			d.release()
			return nil, opErr("get_devices", ErrClosed)
		}
		if held := ch.devs[dev.Name]; held != nil {
			ch.mu.Unlock()
			d.release() // another call got there first
			out = append(out, held.ctx)
			continue
		}
		ch.devs[dev.Name] = d
		ch.mu.Unlock()
		out = append(out, d.ctx)
	}
	if len(out) == 0 {
		return nil, opErr("get_devices", ErrNoDevice)
	}
	return out, nil
}

// hold makes the channel hold the shared Context ctx (an ID moving onto
// it uses that device), if it does not already.
func (ch *EventChannel) hold(ctx *uverbs.Context) error {
	ch.mu.Lock()
	if ch.closed {
		ch.mu.Unlock()
		return ErrClosed
	}
	for _, d := range ch.devs {
		if d.ctx == ctx {
			ch.mu.Unlock()
			return nil
		}
	}
	ch.mu.Unlock()
	devs.mu.Lock()
	var d *sharedDev
	for _, x := range devs.m {
		if x.ctx == ctx {
			d = x
			d.refs++
		}
	}
	devs.mu.Unlock()
	if d == nil {
		return nil // its last channel closed: the ID's device is gone anyway
	}
	ch.mu.Lock()
	closed, had := ch.closed, ch.devs[d.name] != nil
	if !closed && !had {
		ch.devs[d.name] = d
	}
	ch.mu.Unlock()
	if closed || had {
		d.release()
	}
	if closed {
		return ErrClosed
	}
	return nil
}

// devKey is how the kernel names an ID's device: node GUID and index.
type devKey struct {
	guid uint64
	idx  uint32
}

// Address families of struct sockaddr (linux/socket.h).
const (
	afINET  = 2
	afINET6 = 10
)

// putSockaddr writes ap as a struct sockaddr_in or sockaddr_in6 and
// returns its length.
func putSockaddr(s *abi.KernelSockaddrStorage, ap netip.AddrPort) uint16 {
	b := sys.AsBytes(s)
	clear(b)
	be := binary.BigEndian
	a := ap.Addr()
	if a.Is4In6() {
		a = a.Unmap()
	}
	if a.Is4() {
		binary.LittleEndian.PutUint16(b[0:], afINET)
		be.PutUint16(b[2:], ap.Port())
		a4 := a.As4()
		copy(b[4:8], a4[:])
		return 16
	}
	binary.LittleEndian.PutUint16(b[0:], afINET6)
	be.PutUint16(b[2:], ap.Port())
	a16 := a.As16()
	copy(b[8:24], a16[:])
	// sin6_scope_id: a link-local address's interface. The callers
	// checked the zone (checkAddr).
	scope, _ := scopeID(a)
	binary.LittleEndian.PutUint32(b[24:], scope)
	return 28
}

// scopeID is the sin6_scope_id of a's zone: 0 for none, else the index of
// the interface it names, or the number it is.
func scopeID(a netip.Addr) (uint32, error) {
	z := a.Zone()
	if z == "" {
		return 0, nil
	}
	if ifi, err := net.InterfaceByName(z); err == nil {
		return uint32(ifi.Index), nil
	}
	if n, err := strconv.ParseUint(z, 10, 32); err == nil {
		return uint32(n), nil
	}
	return 0, fmt.Errorf("zone %q is neither an interface nor a number of 32 bits", z)
}

// checkAddr refuses an address putSockaddr cannot write as given: no
// address, or a zone naming no interface (it would go as scope 0).
func checkAddr(op, what string, a netip.Addr) error {
	if !a.IsValid() {
		return invalid(op, "no %s address", what)
	}
	if _, err := scopeID(a); err != nil {
		return invalid(op, "%s address %v: %v", what, a, err)
	}
	return nil
}

// getSockaddr reads a struct sockaddr_in or sockaddr_in6.
func getSockaddr(s *abi.KernelSockaddrStorage) netip.AddrPort {
	b := sys.AsBytes(s)
	port := binary.BigEndian.Uint16(b[2:])
	switch binary.LittleEndian.Uint16(b[0:]) {
	case afINET:
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), port)
	case afINET6:
		a := netip.AddrFrom16([16]byte(b[8:24]))
		if scope := binary.LittleEndian.Uint32(b[24:]); scope != 0 && a.IsLinkLocalUnicast() {
			if ifi, err := net.InterfaceByIndex(int(scope)); err == nil {
				a = a.WithZone(ifi.Name)
			} else {
				a = a.WithZone(strconv.FormatUint(uint64(scope), 10))
			}
		}
		return netip.AddrPortFrom(a, port)
	}
	return netip.AddrPort{}
}
