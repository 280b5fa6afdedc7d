package sys

import (
	"cmp"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"unsafe"
	"weak"

	"golang.org/x/sys/unix"
)

// Mapping is an owned shared mapping of a uverbs fd (e.g. an rxe queue).
//
// Its address range stays valid for as long as the *Mapping is reachable,
// whatever other goroutines do: neither Unmap nor Retire munmaps the
// range. Unmap atomically replaces it (mmap MAP_FIXED) with private
// anonymous memory, which drops the mapping's reference to the file (so the
// kernel can tear the context down) while a goroutine that is still
// reading or writing the ring touches harmless zero-filled memory instead
// of faulting, or, once the range is reused, someone else's memory.
// Retire, what destroying an object uses, makes no system call at all: the
// dead ring stays mapped, unused, and a late access touches only its own
// pages, which the kernel no longer reads; the fd's Close replaces every
// retired range still there as Unmap does, so the context can still be
// torn down, and Retire falls back to Unmap beyond a bound (retireMaxBytes,
// retireMaxCount), so dead rings cannot pin unbounded kernel memory
// between garbage collections. The range itself is returned to the kernel
// (munmap) after the Mapping becomes unreachable: its finalizer hands it to
// the returner goroutine, which munmaps adjacent dead ranges together,
// so destroying a ring costs at most one munmap, as in libibverbs, only
// later, and a run of rings destroyed together costs one.
//
// The memory is reached only through the bounds-checked accessors below;
// no slice into it leaves this package, and the typed pointers of Ptr
// (what the data path writes work requests through) are kept beside their
// Mapping or within one call, never past the Mapping's lifetime. Object
// lifetimes (uverbs) decide when a ring may be used; the Mapping only
// guarantees that a late access is never a fault.
type Mapping struct {
	mapping
	// A Mapping fills a 512-byte size class, not its natural 64: the
	// runtime keeps a span's finalizer records in a list sorted by
	// offset and walks it on every SetFinalizer, so with 128 Mappings to
	// an 8 KiB span a ring's create walked about a hundred records
	// (runtime.addspecial, about 700 instructions per CQ in callgrind's
	// count in the guest); with 16 per span it walks a few. The cost is
	// 448 bytes per ring, whose own pages are 4 KiB and up.
	_ [mappingSize - unsafe.Sizeof(mapping{})]byte
}

const mappingSize = 512

type mapping struct {
	base   unsafe.Pointer // immutable: start of the range
	size   int            // immutable
	fd     *FD            // immutable: the mapped fd (nil in tests of placeholders)
	name   string
	mapped atomic.Bool // the file is mapped (false after Unmap)
	mu     sync.Mutex  // serialises Unmap
	retIdx int32       // slot in fd.retired once retired (set under mu), else -1
}

// finalize is the Mapping's finalizer: it hands the range to the returner
// (region.release). It runs once the Mapping is unreachable, so no
// accessor can reach the range any more.
func (m *Mapping) finalize() { region{m.base, uintptr(m.size), m.fd, m.retIdx}.release() }

// region is what the release of a Mapping's range needs.
type region struct {
	base unsafe.Pointer
	size uintptr
	fd   *FD
	idx  int32 // its slot in fd.retired if it was retired, else -1
}

// release is what the finalizer does: it hands the range to the returner, which
// munmaps it soon after, together with the other ranges released
// meanwhile. With the returner's queue full it munmaps the range itself.
// It allocates nothing (tests of the data path count every allocation of
// the process, finalizers included).
func (r region) release() {
	dead.mu.Lock()
	if dead.n < len(dead.list) {
		dead.list[dead.n] = r
		dead.n++
		dead.mu.Unlock()
		select {
		case deadWake <- struct{}{}:
		default: // a wake-up is pending
		}
		return
	}
	dead.mu.Unlock()
	one := [1]region{r}
	unmapRegions(one[:])
}

// dead holds the ranges of unreachable Mappings not yet returned to the
// kernel. The returner takes them in rounds: whatever was released while
// a round's munmaps ran makes the next round. After a collection the
// finalizers release rings far faster than munmap returns them (a dead ring
// costs 25-45 us under TCG, mostly its TLB shootdown), so a round takes
// many, and adjacent ranges (mmap places rings made one after another
// next to each other) go back in one munmap, one TLB flush. A ring that
// is mapped, reachable or retired is never among them, so merging cannot
// reach one in use.
var dead struct {
	mu   sync.Mutex
	list [1024]region
	n    int
	busy bool // the returner is in a round
}

