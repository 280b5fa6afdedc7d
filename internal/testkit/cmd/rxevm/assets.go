package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// kernelSpec names a Debian kernel package and how to find a replacement if
// that exact package is gone from the archive.
type kernelSpec struct {
	short   string
	pkg     string
	pattern string // regexp for apt-cache search --names-only
}

var kernels = []kernelSpec{
	{"6.1", "linux-image-6.1.0-57-amd64", `^linux-image-6\.1\.0-[0-9]+-amd64$`},
	{"6.12", "linux-image-6.12.107+deb12-amd64-unsigned", `^linux-image-6\.12\.[0-9]+\+deb12-amd64-unsigned$`},
}

func selectKernels(s string) ([]kernelSpec, error) {
	if s == "all" {
		return kernels, nil
	}
	var out []kernelSpec
	for _, name := range strings.Split(s, ",") {
		i := slices.IndexFunc(kernels, func(k kernelSpec) bool { return k.short == name })
		if i < 0 {
			return nil, fmt.Errorf("unknown -kernel %q (want 6.1, 6.12 or all)", name)
		}
		out = append(out, kernels[i])
	}
	return out, nil
}

// guestPackages are the Debian 12 packages unpacked into every guest
// (from bookworm through the guest's apt, guestapt.go, on any host).
var guestPackages = []string{
	"ibverbs-utils", "libibverbs1", "ibverbs-providers", "librdmacm1", "rdmacm-utils",
	"perftest", "libnl-3-200", "libnl-route-3-200", "libpci3", "libibumad3", "pci.ids",
	"iproute2", "strace",
}

// guestLibPackages are the Debian 12 packages of every shared library the
// programs of guestPackages need (their DT_NEEDED entries, recursively),
// glibc included: the guest takes nothing from the host, whose libraries
// may be missing (libmnl0, libatm1 and libxtables12 are not on a minimal
// Debian 12) or of another version. checkGuestLibs fails the build, naming
// the library, when a program needs one that none of these provides.
var guestLibPackages = []string{
	"libc6", "libgcc-s1", // glibc; libgcc_s for pthread_cancel's unwinding
	"libmnl0", "libbsd0", "libmd0", "libcap2", "libelf1", "zlib1g", "libbpf1", // iproute2
	"libselinux1", "libpcre2-8-0", "libtirpc3", "libgssapi-krb5-2", "libkrb5-3", // ss
	"libk5crypto3", "libcom-err2", "libkrb5support0", "libkeyutils1",
	"libatm1", "libxtables12", // tc's q_atm.so and m_xt.so
	"libdb5.3",               // arpd
	"libudev1",               // libpci3
	"libunwind8", "liblzma5", // strace
}

// guestPrune are paths (relative to the merged-/usr root) removed from the
// guest: documentation, and parts of the library packages nothing in the
// guest uses (iconv modules, Kerberos plugins, which would pull in OpenSSL).
var guestPrune = []string{
	"usr/share/doc", "usr/share/man", "usr/share/locale", "usr/share/lintian", "usr/share/bash-completion",
	"usr/share/info", "usr/share/i18n", "usr/lib/x86_64-linux-gnu/gconv", "usr/lib/x86_64-linux-gnu/krb5",
}

// guestTools are the programs the test suite and the demo rely on, with
// arguments that make each start, print something and exit. The base image
// is not built unless each of them starts in it (checkGuestTools); the list
// goes to the guest's /etc/pureverbs/tools, and internal/testkit's
// TestGuestTools runs each of them in the booted guest.
var guestTools = [][]string{
	{"ibv_devinfo", "-l"},
	{"ibv_rc_pingpong", "-h"},
	{"ibv_asyncwatch", "-h"},
	{"rdma", "-V"},
	{"ip", "-V"},
	{"ib_send_lat", "--version"},
	{"ib_write_bw", "--version"},
	{"rping", "-h"},
	{"strace", "-V"},
}

// guestModules are loaded in this order (their dependencies first). Modules
// marked optional may be built in or absent without failing.
var guestModules = []struct {
	name     string
	optional bool
}{
	{"crc32_generic", false}, {"ib_core", false}, {"ib_uverbs", false},
	{"udp_tunnel", false}, {"ip6_udp_tunnel", false}, {"rdma_rxe", false},
	{"dummy", false}, {"veth", false},
	{"e1000", false}, // the NIC on the two-host wire (-hosts 2); idle otherwise
	{"ib_cm", true}, {"iw_cm", true}, {"rdma_cm", true}, {"rdma_ucm", true}, {"ib_umad", true},
}

// baseLayout is bumped whenever the base initramfs layout changes, so old
// cached images are not reused.
const baseLayout = "6"

