package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCToolLibVersions: a C tool needing a symbol version its library
// in the sysroot (the guest's) does not define fails the check, naming
// it: a tool linked against a newer glibc than the guest's would not
// start there. The stand-in libc.so.6 defines GLIBC_2.2.5 only; a
// program linked against glibc >= 2.34 needs GLIBC_2.34
// (__libc_start_main).
func TestCToolLibVersions(t *testing.T) {
	requireHostTools(t, "gcc")
	d := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(d, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	prog := filepath.Join(d, "prog")
	if out, err := exec.Command("gcc", "-o", prog, write("prog.c", "int main(void) { return 0; }\n")).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	libDir := filepath.Join(d, "lib")
	if err := os.Mkdir(libDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("gcc", "-shared", "-nostdlib", "-o", filepath.Join(libDir, "libc.so.6"),
		"-Wl,--version-script="+write("v.map", "GLIBC_2.2.5 { global: f; local: *; };\n"), write("f.c", "void f(void) {}\n")).CombinedOutput(); err != nil {
		t.Fatalf("gcc -shared: %v\n%s", err, out)
	}
	err := checkCToolLibs(prog, []string{libDir})
	if err == nil || !strings.Contains(err.Error(), "GLIBC_2.34") || !strings.Contains(err.Error(), "libc.so.6") {
		t.Errorf("checkCToolLibs = %v; want an error naming GLIBC_2.34 of libc.so.6", err)
	}
	if err := checkCToolLibs(prog, []string{filepath.Join(d, "none")}); err == nil || !strings.Contains(err.Error(), "libc.so.6") {
		t.Errorf("checkCToolLibs without the library = %v; want an error naming libc.so.6", err)
	}
}
