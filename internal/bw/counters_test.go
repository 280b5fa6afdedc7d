package bw

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pureverbs/pureverbs/internal/sys"
)

func TestCounterNames(t *testing.T) {
	for _, c := range []struct {
		list  string
		names []string
		ok    bool
	}{
		{"", nil, true},
		{"hw_counters/sent_pkts", []string{"hw_counters/sent_pkts"}, true},
		{"a,b", []string{"a", "b"}, true},
		{"a,,b", []string{"a", "b"}, false}, // three by the commas, two by strtok
		{",a", []string{"a"}, false},
		{"a,", []string{"a"}, false},
	} {
		names, ok := counterNames(c.list)
		if !cmp.Equal(names, c.names, cmpEmpty) || ok != c.ok {
			t.Errorf("counterNames(%q) = %q, %v; want %q, %v", c.list, names, ok, c.names, c.ok)
		}
	}
}

var cmpEmpty = cmp.Comparer(func(a, b []string) bool {
	return strings.Join(a, "\x00") == strings.Join(b, "\x00") && len(a) == len(b)
})

func TestStrtoll(t *testing.T) {
	for in, want := range map[string]int64{
		"12345\n":                     12345,
		"  7":                         7,
		"+8x":                         8,
		"-3\n":                        -3,
		"":                            0,
		"abc":                         0,
		"9223372036854775807\n":       math.MaxInt64,
		"9223372036854775808\n":       math.MaxInt64,
		"99999999999999999999":        math.MaxInt64,
		"-9223372036854775808":        math.MinInt64,
		"-99999999999999999999999999": math.MinInt64,
	} {
		if got := strtoll([]byte(in)); got != want {
			t.Errorf("strtoll(%q) = %d, want %d", in, got, want)
		}
	}
}

// TestCounters: -W's counters under a port directory laid out as sysfs
// lays out rxe's (hw_counters/NAME, one through a symbolic link): each
// report prints each counter's change since the report before, under
// the name given, then an empty line; a missing counter, a nameless one
// and a directory fail the open and leave no file open.
func TestCounters(t *testing.T) {
	dir := t.TempDir() + "/"
	if err := os.MkdirAll(dir+"hw_counters", 0o755); err != nil {
		t.Fatal(err)
	}
	set := func(name, v string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	set("hw_counters/sent_pkts", "100\n")
	set("hw_counters/rcvd_pkts", "7\n")
	if err := os.Symlink("hw_counters", dir+"linked"); err != nil {
		t.Fatal(err)
	}
	before := openFDs(t)
	c, err := openCounters(dir, "hw_counters/sent_pkts,linked/rcvd_pkts")
	if err != nil {
		t.Fatal(err)
	}
	set("hw_counters/sent_pkts", "1100\n")
	var out strings.Builder
	c.print(&out)
	set("hw_counters/sent_pkts", "1150\n")
	set("hw_counters/rcvd_pkts", "6\n") // a counter that went back wraps, as perftest's unsigned difference does
	c.print(&out)
	want := "\thw_counters/sent_pkts=1000\n\tlinked/rcvd_pkts=0\n\n\thw_counters/sent_pkts=50\n\tlinked/rcvd_pkts=18446744073709551615\n\n"
	if out.String() != want {
		t.Errorf("printed %q, want %q", out.String(), want)
	}
	c.close()

	empty, err := openCounters(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	empty.print(&out)
	if out.String() != "\n" {
		t.Errorf("an empty list printed %q, want an empty line", out.String())
	}

	for list, want := range map[string]error{
		"hw_counters/sent_pkts,hw_counters/nope": sys.ENOENT,
		"hw_counters/sent_pkts,":                 errNoCounter,
		"hw_counters":                            sys.EISDIR,
	} {
		if c, err := openCounters(dir, list); !errors.Is(err, want) {
			t.Errorf("openCounters(%q) = %v, %v; want %v", list, c, err, want)
		}
	}
	if after := openFDs(t); after != before {
		t.Errorf("%d open files before, %d after", before, after)
	}
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestForceLink: perftest's str_link_layer takes any argument that
// starts with "IB" or "Ethernet", in any case; anything else ends the
// parse with its complaint.
func TestForceLink(t *testing.T) {
	for arg, want := range map[string]linkLayer{"IB": linkIB, "ib": linkIB, "IBx": linkIB, "Ethernet": linkEthernet, "ETHERNET2": linkEthernet} {
		o, err := ParseArgs(Write, []string{"--force-link=" + arg})
		if err != nil || o.forceLink != want {
			t.Errorf("--force-link=%s: %v, %v; want %v", arg, o.forceLink, err, want)
		}
	}
	for _, arg := range []string{"eth", "I", "RoCE", ""} {
		_, err := ParseArgs(Write, []string{"--force-link", arg})
		if err == nil || err.Error() != "Invalid link layer value should be IB or ETHERNET." {
			t.Errorf("--force-link %q: %v", arg, err)
		}
	}
}