var hostTools = []struct{ bin, pkg string }{
	{"qemu-system-x86_64", "qemu-system-x86"},
	{"busybox", "busybox-static"},
	{"cpio", "cpio"},
	{"depmod", "kmod"},
	{"xz", "xz-utils"},
	{"apt-get", "apt"},
	{"dpkg-deb", "dpkg"},
	{"ldconfig", "libc-bin"},
	{"chroot", "coreutils"},
	{"gzip", "gzip"},
}

// aptGet and aptCache are the apt commands rxevm runs, for host packages
// with the host's configuration and for guest packages with its own
// (guestapt.go). Host tests put fakes here: they must never run the real
// ones, which rxevm, as root, lets change the host.
var aptGet, aptCache = "apt-get", "apt-cache"

// sbinDirs are where hostTool looks after PATH: Debian's PATH for users,
// and root's after su without '-', lacks them (depmod, ldconfig, chroot).
var sbinDirs = []string{"/usr/sbin", "/sbin"}

// hostTool returns the path of the host program bin, from PATH or else
// sbinDirs, and whether it found one; without one, it returns bin.
func hostTool(bin string) (string, bool) {
	if p, err := exec.LookPath(bin); err == nil {
		return p, true
	}
	for _, d := range sbinDirs {
		p := filepath.Join(d, bin)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, true
		}
	}
	return bin, false
}

// hostToolPath is hostTool's path (bin when none was found), for running.
func hostToolPath(bin string) string {
	p, _ := hostTool(bin)
	return p
}

func ensureHostTools(ctx context.Context) error {
	var missing []string
	for _, t := range hostTools {
		if _, ok := hostTool(t.bin); !ok {
			missing = append(missing, t.pkg)
		}
	}
	// busybox must be the static build: it runs as the guest's userland.
	if bb, err := exec.LookPath("busybox"); err == nil {
		if f, err := elf.Open(bb); err == nil {
			for _, p := range f.Progs {
				if p.Type == elf.PT_INTERP {
					missing = append(missing, "busybox-static")
					break
				}
			}
			f.Close()
		}
	}
	// It verifies the guest's Debian 12 packages (guestapt.go).
	if privateApt() && debianKeyring() == "" {
		missing = append(missing, "debian-archive-keyring")
	}
	if len(missing) == 0 {
		return nil
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("missing host packages; install them with: sudo apt-get install %s", strings.Join(missing, " "))
	}
	fmt.Printf("rxevm: installing host packages: %s\n", strings.Join(missing, " "))
	if err := aptUpdate(ctx); err != nil {
		return err
	}
	env := []string{"DEBIAN_FRONTEND=noninteractive"}
	return runCmd(ctx, "", env, aptGet, append([]string{"install", "-y", "-q"}, missing...)...)
}

// runCmd runs a command, passing its output through to ours on failure only.
func runCmd(ctx context.Context, dir string, env []string, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

func cmdOutput(ctx context.Context, dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}

// lockCache takes an exclusive flock on the cache so concurrent runners do
// not build the same files at once. When another run holds it, it says so
// and waits, polling, until the lock is free or ctx ends (the time limit,
// a signal).
// The kernels of one run take turns first (cacheTurn), so that the
// message is only for another run.
func lockCache(ctx context.Context, dir string) (func(), error) {
	select {
	case cacheTurn <- struct{}{}:
	default:
		select {
		case cacheTurn <- struct{}{}:
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for this run's other kernel to build its images: %w", context.Cause(ctx))
		}
	}
	unlock, err := lockCacheFile(ctx, dir)
	if err != nil {
		<-cacheTurn
		return nil, err
	}
	return func() { unlock(); <-cacheTurn }, nil
}

// cacheTurn is held by the kernel of this run that holds the cache lock.
var cacheTurn = make(chan struct{}, 1)

func lockCacheFile(ctx context.Context, dir string) (func(), error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, err
	}
	fd := int(f.Fd())
	unlock := func() { unix.Flock(fd, unix.LOCK_UN); f.Close() }
	err = unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
	if err == unix.EWOULDBLOCK {
		fmt.Printf("rxevm: waiting for another rxevm run holding %s\n", path)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for err == unix.EWOULDBLOCK {
			select {
			case <-ctx.Done():
				f.Close()
				return nil, fmt.Errorf("waiting for the cache lock %s, held by another rxevm run: %w", path, context.Cause(ctx))
			case <-tick.C:
			}
			err = unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("flock %s: %w", path, err)
	}
	return unlock, nil
}

// debComplete checks that the .deb at path is whole: an ar archive of at
// least three members (debian-binary, control, data) whose sizes add up to
// the file's. An interrupted `apt-get download`, which writes to the final
// name, leaves a file cut short, which this tells apart.
func debComplete(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	magic := make([]byte, 8)
	if _, err := io.ReadFull(f, magic); err != nil || string(magic) != "!<arch>\n" {
		return fmt.Errorf("%s: not a Debian package (no ar header; %d bytes)", path, size)
	}
	off, members := int64(8), 0
	hdr := make([]byte, 60)
	for off < size {
		if _, err := f.ReadAt(hdr, off); err != nil {
			return fmt.Errorf("%s: cut short (%d bytes, in an ar member header at %d)", path, size, off)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(hdr[48:58])), 10, 64)
		if err != nil || n < 0 || string(hdr[58:60]) != "`\n" {
			return fmt.Errorf("%s: damaged (bad ar member header at %d)", path, off)
		}
		members++
		off += 60 + n + n%2 // ar pads members to an even size
		if off > size {
			return fmt.Errorf("%s: cut short (%d bytes, its member %q needs %d)", path, size, strings.TrimSpace(string(hdr[:16])), off)
		}
	}
	if members < 3 {
		return fmt.Errorf("%s: cut short (%d bytes, %d ar members; a .deb has at least 3)", path, size, members)
	}
	return nil
}

