package sys

import (
	"fmt"
	"runtime"
	"sort"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Mapping is an owned shared mapping of a uverbs fd (e.g. an rxe queue).
type Mapping struct {
	mu   sync.Mutex
	data []byte
	name string
}

var (
	mapMu  sync.Mutex
	mapped = map[*Mapping]string{}
)

// Mmap maps size bytes at offset of fd read/write and shared.
func Mmap(fd *FD, offset int64, size int, name string) (*Mapping, error) {
	raw, ok := fd.acquire()
	if !ok {
		return nil, ErrClosedFD
	}
	b, err := unix.Mmap(raw, offset, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	fd.release()
	if err != nil {
		return nil, err
	}
	m := &Mapping{data: b, name: name}
	if tracing.Load() {
		buf := make([]byte, 4096)
		buf = buf[:runtime.Stack(buf, false)]
		mapMu.Lock()
		mapped[m] = string(buf)
		mapMu.Unlock()
	}
	return m, nil
}

// Bytes returns the mapped memory (nil after Unmap).
func (m *Mapping) Bytes() []byte { return m.data }

// Pointer returns the base address as an unsafe.Pointer for the provider
// packages' ring accessors, or nil after Unmap.
func (m *Mapping) Pointer() unsafe.Pointer {
	if len(m.data) == 0 {
		return nil
	}
	return unsafe.Pointer(&m.data[0])
}

// Unmap releases the mapping; calling it twice is a no-op.
func (m *Mapping) Unmap() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.data == nil {
		return nil
	}
	err := unix.Munmap(m.data)
	m.data = nil
	mapMu.Lock()
	delete(mapped, m)
	mapMu.Unlock()
	return err
}

// OpenMappings lists traced mappings that were not unmapped.
func OpenMappings() []string {
	mapMu.Lock()
	defer mapMu.Unlock()
	var out []string
	for m, stack := range mapped {
		out = append(out, fmt.Sprintf("mapping %s (%d bytes) created at:\n%s", m.name, len(m.data), stack))
	}
	sort.Strings(out)
	return out
}
