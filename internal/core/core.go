// Package core is what uverbs shares with its sibling packages (async,
// cq, devx) and users must not reach: the per-Context registry of
// affiliated objects (CQ, QP, SRQ, WQ) by user handle, the event
// accounting that makes destroy wait for acknowledgements, the Context's
// event file and commands, and opening a device with driver options.
//
// uverbs registers an accessor (SetAccessor) at init; sibling packages get
// a Context's shared state with Of. Keeping this in an internal package
// means no exported method of uverbs lets a user read events past the
// accounting, count a delivery twice or register a stray object.
package core

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/pureverbs/pureverbs/internal/sys"
)

// Shared is the state of one uverbs.Context that sibling packages use.
type Shared struct {
	// AsyncFile returns the context's asynchronous event file, registering
	// it with the runtime poller on first use.
	AsyncFile func() (*sys.EventFile, error)
	// Objects is the context's *Registry[uverbs.Affiliated] (core cannot
	// name uverbs' types; the user asserts once, not per event).
	Objects any
	// Closed reports whether the Context was closed.
	Closed func() bool

	// DriverID is the device's RDMA_DRIVER_* id (the ioctl header's).
	DriverID uint32
	// DEVX reports whether the kernel user context was allocated with
	// mlx5 DEVX (MLX5_IB_ALLOC_UCTX_DEVX).
	DEVX bool
	// Exec runs one ioctl on the context's command fd: build fills a
	// pooled command buffer (Reset with DriverID included), read, when
	// not nil, collects the outputs after a successful call. A failure
	// comes back as a *uverbs.OpError naming object and method, with the
	// Context's errno mapping (ErrClosed, ErrNotSupported).
	Exec func(object, method string, build, read func(*sys.Ioctl)) error
	// OnClose registers f to run when the Context closes, before its
	// command fd is closed; remove unregisters it. After Close it fails
	// with an error matching uverbs.ErrClosed.
	OnClose func(f func()) (remove func(), err error)
}

var accessor func(any) (*Shared, bool)

// OpenOptions select driver options of a user context.
type OpenOptions struct {
	// DEVX asks an mlx5 device for a DEVX user context.
	DEVX bool
	// DEVXOptional, with DEVX, falls back to a plain user context when
	// the device refuses DEVX (as ibv_open_device does on mlx5).
	DEVXOptional bool
}

var opener func(dev any, o OpenOptions) (any, error)

// SetOpener is called once by uverbs' init: dev is a uverbs.Device, the
// result a *uverbs.Context.
func SetOpener(f func(dev any, o OpenOptions) (any, error)) { opener = f }

// Open opens a uverbs.Device with options (for devx.Open).
func Open(dev any, o OpenOptions) (any, error) {
	if opener == nil {
		return nil, errors.New("core: uverbs is not linked in")
	}
	return opener(dev, o)
}

// SetAccessor is called once by uverbs' init.
func SetAccessor(f func(any) (*Shared, bool)) { accessor = f }

// Of returns the shared state of a *uverbs.Context (false for nil).
func Of(c any) (*Shared, bool) {
	if accessor == nil {
		return nil, false
	}
	return accessor(c)
}

// CountKind selects one of an object's event counters.
type CountKind int

const (
	AsyncEvents CountKind = iota // affiliated async events
	CompEvents                   // completion-channel events (CQs only)
)

func (k CountKind) valid() bool { return k == AsyncEvents || k == CompEvents }

// ErrOverAck is returned by Counts.Ack when more events would be
// acknowledged than were delivered; nothing changes.
var ErrOverAck = errors.New("acknowledging more events than were delivered")

// Counts tracks, for one object, how many events were handed to the
// application and how many it acknowledged, so that destroying the object
// waits, as libibverbs does, until every event the kernel reports as read
// has been acknowledged. The zero value is ready to use.
type Counts struct {
	mu        sync.Mutex
	changed   chan struct{} // closed and replaced on every ack
	delivered [2]uint32
	acked     [2]uint32
	pending   []uint32 // async event types delivered but not acked, oldest first
	abandoned bool
}

// Delivered records that one event of kind k (async events also pass their
// type) was handed to the application.
func (e *Counts) Delivered(k CountKind, typ uint32) {
	if e == nil || !k.valid() {
		return
	}
	e.mu.Lock()
	e.delivered[k]++
	if k == AsyncEvents {
		e.pending = append(e.pending, typ)
	}
	e.mu.Unlock()
}

