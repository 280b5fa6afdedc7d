package sys

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrClosedFD is returned when an operation is attempted on a closed FD.
var ErrClosedFD = errors.New("sys: use of closed file descriptor")

// FD is an owned file descriptor. It is closed exactly once; Close is
// idempotent and safe to call concurrently with other Close calls.
//
// Every FD created by this package is O_CLOEXEC.
type FD struct {
	raw    int32
	closed atomic.Bool
	// inUse is held shared by every system call that uses raw and
	// exclusively by Close, so the number is never closed (and possibly
	// reused by another open) while a call is in flight.
	inUse sync.RWMutex
	name  string
	kind  string // appended to name by Name (joined only when asked)

	// Retired mappings of this fd still in place (mmap.go), in slots
	// (a retired Mapping knows its slot; base is nil in a free one) with
	// a free list, not a map: a CQ's destroy retires a ring and its
	// finalizer forgets it, and a map's insert, lookup and delete were
	// about 350 instructions of that. Close replaces them before it
	// closes the number.
	retMu       sync.Mutex
	retired     []retiredRange
	retFreeHead int32 // index+1 of the first free slot; 0: none
}

// retiredRange is one slot of FD.retired.
type retiredRange struct {
	base     unsafe.Pointer // nil: free
	size     uintptr
	nextFree int32 // free list link (index+1), while free
}

// retire records [base, base+size) as retired and returns its slot
// (under retMu).
func (fd *FD) retire(base unsafe.Pointer, size uintptr) int32 {
	var i int32
	if fd.retFreeHead != 0 {
		i = fd.retFreeHead - 1
		fd.retFreeHead = fd.retired[i].nextFree
	} else {
		fd.retired = append(fd.retired, retiredRange{})
		i = int32(len(fd.retired) - 1)
	}
	fd.retired[i] = retiredRange{base: base, size: size}
	return i
}

// unretire frees slot i if it still holds base, and reports whether it
// did (under retMu). A slot of a range Close replaced is already free,
// and may hold another range by now: base tells them apart, since a
// range stays mapped (as zero pages) until its own release.
func (fd *FD) unretire(i int32, base unsafe.Pointer) bool {
	if i < 0 || int(i) >= len(fd.retired) || fd.retired[i].base != base {
		return false
	}
	fd.retired[i] = retiredRange{nextFree: fd.retFreeHead}
	fd.retFreeHead = i + 1
	return true
}

// retiredLen returns the number of retired ranges in place (tests).
func (fd *FD) retiredLen() int {
	fd.retMu.Lock()
	defer fd.retMu.Unlock()
	n := 0
	for _, r := range fd.retired {
		if r.base != nil {
			n++
		}
	}
	return n
}

// NewFD takes ownership of raw. name describes the fd in leak reports.
// A negative raw gives an error matching unix.EBADF.
func NewFD(raw int, name string) (*FD, error) {
	if raw < 0 {
		return nil, fmt.Errorf("sys: invalid fd %d for %s: %w", raw, name, unix.EBADF)
	}
	fd := &FD{raw: int32(raw), name: name}
	traceOpen(fd)
	return fd, nil
}

// NewFDKind is NewFD with the description name + " " + kind ("rxe0",
// "async events"), joined only when Name is called: an open makes no
// string for a report that normally never comes. A negative raw gives an
// error matching unix.EBADF.
func NewFDKind(raw int, name, kind string) (*FD, error) {
	if raw < 0 {
		return nil, fmt.Errorf("sys: invalid fd %d for %s %s: %w", raw, name, kind, unix.EBADF)
	}
	fd := &FD{raw: int32(raw), name: name, kind: kind}
	traceOpen(fd)
	return fd, nil
}

// Open opens path with flags|O_CLOEXEC and returns an owned FD.
func Open(path string, flags int) (*FD, error) {
	for {
		raw, err := unix.Open(path, flags|unix.O_CLOEXEC, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "open", Path: path, Err: err}
		}
		return NewFD(raw, path)
	}
}

// Int returns the raw descriptor number, or -1 once closed.
func (fd *FD) Int() int {
	if fd == nil || fd.closed.Load() {
		return -1
	}
	return int(fd.raw)
}

