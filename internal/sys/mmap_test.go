package sys

import (
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// memfdMapping maps a 2-page memfd the way a uverbs ring is mapped.
func memfdMapping(t *testing.T) (*FD, *Mapping) {
	t.Helper()
	raw, err := unix.MemfdCreate("pureverbs-ring", unix.MFD_CLOEXEC)
	if err != nil {
		t.Skipf("memfd_create: %v", err)
	}
	fd, err := NewFD(raw, "memfd ring")
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Ftruncate(raw, 8192); err != nil {
		t.Fatal(err)
	}
	m, err := Mmap(fd, 0, 8192, "test ring")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Unmap(); fd.Close() })
	return fd, m
}

// fileMapped reports whether /proc/self/maps still lists the memfd.
func fileMapped(t *testing.T) bool {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(string(b), "pureverbs-ring")
}

func TestMappingAccessors(t *testing.T) {
	_, m := memfdMapping(t)
	m.Store32(4096, 0xdeadbeef)
	if v := m.Load32(4096); v != 0xdeadbeef {
		t.Fatalf("Load32 = %#x", v)
	}
	m.WriteAt([]byte("hello"), 8187)
	got := make([]byte, 5)
	m.ReadAt(got, 8187)
	if string(got) != "hello" || m.Len() != 8192 || !m.Mapped() {
		t.Fatalf("ReadAt = %q, len %d, mapped %v", got, m.Len(), m.Mapped())
	}
	for _, f := range []func(){
		func() { m.Load32(8192) }, func() { m.Load32(-4) }, func() { m.Load32(2) },
		func() { m.Store32(8190, 1) }, func() { m.ReadAt(make([]byte, 2), 8191) },
		func() { m.WriteAt(make([]byte, 1), -1) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Error("out-of-range access did not panic")
				}
			}()
			f()
		}()
	}
}

// TestMappingUnmapUnderUse is defect 1 of the lifetime issue: goroutines
// keep reading and writing a ring while another unmaps it. With the old
// Mapping (munmap, raw Bytes()) the readers died with "unexpected fault
// address"; now the range stays valid (zero-filled), the file reference is
// dropped at once, and -race sees no race on the Mapping itself.
func TestMappingUnmapUnderUse(t *testing.T) {
	_, m := memfdMapping(t)
	if !fileMapped(t) {
		t.Fatal("memfd not in /proc/self/maps after Mmap")
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var started sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		started.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 64)
			first := true
			for !stop.Load() {
				for off := 0; off < 8192; off += 512 {
					m.Store32(off, uint32(off))
					_ = m.Load32(off)
					m.ReadAt(buf, off)
					m.WriteAt(buf, off+64)
				}
				if first {
					started.Done()
					first = false
				}
			}
		}()
	}
	started.Wait()
	if err := m.Unmap(); err != nil {
		t.Fatal(err)
	}
	if m.Mapped() {
		t.Fatal("Mapped after Unmap")
	}
	if fileMapped(t) {
		t.Fatal("memfd still mapped after Unmap")
	}
	// The goroutines keep running on the placeholder for a while.
	for i := 0; i < 1000; i++ {
		_ = m.Load32(0)
	}
	stop.Store(true)
	wg.Wait()
	if err := m.Unmap(); err != nil {
		t.Fatalf("second Unmap = %v", err)
	}
	// The placeholder is private: writes after Unmap never reach the file.
	m.Store32(0, 7)
	if len(OpenMappings()) != 0 && tracing.Load() {
		for _, s := range OpenMappings() {
			if strings.Contains(s, "test ring") {
				t.Fatalf("leak tracer still lists the unmapped ring:\n%s", s)
			}
		}
	}
}
