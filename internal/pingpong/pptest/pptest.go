// Package pptest runs the ping-pong tools against each other inside the
// rdma_rxe VM: a server and a client, each either the Go port (built into
// the guest's /usr/bin by the runner) or rdma-core's C tool, on a pty,
// and checks what both print. It is used by the VM tests of
// cmd/rcpingpong, cmd/ucpingpong, cmd/udpingpong and cmd/srqpingpong, and
// by the performance test of cmd/rcpingpong.
package pptest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pureverbs/pureverbs/internal/pingpong"
	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/uverbs"
)

// Tool names one ping-pong tool in both implementations.
type Tool struct {
	Kind pingpong.Kind
	Go   string // "rcpingpong"
	C    string // "ibv_rc_pingpong"
}

// Device is an rxe device of the VM and how a client reaches a server on
// it: the TCP host, and the GID index (1: the IPv4-mapped RoCE v2 GID).
type Device struct {
	Name string
	Host string
	GID  string // what both tools print for GID index 1
}

// Devices are the VM's two rxe devices.
var Devices = []Device{
	{Name: testkit.RxeDev, Host: testkit.RxeAddr, GID: "::ffff:" + testkit.RxeAddr},
	{Name: testkit.LoopDev, Host: "127.0.0.1", GID: "::ffff:127.0.0.1"},
}

// Side selects an implementation.
type Side string

const (
	Go Side = "go"
	C  Side = "c"
)

// Bin returns the program of tool t for side s.
func (t Tool) Bin(s Side) string {
	if s == Go {
		return t.Go
	}
	return t.C
}

// Pair is who serves and who connects.
type Pair struct{ Server, Client Side }

func (p Pair) String() string { return string(p.Server) + "-server-" + string(p.Client) + "-client" }

// BothWays are the two Go/C pairings every tool must pass.
var BothWays = []Pair{{Go, C}, {C, Go}}

var nextPort atomic.Uint32

func init() { nextPort.Store(20000) }

// Port returns a TCP port no earlier run of this process used.
func Port() int { return int(nextPort.Add(1)) }

// Run is one ping-pong between a server and a client.
type Run struct {
	Tool   Tool
	Pair   Pair
	Dev    Device
	Size   int
	Iters  int
	Extra  []string // more arguments for both sides (e.g. "-q", "4", "-c")
	Port   int      // 0: Port()
	Server string   // output of the server
	Client string   // output of the client
}

// args returns the command line of one side.
func (r *Run) args(client bool) []string {
	a := []string{"-d", r.Dev.Name, "-g", "1", "-p", strconv.Itoa(r.Port), "-s", strconv.Itoa(r.Size), "-n", strconv.Itoa(r.Iters)}
	a = append(a, r.Extra...)
	if client {
		a = append(a, r.Dev.Host)
	}
	return a
}

// Do runs the server, waits until it listens, runs the client, and waits
// for both; it fails the test if either exits non-zero or the run takes
// longer than ctx allows.
func (r *Run) Do(ctx context.Context, t testing.TB) {
	t.Helper()
	if r.Port == 0 {
		r.Port = Port()
	}
	srv := testkit.StartPeer(ctx, t, r.Tool.Bin(r.Pair.Server), r.args(false)...)
	if err := srv.WaitForOutput(ctx, "local address"); err != nil {
		t.Fatal(err)
	}
	if err := waitListen(ctx, r.Port, srv.Done()); err != nil {
		t.Fatalf("server %s: %v\n%s", r.Tool.Bin(r.Pair.Server), err, srv.Output())
	}
	cli := testkit.StartPeer(ctx, t, r.Tool.Bin(r.Pair.Client), r.args(true)...)
	cerr := cli.Wait()
	serr := srv.Wait()
	r.Server, r.Client = clean(srv.Output()), clean(cli.Output())
	if cerr != nil || serr != nil {
		t.Fatalf("%s %s: server (%s %s): %v\n%s\nclient (%s %s): %v\n%s", r.Tool.Go, r.Pair,
			r.Tool.Bin(r.Pair.Server), strings.Join(r.args(false), " "), serr, r.Server,
			r.Tool.Bin(r.Pair.Client), strings.Join(r.args(true), " "), cerr, r.Client)
	}
}

