package pingpong

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/uverbs"
)

// TestParseArgsGetopt runs the tools' option tables through
// internal/getopt (whose tests hold the parser's cases): a complaint comes
// back as a *getoptError in glibc's words, an ambiguous prefix lists the C
// table's order, and abbreviations work.
func TestParseArgsGetopt(t *testing.T) {
	for _, c := range []struct {
		k    Kind
		args []string
		err  string
	}{
		{RC, []string{"--i"}, "option '--i' is ambiguous; possibilities: '--ib-dev' '--ib-port' '--iters' '--iodp'"},
		{RC, []string{"-h"}, "invalid option -- 'h'"},
		{RC, []string{"--chk=1"}, "option '--chk' doesn't allow an argument"},
		{UD, []string{"-s"}, "option requires an argument -- 's'"},
	} {
		var ge *getoptError
		if _, err := ParseArgs(c.k, c.args); !errors.As(err, &ge) || ge.msg != c.err {
			t.Errorf("%v %q: %v, want %q", c.k, c.args, err, c.err)
		}
	}
	o, err := ParseArgs(RC, []string{"--ib-p", "2", "--it=7", "--size=64", "--chk", "host"})
	if want := (Options{Server: "host", Client: true, Port: 18515, IBPort: 2, Size: 64, MTU: 3, RxDepth: 500, Iters: 7, GIDIndex: -1, Validate: true}); err != nil || o != want {
		t.Errorf("long options: %+v %v, want %+v", o, err, want)
	}
}

