package uverbs

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/pureverbs/pureverbs/internal/core"
)

// Object lifetimes.
//
// Every object whose kernel handle travels in later commands, or whose
// rings are mapped, has a life: a reader/writer lock and a dead flag.
// Anything that uses the object's handle or rings holds it shared for the
// duration of the use: creating a child (a QP holds its PD and CQs across
// QP/CREATE, so a concurrent destroy cannot free a handle that the kernel
// would hand to a new object before the create names it), modifying it,
// and, with the data path, every post, poll and doorbell. Destroy, and
// Context.Close for every live object, take it exclusively: they wait
// for the uses in flight, mark the object dead and unmap its rings before
// anyone can start a new use. The lock is per object, never per Context,
// so unrelated objects do not contend.
//
// Rings are additionally memory-safe on their own (sys.Mapping keeps its
// address range valid while reachable), so even a bug here could not turn
// into a fault.
type life struct {
	rw   sync.RWMutex
	dead bool
	// gone mirrors dead for lock-free readers (the empty poll): set
	// before the rings are released.
	gone    atomic.Bool
	release releaser      // unmaps the provider's rings; set before publish
	counts  core.Counts   // delivered/acked events (affiliated objects)
	seq     atomic.Uint64 // the order holdAll takes it in; 0 until first needed
}

// lifeSeq numbers lives in the order holdAll first meets them.
var lifeSeq atomic.Uint64

// order returns l's place in the one order in which several lives are
// held together.
func (l *life) order() uint64 {
	if s := l.seq.Load(); s != 0 {
		return s
	}
	l.seq.CompareAndSwap(0, lifeSeq.Add(1)) // a racing caller's number may win: both read it
	return l.seq.Load()
}

// releaser is the provider's part of an object (its rings). Held as an
// interface rather than a method value, which would allocate a closure
// per object.
type releaser interface{ release() error }

// hold takes a shared reference; false if the object is destroyed.
func (l *life) hold() bool {
	l.rw.RLock()
	if l.dead {
		l.rw.RUnlock()
		return false
	}
	return true
}

// drop releases a reference taken by hold.
func (l *life) drop() { l.rw.RUnlock() }

// kill is Context.Close's end of an object: wait for uses in flight, mark
// it dead, unmap its rings (the kernel object goes with the command fd)
// and release destroy waiters.
func (l *life) kill() {
	l.rw.Lock()
	if !l.dead {
		l.dead = true
		l.gone.Store(true)
		if l.release != nil {
			l.release.release()
		}
	}
	l.rw.Unlock()
	l.counts.Abandon()
}

// killer is implemented by every object the registry holds.
type killer interface{ kill() }

// holdAll holds each distinct object, in one order for the whole process
// (order); on failure it drops what it took and returns false.
// Distinctness matters: a second shared hold of the same lock would
// deadlock against a waiting destroy. So does the order: a waiting
// destroy blocks new shared holds, so two creates holding the same CQs in
// opposite orders, each with a destroy waiting on the CQ it holds, would
// wait for each other for ever.
func holdAll(ls ...*life) bool {
	var buf [4]*life
	sorted := buf[:0]
	for i, l := range ls {
		if l == nil || seenBefore(ls[:i], l) {
			continue
		}
		j := len(sorted)
		sorted = append(sorted, l)
		for ; j > 0 && sorted[j-1].order() > l.order(); j-- {
			sorted[j] = sorted[j-1]
		}
		sorted[j] = l
	}
	for i, l := range sorted {
		if !l.hold() {
			for _, h := range sorted[:i] {
				h.drop()
			}
			return false
		}
	}
	return true
}

// dropAll drops the holds holdAll took.
func dropAll(ls ...*life) {
	for i, l := range ls {
		if l == nil || seenBefore(ls[:i], l) {
			continue
		}
		l.drop()
	}
}

func seenBefore(ls []*life, l *life) bool {
	for _, x := range ls {
		if x == l {
			return true
		}
	}
	return false
}

// destroy is the destroy sequence of an affiliated object, as libibverbs
// does it but bounded by ctx: exclusively (after the uses in flight),
// refuse a second destroy and send the kernel destroy, which returns the
// number of events userspace read; on success mark the object dead and
// unmap its rings; then wait until the application acknowledged that many
// events (or ctx ends: *UnackedError), and only then forget its user
// handle (and call forget, if not nil, for the completion channel's map).
// A kernel refusal (e.g. EBUSY) leaves the object usable.
//
// The handle stays known during the wait because the kernel counts an
// event as reported when read(2) returns it, before the reader looks the
// handle up: a reader between the two must still find the object, or the
// event is delivered uncounted and its Ack never reaches the wait. Once
// every reported event is acknowledged, each was looked up, and the
// kernel returns no more for a destroyed object, so none is in flight.
func (l *life) destroy(ctx context.Context, c *Context, obj Affiliated, object string,
	kernel func() (asyncReported, compReported uint32, err error), forget func()) error {
	if ctx == nil {
		return invalidErr(object, "destroy", "nil context.Context")
	}
	l.rw.Lock()
	if l.dead {
		l.rw.Unlock()
		return closedErr(object, "destroy")
	}
	asyncRep, compRep, err := kernel()
	if err != nil && !errors.Is(err, ErrClosed) {
		l.rw.Unlock()
		return err
	}
	l.dead = true
	l.gone.Store(true)
	var uerr error
	if l.release != nil {
		uerr = l.release.release()
	}
	l.rw.Unlock()
	if err == nil {
		if testHook != nil { // no string built outside tests
			hook(object + ":wait-acks")
		}
		err = waitAcked(ctx, &l.counts, object, asyncRep, compRep)
	}
	c.reg.Remove(obj.UserHandle(), obj)
	if forget != nil {
		forget()
	}
	if err != nil {
		return err
	}
	if uerr != nil {
		return c.opErr(object, "munmap", uerr)
	}
	return nil
}

// testHook, when set by a test, is called at named points of the create
// paths, at a destroy's wait for acknowledgements and between a
// completion channel's read and its lookup, so tests can interleave a
// destroy or a Close deterministically.
var testHook func(point string)

func hook(point string) {
	if testHook != nil {
		testHook(point)
	}
}

// closedErr is the error of an operation on a destroyed object.
func closedErr(object, method string) error {
	return &OpError{Object: object, Method: method, Err: ErrClosed}
}

// invalidErr is the error of a call with invalid arguments.
func invalidErr(object, method, format string, args ...any) error {
	return &OpError{Object: object, Method: method, Err: fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)}
}
