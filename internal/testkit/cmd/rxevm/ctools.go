package main

import (
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
)

// cToolsDir holds C programs for VM tests (module-relative): each *.c is
// one program, compiled on the host by buildCTools into the guest's
// /usr/bin under its base name. It sits under testdata so the go tool
// ignores it.
const cToolsDir = "internal/testkit/testdata/ctools"

// cToolLibs are the only shared libraries a C tool may need: the guest's
// base image has them (rdma-core 44 and glibc 2.36 from Debian 12, the
// versions of the sysroot the tools are compiled against).
var cToolLibs = map[string]bool{"libibverbs.so.1": true, "libc.so.6": true}

// cToolSysrootPackages are the Debian 12 packages unpacked into the
// sysroot the C tools are compiled against (gcc --sysroot): glibc's and
// rdma-core's headers and libraries, the uapi headers, and the libraries
// libibverbs.so needs for linking. They come, like the guest's, through
// the guest's apt (guestapt.go), whatever the host runs: a tool compiled
// against a newer host's glibc (Debian 13's 2.41) may need symbols the
// guest's 2.36 lacks (strtol as __isoc23_strtol, GLIBC_2.38).
var cToolSysrootPackages = []string{
	"libc6", "libc6-dev", "linux-libc-dev",
	"libibverbs1", "libibverbs-dev", "libnl-3-200", "libnl-route-3-200",
}

// cToolPkgs are the host packages buildCTools needs: gcc only (the
// headers and libraries are the sysroot's).
var cToolPkgs = []struct{ file, pkg string }{
	{"gcc", "gcc"},
}

// sysrootLayout is bumped whenever cToolSysroot's layout changes.
const sysrootLayout = "2"

// cToolSysroot returns the sysroot of cToolSysrootPackages in cache
// (ctools-sysroot-<hash of the .debs' names>), downloading and unpacking
// them if it is not there. It holds the cache lock meanwhile.
func cToolSysroot(ctx context.Context, cache string) (string, error) {
	unlock, err := lockCache(ctx, cache)
	if err != nil {
		return "", err
	}
	defer unlock()
	debs, err := fetchDebs(ctx, cache, cToolSysrootPackages)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintln(h, sysrootLayout)
	for _, p := range cToolSysrootPackages {
		fmt.Fprintln(h, filepath.Base(debs[p]))
	}
	dir := filepath.Join(cache, "ctools-sysroot-"+hex.EncodeToString(h.Sum(nil))[:12])
	if fileExists(dir) {
		return dir, nil
	}
	// Drop sysroots of older packages, and one left half unpacked.
	if old, _ := filepath.Glob(filepath.Join(cache, "ctools-sysroot-*")); len(old) > 0 {
		for _, d := range old {
			os.RemoveAll(d)
		}
	}
	tmp := dir + ".tmp"
	for _, p := range cToolSysrootPackages {
		if err := unpackDeb(ctx, debs[p], tmp); err != nil {
			os.RemoveAll(tmp)
			return "", err
		}
	}
	if err := relativeSymlinks(tmp); err != nil {
		os.RemoveAll(tmp)
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil {
		os.RemoveAll(tmp)
		return "", err
	}
	return dir, nil
}

// relativeSymlinks turns each symlink in root to an absolute path into
// one to the same path inside root. The linker follows them (libc6's
// /lib64/ld-linux-x86-64.so.2 -> /lib/x86_64-linux-gnu/...), and an
// absolute one leads to the host's file: Debian 13's ld.so, which lacks
// the GLIBC_PRIVATE symbols Debian 12's libc.so.6 needs from it.
func relativeSymlinks(root string) error {
	return filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.Type()&fs.ModeSymlink == 0 {
			return err
		}
		target, err := os.Readlink(p)
		if err != nil || !filepath.IsAbs(target) {
			return err
		}
		rel, err := filepath.Rel(filepath.Dir(p), filepath.Join(root, target))
		if err != nil {
			return err
		}
		if err := os.Remove(p); err != nil {
			return err
		}
		return os.Symlink(rel, p)
	})
}