var (
	deadWake      = make(chan struct{}, 1)
	deadRound     [len(dead.list)]region // the returner's current round
	startReturner sync.Once
)

// returner is the one goroutine that returns dead ranges. It starts with
// the first Mapping and parks on deadWake between rounds.
func returner() {
	for range deadWake {
		for {
			dead.mu.Lock()
			k := copy(deadRound[:], dead.list[:dead.n])
			clear(dead.list[:dead.n])
			dead.n = 0
			dead.busy = k > 0
			dead.mu.Unlock()
			if k == 0 {
				break
			}
			unmapRegions(deadRound[:k])
			clear(deadRound[:k])
		}
	}
}

// unmapRegions forgets each range where it is retired, then munmaps the
// ranges, adjacent ones together. Forgetting first (under the fd's retMu)
// keeps the fd's Close from replacing a range that is being returned to
// the kernel, which might by then be someone else's; a range Close
// already replaced maps zero pages of ours until it is returned.
func unmapRegions(b []region) {
	slices.SortFunc(b, func(x, y region) int { return cmp.Compare(uintptr(x.base), uintptr(y.base)) })
	page := uintptr(unix.Getpagesize())
	for i := 0; i < len(b); {
		base := b[i].base
		end := uintptr(base) + roundUp(b[i].size, page)
		j := i + 1
		for ; j < len(b) && uintptr(b[j].base) == end; j++ {
			end += roundUp(b[j].size, page)
		}
		// Forgotten run by run, right before its munmap: a Close
		// meanwhile still replaces the ranges of later runs, so the
		// file is not held for the whole round.
		for _, r := range b[i:j] {
			r.forget()
		}
		if unix.MunmapPtr(base, end-uintptr(base)) != nil {
			deadMunmapErrs.Add(1) // a range that was not ours: a bug
		}
		if tracing.Load() {
			mapMu.Lock()
			for _, r := range b[i:j] {
				delete(ranges, uintptr(r.base))
			}
			mapMu.Unlock()
		}
		deadReturned.Add(int64(j - i))
		deadMunmaps.Add(1)
		i = j
	}
}

func roundUp(n, to uintptr) uintptr { return (n + to - 1) &^ (to - 1) }

// deadReturned and deadMunmaps count the ranges returned and the munmaps
// that returned them, deadMunmapErrs the munmaps that failed (tests).
var deadReturned, deadMunmaps, deadMunmapErrs atomic.Int64

// forget drops the range from its fd's retired set.
func (r region) forget() {
	if r.fd == nil || r.idx < 0 {
		return
	}
	r.fd.retMu.Lock()
	if r.fd.unretire(r.idx, r.base) {
		retiredBytes.Add(-int64(r.size))
		retiredCount.Add(-1)
	}
	r.fd.retMu.Unlock()
}

// PendingDeadRanges returns the number of ranges of unreachable Mappings
// not yet munmapped (tests and reports).
func PendingDeadRanges() int {
	dead.mu.Lock()
	defer dead.mu.Unlock()
	n := dead.n
	if dead.busy {
		n++ // a round is under way
	}
	return n
}

// Bounds on retired rings not yet returned by their finalizer (process-wide):
// beyond them Retire replaces the range at once, as Unmap does. Variables
// for tests.
var (
	retireMaxBytes int64 = 32 << 20
	retireMaxCount int64 = 4096
)

var retiredBytes, retiredCount atomic.Int64

var (
	mapMu  sync.Mutex
	mapped = map[*Mapping]string{}
	// ranges: every range a Mapping took, by base address, until it is
	// munmapped; mapped forgets a Mapping at Unmap or Retire, when its
	// range is still the process's (a placeholder or a retired ring).
	ranges = map[uintptr]tracedRange{}
)

// tracedRange is a range in ranges: its Mapping, weakly (the range is
// due back once the Mapping is collected), and its description.
type tracedRange struct {
	m    weak.Pointer[Mapping]
	desc string
}

// Mmap maps size bytes at offset of fd read/write and shared. name says
// which ring it is ("cq ring"); reports add the fd's name.
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
	return newMapping(p, size, fd, name), nil
}