func TestParseArgsDefaults(t *testing.T) {
	for k, size := range map[Kind]uint32{RC: 4096, UC: 4096, UD: 1024, SRQ: 4096} {
		o, err := ParseArgs(k, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := Options{Port: 18515, IBPort: 1, Size: size, MTU: 3, RxDepth: 500, Iters: 1000, GIDIndex: -1}
		if k == SRQ {
			want.NumQP = 16
		}
		if o != want {
			t.Errorf("%v defaults = %+v, want %+v", k, o, want)
		}
	}
}

func TestParseArgs(t *testing.T) {
	o, err := ParseArgs(RC, []string{"-p", "0x4000", "-d", "rxelo", "-i", "1", "-s", "65536", "-m", "4096", "-r", "100",
		"-n", "10", "-l", "0", "-g", "1", "-c", "-o", "-N", "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	want := Options{Server: "127.0.0.1", Client: true, Port: 0x4000, Dev: "rxelo", DevSet: true, IBPort: 1, Size: 65536, MTU: 5, RxDepth: 100,
		Iters: 10, GIDIndex: 1, Validate: true, ODP: true, NewSend: true}
	if o != want {
		t.Errorf("got %+v\nwant %+v", o, want)
	}
	o, err = ParseArgs(SRQ, []string{"-q", "4", "-O"})
	if err == nil {
		t.Errorf("srq took -O: %+v", o)
	}
	o, err = ParseArgs(SRQ, []string{"-q", "4", "-e"})
	if err != nil || o.NumQP != 4 || !o.Events {
		t.Errorf("srq -q 4 -e: %+v %v", o, err)
	}
	if _, err := ParseArgs(UD, []string{"-m", "1024"}); err == nil {
		t.Error("ud took -m, which ibv_ud_pingpong does not have")
	}
	if o, _ := ParseArgs(RC, []string{"-O"}); !o.ODP || !o.ImplicitODP {
		t.Errorf("-O sets both -o and implicit: %+v", o)
	}
	// The C tools' usage errors.
	for _, c := range []struct {
		k    Kind
		args []string
	}{
		{RC, []string{"-p", "65536"}}, {RC, []string{"-p", "-1"}}, {UD, []string{"-p", "70000"}}, {RC, []string{"-i", "0"}},
		{RC, []string{"-m", "1000"}}, {RC, []string{"-m", "x"}}, {SRQ, []string{"-s", "0"}}, {RC, []string{"a", "b"}},
	} {
		if o, err := ParseArgs(c.k, c.args); !errors.Is(err, errUsage) {
			t.Errorf("%v %q = %+v, %v; want errUsage", c.k, c.args, o, err)
		}
	}
	// rc takes size 0 (the C tool then fails later), and strtoul's
	// reading of odd numbers.
	if o, err := ParseArgs(RC, []string{"-s", "0", "-n", "12x"}); err != nil || o.Size != 0 || o.Iters != 12 {
		t.Errorf("-s 0 -n 12x: %+v %v", o, err)
	}
}

func TestMainUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Main(RC, "rcpingpong", []string{"-x"}, &out, &errb); code != 1 {
		t.Errorf("exit %d", code)
	}
	if errb.String() != "rcpingpong: invalid option -- 'x'\n" {
		t.Errorf("stderr %q", errb.String())
	}
	if !strings.HasPrefix(out.String(), "Usage:\n  rcpingpong            start a server and wait for connection\n  rcpingpong <host>     connect to server at <host>\n\nOptions:\n  -p, --port=<port>") ||
		!strings.HasSuffix(out.String(), "  -N, --new_send            use new post send WR API\n") {
		t.Errorf("usage:\n%s", out.String())
	}
	out.Reset()
	errb.Reset()
	if code := Main(SRQ, "srqpingpong", []string{"a", "b"}, &out, &errb); code != 1 || errb.Len() != 0 || !strings.Contains(out.String(), "-q, --num-qp=<num>") {
		t.Errorf("srq a b: exit %d, stderr %q, stdout %q", code, errb.String(), out.String())
	}
}

// -e is taken by every tool; a missing device still fails first.
func TestMainEvents(t *testing.T) {
	notFound := func(name string) string { return "IB device " + name + " not found\n" }
	if _, err := uverbs.Devices(); errors.Is(err, sys.ENOSYS) {
		// A host without RDMA support: the C tools' list fails first.
		notFound = func(string) string { return "Failed to get IB devices list: Function not implemented\n" }
	}
	for k := range specs {
		if o, err := ParseArgs(k, []string{"-e"}); err != nil || !o.Events {
			t.Errorf("%v -e: %+v %v", k, o, err)
		}
		var out, errb bytes.Buffer
		if code := Main(k, "tool", []string{"-e", "-d", "nosuchdev"}, &out, &errb); code != 1 || errb.String() != notFound("nosuchdev") {
			t.Errorf("%v -e -d nosuchdev: exit %d, stderr %q", k, code, errb.String())
		}
		// A name given as "" is looked for, as C looks for it (not "the
		// first device", and not "No IB devices found" where there are none).
		errb.Reset()
		if code := Main(k, "tool", []string{"-d", ""}, &out, &errb); code != 1 || errb.String() != notFound("") {
			t.Errorf("%v -d '': exit %d, stderr %q", k, code, errb.String())
		}
	}
}

// The srq checks and rc's option conflicts come before any device is
// opened, with the C tools' messages.
func TestRunChecks(t *testing.T) {
	for _, c := range []struct {
		k    Kind
		args []string
		want string
	}{
		{SRQ, []string{"-q", "8", "-r", "4"}, "rx_depth 4 is too small for 8 QPs -- must have at least one receive per QP."},
		{SRQ, []string{"-q", "256", "-r", "1000"}, "num_qp 256 must be less than 255"},
		{RC, []string{"-o", "-j"}, "DM memory region can't be on demand"},
		{RC, []string{"-P"}, "prefetch is valid only with on-demand memory region"},
	} {
		var out, errb bytes.Buffer
		if code := Main(c.k, "t", c.args, &out, &errb); code != 1 || errb.String() != c.want+"\n" || out.Len() != 0 {
			t.Errorf("%v %q: exit %d, stderr %q, stdout %q", c.k, c.args, code, errb.String(), out.String())
		}
	}
}

func TestWaitModeFromEnv(t *testing.T) {
	for v, want := range map[string]uverbs.WaitMode{"": uverbs.WaitPoller, "poller": uverbs.WaitPoller, "thread": uverbs.WaitThread, "bogus": uverbs.WaitPoller} {
		t.Setenv(WaitEnv, v)
		if got := WaitModeFromEnv(); got != want {
			t.Errorf("%s=%q: %v, want %v", WaitEnv, v, got, want)
		}
	}
}

// An operand makes the client even when it is "" (C's servername is then
// not NULL, and getaddrinfo fails for it); none runs the server.
func TestParseArgsClient(t *testing.T) {
	for _, args := range [][]string{{""}, {"*"}, {"h"}} {
		if o, err := ParseArgs(RC, args); err != nil || !o.Client || o.Server != args[0] {
			t.Errorf("ParseArgs(%q): client %v, server %q, %v", args, o.Client, o.Server, err)
		}
	}
	if o, err := ParseArgs(RC, nil); err != nil || o.Client {
		t.Errorf("ParseArgs(none): client %v, %v", o.Client, err)
	}
}
