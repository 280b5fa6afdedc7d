package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// The guest is Debian 12 (bookworm) whatever the host runs: its kernel,
// rdma-core and libraries, and the sysroot the C tools are compiled
// against, come from bookworm. On a Debian 12 host that is the host's own
// apt, with its sources (a mirror of its own, a proxy), as always. On any
// other host it is an apt configuration of rxevm's own (guestAptArgs),
// with its sources, lists and caches in $PUREVERBS_CACHE/apt; the host's
// apt then installs only host programs (hostTools, gcc), and its
// apt.conf.d still applies (a proxy, for one), but not its sources,
// preferences, dpkg status or default release. PUREVERBS_GUEST_APT=private
// (or host) chooses.
const (
	guestSuite          = "bookworm"
	defaultDebianMirror = "http://deb.debian.org/debian"
	defaultSecurityURI  = "http://deb.debian.org/debian-security"
)

// debianKeyrings are where the Debian archive keyring may be (Debian 12
// and 13's debian-archive-keyring, which both hold bookworm's keys, ship
// the .gpg one).
var debianKeyrings = []string{
	"/usr/share/keyrings/debian-archive-keyring.gpg",
	"/usr/share/keyrings/debian-archive-keyring.pgp",
}

// debianKeyring returns the first of debianKeyrings that exists, or "".
func debianKeyring() string {
	for _, k := range debianKeyrings {
		if fileExists(k) {
			return k
		}
	}
	return ""
}

// guestSources is the sources.list of the guest's apt: bookworm,
// bookworm-updates and bookworm-security, main, as on a standard Debian
// 12 install. PUREVERBS_DEBIAN_MIRROR and PUREVERBS_DEBIAN_SECURITY
// replace the two archives' URIs (a local mirror).
func guestSources(keyring string) string {
	mirror := os.Getenv("PUREVERBS_DEBIAN_MIRROR")
	if mirror == "" {
		mirror = defaultDebianMirror
	}
	security := os.Getenv("PUREVERBS_DEBIAN_SECURITY")
	if security == "" {
		security = defaultSecurityURI
	}
	opt := "[signed-by=" + keyring + "]"
	return fmt.Sprintf("# written by rxevm (internal/testkit/cmd/rxevm/guestapt.go): the guest's Debian 12 packages\n"+
		"deb %s %s %s main\ndeb %s %s %s-updates main\ndeb %s %s %s-security main\n",
		opt, mirror, guestSuite, opt, mirror, guestSuite, opt, security, guestSuite)
}

// privateApt reports whether the guest's packages come through rxevm's
// own apt configuration (a host other than Debian 12, or
// PUREVERBS_GUEST_APT=private) rather than the host's (Debian 12, or
// PUREVERBS_GUEST_APT=host). Host tests set it.
var privateApt = sync.OnceValue(func() bool {
	switch os.Getenv("PUREVERBS_GUEST_APT") {
	case "private":
		return true
	case "host":
		return false
	}
	return hostCodename("/etc/os-release") != guestSuite
})

// hostCodename returns VERSION_CODENAME from an os-release file, or "".
func hostCodename(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VERSION_CODENAME="); ok {
			return strings.Trim(strings.TrimSpace(v), `"'`)
		}
	}
	return ""
}

// guestAptDir is the guest apt's directory in the cache.
func guestAptDir(cache string) string { return filepath.Join(cache, "apt") }

// guestAptArgs returns the options that point apt at the guest's
// configuration in cache, followed by args.
func guestAptArgs(cache string, args ...string) []string {
	if !privateApt() {
		return args
	}
	d := guestAptDir(cache)
	opts := []string{
		"Dir::Etc::SourceList=" + filepath.Join(d, "sources.list"),
		"Dir::Etc::SourceParts=" + filepath.Join(d, "sources.list.d"),
		"Dir::Etc::Preferences=" + filepath.Join(d, "preferences"),
		"Dir::Etc::PreferencesParts=" + filepath.Join(d, "preferences.d"),
		"Dir::State=" + d,
		"Dir::State::Lists=" + filepath.Join(d, "lists"),
		// No installed packages: else a host's newer installed version
		// (Debian 13's libc6) is the candidate, and has no .deb here.
		"Dir::State::status=" + filepath.Join(d, "status"),
		"Dir::Cache=" + filepath.Join(d, "cache"),
		"APT::Default-Release=", // a host's "trixie" would be an error here
		"APT::Architecture=amd64",
		"APT::Architectures=amd64",
		"Acquire::Languages=none",
	}
	var out []string
	for _, o := range opts {
		out = append(out, "-o", o)
	}
	return append(out, args...)
}

// setupGuestApt writes the guest apt's configuration into cache (again
// when it changed: another mirror, keyring) and makes its directories.
func setupGuestApt(cache string) error {
	if !privateApt() {
		return nil
	}
	keyring := debianKeyring()
	if keyring == "" {
		return fmt.Errorf("no Debian archive keyring (%s), which verifies the guest's Debian 12 packages: install the host package debian-archive-keyring", debianKeyrings[0])
	}
	d := guestAptDir(cache)
	for _, sub := range []string{"sources.list.d", "preferences.d", "lists/partial", "cache/archives/partial"} {
		if err := os.MkdirAll(filepath.Join(d, sub), 0o755); err != nil {
			return err
		}
	}
	src := guestSources(keyring)
	if b, err := os.ReadFile(filepath.Join(d, "sources.list")); err != nil || string(b) != src {
		if err := os.WriteFile(filepath.Join(d, "sources.list"), []byte(src), 0o644); err != nil {
			return err
		}
	}
	if !fileExists(filepath.Join(d, "status")) {
		if err := os.WriteFile(filepath.Join(d, "status"), nil, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// aptOnce records one apt-get update of a run: it runs once, and its
// error goes to every caller, not only the first. A run cut short by its
// caller's context (that kernel's time limit) is not recorded: the next
// caller runs it again.
type aptOnce struct {
	sync.Mutex
	done bool
	err  error
}

func (u *aptOnce) run(ctx context.Context, msg string, args ...string) error {
	u.Lock()
	defer u.Unlock()
	if u.done {
		return u.err
	}
	fmt.Println(msg)
	err := runCmd(ctx, "", nil, aptGet, args...)
	if err == nil || ctx.Err() == nil {
		u.done, u.err = true, err
	}
	return err
}

func (u *aptOnce) reset() {
	u.Lock()
	defer u.Unlock()
	u.done, u.err = false, nil
}

// hostAptUpdated is the host's apt-get update (as root, before installing
// host packages); guestAptUpdated is the guest apt's, which any user may
// run: its lists are in the cache.
var hostAptUpdated, guestAptUpdated aptOnce

func aptUpdate(ctx context.Context) error {
	return hostAptUpdated.run(ctx, "rxevm: apt-get update", "update", "-q")
}

// guestAptUpdate updates the guest apt's lists (Debian 12's) in cache,
// or, on a Debian 12 host, the host's lists (as root only: another user
// goes on with the lists as they are).
func guestAptUpdate(ctx context.Context, cache string) error {
	if !privateApt() {
		if os.Geteuid() != 0 {
			return nil
		}
		return aptUpdate(ctx)
	}
	if err := setupGuestApt(cache); err != nil {
		return err
	}
	return guestAptUpdated.run(ctx, "rxevm: apt-get update of Debian 12's package lists for the guest (in "+guestAptDir(cache)+")",
		guestAptArgs(cache, "update", "-q")...)
}
