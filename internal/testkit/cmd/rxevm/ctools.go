package main

import (
	"context"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// cToolsDir holds C programs for VM tests (module-relative): each *.c is
// one program, compiled on the host by buildCTools into the guest's
// /usr/bin under its base name. It sits under testdata so the go tool
// ignores it.
const cToolsDir = "internal/testkit/testdata/ctools"

// cToolLibs are the only shared libraries a C tool may need: the guest's
// base image has them (rdma-core 44 and glibc from Debian 12, like the
// host's libibverbs-dev that the tools are compiled against).
var cToolLibs = map[string]bool{"libibverbs.so.1": true, "libc.so.6": true}

// cToolPkgs are the host packages buildCTools needs.
var cToolPkgs = []struct{ file, pkg string }{
	{"gcc", "gcc"},
	{"/usr/include/infiniband/verbs.h", "libibverbs-dev"},
}

// buildCTools compiles every C program of cToolsDir with gcc -O2 against
// libibverbs into dstDir (the overlay's usr/bin). The guest has no
// compiler, and no binaries are committed. Missing host packages are
// installed when running as root, as ensureHostTools does; otherwise the
// run fails naming them.
func buildCTools(ctx context.Context, modDir, dstDir string, verbose bool) error {
	srcs, err := filepath.Glob(filepath.Join(modDir, cToolsDir, "*.c"))
	if err != nil || len(srcs) == 0 {
		return err
	}
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
	if len(missing) > 0 {
		if os.Geteuid() != 0 {
			return fmt.Errorf("the C tools of %s need host packages; install them with: sudo apt-get install %s",
				cToolsDir, strings.Join(missing, " "))
		}
		fmt.Printf("rxevm: installing host packages for the C tools: %s\n", strings.Join(missing, " "))
		if err := aptUpdate(ctx); err != nil {
			return err
		}
		env := []string{"DEBIAN_FRONTEND=noninteractive"}
		if err := runCmd(ctx, "", env, aptGet, append([]string{"install", "-y", "-q"}, missing...)...); err != nil {
			return err
		}
	}
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
			if err := runCmd(ctx, "", nil, "gcc", "-O2", "-Wall", "-Werror", "-o", dst, src, "-libverbs"); err != nil {
				errs[i] = fmt.Errorf("compiling %s: %w", src, err)
				return
			}
			errs[i] = checkCToolLibs(dst)
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

// checkCToolLibs fails when a compiled C tool needs a library the guest
// lacks (it would not even start there).
func checkCToolLibs(bin string) error {
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
		if !cToolLibs[l] {
			return fmt.Errorf("%s needs %s, which the guest does not have", filepath.Base(bin), l)
		}
	}
	return nil
}