// buildCTools compiles every C program of cToolsDir with the host's gcc
// -O2 against libibverbs, in a sysroot of Debian 12's packages
// (cToolSysroot), into dstDir (the overlay's usr/bin): the binaries need
// only what the guest has, whatever the host runs. The guest has no
// compiler, and no binaries are committed. A missing gcc is installed
// when running as root, as ensureHostTools does; otherwise the run fails
// naming it.
func buildCTools(ctx context.Context, cache, modDir, dstDir string, verbose bool) error {
	srcs, err := filepath.Glob(filepath.Join(modDir, cToolsDir, "*.c"))
	if err != nil || len(srcs) == 0 {
		return err
	}
	if err := ensureCToolPkgs(ctx); err != nil {
		return err
	}
	sysroot, err := cToolSysroot(ctx, cache)
	if err != nil {
		return fmt.Errorf("the sysroot of the C tools: %w", err)
	}
	libDirs := sysrootLibDirs(sysroot)
	gccArgs := append(sysrootFlags(sysroot), "-O2", "-Wall", "-Werror")
	// One gcc per CPU at a time: every run of the runner compiles them.
	errs := make([]error, len(srcs))
	sem := make(chan struct{}, runtime.NumCPU())
	var wg sync.WaitGroup
	for i, src := range srcs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			dst := filepath.Join(dstDir, strings.TrimSuffix(filepath.Base(src), ".c"))
			args := append(slices.Clone(gccArgs), "-o", dst, src, "-libverbs")
			if err := runCmd(ctx, "", nil, "gcc", args...); err != nil {
				errs[i] = fmt.Errorf("compiling %s: %w", src, err)
				return
			}
			errs[i] = checkCToolLibs(dst, libDirs)
		}()
	}
	wg.Wait()
	for i, src := range srcs {
		if errs[i] != nil {
			return errs[i]
		}
		if verbose {
			fmt.Printf("rxevm: built C tool %s\n", strings.TrimSuffix(filepath.Base(src), ".c"))
		}
	}
	return nil
}

// ensureCToolPkgs installs cToolPkgs (gcc) when missing and running as
// root, as ensureHostTools does; otherwise it fails naming them.
func ensureCToolPkgs(ctx context.Context) error {
	var missing []string
	for _, p := range cToolPkgs {
		if strings.HasPrefix(p.file, "/") {
			if _, err := os.Stat(p.file); err == nil {
				continue
			}
		} else if _, err := exec.LookPath(p.file); err == nil {
			continue
		}
		missing = append(missing, p.pkg)
	}
	if len(missing) == 0 {
		return nil
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("the C tools of %s and -race need host packages; install them with: sudo apt-get install %s",
			cToolsDir, strings.Join(missing, " "))
	}
	fmt.Printf("rxevm: installing host packages for the C tools: %s\n", strings.Join(missing, " "))
	if err := aptUpdate(ctx); err != nil {
		return err
	}
	env := []string{"DEBIAN_FRONTEND=noninteractive"}
	return runCmd(ctx, "", env, aptGet, append([]string{"install", "-y", "-q"}, missing...)...)
}

// sysrootLibDirs are the library directories of sysroot (the guest's
// glibc and libibverbs).
func sysrootLibDirs(sysroot string) []string {
	return []string{filepath.Join(sysroot, "usr/lib/x86_64-linux-gnu"), filepath.Join(sysroot, "lib/x86_64-linux-gnu")}
}

// sysrootFlags are the host gcc's flags for compiling and linking
// against sysroot. A native gcc given --sysroot still looks in its own
// prefix's library directory (/usr/lib/x86_64-linux-gnu, the host's)
// before the sysroot's, for the start files (-B) and libraries (-L)
// alike: the sysroot's come first. Shared libraries' own dependencies
// (libibverbs.so.1's libnl) are found for the link there too
// (-rpath-link).
func sysrootFlags(sysroot string) []string {
	libDirs := sysrootLibDirs(sysroot)
	return []string{"--sysroot=" + sysroot, "-B" + libDirs[0] + "/", "-L" + libDirs[0], "-L" + libDirs[1],
		"-Wl,-rpath-link=" + strings.Join(libDirs, ":")}
}

