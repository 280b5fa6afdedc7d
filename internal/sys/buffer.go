package sys

import (
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// SliceAddr returns the address of b's first byte as the integer the
// kernel takes in a command (the start of a memory region in REG_MR, an
// SGE address), or 0 for an empty slice.
//
// The integer is invisible to the garbage collector: the caller must keep
// b's backing array reachable, and in the heap, for as long as the kernel
// may use the address. Storing the slice in a heap object (an MR, a
// driver struct) before taking the address does both: escape analysis
// then never places the array on a goroutine stack, which may move.
func SliceAddr(b []byte) uint64 {
	if len(b) == 0 {
		return 0
	}
	return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
}

// PtrAddr returns the address of *v as an integer, under the rules of
// SliceAddr: v must point into the heap and stay reachable while the
// kernel may write through the address (e.g. rxe's MODIFY_SRQ, whose
// driver payload names where the kernel writes the resized ring's mmap
// information).
func PtrAddr[T any](v *T) uint64 {
	return uint64(uintptr(unsafe.Pointer(v)))
}

// LoadByte returns b[i], read with an atomic load of the aligned 32-bit
// word that holds it, for memory a device writes behind the program's
// back (a peer's RDMA WRITE into a registered buffer): the compiler must
// then read the memory on every call. The word must lie within b (the
// buffers of AllocBuffer are page-aligned and whole pages); where it
// does not, b[i] is read plainly. i must be an index of b.
func LoadByte(b []byte, i int) byte {
	base := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	addr := base + uintptr(i)
	word := addr &^ 3
	if i < 0 || i >= len(b) || word < base || word+4 > base+uintptr(len(b)) {
		return b[i]
	}
	v := atomic.LoadUint32((*uint32)(unsafe.Pointer(unsafe.SliceData(b[word-base:]))))
	shift := (addr - word) * 8
	if !littleEndian {
		shift = (3 - (addr - word)) * 8
	}
	return byte(v >> shift)
}

// littleEndian: the byte order of the words LoadByte reads.
var littleEndian = func() bool {
	x := uint32(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// PageSize is the system page size.
var PageSize = os.Getpagesize()

// Buffer is page-aligned memory outside the Go heap: a private anonymous
// mapping, zero-filled (or a shared mapping of a file: MapFile), never
// moved or scanned by the garbage collector,
// and released only by Free (there is no finalizer: the collector cannot
// see the slices Bytes hands out, so it cannot know when they are dead).
//
// Leak tracing (EnableLeakTracing) records where each Buffer was
// allocated; OpenBuffers lists those not freed.
type Buffer struct {
	mu    sync.Mutex
	base  unsafe.Pointer // nil after Free
	size  int            // requested length
	total uintptr        // mapped length (whole pages)
	name  string
}

var (
	bufMu   sync.Mutex
	buffers = map[*Buffer]string{}
)

// AllocBuffer maps size bytes (rounded up to whole pages) of private
// anonymous read/write memory.
func AllocBuffer(size int, name string) (*Buffer, error) {
	return allocBuffer(size, name, PageSize, 0)
}

// AllocHugeBuffer is AllocBuffer backed by huge pages of the system's
// default size (MAP_HUGETLB), hugePage bytes each (HugePageSize): size
// is rounded up to whole huge pages. With none free the kernel answers
// ENOMEM.
func AllocHugeBuffer(size int, name string, hugePage int) (*Buffer, error) {
	if hugePage <= 0 || hugePage&(hugePage-1) != 0 {
		return nil, fmt.Errorf("sys: buffer %s: huge page size %d: %w", name, hugePage, unix.EINVAL)
	}
	return allocBuffer(size, name, hugePage, unix.MAP_HUGETLB)
}

// HugePageSize returns the system's default huge page size
// (/proc/meminfo's Hugepagesize), or 0 when it has none.
func HugePageSize() int {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Hugepagesize:"); ok {
			f := strings.Fields(v)
			if len(f) == 2 && f[1] == "kB" {
				if n, err := strconv.Atoi(f[0]); err == nil && n > 0 {
					return n << 10
				}
			}
		}
	}
	return 0
}

// ErrPastEOF is MapFile's error for a range reaching past the end of the
// file: its pages would fault (SIGBUS) when touched. It matches
// unix.EINVAL.
var ErrPastEOF = fmt.Errorf("range past the end of the file: %w", unix.EINVAL)

// FileSize returns the size of the file fd when it has one that bounds
// its mappings: a regular file's (hugetlbfs and tmpfs files included, as
// ftruncate(2) set it) or a block device's; ok is false for other files
// (character devices such as device DAX).
func FileSize(fd int) (size int64, ok bool, err error) {
	var st unix.Stat_t
	for {
		err = unix.Fstat(fd, &st)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return 0, false, err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		return st.Size, true, nil
	case unix.S_IFBLK:
		n, err := unix.IoctlGetUint64(fd, unix.BLKGETSIZE64)
		if err != nil {
			return 0, false, err
		}
		return int64(n), true, nil
	}
	return 0, false, nil
}

// MapFile maps size bytes of the file fd from offset (a multiple of the
// page size), shared and read/write: stores reach the file. The mapping
// outlives fd, which the caller may close. A range reaching past the end
// of a regular file or block device (FileSize) is refused with an error
// matching ErrPastEOF, before the kernel maps pages that would fault.
func MapFile(fd int, offset int64, size int, name string) (*Buffer, error) {
	if size <= 0 || offset < 0 || offset%int64(PageSize) != 0 {
		return nil, fmt.Errorf("sys: buffer %s: size %d at offset %d: %w", name, size, offset, unix.EINVAL)
	}
	fsize, sized, err := FileSize(fd)
	if err != nil {
		return nil, fmt.Errorf("sys: buffer %s: fstat: %w", name, err)
	}
	if sized && int64(size) > fsize-offset {
		return nil, fmt.Errorf("sys: buffer %s: %d bytes at offset %d, the file has %d: %w", name, size, offset, fsize, ErrPastEOF)
	}
	ps := uintptr(PageSize)
	total := (uintptr(size) + ps - 1) &^ (ps - 1)
	p, err := unix.MmapPtr(fd, offset, nil, total, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	return newBuffer(p, size, total, name), nil
}

func allocBuffer(size int, name string, page int, flags int) (*Buffer, error) {
	if size <= 0 {
		return nil, fmt.Errorf("sys: buffer %s: size %d: %w", name, size, unix.EINVAL)
	}
	ps := uintptr(page)
	total := (uintptr(size) + ps - 1) &^ (ps - 1)
	if total < uintptr(size) {
		return nil, fmt.Errorf("sys: buffer %s: size %d: %w", name, size, unix.EINVAL)
	}
	p, err := unix.MmapPtr(-1, 0, nil, total, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|flags)
	if err != nil {
		return nil, err
	}
	return newBuffer(p, size, total, name), nil
}

// newBuffer wraps a mapping of total bytes at p, size of them in use.
func newBuffer(p unsafe.Pointer, size int, total uintptr, name string) *Buffer {
	b := &Buffer{base: p, size: size, total: total, name: name}
	if tracing.Load() {
		st := make([]byte, 4096)
		st = st[:runtime.Stack(st, false)]
		bufMu.Lock()
		buffers[b] = string(st)
		bufMu.Unlock()
	}
	return b
}

// Bytes returns the buffer's memory (length and capacity as requested),
// or nil after Free. The slice must not be used after Free: the range is
// then unmapped, and an access faults.
func (b *Buffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.base == nil {
		return nil
	}
	return unsafe.Slice((*byte)(b.base), b.size)
}

// Int64s returns the buffer as int64s (its length over 8; the mapping is
// page-aligned), or nil after Free.
func (b *Buffer) Int64s() []int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.base == nil {
		return nil
	}
	return unsafe.Slice((*int64)(b.base), b.size/8)
}

// Len returns the requested length.
func (b *Buffer) Len() int { return b.size }

// Free unmaps the buffer. Calling it again is a no-op.
func (b *Buffer) Free() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.base == nil {
		return nil
	}
	if err := unix.MunmapPtr(b.base, b.total); err != nil {
		return fmt.Errorf("sys: free buffer %s: %w", b.name, err)
	}
	b.base = nil
	bufMu.Lock()
	delete(buffers, b)
	bufMu.Unlock()
	return nil
}

// OpenBuffers lists the traced buffers that were not freed.
func OpenBuffers() []string {
	bufMu.Lock()
	defer bufMu.Unlock()
	var out []string
	for b, stack := range buffers {
		out = append(out, fmt.Sprintf("buffer %s (%d bytes) allocated at:\n%s", b.name, b.size, stack))
	}
	sort.Strings(out)
	return out
}
