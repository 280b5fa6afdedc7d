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

// TestRelativeSymlinks: a symlink to an absolute path in the sysroot
// leads to the same path inside it, not to the host's file; relative
// ones are left alone.
func TestRelativeSymlinks(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"lib/x86_64-linux-gnu", "lib64"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "lib/x86_64-linux-gnu/ld.so"), []byte("sysroot's"), 0o644); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{
		"lib64/ld.so":                 "/lib/x86_64-linux-gnu/ld.so",
		"lib/x86_64-linux-gnu/ld.so2": "ld.so",
	}
	for l, target := range links {
		if err := os.Symlink(target, filepath.Join(root, l)); err != nil {
			t.Fatal(err)
		}
	}
	if err := relativeSymlinks(root); err != nil {
		t.Fatal(err)
	}
	for l := range links {
		if b, err := os.ReadFile(filepath.Join(root, l)); err != nil || string(b) != "sysroot's" {
			t.Errorf("%s reads %q, %v; want the sysroot's file", l, b, err)
		}
	}
	if target, _ := os.Readlink(filepath.Join(root, "lib64/ld.so")); target != "../lib/x86_64-linux-gnu/ld.so" {
		t.Errorf("lib64/ld.so -> %q, want ../lib/x86_64-linux-gnu/ld.so", target)
	}
	if target, _ := os.Readlink(filepath.Join(root, "lib/x86_64-linux-gnu/ld.so2")); target != "ld.so" {
		t.Errorf("a relative symlink changed: -> %q", target)
	}
}

// TestRaceEnvSysroot: -race binaries are compiled and linked against
// the sysroot raceEnv names, not the host's glibc (the real one is Debian
// 12's, cToolSysroot, which a Debian 13 host's glibc 2.41 would not
// match). A stand-in sysroot that links to the host's /usr and /lib,
// under a path with a space: a race-built program links with
// --sysroot=<it> on the external linker's command line, needs only
// symbol versions its libraries define, and runs. With an empty sysroot
// the build fails (no headers there): the flags reach the C compiler.
func TestRaceEnvSysroot(t *testing.T) {
	requireHostTools(t, "gcc", "go")
	d := t.TempDir()
	for name, text := range map[string]string{
		"go.mod":  "module racesysroot\n\ngo 1.21\n",
		"main.go": "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"race ok\") }\n",
	} {
		if err := os.WriteFile(filepath.Join(d, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sysroot := filepath.Join(d, "sys root")
	if err := os.Mkdir(sysroot, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"usr", "lib", "lib64"} {
		if err := os.Symlink("/"+dir, filepath.Join(sysroot, dir)); err != nil {
			t.Fatal(err)
		}
	}
	build := func(sysroot, out string) ([]byte, error) {
		cmd := exec.Command("go", "build", "-race", "-ldflags=-v", "-o", out, ".")
		cmd.Dir = d
		cmd.Env = append(os.Environ(), raceEnv(sysroot)...)
		return cmd.CombinedOutput()
	}
	prog := filepath.Join(d, "prog")
	out, err := build(sysroot, prog)
	if err != nil {
		t.Fatalf("go build -race against the stand-in sysroot: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "host link:") || !strings.Contains(string(out), "--sysroot="+sysroot) {
		t.Errorf("the external link does not name --sysroot=%s:\n%s", sysroot, out)
	}
	if err := checkLibVersions(prog, sysrootLibDirs(sysroot)); err != nil {
		t.Error(err)
	}
	if out, err := exec.Command(prog).CombinedOutput(); err != nil || string(out) != "race ok\n" {
		t.Errorf("the race-built program: %v, %q", err, out)
	}
	empty := filepath.Join(d, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := build(empty, filepath.Join(d, "prog2")); err == nil {
		t.Errorf("go build -race with an empty sysroot succeeded; the flags do not reach gcc\n%s", out)
	}
}

// TestQuoteFields: CGO_*FLAGS fields with spaces or quotes stay one
// field each.
func TestQuoteFields(t *testing.T) {
	got := quoteFields([]string{"-O2", "--sysroot=/a b", "-Dx='y'"})
	if want := `-O2 '--sysroot=/a b' "-Dx='y'"`; got != want {
		t.Errorf("quoteFields = %s, want %s", got, want)
	}
}
