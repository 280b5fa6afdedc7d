package uverbs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/pureverbs/pureverbs/internal/sys"
)

func TestReadPKey(t *testing.T) {
	ports := t.TempDir()
	dir := filepath.Join(ports, "1", "pkeys")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]string{"0": "0xffff\n", "1": "0x7fff\n", "2": "8001\n", "3": "0x1ffff\n", "4": "\n", "5": "zz\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		port, index int
		want        uint16
		err         error
	}{
		{1, 0, 0xffff, nil},
		{1, 1, 0x7fff, nil},
		{1, 2, 0x8001, nil},
		{1, 3, 0, ErrSysfs}, // wider than 16 bits
		{1, 4, 0, ErrSysfs},
		{1, 5, 0, ErrSysfs},
		{1, 6, 0, sys.ENOENT},
		{2, 0, 0, sys.ENOENT},
	} {
		got, err := readPKey(ports, tc.port, tc.index)
		if got != tc.want || (tc.err == nil) != (err == nil) || (tc.err != nil && !errors.Is(err, tc.err)) {
			t.Errorf("readPKey(port %d, index %d) = %#x, %v; want %#x, %v", tc.port, tc.index, got, err, tc.want, tc.err)
		}
		if errors.Is(tc.err, sys.ENOENT) && !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("readPKey(port %d, index %d): %v does not match fs.ErrNotExist", tc.port, tc.index, err)
		}
	}
}
