package devx

import (
	"context"
	"encoding/binary"
	"math"
	"sync"

	"github.com/pureverbs/pureverbs/abi"
	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/uverbs"
)

// ChannelFlags are event channel creation flags
// (enum mlx5dv_devx_create_event_channel_flags).
type ChannelFlags uint32

// OmitData makes the channel deliver only each subscription's cookie
// (MLX5DV_DEVX_CREATE_EVENT_CHANNEL_FLAGS_OMIT_EV_DATA): events of one
// subscription that arrive while it is already queued are merged into
// one record, and ordering against other subscriptions is not kept.
// Without it every event is queued with the device's event queue entry,
// in order, and events may be lost when the kernel is out of memory
// (GetEvent then reports ErrOverflow once).
const OmitData ChannelFlags = abi.MLX5_IB_UAPI_DEVX_CR_EV_CH_FLAGS_OMIT_DATA

// Record sizes of an event channel (struct
// mlx5_ib_uapi_devx_async_event_hdr: the u64 cookie, then the raw
// struct mlx5_eqe on channels with data).
const (
	EventHeaderSize = 8
	EQESize         = 64
	EventRecordSize = EventHeaderSize + EQESize
)

// Event is one DEVX event.
type Event struct {
	// Cookie is the value given to Subscribe.
	Cookie uint64
	// EQE is the device's event queue entry (struct mlx5_eqe, big-endian
	// PRM fields); its first Len bytes are what the kernel delivered:
	// EQESize on a channel with data, 0 with OmitData (a read of fewer
	// bytes is passed on as libmlx5 does: the data may be omitted).
	EQE [EQESize]byte
	Len int
}

// Data returns the delivered part of the event queue entry: EQE[:Len],
// with Len taken as 0 when negative and as EQESize when larger; nil for a
// nil *Event.
func (e *Event) Data() []byte {
	if e == nil {
		return nil
	}
	return e.EQE[:min(max(e.Len, 0), EQESize)]
}

// Type returns the EQE's event type (mlx5_eqe.type, byte 1), or 0 when
// no data was delivered (Len < 2: always on an OmitData channel). 0 is
// also a real event type, the completion event
// (MLX5_EVENT_TYPE_COMP), so Type alone cannot tell "no type" from
// "completion": check Len first; an event without data has no type, only
// its Cookie.
func (e *Event) Type() uint8 {
	if e == nil || e.Len < 2 {
		return 0
	}
	return e.EQE[1]
}

// SubType returns the EQE's sub type (byte 3), or 0 without data.
func (e *Event) SubType() uint8 {
	if e == nil || e.Len < 4 {
		return 0
	}
	return e.EQE[3]
}

// DecodeEvent decodes the first event record of b, as read from a
// channel with (omitData false) or without event data, and returns it
// with the number of bytes it took. The kernel hands out one record per
// read: 8 bytes with OmitData, 72 without. Several records in one buffer
// are decoded one after the other; the rules are libmlx5's
// (mlx5dv_devx_get_event): a record needs its 8-byte cookie, and on a
// channel with data a record shorter than 72 bytes is an event with
// partial data. Fewer than 8 bytes are consumed and reported as an error
// matching ErrShortRecord. It allocates nothing and never panics.
func DecodeEvent(b []byte, omitData bool) (ev Event, n int, err error) {
	n, err = decodeEvent(b, omitData, &ev)
	return ev, n, err
}

func decodeEvent(b []byte, omit bool, ev *Event) (int, error) {
	if len(b) < EventHeaderSize {
		return len(b), shortRecord("event", len(b), EventHeaderSize)
	}
	ev.Cookie = binary.LittleEndian.Uint64(b)
	if omit {
		ev.Len = 0
		return EventHeaderSize, nil
	}
	n := copy(ev.EQE[:], b[EventHeaderSize:])
	ev.Len = n
	return EventHeaderSize + n, nil
}

// Read buffer sizes: whole records, so a read of a stream never ends
// inside one that was written whole.
const (
	omitReadSize = 64 * EventHeaderSize
	dataReadSize = 16 * EventRecordSize
)

// EventChannel is a DEVX event channel (struct
// mlx5dv_devx_event_channel): an fd on which the kernel queues the
// events of the subscriptions made over it.
type EventChannel struct {
	ctx    *uverbs.Context
	r      *sys.RecordReader
	omit   bool
	remove func()
	life

	sem       chan struct{} // one reader of buf at a time
	closed    chan struct{}
	closeOnce sync.Once
	closeErr  error
	buf       []byte
	off, n    int // records read but not yet returned: buf[off:n]
}