// fetchDebs makes sure a .deb of each package is in cache/debs and returns
// their paths (package name -> file). The packages are Debian 12's, from
// the guest's apt (guestapt.go), whatever the host runs; when a download
// fails, that apt's lists are updated (by any user: they are in the
// cache) and the rest downloaded again. apt-get download writes into a
// directory of its own inside cache/debs, and only whole .debs
// (debComplete) are moved into cache/debs, so an interrupted download
// leaves nothing behind that a later run would take for a package; a
// cached .deb that is not whole (from an older rxevm) is downloaded again.
func fetchDebs(ctx context.Context, cache string, pkgs []string) (map[string]string, error) {
	dir := filepath.Join(cache, "debs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	// Left by a run that was killed while downloading (the caller holds
	// the cache lock: no other run is using them).
	if stale, _ := filepath.Glob(filepath.Join(dir, ".download-*")); len(stale) > 0 {
		for _, d := range stale {
			os.RemoveAll(d)
		}
	}
	find := func(p string) string {
		// apt-get download encodes ':' and '+' in versions but never in names.
		m, _ := filepath.Glob(filepath.Join(dir, p+"_*.deb"))
		if len(m) == 0 {
			return ""
		}
		slices.Sort(m)
		return m[len(m)-1]
	}
	var need []string
	for _, p := range pkgs {
		f := find(p)
		for f != "" {
			err := debComplete(f)
			if err == nil {
				break
			}
			fmt.Printf("rxevm: cached package %v: removing it, to download it again\n", err)
			if err := os.Remove(f); err != nil {
				return nil, err
			}
			f = find(p)
		}
		if f == "" {
			need = append(need, p)
		}
	}
	download := func() error {
		tmp, err := os.MkdirTemp(dir, ".download-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		// apt-get, as root, downloads as user _apt where it can write.
		if err := os.Chmod(tmp, 0o755); err != nil {
			return err
		}
		err = runCmd(ctx, tmp, nil, aptGet, guestAptArgs(cache, append([]string{"download", "-q"}, need...)...)...)
		// Keep what arrived whole, even if the rest failed: a later run
		// downloads only what is missing.
		got, _ := filepath.Glob(filepath.Join(tmp, "*.deb"))
		for _, f := range got {
			if derr := debComplete(f); derr != nil {
				if err == nil {
					err = fmt.Errorf("apt-get download: %w", derr)
				}
				continue
			}
			if rerr := os.Rename(f, filepath.Join(dir, filepath.Base(f))); rerr != nil && err == nil {
				err = rerr
			}
		}
		return err
	}
	if len(need) > 0 {
		if err := setupGuestApt(cache); err != nil {
			return nil, err
		}
		fmt.Printf("rxevm: downloading %s\n", strings.Join(need, " "))
		err := download()
		if err != nil && ctx.Err() == nil {
			if uerr := guestAptUpdate(ctx, cache); uerr != nil {
				return nil, uerr
			}
			need = slices.DeleteFunc(need, func(p string) bool { return find(p) != "" })
			err = nil
			if len(need) > 0 {
				err = download()
			}
		}
		if err != nil {
			return nil, err
		}
	}
	out := map[string]string{}
	for _, p := range pkgs {
		f := find(p)
		if f == "" {
			return nil, fmt.Errorf("apt-get download %s left no .deb in %s", p, dir)
		}
		out[p] = f
	}
	return out, nil
}

// securityLine is the sources.list line of Debian 12's security archive,
// where both pinned kernels are: debootstrap's sources have bookworm main
// only, which has no 6.12 and an older 6.1 (a Debian 12 host's apt).
const securityLine = "deb http://security.debian.org/debian-security bookworm-security main"

// downloadable reports whether the guest's apt can download pkg: apt-get
// download --print-uris names a .deb of it. (apt-cache show also succeeds
// for a package only in stale lists.)
func downloadable(ctx context.Context, cache, pkg string) bool {
	if setupGuestApt(cache) != nil {
		return false
	}
	out, err := cmdOutput(ctx, "", nil, aptGet, guestAptArgs(cache, "download", "--print-uris", "-q", pkg)...)
	return err == nil && strings.Contains(out, " "+pkg+"_")
}

// resolveKernel returns the kernel package to use: the pinned name if a
// whole .deb of it is cached or the guest's apt can download it (after
// updating its lists if need be), else the newest downloadable match of
// the pattern (fallbackKernel).
func resolveKernel(ctx context.Context, cache string, k kernelSpec) (string, error) {
	m, _ := filepath.Glob(filepath.Join(cache, "debs", k.pkg+"_*.deb"))
	for _, f := range m {
		if debComplete(f) == nil {
			return k.pkg, nil
		}
	}
	if downloadable(ctx, cache, k.pkg) {
		return k.pkg, nil
	}
	if err := guestAptUpdate(ctx, cache); err != nil {
		return "", err
	}
	if downloadable(ctx, cache, k.pkg) {
		return k.pkg, nil
	}
	return fallbackKernel(ctx, cache, k)
}

// fallbackKernel returns the newest package other than the pinned one
// that matches k's pattern and that the guest's apt can download, and
// says so: the suite is not tested on that kernel (the pinned one is gone
// from Debian 12's archive, superseded by a newer ABI). The error, when
// there is none, names the sources it looked in.
func fallbackKernel(ctx context.Context, cache string, k kernelSpec) (string, error) {
	if err := setupGuestApt(cache); err != nil {
		return "", err
	}
	out, err := cmdOutput(ctx, "", nil, aptCache, guestAptArgs(cache, "search", "--names-only", k.pattern)...)
	if err != nil {
		return "", err
	}
	re := regexp.MustCompile(k.pattern)
	var names []string
	for _, line := range strings.Split(out, "\n") {
		name, _, _ := strings.Cut(line, " ")
		if re.MatchString(name) && name != k.pkg {
			names = append(names, name)
		}
	}
	slices.SortFunc(names, compareVersionish)
	for i := len(names) - 1; i >= 0; i-- {
		if downloadable(ctx, cache, names[i]) {
			if !privateApt() {
				fmt.Printf("rxevm: NOTICE: kernel %s: the pinned package %s, the kernel the suite is tested on, cannot be downloaded; using %s instead, which it is not tested on (for the pinned one, add Debian 12's security archive to /etc/apt/sources.list: %s)\n",
					k.short, k.pkg, names[i], securityLine)
				return names[i], nil
			}
			fmt.Printf("rxevm: NOTICE: kernel %s: the pinned package %s, the kernel the suite is tested on, is no longer in Debian 12's archive; using %s instead, which it is not tested on (update the pin in kernels, internal/testkit/cmd/rxevm/assets.go)\n",
				k.short, k.pkg, names[i])
			return names[i], nil
		}
	}
	if !privateApt() {
		return "", fmt.Errorf("kernel %s: apt can download neither the pinned package %s nor another matching %s; the pinned kernels are in Debian 12's security archive: add this line to /etc/apt/sources.list and run apt-get update (as root):\n  %s",
			k.short, k.pkg, k.pattern, securityLine)
	}
	return "", fmt.Errorf("kernel %s: Debian 12's archive (the sources in %s) offers neither the pinned package %s nor another matching %s: check the network, the mirror (PUREVERBS_DEBIAN_MIRROR, PUREVERBS_DEBIAN_SECURITY) and the pin (kernels, internal/testkit/cmd/rxevm/assets.go)",
		k.short, filepath.Join(guestAptDir(cache), "sources.list"), k.pkg, k.pattern)
}

// compareVersionish orders strings by their runs of digits numerically.
func compareVersionish(a, b string) int {
	re := regexp.MustCompile(`[0-9]+|[^0-9]+`)
	pa, pb := re.FindAllString(a, -1), re.FindAllString(b, -1)
	for i := 0; i < len(pa) && i < len(pb); i++ {
		na, ea := strconv.Atoi(pa[i])
		nb, eb := strconv.Atoi(pb[i])
		if ea == nil && eb == nil {
			if na != nb {
				return na - nb
			}
			continue
		}
		if c := strings.Compare(pa[i], pb[i]); c != 0 {
			return c
		}
	}
	return len(pa) - len(pb)
}

// kernelAssets is what a boot needs from the cache.
type kernelAssets struct {
	release string // uname -r
	vmlinuz string
	base    string // gzip'd cpio
}

// prepareKernel returns the cached vmlinuz and base initramfs for k,
// building them on first use (buildKernel), of another kernel when the
// pinned package cannot be downloaded. A first run downloads about 100 MB
// within the time limit per kernel: when that limit ends the
// preparation, the error says so.
func prepareKernel(ctx context.Context, o *options, k kernelSpec) (a *kernelAssets, err error) {
	defer func() {
		if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("%w\nrxevm: preparing kernel %s did not finish within the time limit per kernel (-timeout %s), which includes a first run's download of the kernel and guest packages (about 100 MB; whole ones are kept in %s): give a larger -timeout (make demo VMFLAGS='-timeout 30m')",
				err, k.short, o.timeout, filepath.Join(o.cacheDir, "debs"))
		}
	}()
	unlock, err := lockCache(ctx, o.cacheDir)
	if err != nil {
		return nil, err
	}
	defer unlock()

	pkg, err := resolveKernel(ctx, o.cacheDir, k)
	if err != nil {
		return nil, err
	}
	a, err = buildKernel(ctx, o, pkg)
	// The pinned package failed to download, and apt (its lists updated
	// by fetchDebs) no longer offers it: another kernel, if one matches.
	var de *downloadError
	if err == nil || pkg != k.pkg || !errors.As(err, &de) || ctx.Err() != nil || downloadable(ctx, o.cacheDir, k.pkg) {
		return a, err
	}
	alt, ferr := fallbackKernel(ctx, o.cacheDir, k)
	if ferr != nil {
		return nil, fmt.Errorf("%w\n%v", err, ferr)
	}
	return buildKernel(ctx, o, alt)
}

// downloadError is buildKernel's error when fetching the packages failed.
type downloadError struct{ err error }

func (e *downloadError) Error() string { return e.err.Error() }
func (e *downloadError) Unwrap() error { return e.err }

// buildKernel returns the cached vmlinuz and base initramfs of the kernel
// package pkg, building them if they are not cached. The caller holds the
// cache lock.
func buildKernel(ctx context.Context, o *options, pkg string) (*kernelAssets, error) {
	packages := slices.Clone(guestPackages)
	// Images with valgrind have a name of their own, so that switching
	// -valgrind on and off does not drop (and rebuild) the other.
	prefix := "base-"
	if o.valgrind {
		packages = append(packages, "valgrind")
		prefix = "base-valgrind-"
	}
	h := sha256.New()
	fmt.Fprintln(h, baseLayout, pkg, packages, guestLibPackages, guestPrune, guestTools, guestModules)
	key := hex.EncodeToString(h.Sum(nil))[:12]
	stamp := filepath.Join(o.cacheDir, prefix+pkg+"-"+key+".release")
	if rel, err := os.ReadFile(stamp); err == nil {
		a := &kernelAssets{
			release: strings.TrimSpace(string(rel)),
			vmlinuz: filepath.Join(o.cacheDir, "vmlinuz-"+pkg),
			base:    filepath.Join(o.cacheDir, prefix+pkg+"-"+key+".cpio.gz"),
		}
		if fileExists(a.vmlinuz) && fileExists(a.base) {
			return a, nil
		}
	}
	// Drop images of older layouts.
	if old, _ := filepath.Glob(filepath.Join(o.cacheDir, prefix+pkg+"-*")); len(old) > 0 {
		for _, f := range old {
			os.Remove(f)
		}
	}
	fmt.Printf("rxevm: preparing kernel %s and guest userland (first run; cached in %s)\n", pkg, o.cacheDir)
	userland := append(packages, guestLibPackages...)
	debs, err := fetchDebs(ctx, o.cacheDir, append([]string{pkg}, userland...))
	if err != nil {
		return nil, &downloadError{err}
	}
	// Kernel: unpack, depmod, pick modules.
	kdir := filepath.Join(o.cacheDir, "kernel-"+pkg)
	os.RemoveAll(kdir)
	if err := unpackDeb(ctx, debs[pkg], kdir); err != nil {
		return nil, err
	}
	defer os.RemoveAll(kdir)
	modRoot := kdir
	rels, _ := filepath.Glob(filepath.Join(kdir, "lib/modules/*"))
	if len(rels) == 0 {
		rels, _ = filepath.Glob(filepath.Join(kdir, "usr/lib/modules/*"))
		modRoot = filepath.Join(kdir, "usr")
	}
	if len(rels) != 1 {
		return nil, fmt.Errorf("%s: expected one lib/modules/<release>, found %v", pkg, rels)
	}
	release := filepath.Base(rels[0])
	vmlinuzSrc := filepath.Join(kdir, "boot", "vmlinuz-"+release)
	if err := runCmd(ctx, "", nil, hostToolPath("depmod"), "-b", modRoot, release); err != nil {
		return nil, err
	}
	order, err := moduleOrder(rels[0])
	if err != nil {
		return nil, err
	}

	// Guest root.
	root := filepath.Join(o.cacheDir, "root-"+pkg)
	os.RemoveAll(root)
	defer os.RemoveAll(root)
	for _, p := range userland {
		if err := unpackDeb(ctx, debs[p], root); err != nil {
			return nil, err
		}
	}
	if err := usrMerge(root); err != nil {
		return nil, err
	}
	for _, d := range guestPrune {
		os.RemoveAll(filepath.Join(root, d))
	}
	// valgrind's 32-bit x86 tools need a 32-bit loader the guest lacks.
	x86, _ := filepath.Glob(filepath.Join(root, "usr/libexec/valgrind/*-x86-linux*"))
	for _, f := range x86 {
		os.Remove(f)
	}
	if err := installBusybox(root); err != nil {
		return nil, err
	}
	if err := checkGuestLibs(root, o.verbose); err != nil {
		return nil, err
	}
	mdir := filepath.Join(root, "lib/modules", release)
	if err := os.MkdirAll(mdir, 0o755); err != nil {
		return nil, err
	}
	var names []string
	for _, m := range order {
		dst := filepath.Join(mdir, m.name+".ko")
		src := filepath.Join(rels[0], m.path)
		if strings.HasSuffix(src, ".xz") {
			out, err := exec.CommandContext(ctx, "xz", "-dc", src).Output()
			if err != nil {
				return nil, fmt.Errorf("xz -dc %s: %w", src, err)
			}
			err = os.WriteFile(dst, out, 0o644)
			if err != nil {
				return nil, err
			}
		} else if err := copyFile(src, dst, 0o644); err != nil {
			return nil, err
		}
		names = append(names, m.name+".ko")
	}
	files := map[string]string{
		"etc/pureverbs/modules":                  strings.Join(names, "\n") + "\n",
		"etc/pureverbs/tools":                    toolLines(),
		"etc/passwd":                             "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n",
		"etc/group":                              "root:x:0:\nnogroup:x:65534:\n",
		"etc/hostname":                           "rxevm\n",
		"etc/ld.so.conf":                         "include /etc/ld.so.conf.d/*.conf\n",
		"etc/ld.so.conf.d/x86_64-linux-gnu.conf": "/usr/lib/x86_64-linux-gnu\n",
	}
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return nil, err
		}
	}
	for _, d := range []string{"proc", "sys", "dev", "tmp", "run", "root", "var", "mnt"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return nil, err
		}
	}
	if err := os.Symlink("/run", filepath.Join(root, "var/run")); err != nil {
		return nil, err
	}
	if os.Geteuid() == 0 {
		// ldconfig -r chroots; without root the guest relies on LD_LIBRARY_PATH.
		if err := runCmd(ctx, "", nil, hostToolPath("ldconfig"), "-r", root); err != nil {
			fmt.Println("rxevm: warning:", err)
		}
		if err := checkGuestTools(ctx, root); err != nil {
			return nil, err
		}
	} else {
		fmt.Println("rxevm: not root: the guest tools' libraries were checked, but starting them in the guest root (chroot) was not tried")
	}
	a := &kernelAssets{
		release: release,
		vmlinuz: filepath.Join(o.cacheDir, "vmlinuz-"+pkg),
		base:    filepath.Join(o.cacheDir, prefix+pkg+"-"+key+".cpio.gz"),
	}
	if err := replaceFile(vmlinuzSrc, a.vmlinuz, 0o644); err != nil {
		return nil, err
	}
	if err := makeCpio(ctx, root, a.base); err != nil {
		return nil, err
	}
	if err := os.WriteFile(stamp, []byte(release+"\n"), 0o644); err != nil {
		return nil, err
	}
	fmt.Printf("rxevm: kernel %s ready (%d modules)\n", release, len(names))
	return a, nil
}