// Ack records n acknowledgements of kind k. It fails with ErrOverAck,
// changing nothing, when that would acknowledge more events than were
// delivered.
func (e *Counts) Ack(k CountKind, typ uint32, n uint32) error {
	if e == nil || !k.valid() {
		return ErrOverAck
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	// Modulo 2^32, as the kernel's counts: a CQ woken a million times a
	// second wraps them in 72 minutes.
	if n > e.delivered[k]-e.acked[k] {
		return ErrOverAck
	}
	e.acked[k] += n
	if k == AsyncEvents {
		for m := n; m > 0; m-- {
			i := slices.Index(e.pending, typ)
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
func (e *Counts) Counts(k CountKind) (delivered, acked uint32) {
	if e == nil || !k.valid() {
		return 0, 0
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.delivered[k], e.acked[k]
}

// Abandon releases every waiter for good (the Context closed).
func (e *Counts) Abandon() {
	e.mu.Lock()
	e.abandoned = true
	if e.changed != nil {
		close(e.changed)
		e.changed = nil
	}
	e.mu.Unlock()
}

// Unacked describes what a bounded wait gave up on.
type Unacked struct {
	Async, Comp uint32
	Pending     []uint32 // async event types, oldest first
}

// WaitAcked blocks until asyncReported async and compReported completion
// events (the counts the kernel returns from destroy) are acknowledged, or
// the Counts are abandoned, or ctx ends: then it returns what is still
// outstanding and ctx's error.
func (e *Counts) WaitAcked(ctx context.Context, asyncReported, compReported uint32) (Unacked, error) {
	for {
		e.mu.Lock()
		if e.abandoned || (behind(asyncReported, e.acked[AsyncEvents]) == 0 && behind(compReported, e.acked[CompEvents]) == 0) {
			e.mu.Unlock()
			return Unacked{}, nil
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
			u := Unacked{Pending: slices.Clone(e.pending),
				Async: behind(asyncReported, e.acked[AsyncEvents]), Comp: behind(compReported, e.acked[CompEvents])}
			e.mu.Unlock()
			return u, ctx.Err()
		}
	}
}

// behind returns how many of reported events are not acked, both counts
// modulo 2^32 (the kernel's are u32 and wrap; libibverbs waits for them to
// be equal). An acked count ahead of the kernel's, which only a count
// from another object could give, is not waited for.
func behind(reported, acked uint32) uint32 {
	if d := reported - acked; int32(d) > 0 {
		return d
	}
	return 0
}

// ErrRegistryClosed is returned by Reserve and Publish after Close.
var ErrRegistryClosed = errors.New("registry closed")

// Registry maps user handles to a Context's affiliated objects.
//
// An object is reserved before its create command (so that the handle
// exists when the kernel first reports an event for it) and published
// once it is complete (handle, sizes and mappings set). Lookup of a
// reserved handle waits until its creator publishes or aborts it, so no
// one ever sees a half-made object, and no event of a new object goes
// uncounted.
//
// T is the type objects are handed out as (uverbs.Affiliated); being a
// type parameter, Lookup returns it without a per-event interface
// assertion (whose runtime cache allocates at random moments).
//
// The entries live in a slice of slots, not a hash map: a user handle is
// the slot's index plus one in its low 32 bits and the slot's generation
// in its high 32 bits, so a lookup is an index and a compare, and
// reserving and forgetting an entry touch one slot and a free list.
// Reserve, Publish and Remove cost 289 instructions together against the
// map's 932 (BenchmarkRegistryCycle under callgrind); the map's inserts
// and deletes were the largest part of a CQ's create and destroy after
// the heap (docs/performance.md).
// A slot's generation grows each time it is freed, so a handle is not
// given out again until its slot has been reused 2^32 times: an event of
// a destroyed object finds nothing, never its slot's next occupant.
type Registry[T comparable] struct {
	mu       sync.Mutex
	closed   bool
	slots    []slot[T]
	freeHead uint32 // index+1 of the first free slot; 0: none
	n        int    // slots in use (reserved or published)
}

// slot is one entry, held by value: Reserve allocates nothing once the
// slice has grown.
type slot[T comparable] struct {
	obj       T
	counts    *Counts
	ready     chan struct{} // made by the first Lookup that waits; closed by Publish or Abort
	gen       uint32        // the high half of the handle of the slot's current (or next) entry
	nextFree  uint32        // free list link (index+1), while free
	used      bool
	published bool
}

func handleOf(i int, gen uint32) uint64 { return uint64(gen)<<32 | uint64(i+1) }

// find returns the index of the slot uh names and the slot, or nil
// (under r.mu).
func (r *Registry[T]) find(uh uint64) (int, *slot[T]) {
	i := uint32(uh) - 1 // an index of 0 wraps and fails the bound
	if uint64(i) >= uint64(len(r.slots)) {
		return 0, nil
	}
	s := &r.slots[i]
	if !s.used || s.gen != uint32(uh>>32) {
		return 0, nil
	}
	return int(i), s
}

// forget frees slot i (under r.mu): its handle stops naming anything.
func (r *Registry[T]) forget(i int) {
	s := &r.slots[i]
	gen := s.gen + 1
	if gen == 0 {
		gen = 1
	}
	*s = slot[T]{gen: gen, nextFree: r.freeHead}
	r.freeHead = uint32(i) + 1
	r.n--
}

// settle closes s's ready channel, if a Lookup made one (under r.mu).
func (s *slot[T]) settle() {
	if s.ready != nil {
		close(s.ready)
		s.ready = nil
	}
}

// Reserve allocates a fresh non-zero user handle for an object about to
// be created, whose events are counted in counts.
func (r *Registry[T]) Reserve(counts *Counts) (uint64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return 0, ErrRegistryClosed
	}
	var i int
	if r.freeHead != 0 {
		i = int(r.freeHead - 1)
		r.freeHead = r.slots[i].nextFree
	} else {
		if len(r.slots) >= 1<<31 {
			return 0, errors.New("core: registry full")
		}
		r.slots = append(r.slots, slot[T]{gen: 1})
		i = len(r.slots) - 1
	}
	s := &r.slots[i]
	*s = slot[T]{gen: s.gen, counts: counts, used: true}
	r.n++
	return handleOf(i, s.gen), nil
}

// Publish makes the complete object obj findable under uh. After Close it
// fails with ErrRegistryClosed and forgets uh: the creator must release
// the object and report the Context closed.
func (r *Registry[T]) Publish(uh uint64, obj T) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	i, s := r.find(uh)
	if s == nil {
		return ErrRegistryClosed
	}
	s.settle()
	if r.closed {
		r.forget(i)
		return ErrRegistryClosed
	}
	s.obj, s.published = obj, true
	return nil
}

// Abort forgets a reserved handle whose create failed.
func (r *Registry[T]) Abort(uh uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if i, s := r.find(uh); s != nil && !s.published {
		s.settle()
		r.forget(i)
	}
}

// Remove forgets a published object (after its destroy).
func (r *Registry[T]) Remove(uh uint64, obj T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if i, s := r.find(uh); s != nil && s.published && s.obj == obj {
		r.forget(i)
	}
}

// LookupHook, when a test sets it (before the readers it concerns start,
// reset after they end), is called at the start of every Lookup with the
// handle: the point between an event reader's read(2) and its lookup,
// where a test can interleave a destroy.
var LookupHook func(uh uint64)

// Lookup returns the object published under uh and its counts. A handle
// that is reserved but not yet published makes Lookup wait for its
// creator (a create finishes or fails within one command). Handles are
// never reused, so what uh names after the wait is that creator's object
// or nothing.
func (r *Registry[T]) Lookup(uh uint64) (obj T, counts *Counts, ok bool) {
	if LookupHook != nil {
		LookupHook(uh)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	_, s := r.find(uh)
	if s != nil && !s.published {
		if s.ready == nil {
			s.ready = make(chan struct{})
		}
		ready := s.ready
		r.mu.Unlock()
		<-ready
		r.mu.Lock()
		_, s = r.find(uh) // the slice may have grown meanwhile
	}
	if s == nil || !s.published {
		return obj, nil, false
	}
	return s.obj, s.counts, true
}

// Close marks the registry closed and returns the published objects; the
// creators of reserved ones see Publish fail.
func (r *Registry[T]) Close() []T {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	var out []T
	for i := range r.slots {
		if s := &r.slots[i]; s.used && s.published {
			out = append(out, s.obj)
			r.forget(i)
		}
	}
	return out
}

// Len returns the number of published and reserved handles.
func (r *Registry[T]) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}