// NewEventChannel creates an event channel
// (mlx5dv_devx_create_event_channel(3)), with flags 0 or OmitData.
// Closing the context closes it too. The kernel needs no DEVX uid for it
// (though Subscribe and SubscribeFd do).
func NewEventChannel(c *uverbs.Context, flags ChannelFlags) (*EventChannel, error) {
	const object, method = "devx_event_channel", "create"
	sh, err := mlx5Shared(c, object, method)
	if err != nil {
		return nil, err
	}
	if flags&^OmitData != 0 {
		return nil, invalid(object, method, "unknown flags %#x", uint32(flags&^OmitData))
	}
	var fa sys.Attr
	raw := -1
	err = run(sh, object, method,
		func(cmd *sys.Ioctl, drv uint32) { fa = buildEventChannelAlloc(cmd, drv, uint32(flags)) },
		func(cmd *sys.Ioctl) { raw = cmd.NewFDNum(fa) })
	if err != nil {
		return nil, err
	}
	r, err := adopt(raw, c.Device().Name+" devx events")
	if err != nil {
		return nil, &uverbs.OpError{Object: object, Method: method, Err: err}
	}
	ch := newEventChannel(c, r, flags&OmitData != 0)
	remove, err := sh.OnClose(func() { ch.close() })
	if err != nil {
		r.Close()
		return nil, err
	}
	ch.remove = remove
	return ch, nil
}

// newEventChannel wraps an event fd (tests feed a socket pair).
func newEventChannel(c *uverbs.Context, r *sys.RecordReader, omit bool) *EventChannel {
	size := dataReadSize
	if omit {
		size = omitReadSize
	}
	return &EventChannel{ctx: c, r: r, omit: omit, sem: make(chan struct{}, 1), closed: make(chan struct{}), buf: make([]byte, size)}
}

// Fd returns the (non-blocking) descriptor, for the caller's own poll or
// epoll loop; read it with TryGetEvent. It returns -1 after Close (or the
// context's Close) and for a nil channel: the old number may name another
// file by then.
func (ch *EventChannel) Fd() int {
	if ch == nil || ch.r == nil {
		return -1
	}
	select {
	case <-ch.closed:
		return -1
	default:
		return ch.r.Fd()
	}
}

// OmitData reports whether the channel was created with OmitData.
func (ch *EventChannel) OmitData() bool { return ch != nil && ch.omit }

var (
	errNilChannel = invalid("devx_event_channel", "get_event", "nil *devx.EventChannel")
	errNilChCtx   = invalid("devx_event_channel", "get_event", "nil context.Context")
	errChClosed   = closed("devx_event_channel", "get_event")
)

// GetEvent waits, parked on the runtime poller, for one event and
// decodes it (mlx5dv_devx_get_event(3)). It returns ctx's error when ctx
// ends, an error matching uverbs.ErrClosed after Close (or the context's
// Close), ErrOverflow once after the kernel lost events, and
// ErrShortRecord for a record without its cookie; a nil ctx is refused
// with uverbs.ErrInvalid. Decoding allocates nothing; with a context used
// again and again GetEvent allocates nothing.
func (ch *EventChannel) GetEvent(ctx context.Context) (Event, error) {
	var ev Event
	if ch == nil || ch.r == nil {
		return ev, errNilChannel
	}
	if ctx == nil {
		return ev, errNilChCtx
	}
	if err := ctx.Err(); err != nil {
		return ev, err
	}
	select {
	case ch.sem <- struct{}{}:
	case <-ctx.Done():
		return ev, ctx.Err()
	case <-ch.closed:
		return ev, errChClosed
	}
	err := ch.next(ctx, &ev, true)
	<-ch.sem
	return ev, err
}

// TryGetEvent is GetEvent without waiting (mlx5dv_devx_get_event(3) on
// a non-blocking channel): when no event is queued (or
// another goroutine is waiting in GetEvent) it fails with ErrNoEvent,
// which matches unix.EAGAIN.
func (ch *EventChannel) TryGetEvent() (Event, error) {
	var ev Event
	if ch == nil || ch.r == nil {
		return ev, errNilChannel
	}
	select {
	case ch.sem <- struct{}{}:
	case <-ch.closed:
		return ev, errChClosed
	default:
		return ev, ErrNoEvent
	}
	err := ch.next(context.Background(), &ev, false)
	<-ch.sem
	return ev, err
}

// next returns the next record, reading when none is left (under sem).
func (ch *EventChannel) next(ctx context.Context, ev *Event, wait bool) error {
	if ch.off >= ch.n {
		var n int
		var err error
		if wait {
			n, err = ch.r.Read(ctx, ch.buf)
		} else {
			n, err = ch.r.TryRead(ch.buf)
		}
		if err != nil {
			return readErr("devx_event_channel", err, errChClosed)
		}
		if n == 0 {
			return errZeroRead
		}
		ch.off, ch.n = 0, n
	}
	used, err := decodeEvent(ch.buf[ch.off:ch.n], ch.omit, ev)
	ch.off += used
	return err
}