// unpackDeb unpacks the cached .deb into dst. A .deb dpkg-deb cannot
// unpack is removed from the cache, so that the next run downloads it
// again, and the error says so.
func unpackDeb(ctx context.Context, deb, dst string) error {
	err := runCmd(ctx, "", nil, "dpkg-deb", "-x", deb, dst)
	if err == nil || ctx.Err() != nil {
		return err
	}
	if rerr := os.Remove(deb); rerr != nil {
		return fmt.Errorf("%w\nrxevm: %s cannot be unpacked (a damaged download?): delete it (%v) and run again to download it again", err, deb, rerr)
	}
	return fmt.Errorf("%w\nrxevm: %s cannot be unpacked (a damaged download?): removed it from the cache; run again to download it again", err, deb)
}

type module struct{ name, path string }

func modName(path string) string {
	b := filepath.Base(path)
	b = strings.TrimSuffix(b, ".xz")
	b = strings.TrimSuffix(b, ".zst")
	b = strings.TrimSuffix(b, ".ko")
	return strings.ReplaceAll(b, "-", "_")
}

// moduleOrder reads modules.dep and modules.builtin and returns the guest
// modules with every dependency before its user.
func moduleOrder(dir string) ([]module, error) {
	dep, err := os.ReadFile(filepath.Join(dir, "modules.dep"))
	if err != nil {
		return nil, err
	}
	paths := map[string]string{}
	deps := map[string][]string{}
	for _, line := range strings.Split(string(dep), "\n") {
		mod, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		n := modName(mod)
		paths[n] = mod
		for _, d := range strings.Fields(rest) {
			deps[n] = append(deps[n], modName(d))
		}
	}
	builtin := map[string]bool{}
	if b, err := os.ReadFile(filepath.Join(dir, "modules.builtin")); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if line != "" {
				builtin[modName(line)] = true
			}
		}
	}
	var order []module
	seen := map[string]bool{}
	var visit func(n string) error
	visit = func(n string) error {
		if seen[n] {
			return nil
		}
		seen[n] = true
		if builtin[n] {
			return nil
		}
		p, ok := paths[n]
		if !ok {
			return fmt.Errorf("module %s: not in modules.dep", n)
		}
		// modules.dep lists the full closure; visiting each keeps order right.
		for _, d := range deps[n] {
			if err := visit(d); err != nil {
				return err
			}
		}
		order = append(order, module{n, p})
		return nil
	}
	for _, m := range guestModules {
		if err := visit(m.name); err != nil {
			if m.optional {
				continue
			}
			return nil, err
		}
	}
	return order, nil
}

