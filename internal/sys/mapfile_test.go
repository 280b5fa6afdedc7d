package sys

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestMapFilePastEOF: MapFile refuses a range past the end of a regular
// file (ErrPastEOF, matching EINVAL) and maps one that ends at it.
func TestMapFilePastEOF(t *testing.T) {
	name := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(name, make([]byte, PageSize+1), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fd := int(f.Fd())
	if n, ok, err := FileSize(fd); n != int64(PageSize+1) || !ok || err != nil {
		t.Fatalf("FileSize = %d %v %v", n, ok, err)
	}
	b, err := MapFile(fd, 0, PageSize+1, "t")
	if err != nil {
		t.Fatal(err)
	}
	b.Bytes()[PageSize] = 1
	if err := b.Free(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		off  int64
		size int
	}{{0, PageSize + 2}, {int64(PageSize), PageSize}, {int64(2 * PageSize), 1}} {
		if _, err := MapFile(fd, c.off, c.size, "t"); !errors.Is(err, ErrPastEOF) || !errors.Is(err, unix.EINVAL) {
			t.Errorf("%d bytes at %d: %v, want ErrPastEOF", c.size, c.off, err)
		}
	}
	if _, _, err := FileSize(-1); !errors.Is(err, unix.EBADF) {
		t.Errorf("FileSize(-1) = %v", err)
	}
}