// Name returns the description given at creation.
func (fd *FD) Name() string {
	if fd.kind == "" {
		return fd.name
	}
	return fd.name + " " + fd.kind
}

// acquire returns the raw number for one system call, or false once the
// FD is closed. Every successful acquire must be paired with release.
func (fd *FD) acquire() (int, bool) {
	if fd == nil {
		return -1, false
	}
	fd.inUse.RLock()
	if fd.closed.Load() {
		fd.inUse.RUnlock()
		return -1, false
	}
	return int(fd.raw), true
}

func (fd *FD) release() { fd.inUse.RUnlock() }

// Close closes the descriptor once no system call using it is in flight.
// Mappings of it that were retired (Mapping.Retire) and are still in place
// are replaced first, so that none keeps the file open. Closing twice
// returns nil.
func (fd *FD) Close() error {
	if fd == nil || !fd.closed.CompareAndSwap(false, true) {
		return nil
	}
	fd.replaceRetired()
	fd.inUse.Lock()
	defer fd.inUse.Unlock()
	traceClose(fd)
	return unix.Close(int(fd.raw))
}

// Disown marks the FD closed without closing the descriptor and returns the
// raw number; used when ownership moves elsewhere (e.g. to an os.File).
func (fd *FD) Disown() int {
	if !fd.closed.CompareAndSwap(false, true) {
		return -1
	}
	fd.replaceRetired()
	fd.inUse.Lock()
	defer fd.inUse.Unlock()
	traceClose(fd)
	return int(fd.raw)
}

// SetNonblock sets or clears O_NONBLOCK.
func (fd *FD) SetNonblock(on bool) error {
	raw, ok := fd.acquire()
	if !ok {
		return ErrClosedFD
	}
	defer fd.release()
	return unix.SetNonblock(raw, on)
}

// IsCloexec reports whether FD_CLOEXEC is set on raw (used by tests).
func IsCloexec(raw int) (bool, error) {
	flags, err := unix.FcntlInt(uintptr(raw), unix.F_GETFD, 0)
	if err != nil {
		return false, err
	}
	return flags&unix.FD_CLOEXEC != 0, nil
}

// IsNonblock reports whether O_NONBLOCK is set on raw.
func IsNonblock(raw int) (bool, error) {
	flags, err := unix.FcntlInt(uintptr(raw), unix.F_GETFL, 0)
	if err != nil {
		return false, err
	}
	return flags&unix.O_NONBLOCK != 0, nil
}

// Leak tracing. When enabled (tests), every owned descriptor records the
// stack that created it, and OpenFDs lists those not yet closed.

var (
	tracing atomic.Bool
	traceMu sync.Mutex
	traced  = map[*FD]string{}
)

// EnableLeakTracing turns on creation-stack recording for owned FDs and
// owned mappings. Call it from TestMain.
func EnableLeakTracing() { tracing.Store(true) }

func traceOpen(fd *FD) {
	if !tracing.Load() {
		return
	}
	buf := make([]byte, 4096)
	buf = buf[:runtime.Stack(buf, false)]
	traceMu.Lock()
	traced[fd] = string(buf)
	traceMu.Unlock()
}

func traceClose(fd *FD) {
	if !tracing.Load() {
		return
	}
	traceMu.Lock()
	delete(traced, fd)
	traceMu.Unlock()
}

// OpenFDs describes the traced descriptors that are still open: name and
// creation stack. It is empty when nothing leaked (or tracing is off).
func OpenFDs() []string {
	traceMu.Lock()
	defer traceMu.Unlock()
	var out []string
	for fd, stack := range traced {
		out = append(out, fmt.Sprintf("fd %d (%s) opened at:\n%s", fd.raw, fd.Name(), stack))
	}
	sort.Strings(out)
	return out
}

// LeakReport returns "" when no traced FD, mapping or buffer is open, otherwise a
// report naming each leaked resource and where it was created.
func LeakReport() string {
	fds := OpenFDs()
	maps := append(OpenMappings(), OpenBuffers()...)
	if len(fds) == 0 && len(maps) == 0 {
		return ""
	}
	return "leaked resources:\n" + strings.Join(append(fds, maps...), "\n")
}
