package main

import (
	"debug/elf"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExistsInRoot follows symlinks inside the root, absolute ones
// relative to it, as the guest will see them.
func TestExistsInRoot(t *testing.T) {
	root := t.TempDir()
	mk := func(p string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ln := func(target, p string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, filepath.Join(root, p)); err != nil {
			t.Fatal(err)
		}
	}
	mk("usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2")
	ln("usr/lib", "lib")
	ln("usr/lib64", "lib64")
	ln("/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", "usr/lib64/ld-linux-x86-64.so.2")
	ln("/etc/passwd", "usr/lib/outside") // absolute: root's /etc/passwd, not the host's
	ln("loop2", "usr/loop1")
	ln("loop1", "usr/loop2")
	ln("../../x86_64-linux-gnu/ld-linux-x86-64.so.2", "usr/lib/a/b")
	for p, want := range map[string]bool{
		"/lib64/ld-linux-x86-64.so.2":     true,
		"/usr/lib64/ld-linux-x86-64.so.2": true,
		"/lib/x86_64-linux-gnu":           true,
		"/usr/lib/outside":                false,
		"/usr/loop1":                      false,
		"/usr/lib/a/b":                    false, // a is not a directory
		"/lib/x86_64-linux-gnu/libc.so.6": false,
		"/lib/../lib/x86_64-linux-gnu/../x86_64-linux-gnu/ld-linux-x86-64.so.2": true,
	} {
		if got := existsInRoot(root, p); got != want {
			t.Errorf("existsInRoot(%s) = %v, want %v", p, got, want)
		}
	}
}

// TestCheckGuestLibs: a dynamically linked program in the guest root whose
// interpreter and libraries are not in it fails the check, naming them (the
// guest used to take them from the host, and a minimal host lacked some);
// once they are there, it passes.
func TestCheckGuestLibs(t *testing.T) {
	var prog string
	var needed []string
	var interp string
	// coreutils on the host; in the guest (busybox) an rdma-core tool.
	for _, p := range []string{"/usr/bin/true", "/bin/true", "/usr/bin/env", "/usr/bin/ibv_devinfo"} {
		f, err := elf.Open(p)
		if err != nil {
			continue
		}
		needed, _ = f.ImportedLibraries()
		for _, ph := range f.Progs {
			if ph.Type == elf.PT_INTERP {
				b := make([]byte, ph.Filesz)
				ph.ReadAt(b, 0)
				interp = strings.TrimRight(string(b), "\x00")
			}
		}
		f.Close()
		if interp != "" && len(needed) > 0 {
			prog = p
			break
		}
	}
	if prog == "" {
		t.Fatal("no dynamically linked /usr/bin/true, /usr/bin/env or /usr/bin/ibv_devinfo here")
	}
	root := t.TempDir()
	b, err := os.ReadFile(prog)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "usr/bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "usr/bin/prog"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	err = checkGuestLibs(root, false)
	if err == nil {
		t.Fatal("checkGuestLibs passed a root without glibc")
	}
	for _, want := range append([]string{interp, "guestLibPackages", "/usr/bin/prog"}, needed...) {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	for _, lib := range append([]string{interp}, needed...) {
		p := filepath.Join(root, "usr/lib/x86_64-linux-gnu", filepath.Base(lib))
		if strings.HasPrefix(lib, "/") {
			p = filepath.Join(root, "usr", strings.TrimPrefix(strings.TrimPrefix(lib, "/usr"), "/"))
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"lib", "lib64"} {
		if err := os.Symlink("usr/"+d, filepath.Join(root, d)); err != nil && !os.IsExist(err) {
			t.Fatal(err)
		}
	}
	if err := checkGuestLibs(root, false); err != nil {
		t.Errorf("with %s and %q in the root: %v", interp, needed, err)
	}
}

// TestGuestUserlandLists: the libraries a minimal host lacked come from
// Debian packages, and the tools the suite relies on are checked.
func TestGuestUserlandLists(t *testing.T) {
	for _, p := range []string{"libc6", "libmnl0", "libatm1", "libxtables12", "libbpf1", "libelf1"} {
		found := false
		for _, q := range guestLibPackages {
			found = found || q == p
		}
		if !found {
			t.Errorf("guestLibPackages lacks %s", p)
		}
	}
	lines := toolLines()
	for _, tool := range []string{"ibv_devinfo", "ibv_rc_pingpong", "ibv_asyncwatch", "rdma ", "ip ", "ib_send_lat"} {
		if !strings.Contains(lines, tool) {
			t.Errorf("guestTools lacks %s:\n%s", tool, lines)
		}
	}
}