// usrMerge moves /bin, /sbin, /lib, /lib64 into /usr and leaves symlinks, as
// on a merged-/usr Debian system.
func usrMerge(root string) error {
	for _, d := range []string{"bin", "sbin", "lib", "lib64"} {
		top := filepath.Join(root, d)
		dst := filepath.Join(root, "usr", d)
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return err
		}
		if fi, err := os.Lstat(top); err == nil && fi.IsDir() {
			err := filepath.WalkDir(top, func(p string, e fs.DirEntry, err error) error {
				if err != nil || p == top {
					return err
				}
				rel, _ := filepath.Rel(top, p)
				target := filepath.Join(dst, rel)
				if e.IsDir() {
					return os.MkdirAll(target, 0o755)
				}
				os.Remove(target)
				return os.Rename(p, target)
			})
			if err != nil {
				return err
			}
			if err := os.RemoveAll(top); err != nil {
				return err
			}
		}
		if _, err := os.Lstat(top); err != nil {
			if err := os.Symlink("usr/"+d, top); err != nil {
				return err
			}
		}
	}
	return nil
}

func installBusybox(root string) error {
	bb, err := exec.LookPath("busybox")
	if err != nil {
		return err
	}
	if err := copyFile(bb, filepath.Join(root, "usr/bin/busybox"), 0o755); err != nil {
		return err
	}
	out, err := exec.Command(bb, "--list-full").Output()
	if err != nil {
		return fmt.Errorf("busybox --list-full: %w", err)
	}
	for _, p := range strings.Fields(string(out)) {
		name := filepath.Base(p)
		if fileExists(filepath.Join(root, "usr/bin", name)) || fileExists(filepath.Join(root, "usr/sbin", name)) {
			continue // keep the real tool (iproute2's ip, for one)
		}
		if err := os.Symlink("busybox", filepath.Join(root, "usr/bin", name)); err != nil {
			return err
		}
	}
	return nil
}