func newMapping(p unsafe.Pointer, size int, fd *FD, name string) *Mapping {
	m := &Mapping{mapping: mapping{base: p, size: size, fd: fd, name: name, retIdx: -1}}
	m.mapped.Store(true)
	startReturner.Do(func() { go returner() })
	// A finalizer, not runtime.AddCleanup: AddCleanup allocates twice per
	// call (a box for its argument and a closure of its generic caller,
	// Go 1.26), and a CQ maps one ring, a QP two. The finalizer reads only
	// the immutable fields; m has no pointer back to itself through fd,
	// so no cycle keeps it.
	runtime.SetFinalizer(m, (*Mapping).finalize)
	if tracing.Load() {
		buf := make([]byte, 4096)
		buf = buf[:runtime.Stack(buf, false)]
		mapMu.Lock()
		mapped[m] = string(buf)
		ranges[uintptr(p)] = tracedRange{weak.Make(m), fmt.Sprintf("range of %s (%d bytes) created at:\n%s", m.desc(), size, buf)}
		mapMu.Unlock()
	}
	return m
}

// desc names the mapping in errors and leak reports: the fd's name and
// the ring's (joined only when needed: a string per ring would be an
// allocation per create).
func (m *Mapping) desc() string {
	if m.fd == nil {
		return m.name
	}
	return m.fd.Name() + " " + m.name
}

// Len returns the size of the mapping in bytes.
func (m *Mapping) Len() int { return m.size }

// Mapped reports whether the mapping is in use (neither Unmap nor Retire
// called).
func (m *Mapping) Mapped() bool { return m.mapped.Load() }

// Unmap drops the mapping of the file: the range is replaced by anonymous
// zero-filled memory in one atomic mmap, so concurrent accesses never
// fault. Calling it twice, or after Retire, is a no-op.
func (m *Mapping) Unmap() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.mapped.Load() {
		return nil
	}
	if err := placeholder(m.base, uintptr(m.size)); err != nil {
		// Without the placeholder the file stays mapped; keep it so.
		return fmt.Errorf("sys: unmap %s: %w", m.desc(), err)
	}
	m.done()
	return nil
}

// Retire ends the use of the mapping without a system call: the range
// keeps mapping the file until the Mapping is unreachable (its finalizer
// munmaps it) or the fd closes (Close replaces it as Unmap does). Past the
// process-wide bound on retired rings, or once the fd is closed, it is
// Unmap. Calling it twice, or after Unmap, is a no-op.
func (m *Mapping) Retire() error {
	m.mu.Lock()
	if !m.mapped.Load() {
		m.mu.Unlock()
		return nil
	}
	if fd := m.fd; fd != nil {
		fd.retMu.Lock()
		// Close sets closed before it takes retMu to replace the
		// retired ranges: seen open here, this one is among them.
		if !fd.closed.Load() && retiredCount.Load() < retireMaxCount &&
			retiredBytes.Load()+int64(m.size) <= retireMaxBytes {
			m.retIdx = fd.retire(m.base, uintptr(m.size))
			retiredBytes.Add(int64(m.size))
			retiredCount.Add(1)
			fd.retMu.Unlock()
			m.done()
			m.mu.Unlock()
			return nil
		}
		fd.retMu.Unlock()
	}
	m.mu.Unlock()
	return m.Unmap()
}

// done marks the mapping out of use and forgets it in the leak tracer
// (under m.mu).
func (m *Mapping) done() {
	m.mapped.Store(false)
	if tracing.Load() {
		mapMu.Lock()
		delete(mapped, m)
		mapMu.Unlock()
	}
}

// placeholder replaces [base, base+size) with private anonymous memory in
// one atomic mmap (MAP_FIXED), dropping whatever file it mapped.
func placeholder(base unsafe.Pointer, size uintptr) error {
	_, err := unix.MmapPtr(-1, 0, base, size, unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_FIXED)
	return err
}

// replaceRetired replaces every retired range of fd that is still mapped
// (fd.Close, after it marked the fd closed, before it closes the number):
// then no mapping holds the file and the kernel can release it.
func (fd *FD) replaceRetired() {
	fd.retMu.Lock()
	defer fd.retMu.Unlock()
	for i, r := range fd.retired {
		if r.base == nil {
			continue
		}
		if placeholder(r.base, r.size) != nil {
			// The file stays mapped until the finalizer munmaps it.
			continue
		}
		fd.unretire(int32(i), r.base)
		retiredBytes.Add(-int64(r.size))
		retiredCount.Add(-1)
	}
}

// RetiredMappings returns the number of retired mappings not yet returned
// and their bytes (process-wide), for tests and reports.
func RetiredMappings() (n int, bytes int64) {
	return int(retiredCount.Load()), retiredBytes.Load()
}

