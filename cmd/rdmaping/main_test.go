package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/testkit/leakmain"
	"github.com/pureverbs/pureverbs/uverbs"
)

// TestMain traces every fd and mapping the tests create and fails the run
// when any is left open; in the VM each test is also checked on its own
// (testkit.LeakCheck: goroutines, fds, mappings, kernel objects), which
// covers the tool's own release of everything when Main runs in the
// test's process (vm_test.go's in-process tests).
func TestMain(m *testing.M) {
	os.Exit(leakmain.Run(m))
}

// cUsage is rping's usage text as rdma-core 44's binary prints it (tabs
// included).
const cUsage = "rping -s [-vVd] [-S size] [-C count] [-a addr] [-p port]\n" +
	"rping -c [-vVd] [-S size] [-C count] [-I addr] -a addr [-p port]\n" +
	"\t-c\t\tclient side\n" +
	"\t-I\t\tSource address to bind to for client.\n" +
	"\t-s\t\tserver side.  To bind to any address with IPv6 use -a ::0\n" +
	"\t-v\t\tdisplay ping data to stdout\n" +
	"\t-V\t\tvalidate ping data\n" +
	"\t-d\t\tdebug printfs\n" +
	"\t-S size \tping data size\n" +
	"\t-C count\tping count times\n" +
	"\t-a addr\t\taddress\n" +
	"\t-p port\t\tport\n" +
	"\t-P\t\tpersistent server mode allowing multiple connections\n" +
	"\t-q\t\tuse self-created, self-modified QP\n"