// checkGuestLibs checks that every ELF program and library in root finds
// its interpreter and each library it needs (DT_NEEDED) inside root, where
// the guest's loader will look: the RUNPATH/RPATH of the file, the
// multiarch directories and /usr/lib. Symlinks are followed within root.
// The error names each missing library and the files needing it.
func checkGuestLibs(root string, verbose bool) error {
	type elfFile struct {
		path   string
		needed []string
		interp string
		rpaths []string
	}
	var files []elfFile
	err := filepath.WalkDir(filepath.Join(root, "usr"), func(p string, e fs.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return err
		}
		f, err := elf.Open(p)
		if err != nil {
			return nil // not an ELF file
		}
		defer f.Close()
		ef := elfFile{path: p}
		ef.needed, _ = f.ImportedLibraries()
		for _, tag := range []elf.DynTag{elf.DT_RUNPATH, elf.DT_RPATH} {
			v, _ := f.DynString(tag)
			for _, rp := range v {
				for _, d := range strings.Split(rp, ":") {
					d = strings.ReplaceAll(d, "$ORIGIN", "/"+filepath.Dir(strings.TrimPrefix(p, root+"/")))
					ef.rpaths = append(ef.rpaths, d)
				}
			}
		}
		for _, prog := range f.Progs {
			if prog.Type == elf.PT_INTERP {
				b, err := io.ReadAll(prog.Open())
				if err != nil {
					return fmt.Errorf("%s: reading PT_INTERP: %w", p, err)
				}
				ef.interp = strings.TrimRight(string(b), "\x00")
			}
		}
		files = append(files, ef)
		return nil
	})
	if err != nil {
		return err
	}
	dirs := []string{"/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/lib"}
	missing := map[string][]string{}
	for _, ef := range files {
		rel := "/" + strings.TrimPrefix(ef.path, root+"/")
		if ef.interp != "" && !existsInRoot(root, ef.interp) {
			missing[ef.interp] = append(missing[ef.interp], rel)
		}
		for _, lib := range ef.needed {
			found := false
			for _, d := range append(slices.Clone(ef.rpaths), dirs...) {
				if existsInRoot(root, filepath.Join(d, lib)) {
					found = true
					break
				}
			}
			if !found {
				missing[lib] = append(missing[lib], rel)
			}
		}
	}
	if verbose {
		fmt.Printf("rxevm: %d ELF files in the guest root find all their libraries\n", len(files)-len(missing))
	}
	if len(missing) == 0 {
		return nil
	}
	var lines []string
	for lib, users := range missing {
		if len(users) > 4 {
			users = append(users[:4:4], fmt.Sprintf("and %d more", len(users)-4))
		}
		lines = append(lines, fmt.Sprintf("  %s, needed by %s", lib, strings.Join(users, ", ")))
	}
	slices.Sort(lines)
	return fmt.Errorf("guest root: %d libraries are in none of the guest's Debian packages; add their packages to guestLibPackages (internal/testkit/cmd/rxevm/assets.go):\n%s",
		len(missing), strings.Join(lines, "\n"))
}