var errZeroRead = shortRecord("event (zero-length read: end of file)", 0, EventHeaderSize)

// Close closes the channel (mlx5dv_devx_destroy_event_channel(3)): its
// subscriptions end, events not read are lost, and a blocked GetEvent
// returns an error matching uverbs.ErrClosed. It waits for Subscribe
// calls in flight on the channel. Closing twice is a no-op.
func (ch *EventChannel) Close() error {
	if ch == nil || ch.r == nil {
		return errNilChannel
	}
	if ch.remove != nil {
		ch.remove()
	}
	return ch.close()
}

func (ch *EventChannel) close() error {
	ch.closeOnce.Do(func() {
		ch.rw.Lock()
		ch.dead = true
		ch.rw.Unlock()
		close(ch.closed)
		ch.closeErr = ch.r.Close()
	})
	return ch.closeErr
}

// Subscribe subscribes the channel to events
// (mlx5dv_devx_subscribe_devx_event(3)): the event numbers (1 to
// MaxEvents of them, PRM event types up to MaxEventNum; 0 is the
// completion event of a CQ object) of obj, or device-level (unaffiliated)
// events when obj is nil. Each event read from the channel carries cookie.
// It needs a context with DEVX: the kernel refuses any other (EINVAL).
func Subscribe(ch *EventChannel, obj *Obj, events []uint16, cookie uint64) error {
	const method = "subscribe_event"
	var list []byte
	return subscribe(ch, obj, method, func() error {
		if err := checkEvents(method, events); err != nil {
			return err
		}
		list = eventList(events)
		return nil
	}, func(cmd *sys.Ioctl, drv uint32, chFD int, h uint32) {
		buildSubscribe(cmd, drv, chFD, h, obj != nil, list, cookie)
	})
}

// SubscribeFd subscribes an eventfd to one event of obj (or a
// device-level event when obj is nil) over the channel
// (mlx5dv_devx_subscribe_devx_event_fd(3)): the kernel signals fd, which
// must be an eventfd (see NewEventFD), each time the event occurs, and
// queues nothing on the channel. The kernel keeps its own reference to
// the eventfd. fd must be 0 to math.MaxInt32 (the kernel's s32). It needs
// a context with DEVX, as Subscribe.
func SubscribeFd(ch *EventChannel, fd int, obj *Obj, event uint16) error {
	const method = "subscribe_event_fd"
	return subscribe(ch, obj, method, func() error {
		if err := checkEvents(method, []uint16{event}); err != nil {
			return err
		}
		return checkEventFD(method, fd)
	},
		func(cmd *sys.Ioctl, drv uint32, chFD int, h uint32) {
			buildSubscribeFd(cmd, drv, chFD, h, obj != nil, event, fd)
		})
}

// checkEvents refuses what the kernel's SUBSCRIBE_EVENT refuses with
// EINVAL before it looks at the device's event caps: no events, more than
// MaxEvents, or a number above MaxEventNum.
func checkEvents(method string, events []uint16) error {
	if len(events) == 0 || len(events) > MaxEvents {
		return invalid("devx", method, "%d event numbers (want 1 to %d)", len(events), MaxEvents)
	}
	for _, e := range events {
		if e > MaxEventNum {
			return invalid("devx", method, "event number %d (want 0 to %d)", e, MaxEventNum)
		}
	}
	return nil
}

// checkEventFD refuses an fd the kernel's s32 FD_NUM cannot carry (a
// larger one would be sent truncated, naming another file).
func checkEventFD(method string, fd int) error {
	if fd < 0 || fd > math.MaxInt32 {
		return invalid("devx", method, "eventfd %d (want 0 to %d)", fd, math.MaxInt32)
	}
	return nil
}

// subscribe checks the device and the DEVX uid (SUBSCRIBE_EVENT refuses a
// context without one), then the arguments (check), holds the channel and
// the object, and sends the command.
func subscribe(ch *EventChannel, obj *Obj, method string, check func() error, build func(cmd *sys.Ioctl, drv uint32, chFD int, h uint32)) error {
	const object = "devx"
	if ch == nil || ch.r == nil {
		return invalid(object, method, "nil *devx.EventChannel")
	}
	sh, err := shared(ch.ctx, object, method)
	if err != nil {
		return err
	}
	if err := check(); err != nil {
		return err
	}
	var h uint32
	if obj != nil {
		if _, err := obj.use(method); err != nil {
			return err
		}
		defer obj.release()
		if !sameContext(obj.ctx, ch.ctx) {
			return invalid(object, method, "%v", errForeign)
		}
		h = obj.handle
	}
	if !ch.hold() {
		return closed("devx_event_channel", method)
	}
	defer ch.release()
	fd := ch.r.Fd()
	return run(sh, object, method, func(cmd *sys.Ioctl, drv uint32) { build(cmd, drv, fd, h) }, nil)
}