// raceEnv is the go command's environment for -race builds: cgo (the
// race runtime needs it) with the host gcc compiling and linking against
// sysroot, the C tools' (cToolSysroot), so that the binaries need only
// the guest's Debian 12 glibc whatever the host runs. Linked against the
// host's, on Debian 13 (glibc 2.41), they could need symbol versions the
// guest's 2.36 lacks. It is used on every host, Debian 12's too, where
// the result is the same glibc: one way of building, the one CI runs.
func raceEnv(sysroot string) []string {
	flags := quoteFields(append(sysrootFlags(sysroot), "-O2", "-g"))
	return []string{"CGO_ENABLED=1", "GOOS=linux", "GOARCH=amd64", "CC=gcc",
		"CGO_CFLAGS=" + flags, "CGO_CXXFLAGS=" + flags, "CGO_LDFLAGS=" + flags}
}

// quoteFields joins fields for the go command's CGO_*FLAGS, which it
// splits at spaces outside quotes: a field with a space or quote is
// quoted.
func quoteFields(fields []string) string {
	out := make([]string, len(fields))
	for i, f := range fields {
		switch {
		case !strings.ContainsAny(f, " \t\n'\""):
			out[i] = f
		case !strings.Contains(f, "'"):
			out[i] = "'" + f + "'"
		default:
			out[i] = `"` + f + `"`
		}
	}
	return strings.Join(out, " ")
}

// checkCToolLibs fails when a compiled C tool needs a library the guest
// lacks, or a symbol version (GLIBC_2.38) its copy of the library, in
// libDirs (the sysroot's, of the guest's versions), does not define: the
// tool would not even start there.
func checkCToolLibs(bin string, libDirs []string) error {
	return checkLibs(bin, libDirs, cToolLibs)
}

// checkLibVersions fails when bin needs a symbol version (GLIBC_2.38) that
// its library in libDirs (the sysroot's, of the guest's versions) does
// not define, or a library libDirs lack: it would not start in the
// guest.
func checkLibVersions(bin string, libDirs []string) error {
	return checkLibs(bin, libDirs, nil)
}

// checkLibs is checkLibVersions, and, given allowed, fails too when bin
// needs a library allowed does not name.
func checkLibs(bin string, libDirs []string, allowed map[string]bool) error {
	f, err := elf.Open(bin)
	if err != nil {
		return err
	}
	defer f.Close()
	libs, err := f.ImportedLibraries()
	if err != nil {
		return err
	}
	for _, l := range libs {
		if allowed != nil && !allowed[l] {
			return fmt.Errorf("%s needs %s, which the guest does not have", filepath.Base(bin), l)
		}
	}
	for _, l := range libs {
		if _, err := libVersions(l, libDirs); err != nil {
			return fmt.Errorf("%s needs %s: %w", filepath.Base(bin), l, err)
		}
	}
	needs, err := f.DynamicVersionNeeds()
	if err != nil {
		return fmt.Errorf("%s: %w", bin, err)
	}
	for _, n := range needs {
		have, err := libVersions(n.Name, libDirs)
		if err != nil {
			return fmt.Errorf("%s needs %s: %w", filepath.Base(bin), n.Name, err)
		}
		for _, v := range n.Needs {
			if !have[v.Dep] {
				return fmt.Errorf("%s needs %s from %s, which the guest's %s does not define", filepath.Base(bin), v.Dep, n.Name, n.Name)
			}
		}
	}
	return nil
}

// libVersions returns the symbol versions the library lib in the first of
// dirs that has it defines.
func libVersions(lib string, dirs []string) (map[string]bool, error) {
	for _, d := range dirs {
		f, err := elf.Open(filepath.Join(d, lib))
		if err != nil {
			continue
		}
		defer f.Close()
		defs, err := f.DynamicVersions()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(d, lib), err)
		}
		have := map[string]bool{}
		for _, v := range defs {
			have[v.Name] = true
		}
		return have, nil
	}
	return nil, fmt.Errorf("not in %s", strings.Join(dirs, ", "))
}