// at panics with a clear message on an access outside the mapping:
// that is a bug in the ring code, never the result of user input.
//
// The accessors are small enough to inline into the data path (the panics
// are out of line): each post and poll makes several.
func (m *Mapping) at(off, n int) unsafe.Pointer {
	// off < 0 or n < 0 wrap to huge unsigned values.
	if uint(off) > uint(m.size) || uint(n) > uint(m.size)-uint(off) {
		panic(&accessError{m: m, off: off, n: n})
	}
	return unsafe.Add(m.base, off)
}

// word checks a 32-bit access at off (aligned, inside) in one branch.
func (m *Mapping) word(off int) *atomic.Uint32 {
	if off&3 != 0 || uint(off) >= uint(m.size) || uint(m.size)-uint(off) < 4 {
		panic(&accessError{m: m, off: off, n: 4, word: true})
	}
	return (*atomic.Uint32)(unsafe.Add(m.base, off))
}

// accessError is the panic of an access outside a mapping or a misaligned
// 32-bit one. Its text is built only when printed, which keeps the
// accessors small enough to inline into the data path.
type accessError struct {
	m      *Mapping
	off, n int
	word   bool // a 32-bit load or store, which must be aligned
	align  int  // Ptr's: the alignment of its type
}

func (e *accessError) Error() string {
	if e.word && e.off&3 != 0 {
		return fmt.Sprintf("sys: unaligned 32-bit access at %d in %s", e.off, e.m.desc())
	}
	if e.align > 1 && e.off&(e.align-1) != 0 {
		return fmt.Sprintf("sys: access at %d in %s not aligned to %d bytes", e.off, e.m.desc(), e.align)
	}
	return fmt.Sprintf("sys: access [%d,%d) outside mapping %s of %d bytes", e.off, e.off+e.n, e.m.desc(), e.m.size)
}

// Ptr returns a pointer to the T at off in m, after one check that the T
// lies inside the mapping and is aligned for its type; the panic of a bad
// offset is the other accessors'. It is how the data path builds a work
// request in its ring slot, reads a completion where the kernel wrote it,
// and keeps a ring's index words, as librxe does, without a copy through a
// scratch buffer.
//
// T must hold no Go pointers (a generated abi struct, an atomic.Uint32):
// the garbage collector does not scan the mapping. The pointer is valid
// while m is reachable (Retire leaves the dead ring mapped and Unmap puts
// zero pages in its place; only the finalizer munmaps the range), so the
// caller keeps it no longer than m:
// beside m in the same struct, or within a call that keeps m reachable
// (runtime.KeepAlive after the last use).
func Ptr[T any](m *Mapping, off int) *T {
	var zero T
	size, align := int(unsafe.Sizeof(zero)), int(unsafe.Alignof(zero))
	if off&(align-1) != 0 || uint(off) > uint(m.size) || uint(size) > uint(m.size)-uint(off) {
		panic(&accessError{m: m, off: off, n: size, align: align})
	}
	return (*T)(unsafe.Add(m.base, off))
}

// Load32 atomically loads the 32-bit word at off (acquire).
func (m *Mapping) Load32(off int) uint32 {
	v := m.word(off).Load()
	runtime.KeepAlive(m)
	return v
}

// Store32 atomically stores v at off (release).
func (m *Mapping) Store32(off int, v uint32) {
	m.word(off).Store(v)
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
		out = append(out, fmt.Sprintf("mapping %s (%d bytes) created at:\n%s", m.desc(), m.size, stack))
	}
	sort.Strings(out)
	return out
}

// OpenRanges lists, with leak tracing on, the address ranges whose
// Mapping the garbage collector has reclaimed but which are not yet
// returned to the kernel (munmap), each with the stack that mapped it.
// Unmap, Retire and the fd's Close leave a range to the Mapping's
// finalizer, which hands it to the returner after a collection; a range
// listed here for long was lost on that way and stays a VMA of the
// process for good. (A range whose Mapping is still reachable, say from a
// test's cleanup list, is not listed: OpenMappings lists it while mapped.)
func OpenRanges() []string {
	mapMu.Lock()
	defer mapMu.Unlock()
	var out []string
	for _, r := range ranges {
		if r.m.Value() == nil {
			out = append(out, "collected, not returned: "+r.desc)
		}
	}
	sort.Strings(out)
	return out
}
