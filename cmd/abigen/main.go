// Command abigen generates package abi from the Linux RDMA uapi headers.
//
// It contains a small C header parser of its own (no cgo): it understands
// #define integer constants (including expressions, casts and _IOWR), enums
// and struct/union definitions, computes their C layout for 64-bit Linux and
// writes Go declarations with identical sizes and offsets.
//
// Usage:
//
//	go run ./cmd/abigen [-include /usr/include] [-out abi]
//	go run ./cmd/abigen [-include /usr/include] -check abi
//
// The headers come from the Debian package linux-libc-dev. With -check
// nothing is written: the declarations of the committed package in the
// given directory are compared with a regeneration from the installed
// headers, which may be newer than the ones abi/ was generated from. Every
// committed constant, type and method must be generated identically
// (otherwise the exit status is 1); declarations only the headers have are
// listed as additions. scripts/check-generate.sh uses it when the installed
// linux-libc-dev is not the one named in abi/'s "// Source:" line.
package main

import (
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

//go:embed allowlist.txt
var defaultAllowlist string

// Headers is the ordered list of parsed headers, relative to -include.
// Order matters: a header may use constants from an earlier one.
var Headers = []string{
	"rdma/ib_user_verbs.h",
	"rdma/rdma_user_ioctl_cmds.h",
	"rdma/ib_user_ioctl_verbs.h",
	"rdma/ib_user_ioctl_cmds.h",
	"rdma/rdma_user_rxe.h",
	"rdma/mlx5_user_ioctl_verbs.h",
	"rdma/mlx5_user_ioctl_cmds.h",
	"rdma/mlx5-abi.h",
	"rdma/rdma_netlink.h",
	"linux/socket.h",
	"rdma/ib_user_sa.h",
	"rdma/rdma_user_cm.h",
}

func main() {
	include := flag.String("include", "/usr/include", "directory holding rdma/*.h")
	outDir := flag.String("out", "abi", "output directory")
	allow := flag.String("allowlist", "", "allowlist file (default: the built-in cmd/abigen/allowlist.txt)")
	version := flag.String("version", "", "linux-libc-dev version for the Source line (default: ask dpkg-query)")
	verbose := flag.Bool("v", false, "list macros that are skipped because they are not integer constants, and left-out sentinels")
	check := flag.String("check", "", "compare the committed package in this directory with the installed headers instead of writing (compatibility: additions are allowed)")
	flag.Parse()
	if *check != "" {
		ok, err := runCheck(*include, *check, *allow, *version, *verbose)
		if err != nil {
			fmt.Fprintln(os.Stderr, "abigen:", err)
			os.Exit(2)
		}
		if !ok {
			os.Exit(1)
		}
		return
	}
	if err := run(*include, *outDir, *allow, *version, *verbose); err != nil {
		fmt.Fprintln(os.Stderr, "abigen:", err)
		os.Exit(1)
	}
}

func run(include, outDir, allowFile, version string, verbose bool) error {
	out, err := generate(include, allowFile, version, verbose)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return err
	}
	for name, data := range out.files() {
		if err := os.WriteFile(filepath.Join(outDir, name), data, 0o644); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "abigen: wrote %d constants and %d types to %s\n", out.NumConsts, out.NumTypes, outDir)
	return nil
}

// runCheck compares the package in dir with a regeneration and prints the
// report. It returns false if the package is not compatible.
func runCheck(include, dir, allowFile, version string, verbose bool) (bool, error) {
	if version == "" {
		version = libcDevVersion()
	}
	out, err := generate(include, allowFile, version, verbose)
	if err != nil {
		return false, err
	}
	r, err := CheckCompat(dir, out.files())
	if err != nil {
		return false, err
	}
	src := fmt.Sprintf("%s (linux-libc-dev %s)", filepath.Join(include, "rdma"), version)
	fmt.Printf("abigen: %s against %s: %s\n", dir, src, r)
	if !r.OK() {
		fmt.Printf("abigen: %s is NOT compatible with %s\n", dir, src)
		return false, nil
	}
	fmt.Printf("abigen: %s is compatible with %s\n", dir, src)
	return true, nil
}

func (o *Output) files() map[string][]byte {
	return map[string][]byte{"zconst.go": o.Const, "ztypes.go": o.Types, "zlayout_test.go": o.Layout}
}

// generate parses the headers under include and generates the files.
func generate(include, allowFile, version string, verbose bool) (*Output, error) {
	alText, alName := defaultAllowlist, "cmd/abigen/allowlist.txt"
	if allowFile != "" {
		b, err := os.ReadFile(allowFile)
		if err != nil {
			return nil, err
		}
		alText, alName = string(b), allowFile
	}
	al, err := ParseAllowlist(alName, alText)
	if err != nil {
		return nil, err
	}
	p := NewParser()
	for _, h := range Headers {
		src, err := os.ReadFile(filepath.Join(include, h))
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s not found in %s: install the kernel uapi headers (apt-get install linux-libc-dev) or pass -include", h, include)
		}
		if err != nil {
			return nil, err
		}
		if err := p.ParseFile(h, string(src)); err != nil {
			return nil, err
		}
	}
	if version == "" {
		version = libcDevVersion()
	}
	header := fmt.Sprintf("// Code generated by cmd/abigen; DO NOT EDIT.\n"+
		"// Source: %s (linux-libc-dev %s)\n"+
		"// Regenerate: make generate (go run ./cmd/abigen -out abi)\n",
		filepath.Join(include, "rdma"), version)
	out, err := Generate(p, Headers, al, header)
	if err != nil {
		return nil, err
	}
	if verbose {
		for _, s := range out.Skipped {
			fmt.Fprintln(os.Stderr, "skipped", s)
		}
	}
	return out, nil
}

func libcDevVersion() string {
	out, err := exec.Command("dpkg-query", "-W", "-f=${Version}", "linux-libc-dev").Output()
	if err != nil || len(strings.TrimSpace(string(out))) == 0 {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}