// existsInRoot reports whether p exists inside root, following symlinks
// (absolute targets are relative to root) as the guest will.
func existsInRoot(root, p string) bool {
	rest := strings.Split(strings.Trim(filepath.Clean("/"+p), "/"), "/")
	cur := "/"
	for hops := 0; len(rest) > 0; {
		name := rest[0]
		rest = rest[1:]
		if name == "" || name == "." {
			continue
		}
		if name == ".." {
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, name)
		fi, err := os.Lstat(filepath.Join(root, next))
		if err != nil {
			return false
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if hops++; hops > 40 {
			return false
		}
		target, err := os.Readlink(filepath.Join(root, next))
		if err != nil {
			return false
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(cur, target)
		}
		rest = append(strings.Split(strings.Trim(filepath.Clean(target), "/"), "/"), rest...)
		cur = "/"
	}
	return true
}

// toolLines is guestTools for the guest's /etc/pureverbs/tools, one
// command per line, which internal/testkit's TestGuestTools runs.
func toolLines() string {
	var b strings.Builder
	for _, t := range guestTools {
		b.WriteString(strings.Join(t, " ") + "\n")
	}
	return b.String()
}

// checkGuestTools runs each of guestTools in root through chroot (the
// guest's own loader and libraries, the host's kernel) and fails, with the
// tool's output, when one cannot start: exit status 126 or 127, or the
// loader's "error while loading shared libraries".
func checkGuestTools(ctx context.Context, root string) error {
	var bad []string
	for _, t := range guestTools {
		cmd := exec.CommandContext(ctx, hostToolPath("chroot"), append([]string{root}, t...)...)
		cmd.Env = []string{"PATH=/usr/bin:/usr/sbin:/bin:/sbin", "HOME=/", "LC_ALL=C"}
		out, err := cmd.CombinedOutput()
		rc := 0
		if ee, ok := err.(*exec.ExitError); ok {
			rc = ee.ExitCode()
		} else if err != nil {
			return fmt.Errorf("chroot %s %s: %w", root, strings.Join(t, " "), err)
		}
		if rc == 126 || rc == 127 || strings.Contains(string(out), "error while loading shared libraries") {
			bad = append(bad, fmt.Sprintf("  %s: exit status %d: %s", strings.Join(t, " "), rc, strings.TrimSpace(string(out))))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("guest root: tools the test suite relies on cannot start:\n%s", strings.Join(bad, "\n"))
	}
	return nil
}

func fileExists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// copyFile copies the content of src (following symlinks) to dst.
func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// replaceFile copies src to dst through a temporary file renamed over
// dst: a guest booting the old dst (another run's QEMU) goes on reading
// it whole.
func replaceFile(src, dst string, mode os.FileMode) error {
	tmp := dst + ".tmp"
	if err := copyFile(src, tmp, mode); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, dst)
}

// makeCpio writes dir as a gzip'd newc cpio archive (owner root) to dst.
// A failure of any stage of the pipeline fails it (bash's pipefail; dash
// has none, and the exit status was gzip's), so that no archive cut short
// is cached.
func makeCpio(ctx context.Context, dir, dst string) error {
	tmp := dst + ".tmp"
	script := `set -o pipefail; find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet | gzip -1 > "$1"`
	if err := runCmd(ctx, dir, nil, "bash", "-c", script, "bash", tmp); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, dst)
}
