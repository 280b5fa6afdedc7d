package uverbs

import (
	"errors"
	"fmt"
	"os"

	"github.com/pureverbs/pureverbs/internal/sys"
)

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

// AllocHugeBuffer is AllocBuffer backed by huge pages of the system's
// default size (MAP_HUGETLB, 2 MiB on x86-64; /proc/meminfo's
// Hugepagesize): fewer pages to pin and translate when the memory is
// registered, as perftest's --use_hugepages. The mapping is rounded up to
// whole huge pages. The pages come from the pool the administrator
// reserved (vm.nr_hugepages); with too few free the error matches
// unix.ENOMEM and says so, and on a system without huge pages it matches
// ErrNotSupported.
func AllocHugeBuffer(size int) (*Buffer, error) {
	if size <= 0 {
		return nil, invalidErr("buffer", "alloc huge", "size %d", size)
	}
	hp := sys.HugePageSize()
	if hp == 0 {
		return nil, &OpError{Object: "buffer", Method: "alloc huge", Err: fmt.Errorf("%w: the system has no huge pages", ErrNotSupported)}
	}
	b, err := sys.AllocHugeBuffer(size, "uverbs huge buffer", hp)
	if err != nil {
		err = &OpError{Object: "buffer", Method: "alloc huge", Err: err}
		if errors.Is(err, sys.ENOMEM) {
			n := (size + hp - 1) / hp
			err = withHint(err, fmt.Sprintf("%d huge pages of %d KiB are needed and fewer are free: reserve more "+
				"(sysctl vm.nr_hugepages, or /sys/kernel/mm/hugepages/hugepages-%dkB/nr_hugepages)", n, hp>>10, hp>>10))
		}
		return nil, err
	}
	return &Buffer{b: b}, nil
}

// MapFileBuffer maps size bytes of f from offset (a multiple of the page
// size) as a Buffer: shared, read/write, so what the device writes into
// registered memory reaches the file (a file on a DAX file system
// is persistent memory, the target of librpma's peers), as perftest's
// --mmap. f must be open for reading and writing; the mapping outlives
// it. Close unmaps it.
//
// The range must lie within the file: for a regular file (on a DAX file
// system, tmpfs or hugetlbfs, whose size is what ftruncate(2) set) or a
// block device, a range reaching past its end, whose pages would raise
// SIGBUS when touched, is refused with an error matching ErrInvalid (and
// unix.EINVAL). The size of other files (a device DAX character device)
// is not known here: the kernel's checks apply. A closed f gives an error
// matching ErrClosed (and os.ErrClosed).
func MapFileBuffer(f *os.File, offset int64, size int) (*Buffer, error) {
	if f == nil || size <= 0 || offset < 0 || offset%int64(sys.PageSize) != 0 {
		return nil, invalidErr("buffer", "map file", "size %d at offset %d (pages of %d bytes)", size, offset, sys.PageSize)
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, &OpError{Object: "buffer", Method: "map file", Err: err}
	}
	var b *sys.Buffer
	var merr error
	if err := rc.Control(func(fd uintptr) { b, merr = sys.MapFile(int(fd), offset, size, "uverbs file buffer "+f.Name()) }); err != nil {
		// Control fails only on a closed file ("use of closed file").
		return nil, &OpError{Object: "buffer", Method: "map file", Err: fmt.Errorf("%w: %s (%w)", ErrClosed, f.Name(), os.ErrClosed)}
	}
	if errors.Is(merr, sys.ErrPastEOF) {
		return nil, &OpError{Object: "buffer", Method: "map file", Err: fmt.Errorf("%w: %w", ErrInvalid, merr)}
	}
	if merr != nil {
		return nil, &OpError{Object: "buffer", Method: "map file", Err: merr}
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
