package uverbs

import "github.com/pureverbs/pureverbs/internal/sys"

// Buffer is page-aligned, zero-filled memory outside the Go heap (a
// private anonymous mmap), for applications that want registered memory
// the garbage collector never sees: register Bytes with PD.RegMR.
//
// A Buffer belongs to no Context (it may be registered in several, and
// its contents stay readable after a Context is closed), so Context.Close
// does not free it: Close does. Nothing frees it implicitly, because the
// collector cannot tell when the slices Bytes returned are dead.
type Buffer struct{ b *sys.Buffer }

// AllocBuffer allocates size bytes (the mapping is rounded up to whole
// pages; Bytes has exactly size). size must be positive.
func AllocBuffer(size int) (*Buffer, error) {
	if size <= 0 {
		return nil, invalidErr("buffer", "alloc", "size %d", size)
	}
	b, err := sys.AllocBuffer(size, "uverbs buffer")
	if err != nil {
		return nil, &OpError{Object: "buffer", Method: "alloc", Err: err}
	}
	return &Buffer{b: b}, nil
}

// Bytes returns the memory, or nil after Close. The slice, and anything
// derived from it, must not be used after Close: the pages are unmapped
// and an access faults. Deregister MRs on it before closing it (the
// kernel keeps registered pages pinned until Dereg regardless, so the
// device never touches memory reused by someone else).
func (b *Buffer) Bytes() []byte {
	if b == nil || b.b == nil {
		return nil
	}
	return b.b.Bytes()
}

// Len returns the size given to AllocBuffer.
func (b *Buffer) Len() int {
	if b == nil || b.b == nil {
		return 0
	}
	return b.b.Len()
}

// Close unmaps the memory. Closing twice is a no-op.
func (b *Buffer) Close() error {
	if b == nil || b.b == nil {
		return invalidErr("buffer", "close", "nil Buffer")
	}
	if err := b.b.Free(); err != nil {
		return &OpError{Object: "buffer", Method: "close", Err: err}
	}
	return nil
}
