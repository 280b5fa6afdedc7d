package sys

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// bufferMapped reports whether /proc/self/maps has a mapping covering
// [addr, addr+size). The kernel may have merged the buffer's anonymous
// mapping with a neighbour of the same protection (the race runtime's and
// the Go heap's are such neighbours), so the buffer need not start a line
// of its own.
func bufferMapped(t *testing.T, addr uint64, size int) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		r, _, _ := strings.Cut(l, " ")
		lo, hi, ok := strings.Cut(r, "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 == nil && err2 == nil && start <= addr && addr+uint64(size) <= end {
			return true
		}
	}
	return false
}

func TestBuffer(t *testing.T) {
	for _, n := range []int{0, -1} {
		if _, err := AllocBuffer(n, "bad"); !errors.Is(err, unix.EINVAL) {
			t.Errorf("AllocBuffer(%d) = %v, want EINVAL", n, err)
		}
	}
	size := PageSize + 100
	b, err := AllocBuffer(size, "test buffer")
	if err != nil {
		t.Fatal(err)
	}
	mem := b.Bytes()
	if len(mem) != size || cap(mem) != size || b.Len() != size {
		t.Fatalf("len %d cap %d Len %d, want %d", len(mem), cap(mem), b.Len(), size)
	}
	addr := SliceAddr(mem)
	if addr%uint64(PageSize) != 0 {
		t.Errorf("buffer at %#x is not page aligned", addr)
	}
	for i, c := range mem {
		if c != 0 {
			t.Fatalf("byte %d = %d, want zero-filled", i, c)
		}
	}
	mem[0], mem[size-1] = 1, 2
	if !bufferMapped(t, addr, size) {
		t.Fatalf("no mapping at %#x", addr)
	}
	if r := OpenBuffers(); len(r) != 1 || !strings.Contains(r[0], "test buffer") || !strings.Contains(r[0], "TestBuffer") {
		t.Errorf("OpenBuffers = %q", r)
	}
	if !strings.Contains(LeakReport(), "test buffer") {
		t.Errorf("LeakReport does not name the buffer: %q", LeakReport())
	}
	if err := b.Free(); err != nil {
		t.Fatal(err)
	}
	if bufferMapped(t, addr, 1) {
		t.Errorf("mapping at %#x left after Free", addr)
	}
	if b.Bytes() != nil {
		t.Error("Bytes after Free is not nil")
	}
	if err := b.Free(); err != nil {
		t.Errorf("second Free = %v", err)
	}
	if r := OpenBuffers(); len(r) != 0 {
		t.Errorf("OpenBuffers after Free = %q", r)
	}
}

func TestAddrs(t *testing.T) {
	if SliceAddr(nil) != 0 || SliceAddr([]byte{}) != 0 {
		t.Error("empty slice address is not 0")
	}
	b := make([]byte, 16)
	if SliceAddr(b[4:]) != SliceAddr(b)+4 {
		t.Error("SliceAddr of a sub-slice")
	}
	p := new([2]uint64)
	if PtrAddr(&p[1]) != PtrAddr(p)+8 {
		t.Error("PtrAddr of a field")
	}
}

// TestLoadByte: every byte of an aligned buffer through its word, and
// the plain read where the word would leave the slice.
func TestLoadByte(t *testing.T) {
	b, err := AllocBuffer(PageSize, "loadbyte")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Free()
	m := b.Bytes()
	for i := range 64 {
		m[i] = byte(i*3 + 1)
	}
	for i := range 64 {
		if got := LoadByte(m, i); got != byte(i*3+1) {
			t.Errorf("LoadByte(%d) = %d, want %d", i, got, i*3+1)
		}
	}
	if got := LoadByte(m[1:6], 4); got != m[5] {
		t.Errorf("unaligned slice: %d, want %d", got, m[5])
	}
}
