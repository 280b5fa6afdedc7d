package uverbs

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/pureverbs/pureverbs/internal/sys"
)

// TestMapFileBufferBounds: a range reaching past the end of the file, whose
// pages would raise SIGBUS when touched, is refused with ErrInvalid; the
// last byte of a range that fits is usable; a closed file gives ErrClosed.
func TestMapFileBufferBounds(t *testing.T) {
	ps := sys.PageSize
	name := filepath.Join(t.TempDir(), "buf")
	if err := os.WriteFile(name, make([]byte, 2*ps+10), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := MapFileBuffer(f, 0, 2*ps+10)
	if err != nil {
		t.Fatal(err)
	}
	mem := b.Bytes()
	mem[len(mem)-1] = 1 // within the file: no fault
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		off  int64
		size int
	}{
		{0, 2*ps + 11},
		{int64(ps), 2 * ps},
		{int64(2 * ps), ps},
		{int64(4 * ps), 1},
		{math.MaxInt64 / int64(ps) * int64(ps), math.MaxInt},
	} {
		b, err := MapFileBuffer(f, c.off, c.size)
		if !errors.Is(err, ErrInvalid) || !errors.Is(err, sys.EINVAL) {
			t.Errorf("%d bytes at %d of a file of %d: %v, want ErrInvalid", c.size, c.off, 2*ps+10, err)
		}
		if b != nil {
			b.Close()
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := MapFileBuffer(f, 0, ps); !errors.Is(err, ErrClosed) || !errors.Is(err, os.ErrClosed) {
		t.Errorf("closed file: %v, want ErrClosed", err)
	}
	if r := sys.OpenBuffers(); len(r) != 0 {
		t.Errorf("OpenBuffers = %q", r)
	}
}