// TestParseArgs: the C tool's options, defaults, messages (and on which
// stream), statuses and quirks, as rdma-core 44's rping shows them
// (each case's expectation was taken from the C binary).
func TestParseArgs(t *testing.T) {
	def := defaultOptions()
	with := func(f func(o *options)) options {
		o := def
		f(&o)
		return o
	}
	for _, c := range []struct {
		args           string
		status         int
		stdout, stderr string
		want           options // checked when status is 0
	}{
		{"", 22, cUsage, "", def},
		{"-x", 22, cUsage, "", def},
		{"-S", 22, cUsage, "", def},           // missing argument: getopt's '?', no message (opterr = 0)
		{"--size=64 -s", 22, cUsage, "", def}, // no long options: '-' is an unknown option letter
		{"-t 5 -s", 22, cUsage, "", def},      // in the option string, not handled
		{"-s -q", 0, "", "", with(func(o *options) { o.server, o.selfQP = 1, true })},
		{"-s", 0, "", "", with(func(o *options) { o.server = 1 })},
		{"-c -a 10.99.0.1", 0, "", "", with(func(o *options) { o.server, o.addr = 0, netip.MustParseAddr("10.99.0.1") })},
		{"-s -c", 0, "", "", with(func(o *options) { o.server = 0 })},
		{"extra -s", 0, "", "", with(func(o *options) { o.server = 1 })}, // operands are ignored
		{"-S 1", 22, "", "Invalid size 1 (valid range is 23 to 65536)\n", def},
		{"-S 22 -s", 22, "", "Invalid size 22 (valid range is 23 to 65536)\n", def},
		{"-S 23 -s", 0, "", "", with(func(o *options) { o.server, o.size = 1, 23 })},
		{"-S 65535 -s", 0, "", "", with(func(o *options) { o.server, o.size = 1, 65535 })},
		{"-S 65536 -s", 22, "", "Invalid size 65536 (valid range is 23 to 65536)\n", def},
		{"-S abc -s", 22, "", "Invalid size 0 (valid range is 23 to 65536)\n", def},
		// Compared as a size_t, a negative size passes the check.
		{"-S -5 -s", 0, "", "", with(func(o *options) { o.server, o.size = 1, -5 })},
		// A good -a after a bad -S clears the status.
		{"-S 1 -a 1.2.3.4 -c", 0, "", "Invalid size 1 (valid range is 23 to 65536)\n",
			with(func(o *options) { o.server, o.size, o.addr = 0, 1, netip.MustParseAddr("1.2.3.4") })},
		{"-S 100 -x -S 5", 22, cUsage, "", def},
		{"-C 5 -S 1", 22, "", "Invalid size 1 (valid range is 23 to 65536)\n", def},
		{"-C -1 -s", 22, "", "Invalid count -1\n", def},
		{"-C abc -c", 0, "", "", with(func(o *options) { o.server = 0 })},
		{"-C 99999999999 -c", 0, "", "", with(func(o *options) { o.server, o.count = 0, 1215752191 })},
		{"-p 70000 -s", 0, "", "", with(func(o *options) { o.server, o.port = 1, 4464 })},
		{"-p -1 -s", 0, "", "", with(func(o *options) { o.server, o.port = 1, 65535 })},
		{"-d -p 77 -S 30 -C 3 -v -V -s", 0, "port 77\nsize 30\ncount 3\nverbose\nvalidate data\nserver\n", "",
			with(func(o *options) {
				o.server, o.port, o.size, o.count, o.verbose, o.validate, o.debug = 1, 77, 30, 3, true, true, true
			})},
		{"-p 77 -d -S 30 -s", 0, "size 30\nserver\n", "", with(func(o *options) { o.server, o.port, o.size, o.debug = 1, 77, 30, true })},
		{"-dsv", 0, "server\nverbose\n", "", with(func(o *options) { o.server, o.verbose, o.debug = 1, true, true })},
		{"-sP -I 10.0.0.2 -a ::0", 0, "", "", with(func(o *options) {
			o.server, o.persistent, o.src, o.addr = 1, true, netip.MustParseAddr("10.0.0.2"), netip.IPv6Unspecified()
		})},
		{"-s -- -c", 0, "", "", with(func(o *options) { o.server = 1 })},
		{"-- -s", 22, cUsage, "", def},
		// (An empty name fails without asking DNS, so the case does not
		// depend on this machine's resolver.)
		{"-a '' -s", 254, "getaddrinfo failed (Name or service not known) - invalid hostname or IP address\n", "", def},
		{"-I '' -a 1.2.3.4 -s", 0, "getaddrinfo failed (Name or service not known) - invalid hostname or IP address\n", "",
			with(func(o *options) { o.server, o.addr = 1, netip.MustParseAddr("1.2.3.4") })},
	} {
		var stdout, stderr bytes.Buffer
		args := strings.Fields(c.args)
		for i, a := range args {
			if a == "''" {
				args[i] = ""
			}
		}
		o, status := parseArgs(context.Background(), args, &stdout, &stderr)
		if status != c.status || stdout.String() != c.stdout || stderr.String() != c.stderr {
			t.Errorf("%q: status %d, stdout %q, stderr %q; want %d, %q, %q", c.args, status, stdout.String(), stderr.String(),
				c.status, c.stdout, c.stderr)
			continue
		}
		if status == 0 && o != c.want {
			t.Errorf("%q: options %+v, want %+v", c.args, o, c.want)
		}
	}
}

// TestMainBadArgs: Main ends a bad command line before touching any
// device, with the status and streams of the C tool.
func TestMainBadArgs(t *testing.T) {
	for _, c := range []struct {
		args   []string
		status int
		stdout string
		stderr string
	}{
		{nil, 22, cUsage, ""},
		{[]string{"-S", "100000", "-c"}, 22, "", "Invalid size 100000 (valid range is 23 to 65536)\n"},
		{[]string{"-a", "", "-s"}, 254, "getaddrinfo failed (Name or service not known) - invalid hostname or IP address\n", ""},
	} {
		var stdout, stderr bytes.Buffer
		if st := Main(context.Background(), c.args, &stdout, &stderr); st != c.status || stdout.String() != c.stdout || stderr.String() != c.stderr {
			t.Errorf("Main(%q): %d, stdout %q, stderr %q; want %d, %q, %q", c.args, st, stdout.String(), stderr.String(), c.status, c.stdout, c.stderr)
		}
	}
}

