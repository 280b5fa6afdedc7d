package sys

import (
	"fmt"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Mapping is an owned shared mapping of a uverbs fd (e.g. an rxe queue).
//
// Its address range stays valid for as long as the *Mapping is reachable,
// whatever other goroutines do: Unmap does not munmap the range but
// atomically replaces it (mmap MAP_FIXED) with private anonymous memory,
// which drops the mapping's reference to the file (so the kernel can tear
// the context down) while a goroutine that is still reading or writing the
// ring touches harmless zero-filled memory instead of faulting, or, once
// the range is reused, someone else's memory. The range itself is returned
// to the kernel by a cleanup when the Mapping becomes unreachable.
//
// The memory is reached only through the bounds-checked accessors below;
// no slice or pointer into it leaves this package, so no user of a ring
// can hold its address past the Mapping's lifetime. Object lifetimes
// (uverbs) decide when a ring may be used; the Mapping only guarantees that
// a late access is never a fault.
type Mapping struct {
	base   unsafe.Pointer // immutable: start of the range
	size   int            // immutable
	name   string
	mapped atomic.Bool // the file is mapped (false after Unmap)
	mu     sync.Mutex  // serialises Unmap
}

// region is what the cleanup of a Mapping needs (not the Mapping itself,
// which would keep it reachable).
type region struct {
	base unsafe.Pointer
	size uintptr
}

var (
	mapMu  sync.Mutex
	mapped = map[*Mapping]string{}
)

// Mmap maps size bytes at offset of fd read/write and shared.
func Mmap(fd *FD, offset int64, size int, name string) (*Mapping, error) {
	if size <= 0 {
		return nil, fmt.Errorf("sys: mmap %s: size %d: %w", name, size, unix.EINVAL)
	}
	raw, ok := fd.acquire()
	if !ok {
		return nil, ErrClosedFD
	}
	p, err := unix.MmapPtr(raw, offset, nil, uintptr(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	fd.release()
	if err != nil {
		return nil, err
	}
	return newMapping(p, size, name), nil
}

func newMapping(p unsafe.Pointer, size int, name string) *Mapping {
	m := &Mapping{base: p, size: size, name: name}
	m.mapped.Store(true)
	runtime.AddCleanup(m, func(r region) { unix.MunmapPtr(r.base, r.size) }, region{p, uintptr(size)})
	if tracing.Load() {
		buf := make([]byte, 4096)
		buf = buf[:runtime.Stack(buf, false)]
		mapMu.Lock()
		mapped[m] = string(buf)
		mapMu.Unlock()
	}
	return m
}

// Len returns the size of the mapping in bytes.
func (m *Mapping) Len() int { return m.size }

// Mapped reports whether the file is still mapped (Unmap not called).
func (m *Mapping) Mapped() bool { return m.mapped.Load() }

// Unmap drops the mapping of the file: the range is replaced by anonymous
// zero-filled memory in one atomic mmap, so concurrent accesses never
// fault. Calling it twice is a no-op.
func (m *Mapping) Unmap() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.mapped.Load() {
		return nil
	}
	_, err := unix.MmapPtr(-1, 0, m.base, uintptr(m.size), unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_FIXED)
	if err != nil {
		// Without the placeholder the file stays mapped; keep it so.
		return fmt.Errorf("sys: unmap %s: %w", m.name, err)
	}
	m.mapped.Store(false)
	mapMu.Lock()
	delete(mapped, m)
	mapMu.Unlock()
	return nil
}

// at panics with a clear message on an access outside the mapping:
// that is a bug in the ring code, never the result of user input.
func (m *Mapping) at(off, n int) unsafe.Pointer {
	if off < 0 || n < 0 || off > m.size-n {
		panic(fmt.Sprintf("sys: access [%d,%d) outside mapping %s of %d bytes", off, off+n, m.name, m.size))
	}
	return unsafe.Add(m.base, off)
}

// Load32 atomically loads the 32-bit word at off (acquire).
func (m *Mapping) Load32(off int) uint32 {
	if off&3 != 0 {
		panic(fmt.Sprintf("sys: unaligned 32-bit load at %d in %s", off, m.name))
	}
	v := (*atomic.Uint32)(m.at(off, 4)).Load()
	runtime.KeepAlive(m)
	return v
}

// Store32 atomically stores v at off (release).
func (m *Mapping) Store32(off int, v uint32) {
	if off&3 != 0 {
		panic(fmt.Sprintf("sys: unaligned 32-bit store at %d in %s", off, m.name))
	}
	(*atomic.Uint32)(m.at(off, 4)).Store(v)
	runtime.KeepAlive(m)
}

// ReadAt copies len(dst) bytes at off into dst.
func (m *Mapping) ReadAt(dst []byte, off int) {
	copy(dst, unsafe.Slice((*byte)(m.at(off, len(dst))), len(dst)))
	runtime.KeepAlive(m)
}

// WriteAt copies src to off.
func (m *Mapping) WriteAt(src []byte, off int) {
	copy(unsafe.Slice((*byte)(m.at(off, len(src))), len(src)), src)
	runtime.KeepAlive(m)
}

// OpenMappings lists traced mappings that were not unmapped.
func OpenMappings() []string {
	mapMu.Lock()
	defer mapMu.Unlock()
	var out []string
	for m, stack := range mapped {
		out = append(out, fmt.Sprintf("mapping %s (%d bytes) created at:\n%s", m.name, m.size, stack))
	}
	sort.Strings(out)
	return out
}
