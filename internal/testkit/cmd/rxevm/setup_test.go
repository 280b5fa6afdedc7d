package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
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
//	updated/NAME  moves to debs/NAME on `apt-get update`
//	update-fails  makes `apt-get update` fail
//	search        is apt-cache search's output
//	log           gets a line per command run
//
// apt-cache show succeeds for every name (an installed package, or one in
// stale lists).
func fakeApt(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	for _, dir := range []string{"debs", "cut", "updated"} {
		if err := os.Mkdir(filepath.Join(d, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	get := `#!/bin/sh
d=` + d + `
echo "apt-get $*" >>$d/log
case $1 in
update)
	[ -e $d/update-fails ] && { echo "E: update failed"; exit 100; }
	for f in $d/updated/*; do [ -e "$f" ] && mv "$f" $d/debs/; done
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
		if ! [ -e $d/debs/$p ]; then
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
echo "apt-cache $*" >>$d/log
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
	oldGet, oldCache := aptGet, aptCache
	aptGet, aptCache = filepath.Join(d, "apt-get"), filepath.Join(d, "apt-cache")
	aptUpdated = sync.Once{}
	t.Cleanup(func() { aptGet, aptCache = oldGet, oldCache; aptUpdated = sync.Once{} })
	return d
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
