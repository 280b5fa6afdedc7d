package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/testkit"
)

// writeDeb writes an ar archive shaped as a .deb (debian-binary, control
// and data members, an odd size among them) to path, and returns its bytes.
func writeDeb(t *testing.T, path string) []byte {
	t.Helper()
	var b bytes.Buffer
	b.WriteString("!<arch>\n")
	for _, m := range []struct{ name, data string }{
		{"debian-binary", "2.0\n"},
		{"control.tar.xz", "control"},
		{"data.tar.xz", strings.Repeat("d", 1001)},
	} {
		fmt.Fprintf(&b, "%-16s%-12d%-6d%-6d%-8s%-10d`\n", m.name, 0, 0, 0, "100644", len(m.data))
		b.WriteString(m.data)
		if len(m.data)%2 == 1 {
			b.WriteByte('\n')
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// fakeApt puts fake apt-get and apt-cache commands in aptGet and aptCache
// for the test and returns their directory, where
//
//	debs/NAME     is the .deb `apt-get download NAME` writes (as
//	              NAME_1.0_amd64.deb); a name without one cannot be
//	              downloaded (exit status 100), nor printed by --print-uris
//	cut/NAME      is a .deb download writes cut short, exiting 1 (killed)
//	gone/NAME     is in apt's lists (--print-uris names it) but not on
//	              the mirror (download fails) until `apt-get update`
//	updated/NAME  moves to debs/NAME on `apt-get update`
//	update-fails  makes `apt-get update` fail
//	search        is apt-cache search's output
//	log           gets a line per command run, its -o options left out
//	              and " (guest apt)" added when they point apt at the
//	              guest's configuration (Dir::Etc::SourceList)
//	opts          gets the -o options of each command, a line each
//
// apt-cache show succeeds for every name (an installed package, or one in
// stale lists).
func fakeApt(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	for _, dir := range []string{"debs", "cut", "gone", "updated"} {
		if err := os.Mkdir(filepath.Join(d, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Both take apt's -o options first (guestAptArgs), as rxevm gives them.
	opts := `guest=
while [ "$1" = -o ]; do
	echo "$2" >>$d/opts
	case $2 in Dir::Etc::SourceList=*) guest=" (guest apt)" ;; esac
	shift 2
done
`
	get := `#!/bin/sh
d=` + d + `
` + opts + `echo "apt-get $*$guest" >>$d/log
case $1 in
update)
	[ -e $d/update-fails ] && { echo "E: update failed"; exit 100; }
	for f in $d/updated/*; do [ -e "$f" ] && mv "$f" $d/debs/; done
	rm -f $d/gone/*
	exit 0 ;;
download)
	shift
	uris=
	[ "$1" = --print-uris ] && { uris=1; shift; }
	rc=0
	for p; do
		[ "$p" = -q ] && continue
		if [ -e $d/cut/$p ]; then
			head -c 100 $d/cut/$p >${p}_1.0_amd64.deb
			echo "killed"; exit 1
		fi
		if [ -e $d/gone/$p ] && [ -z "$uris" ]; then
			echo "E: Failed to fetch http://deb.example/$p.deb  404  Not Found"; rc=100; continue
		fi
		if ! [ -e $d/debs/$p ] && ! [ -e $d/gone/$p ]; then
			echo "E: Can't find a source to download version '1.0' of '$p:amd64'"; rc=100; continue
		fi
		if [ -n "$uris" ]; then
			echo "'http://deb.example/$p.deb' ${p}_1.0_amd64.deb 1000 SHA256:00"
		else
			cp $d/debs/$p ${p}_1.0_amd64.deb
		fi
	done
	exit $rc ;;
esac
echo "fake apt-get: $*"; exit 100
`
	cache := `#!/bin/sh
d=` + d + `
` + opts + `echo "apt-cache $*$guest" >>$d/log
case $1 in
show) exit 0 ;;
search) cat $d/search 2>/dev/null; exit 0 ;;
esac
exit 100
`
	for name, text := range map[string]string{"apt-get": get, "apt-cache": cache} {
		if err := os.WriteFile(filepath.Join(d, name), []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The guest apt's keyring, so that the tests need no Debian host.
	keyring := filepath.Join(d, "debian-archive-keyring.gpg")
	if err := os.WriteFile(keyring, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	oldGet, oldCache, oldKeyrings, oldPrivate := aptGet, aptCache, debianKeyrings, privateApt
	aptGet, aptCache, debianKeyrings = filepath.Join(d, "apt-get"), filepath.Join(d, "apt-cache"), []string{keyring}
	// The guest's own apt, as on a host other than Debian 12
	// (fakeHostApt: the host's, as on Debian 12).
	privateApt = func() bool { return true }
	resetAptUpdate()
	t.Cleanup(func() {
		aptGet, aptCache, debianKeyrings, privateApt = oldGet, oldCache, oldKeyrings, oldPrivate
		resetAptUpdate()
	})
	return d
}

// fakeHostApt is fakeApt on a Debian 12 host, whose own apt serves the
// guest's packages.
func fakeHostApt(t *testing.T) string {
	d := fakeApt(t)
	privateApt = func() bool { return false }
	return d
}

// TestGuestAptHost: on a Debian 12 host the guest's packages come through
// the host's apt as they are (no -o options, nothing written in the cache
// but the .debs), its lists updated as root only, and a kernel that
// cannot be found names the security archive to add to the host's
// sources.
func TestGuestAptHost(t *testing.T) {
	d := fakeHostApt(t)
	cache := t.TempDir()
	writeDeb(t, filepath.Join(d, "debs", "a"))
	if _, err := fetchDebs(context.Background(), cache, []string{"a"}); err != nil {
		t.Fatalf("fetchDebs: %v\napt: %s", err, aptLog(t, d))
	}
	if log := aptLog(t, d); strings.Contains(log, "(guest apt)") {
		t.Errorf("the host's apt was given the guest's configuration:\n%s", log)
	}
	if _, err := os.Stat(filepath.Join(cache, "apt")); !os.IsNotExist(err) {
		t.Errorf("the guest apt's directory was made on a Debian 12 host: %v", err)
	}
	_, err := resolveKernel(context.Background(), cache, testKernel)
	if err == nil || !strings.Contains(err.Error(), securityLine) {
		t.Errorf("resolveKernel with nothing downloadable: %v; want the line %q", err, securityLine)
	}
}

// TestHostCodename: the suite of the host, from os-release.
func TestHostCodename(t *testing.T) {
	dir := t.TempDir()
	for body, want := range map[string]string{
		"PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nVERSION_CODENAME=bookworm\nID=debian\n": "bookworm",
		"VERSION_CODENAME=\"trixie\"\n": "trixie",
		"ID=alpine\n":                   "",
	} {
		p := filepath.Join(dir, "os-release")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := hostCodename(p); got != want {
			t.Errorf("hostCodename(%q) = %q, want %q", body, got, want)
		}
	}
	if got := hostCodename(filepath.Join(dir, "missing")); got != "" {
		t.Errorf("hostCodename of no file = %q", got)
	}
}

func resetAptUpdate() {
	hostAptUpdated.reset()
	guestAptUpdated.reset()
}

func aptLog(t *testing.T, d string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(d, "log"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

// TestDebComplete: a .deb cut short anywhere (an interrupted download)
// is told apart from a whole one.
func TestDebComplete(t *testing.T) {
	p := filepath.Join(t.TempDir(), "a_1_amd64.deb")
	whole := writeDeb(t, p)
	if err := debComplete(p); err != nil {
		t.Fatalf("whole .deb: %v", err)
	}
	for _, n := range []int{0, 5, 8, 30, 68, 80, 200, len(whole) - 1} {
		if err := os.WriteFile(p, whole[:n], 0o644); err != nil {
			t.Fatal(err)
		}
		err := debComplete(p)
		if err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("cut to %d of %d bytes: %v", n, len(whole), err)
		}
	}
}

// TestFetchDebsCutShort: a .deb cut short in the cache (an interrupted
// download of an older rxevm) is downloaded again, and a stale download
// directory removed, instead of being unpacked on every run.
func TestFetchDebsCutShort(t *testing.T) {
	d := fakeApt(t)
	cache := t.TempDir()
	good := writeDeb(t, filepath.Join(d, "debs", "pkg"))
	cut := filepath.Join(cache, "debs", "pkg_0.9_amd64.deb")
	writeDeb(t, cut)
	if err := os.Truncate(cut, 100); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(cache, "debs", ".download-123"), 0o755); err != nil {
		t.Fatal(err)
	}
	debs, err := fetchDebs(context.Background(), cache, []string{"pkg"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(debs["pkg"])
	if err != nil || !bytes.Equal(b, good) {
		t.Errorf("fetchDebs gave %s (%d bytes, %v), not the downloaded .deb; apt: %s", debs["pkg"], len(b), err, aptLog(t, d))
	}
	if fileExists(cut) {
		t.Errorf("the cut .deb %s is still in the cache", cut)
	}
	if m, _ := filepath.Glob(filepath.Join(cache, "debs", ".download-*")); len(m) > 0 {
		t.Errorf("download directories left: %v", m)
	}
}

// TestGuestAptPrivate: the guest's packages come through rxevm's own apt
// configuration in the cache (Debian 12's sources, lists, an empty dpkg
// status), not the host's, whatever the host runs; when a package cannot
// be downloaded, those lists are updated, by any user (the old runner
// updated the host's lists, as root only), and the download tried again.
func TestGuestAptPrivate(t *testing.T) {
	d := fakeApt(t)
	cache := t.TempDir()
	writeDeb(t, filepath.Join(d, "debs", "a"))
	writeDeb(t, filepath.Join(d, "updated", "b")) // in the lists after an update only
	if _, err := fetchDebs(context.Background(), cache, []string{"a", "b"}); err != nil {
		t.Fatalf("fetchDebs: %v\napt: %s", err, aptLog(t, d))
	}
	log := aptLog(t, d)
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		if !strings.HasSuffix(line, "(guest apt)") {
			t.Errorf("apt ran with the host's configuration: %q", line)
		}
	}
	if !strings.Contains(log, "apt-get update -q (guest apt)") {
		t.Errorf("the guest apt's lists were not updated after a failed download:\n%s", log)
	}
	opts, err := os.ReadFile(filepath.Join(d, "opts"))
	if err != nil {
		t.Fatal(err)
	}
	apt := filepath.Join(cache, "apt")
	for _, want := range []string{
		"Dir::Etc::SourceList=" + filepath.Join(apt, "sources.list"),
		"Dir::Etc::SourceParts=" + filepath.Join(apt, "sources.list.d"),
		"Dir::State::Lists=" + filepath.Join(apt, "lists"),
		"Dir::State::status=" + filepath.Join(apt, "status"),
		"Dir::Cache=" + filepath.Join(apt, "cache"),
		"APT::Default-Release=",
	} {
		if !slices.Contains(strings.Split(string(opts), "\n"), want) {
			t.Errorf("apt's options lack %q:\n%s", want, opts)
		}
	}
	src, err := os.ReadFile(filepath.Join(apt, "sources.list"))
	if err != nil {
		t.Fatal(err)
	}
	for _, suite := range []string{" bookworm main", " bookworm-updates main", " bookworm-security main"} {
		if !strings.Contains(string(src), "[signed-by="+debianKeyrings[0]+"] ") || !strings.Contains(string(src), suite) {
			t.Errorf("sources.list lacks%s signed by %s:\n%s", suite, debianKeyrings[0], src)
		}
	}
	if st, err := os.ReadFile(filepath.Join(apt, "status")); err != nil || len(st) != 0 {
		t.Errorf("the guest apt's dpkg status is not an empty file: %q, %v", st, err)
	}
}

// TestFetchDebsInterrupted: a download killed half way leaves no .deb cut
// short in the cache (a later run would take it for the package), but
// keeps the whole ones.
func TestFetchDebsInterrupted(t *testing.T) {
	d := fakeApt(t)
	cache := t.TempDir()
	writeDeb(t, filepath.Join(d, "debs", "a"))
	writeDeb(t, filepath.Join(d, "cut", "b"))
	if err := os.WriteFile(filepath.Join(d, "update-fails"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := fetchDebs(context.Background(), cache, []string{"a", "b"}); err == nil {
		t.Fatal("fetchDebs succeeded with a download killed")
	}
	if m, _ := filepath.Glob(filepath.Join(cache, "debs", "b_*")); len(m) > 0 {
		t.Errorf("the interrupted download left %v in the cache", m)
	}
	if m, _ := filepath.Glob(filepath.Join(cache, "debs", "a_*.deb")); len(m) != 1 {
		t.Errorf("the whole .deb of a was not kept: %v", m)
	}
	if m, _ := filepath.Glob(filepath.Join(cache, "debs", ".download-*")); len(m) > 0 {
		t.Errorf("download directories left: %v", m)
	}
}

// stdout returns what f prints on os.Stdout.
func stdout(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = w
	done := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(r)
		done <- b
	}()
	defer func() {
		os.Stdout = old
	}()
	f()
	w.Close()
	return string(<-done)
}

var testKernel = kernelSpec{"6.12", "linux-image-6.12.107+deb12-amd64-unsigned", `^linux-image-6\.12\.[0-9]+\+deb12-amd64-unsigned$`}

// TestResolveKernel: the pinned kernel package counts only if the guest's
// apt can download it (apt-cache show also knows a package only
// installed); another kernel is taken with a notice naming both, and with
// none the error names the pinned package and the guest's sources.
func TestResolveKernel(t *testing.T) {
	const alt, older = "linux-image-6.12.110+deb12-amd64-unsigned", "linux-image-6.12.9+deb12-amd64-unsigned"
	search := testKernel.pkg + " - Linux 6.12\n" + alt + " - Linux 6.12\n" + older + " - Linux 6.12\n"
	for _, c := range []struct {
		name       string
		debs       []string // downloadable
		want       string
		wantNotice bool
	}{
		{"pinned downloadable", []string{testKernel.pkg, alt}, testKernel.pkg, false},
		{"pinned only installed", []string{alt, older}, alt, true},
		{"newest not downloadable", []string{older}, older, true},
		{"nothing downloadable", nil, "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := fakeApt(t)
			if err := os.WriteFile(filepath.Join(d, "search"), []byte(search), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, p := range c.debs {
				writeDeb(t, filepath.Join(d, "debs", p))
			}
			var got string
			var err error
			cache := t.TempDir()
			sources := filepath.Join(cache, "apt", "sources.list")
			out := stdout(t, func() { got, err = resolveKernel(context.Background(), cache, testKernel) })
			if c.want == "" {
				if err == nil || !strings.Contains(err.Error(), sources) || !strings.Contains(err.Error(), testKernel.pkg) {
					t.Errorf("resolveKernel = %q, %v; want an error naming %s and %s", got, err, testKernel.pkg, sources)
				}
				return
			}
			if err != nil || got != c.want {
				t.Errorf("resolveKernel = %q, %v; want %s (apt: %s)", got, err, c.want, aptLog(t, d))
			}
			notice := strings.Contains(out, "NOTICE") && strings.Contains(out, testKernel.pkg) && strings.Contains(out, c.want)
			if notice != c.wantNotice {
				t.Errorf("notice %v, want %v: %q", notice, c.wantNotice, out)
			}
		})
	}
}

// TestPrepareKernelFallsBack: when the pinned kernel is in apt's lists
// but its download fails, and after apt-get update the lists lack it,
// the newest other matching kernel is downloaded (the old runner asked
// for the pinned name again). The fake .debs are not real packages, so
// the build stops at unpacking the other kernel's.
func TestPrepareKernelFallsBack(t *testing.T) {
	requireHostTools(t, "dpkg-deb")
	const alt = "linux-image-6.12.110+deb12-amd64-unsigned"
	d := fakeApt(t)
	if err := os.WriteFile(filepath.Join(d, "search"), []byte(alt+" - Linux 6.12\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	writeDeb(t, filepath.Join(d, "gone", testKernel.pkg))
	writeDeb(t, filepath.Join(d, "updated", alt))
	for _, p := range append(slices.Clone(guestPackages), guestLibPackages...) {
		writeDeb(t, filepath.Join(d, "debs", p))
	}
	o := &options{cacheDir: t.TempDir(), timeout: time.Minute}
	var err error
	out := stdout(t, func() { _, err = prepareKernel(context.Background(), o, testKernel) })
	if err == nil || !strings.Contains(err.Error(), "dpkg-deb") || !strings.Contains(err.Error(), alt+"_") {
		t.Errorf("prepareKernel: %v; want a failure to unpack the .deb of %s\napt: %s\n%s", err, alt, aptLog(t, d), out)
	}
	if !strings.Contains(out, "NOTICE") || !strings.Contains(out, alt) {
		t.Errorf("no notice of the other kernel:\n%s", out)
	}
}

// requireHostTools skips where the runner's host tools are missing: in
// the guest, which runs this package's tests too and has busybox's tools
// only (make unit runs them on the host).
func requireHostTools(t *testing.T, tools ...string) {
	t.Helper()
	if testkit.InVM() {
		// Its busybox has a dpkg-deb, which unpacks otherwise.
		t.Skip("host tools missing: the guest's are busybox's (a host test)")
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("host tools missing: %s (a host test)", tool)
		}
	}
}

// TestHostTool: a tool found in /usr/sbin when PATH lacks it (Debian's
// PATH for users, and root's after su) runs by that path: depmod, found
// there, used to run through PATH and fail.
func TestHostTool(t *testing.T) {
	sbin := t.TempDir()
	if err := os.WriteFile(filepath.Join(sbin, "faketool"), []byte("#!/bin/sh\necho ran\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	old := sbinDirs
	sbinDirs = []string{filepath.Join(t.TempDir(), "none"), sbin}
	t.Cleanup(func() { sbinDirs = old })
	t.Setenv("PATH", t.TempDir())
	p, ok := hostTool("faketool")
	if !ok || p != filepath.Join(sbin, "faketool") {
		t.Fatalf("hostTool(faketool) = %q, %v", p, ok)
	}
	if out, err := cmdOutput(context.Background(), "", nil, hostToolPath("faketool")); err != nil || out != "ran\n" {
		t.Errorf("running %s: %q, %v", hostToolPath("faketool"), out, err)
	}
	if p, ok := hostTool("nosuchtool"); ok || p != "nosuchtool" {
		t.Errorf("hostTool(nosuchtool) = %q, %v", p, ok)
	}
}

// TestLockCacheWaits: a run finding the cache locked by another says so,
// gives up when its context ends (the time limit, Ctrl-C), where it used
// to block in flock, and takes the lock once the other releases it.
func TestLockCacheWaits(t *testing.T) {
	dir := t.TempDir()
	// Another run's hold: the file lock alone.
	unlock, err := lockCacheFile(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out := stdout(t, func() {
		var u func()
		if u, err = lockCache(ctx, dir); err == nil {
			u()
		}
	})
	lock := filepath.Join(dir, "lock")
	if err == nil || !strings.Contains(err.Error(), lock) || !errors.Is(err, context.Canceled) {
		t.Errorf("lockCache with the lock held and its context ended: %v", err)
	}
	if !strings.Contains(out, "waiting for another rxevm run holding "+lock) {
		t.Errorf("no word of the wait: %q", out)
	}
	got := make(chan error, 1)
	go func() {
		u, err := lockCache(context.Background(), dir)
		if err == nil {
			u()
		}
		got <- err
	}()
	unlock()
	if err := <-got; err != nil {
		t.Errorf("lockCache after the holder released it: %v", err)
	}
}

// TestLockCacheSameRun: the kernels of one run take turns without
// calling it another run's hold.
func TestLockCacheSameRun(t *testing.T) {
	dir := t.TempDir()
	unlock, err := lockCache(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out := stdout(t, func() {
		var u func()
		if u, err = lockCache(ctx, dir); err == nil {
			u()
		}
	})
	if err == nil || !strings.Contains(err.Error(), "this run's other kernel") || strings.Contains(out, "another rxevm run") {
		t.Errorf("a second kernel of the run, its context ended: %v, printed %q", err, out)
	}
	got := make(chan error, 1)
	go func() {
		u, err := lockCache(context.Background(), dir)
		if err == nil {
			u()
		}
		got <- err
	}()
	unlock()
	if err := <-got; err != nil {
		t.Errorf("lockCache after the run's other kernel released it: %v", err)
	}
}

// TestStopSignalsNohup: a run started with SIGHUP ignored (nohup) keeps
// ignoring it.
func TestStopSignalsNohup(t *testing.T) {
	defer func(f func() bool) { sighupIgnored = f }(sighupIgnored)
	sighupIgnored = func() bool { return true }
	if slices.Contains(stopSignals(), os.Signal(syscall.SIGHUP)) {
		t.Fatal("SIGHUP handled although ignored")
	}
	sighupIgnored = func() bool { return false }
	if !slices.Contains(stopSignals(), os.Signal(syscall.SIGHUP)) {
		t.Fatal("SIGHUP not handled")
	}
}

// TestStopSignals: SIGHUP (a dropped ssh session) ends the run's context,
// as SIGINT and SIGTERM do, instead of killing the runner and leaving its
// temporary directory behind.
func TestStopSignals(t *testing.T) {
	if sighupIgnored() {
		t.Skip("started with SIGHUP ignored (nohup): TestStopSignalsNohup's case")
	}
	ctx, stop := signal.NotifyContext(context.Background(), stopSignals()...)
	defer stop()
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(time.Minute):
		t.Fatal("SIGHUP did not end the context")
	}
}

// TestAbsoluteDirs: a relative PUREVERBS_CACHE or TMPDIR gives absolute
// cache and work directories (makeCpio runs its shell in another
// directory with the output path as given).
func TestAbsoluteDirs(t *testing.T) {
	t.Chdir(t.TempDir())
	if err := os.Mkdir("tmp", 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PUREVERBS_CACHE", "cache")
	t.Setenv("TMPDIR", "tmp")
	o, err := parseArgs([]string{"./a"})
	if err != nil {
		t.Fatal(err)
	}
	if !filepath.IsAbs(o.cacheDir) || filepath.Base(o.cacheDir) != "cache" {
		t.Errorf("PUREVERBS_CACHE=cache: cache dir %q", o.cacheDir)
	}
	work, err := makeWorkDir()
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(work)
	if !filepath.IsAbs(work) || !fileExists(work) {
		t.Errorf("TMPDIR=tmp: work dir %q", work)
	}
}

// TestAptUpdateError: apt-get update runs once, and its failure goes to
// every caller (the second caller used to get nil and go on with stale
// lists).
func TestAptUpdateError(t *testing.T) {
	d := fakeApt(t)
	if err := os.WriteFile(filepath.Join(d, "update-fails"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := aptUpdate(context.Background()); err == nil {
			t.Errorf("call %d: apt-get update failed, aptUpdate returned nil", i+1)
		}
	}
	if n := strings.Count(aptLog(t, d), "apt-get update"); n != 1 {
		t.Errorf("apt-get update ran %d times, want 1", n)
	}
}

// TestMakeCpioFails: a failing cpio (a stage before the last of the
// pipeline) fails makeCpio and leaves no archive, instead of an archive
// cut short that would be cached.
func TestMakeCpioFails(t *testing.T) {
	requireHostTools(t, "bash", "gzip")
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "cpio"), []byte("#!/bin/sh\ncat >/dev/null\necho cpio: write error >&2\nexit 2\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	src, out := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(out, "base.cpio.gz")
	if err := makeCpio(context.Background(), src, dst); err == nil || !strings.Contains(err.Error(), "write error") {
		t.Errorf("makeCpio with cpio failing: %v", err)
	}
	if m, _ := filepath.Glob(filepath.Join(out, "*")); len(m) > 0 {
		t.Errorf("left %v", m)
	}
}

// TestReplaceFile: the cached vmlinuz is replaced by a rename, so a
// reader of the old one (another run's QEMU) reads it whole.
func TestReplaceFile(t *testing.T) {
	d := t.TempDir()
	dst, src := filepath.Join(d, "vmlinuz"), filepath.Join(d, "new")
	if err := os.WriteFile(dst, []byte("old kernel"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(src, []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := replaceFile(src, dst, 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(f); err != nil || string(b) != "old kernel" {
		t.Errorf("a reader of the old file read %q, %v", b, err)
	}
	if b, err := os.ReadFile(dst); err != nil || string(b) != "new" {
		t.Errorf("%s has %q, %v", dst, b, err)
	}
	if fileExists(dst + ".tmp") {
		t.Error("temporary file left")
	}
}