// TestMainNoDevice: on a machine without RDMA devices both roles end as
// librdmacm's examples do: "No RDMA devices were detected", ENODEV.
func TestMainNoDevice(t *testing.T) {
	if devs, err := uverbs.Devices(); err == nil && len(devs) > 0 {
		t.Skip("this machine has RDMA devices") // the VM has; vm_test.go runs the tool there
	}
	for _, args := range [][]string{{"-s"}, {"-c", "-a", "10.99.0.1", "-C", "1"}} {
		var stdout, stderr bytes.Buffer
		if st := Main(context.Background(), args, &stdout, &stderr); st != 19 || stdout.String() != "" ||
			stderr.String() != "No RDMA devices were detected\n" {
			t.Errorf("Main(%q) without devices: %d, stdout %q, stderr %q", args, st, stdout.String(), stderr.String())
		}
	}
}

// TestGetAddr: rping's get_addr on the names rdmacm.GetAddrInfo reads
// as glibc does, and its line and code for what names no host (the empty
// name included, which glibc looks up and GetAddrInfo takes for none).
func TestGetAddr(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for in, want := range map[string]string{"10.1": "10.0.0.1", "::1": "::1", "fe80::1%lo": "fe80::1%lo"} {
		var out bytes.Buffer
		if a, code := getAddr(ctx, in, &out); code != 0 || a.String() != want || out.Len() != 0 {
			t.Errorf("getAddr(%q) = %v, %d, %q; want %s", in, a, code, out.String(), want)
		}
	}
	for _, in := range []string{""} {
		var out bytes.Buffer
		if a, code := getAddr(ctx, in, &out); code != -2 || a.IsValid() ||
			out.String() != "getaddrinfo failed (Name or service not known) - invalid hostname or IP address\n" {
			t.Errorf("getAddr(%q) = %v, %d, %q; want EAI_NONAME and its line", in, a, code, out.String())
		}
	}
}

// TestRdmaInfoWire: struct rping_rdma_info is 16 bytes, every field
// big-endian, no padding.
func TestRdmaInfoWire(t *testing.T) {
	m := rdmaInfo{Addr: 0x0102030405060708, RKey: 0x0a0b0c0d, Size: 100}
	b := make([]byte, rdmaInfoLen)
	m.put(b)
	want := []byte{1, 2, 3, 4, 5, 6, 7, 8, 0x0a, 0x0b, 0x0c, 0x0d, 0, 0, 0, 100}
	if !bytes.Equal(b, want) {
		t.Fatalf("encoded % x, want % x", b, want)
	}
	if got := readInfo(want); got != m {
		t.Fatalf("decoded %+v, want %+v", got, m)
	}
	if rdmaInfoLen != 16 {
		t.Fatalf("rdmaInfoLen %d", rdmaInfoLen)
	}
}

// TestFillPing: the client's ping data, spelled out: the header, letters
// from the ping's start letter cycling 'A'..'z', a NUL last; a buffer
// shorter than the header cuts it (snprintf).
func TestFillPing(t *testing.T) {
	for _, c := range []struct {
		size  int
		n     int32
		start byte
		want  string
	}{
		{30, 0, 'A', "rdma-ping-0: ABCDEFGHIJKLMNOP\x00"},
		{30, 1, 'B', "rdma-ping-1: BCDEFGHIJKLMNOPQ\x00"},
		{23, 12, 'M', "rdma-ping-12: MNOPQRST\x00"},
		{20, 57, 'z', "rdma-ping-57: zABCD\x00"},
		{23, 3, 'w', "rdma-ping-3: wxyzABCDE\x00"},
		{10, 5, 'A', "rdma-ping\x00"},
		{14, 5, 'A', "rdma-ping-5: \x00"},
		{1, 5, 'A', "\x00"},
	} {
		b := bytes.Repeat([]byte{'#'}, c.size)
		fillPing(b, c.n, c.start)
		if string(b) != c.want {
			t.Errorf("fillPing(%d bytes, %d, %q) = %q, want %q", c.size, c.n, c.start, b, c.want)
		}
	}
	// The start letter of ping n is 'A' + n mod 58.
	c := byte(firstChar)
	for n := range 200 {
		if want := byte('A' + n%58); c != want {
			t.Fatalf("start letter of ping %d: %q, want %q", n, c, want)
		}
		c = nextChar(c)
	}
}

