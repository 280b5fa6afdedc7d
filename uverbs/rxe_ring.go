package uverbs

import (
	"fmt"
	"sync/atomic"

	"github.com/pureverbs/pureverbs/internal/sys"
)

// The rxe shared queue (struct rxe_queue_buf, rdma_user_rxe.h): a 384-byte
// header with the element size, the index mask and the producer and
// consumer indices on their own cache lines, then 1<<log2_elem_size bytes
// per slot. Indices are stored masked; the queue is empty when producer ==
// consumer and full when producer+1 == consumer, so one slot stays unused.
//
// The side that owns an index keeps a private copy and publishes it with
// an atomic store (release); it reads the other side's index with an
// atomic load (acquire), as librxe does with C11 atomics. Go's sync/atomic
// operations are sequentially consistent, which is at least that.
const (
	rxeLog2ElemOff = 0
	rxeMaskOff     = 4
	rxeProdOff     = 128
	rxeConsOff     = 256
	rxeDataOff     = 384
)

// rxeRing is one side of a mapped rxe queue: the producer of a send,
// receive or shared receive queue (FROM_CLIENT), or the consumer of a
// completion queue (TO_CLIENT). Its methods are not synchronised: the
// owner serialises them (the QP's SQ or RQ lock, the CQ's lock) and holds
// the object's life.
type rxeRing struct {
	m     *sys.Mapping
	mask  uint32
	shift uint32
	own   uint32 // producer index (producer side) or consumer index (consumer side)
	// The index words in the header, checked once by init and kept beside
	// m (sys.Ptr): a post or poll then loads and stores them with no
	// bounds check of its own.
	ownW   *atomic.Uint32 // the word own is published to
	otherW *atomic.Uint32 // the other side's index
}

// newRxeRing checks the header the kernel initialised and returns the
// producer (producer true) or consumer side of the queue.
func newRxeRing(m *sys.Mapping, producer bool) (*rxeRing, error) {
	r := new(rxeRing)
	if err := r.init(m, producer); err != nil {
		return nil, err
	}
	return r, nil
}

// init is newRxeRing into r (a ring held by value, one allocation less).
func (r *rxeRing) init(m *sys.Mapping, producer bool) error {
	if m.Len() < rxeDataOff {
		return fmt.Errorf("%w: rxe queue of %d bytes has no room for its header", ErrInvalid, m.Len())
	}
	shift := m.Load32(rxeLog2ElemOff)
	mask := m.Load32(rxeMaskOff)
	if shift < 5 || shift > 20 || mask&(mask+1) != 0 || mask > 1<<24 {
		return fmt.Errorf("%w: rxe queue header: log2_elem_size %d, index_mask %#x", ErrInvalid, shift, mask)
	}
	if need := rxeDataOff + (int(mask)+1)<<shift; need > m.Len() {
		return fmt.Errorf("%w: rxe queue of %d slots of %d bytes needs %d bytes, mapping has %d",
			ErrInvalid, mask+1, 1<<shift, need, m.Len())
	}
	ownAt, otherAt := rxeConsOff, rxeProdOff
	if producer {
		ownAt, otherAt = rxeProdOff, rxeConsOff
	}
	*r = rxeRing{m: m, mask: mask, shift: shift,
		ownW: sys.Ptr[atomic.Uint32](m, ownAt), otherW: sys.Ptr[atomic.Uint32](m, otherAt)}
	r.own = r.ownW.Load() & mask
	return nil
}

// slots returns the number of slots (capacity + 1).
func (r *rxeRing) slots() uint32 { return r.mask + 1 }

// slotSize returns the bytes per slot.
func (r *rxeRing) slotSize() int { return 1 << r.shift }

// slot returns the offset of the slot i places after the own index.
func (r *rxeRing) slot(i uint32) int {
	return rxeDataOff + int((r.own+i)&r.mask)<<r.shift
}

// free returns how many slots the producer may fill.
func (r *rxeRing) free() uint32 {
	cons := r.otherW.Load() & r.mask
	return (cons - r.own - 1) & r.mask
}

// ready returns how many filled slots the consumer may read.
func (r *rxeRing) ready() uint32 {
	prod := r.otherW.Load() & r.mask
	return (prod - r.own) & r.mask
}

// advance moves the own index by n and publishes it: the producer hands n
// written slots to the kernel, the consumer gives n read slots back.
func (r *rxeRing) advance(n uint32) {
	r.own = (r.own + n) & r.mask
	r.ownW.Store(r.own)
}