// clean drops the carriage returns the pty adds.
func clean(s string) string { return strings.ReplaceAll(s, "\r\n", "\n") }

// waitListen waits until a TCP socket listens on port (in /proc/net/tcp or
// tcp6), so that the client does not race the server's bind, or until
// the server exits.
func waitListen(ctx context.Context, port int, exited <-chan struct{}) error {
	want := fmt.Sprintf(":%04X ", port)
	for {
		for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
			fh, err := os.Open(f)
			if err != nil {
				continue
			}
			sc := bufio.NewScanner(fh)
			for sc.Scan() {
				// sl local_address rem_address st ...; st 0A is LISTEN.
				fs := strings.Fields(sc.Text())
				if len(fs) > 3 && strings.HasSuffix(fs[1]+" ", want) && fs[3] == "0A" {
					fh.Close()
					return nil
				}
			}
			fh.Close()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("port %d never listened: %w", port, ctx.Err())
		case <-exited:
			return fmt.Errorf("exited before listening on port %d", port)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Addr is one "local address" or "remote address" line.
type Addr struct {
	Remote        bool
	LID, QPN, PSN uint32
	GID           string
}

var addrRE = regexp.MustCompile(`(?m)^  (local|remote) address: +LID 0x([0-9a-f]{4}), QPN 0x([0-9a-f]{6}), PSN 0x([0-9a-f]{6})[,:] GID (\S+)$`)

// Addrs returns the address lines of out, local ones first.
func Addrs(out string) (local, remote []Addr) {
	for _, m := range addrRE.FindAllStringSubmatch(out, -1) {
		var a Addr
		a.Remote = m[1] == "remote"
		for i, p := range []*uint32{&a.LID, &a.QPN, &a.PSN} {
			v, _ := strconv.ParseUint(m[2+i], 16, 32)
			*p = uint32(v)
		}
		a.GID = m[5]
		if a.Remote {
			remote = append(remote, a)
		} else {
			local = append(local, a)
		}
	}
	return local, remote
}

// Check verifies both outputs: the address lines agree across the two
// sides (each side's remote lines are the other's local lines, with the
// device's GID), the summaries report size*iters*2 bytes and iters
// iterations, and -c found nothing invalid. nqp is the number of QPs
// (address lines per side).
func (r *Run) Check(t testing.TB, nqp int) (server, client pingpong.Result) {
	t.Helper()
	sl, sr := Addrs(r.Server)
	cl, cr := Addrs(r.Client)
	if len(sl) != nqp || len(sr) != nqp || len(cl) != nqp || len(cr) != nqp {
		t.Errorf("address lines: server %d local %d remote, client %d local %d remote; want %d each\nserver:\n%s\nclient:\n%s",
			len(sl), len(sr), len(cl), len(cr), nqp, r.Server, r.Client)
	} else {
		for i := range nqp {
			if sl[i].QPN != cr[i].QPN || sl[i].PSN != cr[i].PSN || sl[i].LID != cr[i].LID || sl[i].GID != cr[i].GID ||
				cl[i].QPN != sr[i].QPN || cl[i].PSN != sr[i].PSN || cl[i].LID != sr[i].LID || cl[i].GID != sr[i].GID {
				t.Errorf("QP %d: server local %+v remote %+v; client local %+v remote %+v", i, sl[i], sr[i], cl[i], cr[i])
			}
			if sl[i].GID != r.Dev.GID || cl[i].GID != r.Dev.GID {
				t.Errorf("QP %d: GIDs %s and %s, want %s", i, sl[i].GID, cl[i].GID, r.Dev.GID)
			}
		}
	}
	want := int64(r.Size) * int64(r.Iters) * 2
	for _, o := range []struct {
		name string
		out  string
		res  *pingpong.Result
	}{{"server", r.Server, &server}, {"client", r.Client, &client}} {
		res, err := pingpong.ParseSummary(o.out)
		if err != nil {
			t.Errorf("%s: %v", o.name, err)
			continue
		}
		*o.res = res
		if res.Bytes != want || res.Iters != int64(r.Iters) {
			t.Errorf("%s: summary says %d bytes and %d iters, want %d and %d:\n%s", o.name, res.Bytes, res.Iters, want, r.Iters, o.out)
		}
		if strings.Contains(o.out, "invalid data") {
			t.Errorf("%s: -c found invalid data:\n%s", o.name, o.out)
		}
	}
	return server, client
}

// ActiveMTU returns the active MTU of port 1 of dev in bytes.
func ActiveMTU(t testing.TB, dev string) int {
	t.Helper()
	c, err := uverbs.OpenByName(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pa, err := c.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	return pa.ActiveMTU.Bytes()
}

// Matrix runs tool for every device, pairing and size (sizes(dev) gives
// the sizes of a device), as subtests dev/pair/size=N, with iters
// iterations and extra arguments on both sides, checks each run, and
// checks that the kernel's resource counts of each device are back to
// where they were. It logs one summary line per run.
func Matrix(t *testing.T, tool Tool, pairs []Pair, sizes func(dev string) []int, iters int, nqp int, extra ...string) {
	testkit.RequireVM(t)
	for _, dev := range Devices {
		t.Run(dev.Name, func(t *testing.T) {
			before := testkit.Resources(t, dev.Name)
			for _, pair := range pairs {
				for _, size := range sizes(dev.Name) {
					t.Run(fmt.Sprintf("%s/size=%d", pair, size), func(t *testing.T) {
						ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
						defer cancel()
						r := &Run{Tool: tool, Pair: pair, Dev: dev, Size: size, Iters: iters, Extra: extra}
						r.Do(ctx, t)
						s, c := r.Check(t, nqp)
						t.Logf("%s %s size %d: server %.2f usec/iter, client %.2f usec/iter", dev.Name, pair, size, s.USecPerIter, c.USecPerIter)
					})
				}
			}
			after := testkit.Resources(t, dev.Name)
			for k, v := range before {
				if after[k] != v {
					t.Errorf("%s resources after the runs %v, before %v", dev.Name, after, before)
					break
				}
			}
		})
	}
}

// SameFailure runs the Go and the C tool with args, expects both to fail
// (exit status non-zero, before any TCP exchange) and the C tool's
// message, want, to be the first line of both outputs.
func SameFailure(t *testing.T, tool Tool, want string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, s := range []Side{C, Go} {
		out, err := testkit.RunPeer(ctx, t, tool.Bin(s), args...)
		out = clean(out)
		first, _, _ := strings.Cut(out, "\n")
		if err == nil || first != want {
			t.Errorf("%s %s: %v, output %q; want a failure saying %q", tool.Bin(s), strings.Join(args, " "), err, out, want)
		}
	}
}

// BadArgs are client command lines that fail, or reach the connect to a
// server that is not there, in every ping-pong tool: sizes, depths,
// MTUs, ports, GID indexes and SLs out of range or malformed, unknown
// options (also after and before an option that fails its own check),
// missing arguments, an extra operand, a host that does not resolve, long
// options, -h. SameAsC runs them. (An option missing its
// argument cannot be among them: it would take the server operand.)
var BadArgs = [][]string{
	{"-s", "0"}, {"-s", "abc"}, {"-s", "-100"}, {"-s", "2000000000"},
	// From 2^31 up the C tools' int size is negative: memalign fails.
	{"-s", "2147483648"}, {"-s", "3000000000"},
	{"-n", "0"}, {"-r", "0"}, {"-r", "100000"},
	{"-m", "9999"}, {"-m", "512"},
	{"-g", "99"}, {"-g", "5000"}, {"-g", "-1"},
	{"-i", "0"}, {"-i", "2"},
	// ibv_query_port and ibv_query_gid take the port as a uint8_t: 257 is
	// port 1 (the run goes on to the connect), 256 port 0.
	{"-i", "257"}, {"-i", "256"}, {"-i", "0x101"},
	{"-p", "70000"}, {"-l", "16"},
	{"-z"}, {"-h"},
	// In order: a bad port before an unknown option ends the run first.
	{"-i", "0", "-z"}, {"-z", "-i", "0"},
	{"--size=64", "--iters=3"},
	{"extra"},
	{"-d", "nosuchdev0"},
}

// qpnPSN matches the random parts of an address line.
var qpnPSN = regexp.MustCompile(`QPN 0x[0-9a-f]{6}, PSN 0x[0-9a-f]{6}`)

// SameAsC runs every command line of cases (each after "-d rxe0 -g 1 -p
// PORT", so that a case may override them, and before the server operand
// 127.0.0.1, where nothing listens on PORT), then HostOperands' in place
// of that operand, with the Go tool and with the
// C tool, and fails unless both exit the same way and print the same
// lines (CompareWithC). skip maps a case (its arguments joined by spaces)
// to the reason the Go tool may differ there.
func SameAsC(t *testing.T, tool Tool, cases [][]string, skip map[string]string) {
	t.Helper()
	lead := func() []string { return []string{"-d", testkit.RxeDev, "-g", "1", "-p", strconv.Itoa(Port())} }
	CompareWithC(t, tool.Go, tool.C, lead, cases, skip)
	CompareOperands(t, tool.Go, tool.C, lead, HostOperands)
}

// CompareWithC runs lead(), then each case, then "127.0.0.1" with the Go
// program goBin and the C program cBin, and fails unless both exit the
// same way (status included) and print the same lines. The comparison
// leaves out the Go tools' "  (...)" detail lines, the random QPN and PSN
// and the program's name, trims the lines and sorts them (the C tools'
// stdout and stderr interleave differently). skip maps a case (its
// arguments joined by spaces) to the reason the Go program may differ.
// A case's two programs run at the same time, and compareWindow cases at
// once, so a case must not make them claim something only one can hold
// (a port to listen on).
func CompareWithC(t *testing.T, goBin, cBin string, lead func() []string, cases [][]string, skip map[string]string) {
	t.Helper()
	compareWithC(t, goBin, cBin, lead, cases, skip, "127.0.0.1")
}

// CompareOperands is CompareWithC for cases that end with their own
// server operand (HostOperands).
func CompareOperands(t *testing.T, goBin, cBin string, lead func() []string, cases [][]string) {
	t.Helper()
	compareWithC(t, goBin, cBin, lead, cases, nil, "")
}

// HostOperands are cases made of a server operand that Go's resolver
// reads otherwise than getaddrinfo(3) reads the C tools' servername: ""
// (no host to getaddrinfo, the local system to net.Dial), "*" (glibc's
// NULL node: the local host, where nothing listens on the case's port;
// net would look "*" up), and a name that does not resolve (the guest
// has no DNS server: EAI_AGAIN). SameAsC runs them after its cases.
// "127.1" and "0x7f000001" are 127.0.0.1 to getaddrinfo (inet_aton's forms).
var HostOperands = [][]string{{""}, {"*"}, {"nosuchhost.invalid"}, {"127.1"}, {"0x7f000001"}}

// compareWithC is CompareWithC with the operand after each case ("" for
// none: the case has its own).
func compareWithC(t *testing.T, goBin, cBin string, lead func() []string, cases [][]string, skip map[string]string, operand string) {
	t.Helper()
	norm := func(bin, out string, err error) string { return Normalize(out, err, bin) }
	// The cases run compareWindow at a time, each case's two programs at
	// once: they are clients of a port nothing listens on, each case
	// with a port of its own, so nothing they do meets another's.
	type run struct {
		key, args string
		cancel    context.CancelFunc
		ctx       context.Context
		peers     [2]*testkit.Peer
	}
	finish := func(r *run) {
		var outs [2]string
		for i, bin := range []string{goBin, cBin} {
			err := r.peers[i].Wait()
			if r.ctx.Err() != nil {
				t.Errorf("%s %s: still running after 30 s", bin, r.args)
			}
			outs[i] = norm(bin, r.peers[i].Output(), err)
		}
		r.cancel()
		if outs[0] != outs[1] {
			// The differing lines first: the VM runner's summary, all
			// that CI keeps of a long log, cuts each entry short.
			t.Errorf("%s %s: Go and C differ (-C +Go):\n%s\nGo:\n%s\nC:\n%s", goBin, r.key,
				cmp.Diff(strings.Split(outs[1], "\n"), strings.Split(outs[0], "\n")), outs[0], outs[1])
		}
	}
	var inFlight []*run
	for _, c := range cases {
		key := strings.Join(c, " ")
		if operand == "" {
			key = fmt.Sprintf("%q", c) // the operand "" shows
		}
		if why, ok := skip[key]; ok {
			t.Logf("%s %s: not compared: %s", goBin, key, why)
			continue
		}
		args := append(lead(), c...)
		if operand != "" {
			args = append(args, operand)
		}
		r := &run{key: key, args: strings.Join(args, " ")}
		r.ctx, r.cancel = context.WithTimeout(context.Background(), 30*time.Second)
		for i, bin := range []string{goBin, cBin} {
			r.peers[i] = testkit.StartPeer(r.ctx, t, bin, args...)
		}
		inFlight = append(inFlight, r)
		if len(inFlight) == compareWindow {
			finish(inFlight[0])
			inFlight = inFlight[1:]
		}
	}
	for _, r := range inFlight {
		finish(r)
	}
}

// Normalize is the form in which CompareWithC compares a run's output
// out and its end err (nil: exit 0): without the Go tools' "  (...)"
// detail lines, blank lines and the random QPN and PSN, each line trimmed
// and each of names (the programs' names) replaced by TOOL, the lines
// sorted (the C tools' stdout and stderr interleave differently), the
// exit status last.
func Normalize(out string, err error, names ...string) string {
	// The longest first: "rdmaudaddy" before "udaddy".
	names = slices.SortedFunc(slices.Values(names), func(a, b string) int { return len(b) - len(a) })
	name := func(s string) string {
		for _, n := range names {
			s = strings.ReplaceAll(s, n, "TOOL")
		}
		return s
	}
	var keep []string
	for _, l := range strings.Split(clean(out), "\n") {
		if strings.HasPrefix(l, "  (") || strings.TrimSpace(l) == "" {
			continue
		}
		l = qpnPSN.ReplaceAllString(strings.TrimSpace(l), "QPN x, PSN y")
		keep = append(keep, name(l))
	}
	slices.Sort(keep)
	status := "exit 0"
	if err != nil {
		status = name(err.Error())
	}
	return strings.Join(keep, "\n") + "\n(" + status + ")"
}

// compareWindow is how many cases CompareWithC runs at once (two
// processes each): the guest's two vCPUs stay busy while processes start
// and exit.
const compareWindow = 2

// SizesIters parses a performance comparison's size and iteration flags:
// comma-separated message sizes, and either one iteration count for all
// of them or one per size. It returns one count per size.
func SizesIters(sizes, iters string) ([]int, []int, error) {
	list := func(v string) ([]int, error) {
		var out []int
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				return nil, fmt.Errorf("%q: %q is not a positive number", v, f)
			}
			out = append(out, n)
		}
		return out, nil
	}
	s, err := list(sizes)
	if err != nil {
		return nil, nil, fmt.Errorf("sizes %w", err)
	}
	n, err := list(iters)
	if err != nil {
		return nil, nil, fmt.Errorf("iterations %w", err)
	}
	switch len(n) {
	case len(s):
	case 1:
		for len(n) < len(s) {
			n = append(n, n[0])
		}
	default:
		return nil, nil, fmt.Errorf("iterations %q: give one number or one per size (sizes %q)", iters, sizes)
	}
	return s, n, nil
}