// TestPingLine: -v's lines print the buffer up to its NUL.
func TestPingLine(t *testing.T) {
	b := []byte("rdma-ping-7: HIJ\x00stale")
	if got, want := pingLine(false, b), "ping data: rdma-ping-7: HIJ\n"; got != want {
		t.Errorf("client line %q, want %q", got, want)
	}
	if got, want := pingLine(true, b), "server ping data: rdma-ping-7: HIJ\n"; got != want {
		t.Errorf("server line %q, want %q", got, want)
	}
	if got, want := pingLine(true, []byte("abc")), "server ping data: abc\n"; got != want {
		t.Errorf("line of a buffer without NUL %q, want %q", got, want)
	}
}

// TestStates: the numbers the C tool prints for its states.
func TestStates(t *testing.T) {
	for st, want := range map[state]int{stIdle: 1, stConnectRequest: 2, stRouteResolved: 4, stConnected: 5,
		stReadAdv: 6, stReadComplete: 7, stWriteAdv: 8, stWriteComplete: 9, stDisconnected: 10, stError: 11} {
		if int(st) != want {
			t.Errorf("state %d, want %d", st, want)
		}
	}
}

// TestRecvTransitions: a receive moves the server to RDMA_READ_ADV (the
// client's start buffer) or RDMA_WRITE_ADV (its sink) and records the
// advertised buffer; the client to RDMA_WRITE_ADV after its start
// advertisement, else RDMA_WRITE_COMPLETE.
func TestRecvTransitions(t *testing.T) {
	r := &runner{}
	srv := r.newSession(true, nil)
	srv.recvBuf = make([]byte, rdmaInfoLen)
	rdmaInfo{Addr: 0x7f0000001000, RKey: 0x1234, Size: 64}.put(srv.recvBuf)
	for _, c := range []struct{ from, to state }{
		{stConnectRequest, stReadAdv}, {stConnected, stReadAdv}, {stWriteComplete, stReadAdv},
		{stReadComplete, stWriteAdv}, {stReadAdv, stWriteAdv},
	} {
		srv.st = c.from
		srv.serverRecv()
		if srv.st != c.to || srv.remote != (rdmaInfo{Addr: 0x7f0000001000, RKey: 0x1234, Size: 64}) {
			t.Errorf("server receive in state %d: state %d, remote %+v; want %d", c.from, srv.st, srv.remote, c.to)
		}
	}
	cli := r.newSession(false, nil)
	for _, c := range []struct{ from, to state }{{stReadAdv, stWriteAdv}, {stWriteAdv, stWriteComplete}, {stConnected, stWriteComplete}} {
		cli.st = c.from
		cli.clientRecv()
		if cli.st != c.to {
			t.Errorf("client receive in state %d: state %d, want %d", c.from, cli.st, c.to)
		}
	}
}

// TestSemaphore: posts count (two before a wait are two waits), a post
// wakes a parked waiter, and a wait ends with its context.
func TestSemaphore(t *testing.T) {
	s := newSemaphore()
	ctx := context.Background()
	s.post()
	s.post()
	for i := range 2 {
		if err := s.wait(ctx); err != nil {
			t.Fatalf("wait %d: %v", i, err)
		}
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := s.wait(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait with nothing posted: %v, want DeadlineExceeded", err)
	}
	done := make(chan error)
	go func() { done <- s.wait(ctx) }()
	s.post()
	if err := <-done; err != nil {
		t.Fatalf("parked wait: %v", err)
	}
}

// TestErrno: perror's text is glibc's, capitalised; the C tool's status
// for a failed call is its errno, else -1.
func TestErrno(t *testing.T) {
	_, oerr := os.Open("/nonexistent/rping")
	err := fmt.Errorf("rdmacm: bind_addr: %w", oerr) // wraps ENOENT
	var stderr bytes.Buffer
	r := &runner{stderr: &stderr}
	r.perror("rdma_bind_addr", err)
	r.perror("rdma_listen", errors.New("no errno here"))
	if got, want := stderr.String(), "rdma_bind_addr: No such file or directory\nrdma_listen: no errno here\n"; got != want {
		t.Errorf("perror: %q, want %q", got, want)
	}
	if got := retOf(err); got != 2 {
		t.Errorf("retOf: %d, want 2 (ENOENT)", got)
	}
	if got := retOf(errors.New("no errno")); got != -1 {
		t.Errorf("retOf without errno: %d, want -1", got)
	}
}
