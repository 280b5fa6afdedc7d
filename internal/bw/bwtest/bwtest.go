// Package bwtest runs the Go bandwidth tools (cmd/writebw, cmd/readbw,
// cmd/sendbw) and perftest's ib_write_bw, ib_read_bw and ib_send_bw
// against each other inside the rdma_rxe VMs, on one host or across the
// two hosts, checks what both sides print, and measures: the VM tests of
// the three tools use it, and its tables feed docs/performance.md (make
// perf).
package bwtest

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/bw"
	"github.com/pureverbs/pureverbs/internal/pingpong/pptest"
	"github.com/pureverbs/pureverbs/internal/testkit"
)

// Tool names one bandwidth (or latency) tool in both implementations.
type Tool struct {
	Verb bw.Verb
	Go   string  // "writebw"
	Test bw.Test // bw.BW (the zero value) or bw.LAT
}

// C is perftest's program ("ib_write_bw", "ib_write_lat").
func (t Tool) C() string { return t.Verb.CToolTest(t.Test) }

// Size is n, or 8 for the atomic tools, which run 8-byte messages only.
func (t Tool) Size(n int) int {
	if t.Verb == bw.Atomic {
		return 8
	}
	return n
}

// Bin returns the program of side s.
func (t Tool) Bin(s pptest.Side) string {
	if s == pptest.Go {
		return t.Go
	}
	return t.C()
}

var nextPort atomic.Int32

func init() { nextPort.Store(22000) }

// Port returns a TCP port no earlier run of this process used.
func Port() int { return int(nextPort.Add(1)) }

// Place is where a run's two programs run: one guest (Host nil) or the
// two hosts of the two-host topology, the server on Server and the
// client on Client.
type Place struct {
	Server, Client *testkit.Host
}

// Run is one bandwidth test between a server and a client.
type Run struct {
	Tool  Tool
	Pair  pptest.Pair
	Dev   string // the device on both sides
	Host  string // the server's address for the client
	Size  int
	Iters int
	Extra []string // more arguments for both sides ("-a", "-Q", "1", ...)
	// ServerExtra and ClientExtra are more arguments for one side
	// (after Extra).
	ServerExtra, ClientExtra []string
	// NoGIDIndex leaves out "-x 1": the tools choose the GID.
	NoGIDIndex bool
	Place      Place
	Port       int // 0: Port()

	Server, Client string // outputs
}

// Args returns the command line of one side.
func (r *Run) Args(client bool) []string {
	a := []string{"-d", r.Dev, "-x", "1", "-p", strconv.Itoa(r.Port), "-s", strconv.Itoa(r.Size), "-n", strconv.Itoa(r.Iters)}
	if r.NoGIDIndex {
		a = slices.Delete(a, 2, 4)
	}
	a = append(a, r.Extra...)
	if client {
		a = append(a, r.ClientExtra...)
		a = append(a, r.Host)
	} else {
		a = append(a, r.ServerExtra...)
	}
	return a
}

func (r *Run) start(ctx context.Context, t testing.TB, h *testkit.Host, name string, args []string) *testkit.Peer {
	if h == nil {
		return testkit.StartPeer(ctx, t, name, args...)
	}
	return h.Start(ctx, t, name, args...)
}

// cClockFlake is what perftest prints when it cannot time a run: it
// calibrates the TSC against gettimeofday for 0.2 s before every report
// and gives up when the samples do not line up (r^2 < 0.9), which happens
// when the host deschedules the guest's vCPUs (get_clock.c).
const cClockFlake = "Can't produce a report"

// clockFlake returns the first of outs in which perftest said it could
// not calibrate its clock (cClockFlake), or "".
func clockFlake(outs ...string) string {
	for _, out := range outs {
		if strings.Contains(out, cClockFlake) {
			return out
		}
	}
	return ""
}

// listenRace is what a client (perftest's or a Go tool's) prints when
// the RDMA CM rejected its connection with reason 8, invalid service ID:
// the server's listen was not in place yet. rdma_listen marks an ID
// LISTEN (what WaitCMListen sees in the kernel's resource list) before
// it registers the listen with the device's CM, and a request that comes
// in between meets no listener. perftest's client gives up there (6.06's
// after a segmentation fault).
const listenRace = "Event: RDMA_CM_EVENT_REJECTED; error: 8."

// clockRetry runs attempt until it returns "", at most 3 times. An
// attempt that runs perftest beside a Go tool returns the output of a
// perftest that ended because it could not calibrate its clock
// (clockFlake), having stopped its peers and without failing t; then it
// runs again, with a log line saying so. Any other outcome is the
// attempt's to report.
func clockRetry(t testing.TB, what string, attempt func() (flake string)) {
	t.Helper()
	for i := 1; ; i++ {
		flake := attempt()
		if flake == "" || t.Failed() {
			return
		}
		if i == 3 {
			t.Fatalf("%s: perftest could not calibrate its clock in 3 attempts; the last:\n%s", what, flake)
		}
		t.Logf("%s, attempt %d: perftest could not calibrate its clock (%q); running it again", what, i, cClockFlake)
	}
}

// Do runs the server, waits until it listens, runs the client and waits
// for both; it fails the test if either exits non-zero. A run whose C
// side failed only because perftest could not calibrate its clock, or a
// latency run of fixed duration that a stalled guest left without a
// turn to count (stalled), is repeated (at most twice), with a log line
// saying so.
func (r *Run) Do(ctx context.Context, t testing.TB) {
	t.Helper()
	if failed, ok := r.do(ctx, t, false); !ok {
		t.Fatal(failed[len(failed)-1])
	}
}

// do runs the run until it succeeds: a failure of perftest's clock
// calibration or a client that came before the server's listen was in
// place (listenRace) is always repeated (at most twice), as is a
// success that stalled reports (then the last attempt stands), any other
// failure only when anyFailure is set (at most twice). It returns the
// failed attempts' errors and whether the last attempt succeeded.
func (r *Run) do(ctx context.Context, t testing.TB, anyFailure bool) (failed []error, ok bool) {
	t.Helper()
	for attempt := 1; attempt <= 3; attempt++ {
		err := r.try(ctx, t)
		if err == nil {
			if side := r.stalled(); side != "" && attempt < 3 && ctx.Err() == nil {
				t.Logf("%s %s size %d: the %s's measured stretch saw no turn (the guest stalled through it); running it again", r.Tool.Go, r.Pair, r.Size, side)
				r.Port = 0
				continue
			}
			return failed, true
		}
		failed = append(failed, err)
		flake := clockFlake(r.Server, r.Client) != ""
		race := strings.Contains(r.Client, listenRace)
		if attempt == 3 || ctx.Err() != nil || !(flake || race || anyFailure) {
			break
		}
		switch {
		case flake:
			t.Logf("%s %s size %d: perftest could not calibrate its clock (%q); running it again", r.Tool.Go, r.Pair, r.Size, cClockFlake)
		case race:
			t.Logf("%s %s size %d: the client came before the server's listen was in place (%q); running it again", r.Tool.Go, r.Pair, r.Size, listenRace)
		default:
			t.Logf("%s %s size %d failed (%s); running it again", r.Tool.Go, r.Pair, r.Size, failureLine(r.Server+"\n"+r.Client))
		}
		r.Port = 0
	}
	return failed, false
}

// stalled names the side ("server" or "client") of a latency run of
// fixed duration (-D) that reported no turn in its measured stretch, or
// returns "". A ping-pong turns many times a second; none in a whole
// stretch means that the guest's vCPUs were descheduled through it (the
// clocks run on while the guest does not, as with cClockFlake), and
// perftest, which reports the stretch as it was, prints 0 turns. The
// report check fails such a run after the last attempt.
func (r *Run) stalled() string {
	if r.Tool.Test != bw.LAT || !slices.Contains(r.Extra, "-D") {
		return ""
	}
	for _, side := range []struct{ name, out string }{{"server", r.Server}, {"client", r.Client}} {
		for _, l := range bw.ParseLatDurReports(side.out) {
			if l.Iters == 0 {
				return side.name
			}
		}
	}
	return ""
}

// failureLine picks the line of a failed run's output that says why.
func failureLine(out string) string {
	for _, want := range []string{"Failed status", "Completion with error", cClockFlake, "Couldn't", "Unable", "Failed"} {
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, want) {
				return strings.TrimSpace(l)
			}
		}
	}
	return "no message"
}

// try is one attempt of Do.
func (r *Run) try(ctx context.Context, t testing.TB) error {
	t.Helper()
	if r.Port == 0 {
		r.Port = Port()
	}
	srvBin, cliBin := r.Tool.Bin(r.Pair.Server), r.Tool.Bin(r.Pair.Client)
	srv := r.start(ctx, t, r.Place.Server, srvBin, r.Args(false))
	defer srv.Stop()
	var err error
	cm := slices.Contains(r.Args(false), "-R") || slices.Contains(r.Args(false), "-z")
	// A server that exits (a refused option) ends the wait at once.
	wctx, wcancel := srv.UntilExit(ctx)
	switch {
	case cm && r.Place.Server == nil:
		// The rdma_cm data exchange: the server listens with an rdma_cm
		// ID, not a socket.
		err = testkit.WaitCMListen(wctx, r.Port)
	case cm:
		err = r.Place.Server.WaitCMListen(wctx, t, r.Port)
	case r.Place.Server == nil:
		err = testkit.WaitTCPListen(wctx, r.Port)
	default:
		err = r.Place.Server.WaitListen(wctx, t, r.Port)
	}
	wcancel()
	if err != nil {
		select {
		case <-srv.Done():
			return fmt.Errorf("server %s %s exited without listening: %v\n%s", srvBin, strings.Join(r.Args(false), " "), srv.Wait(), srv.Output())
		default:
		}
		return fmt.Errorf("server %s: %v\n%s", srvBin, err, srv.Output())
	}
	cli := r.start(ctx, t, r.Place.Client, cliBin, r.Args(true))
	// A server that failed (perftest's clock calibration, for one) can
	// leave its client waiting for ever: with the rdma_cm exchange (-R)
	// nothing tells the client that the server has gone (ib_write_bw
	// polls its receive queue for the server's report, and the Go tools
	// wait for it likewise). Such a client gets serverGoneGrace to end
	// by itself and is then stopped, and the run fails (or runs again,
	// as do says) at once instead of at ctx's end.
	select {
	case <-cli.Done():
	case <-srv.Done():
		if srv.Wait() != nil {
			grace := time.NewTimer(serverGoneGrace)
			select {
			case <-cli.Done():
			case <-grace.C:
				cli.Stop()
			}
			grace.Stop()
		}
	}
	cerr := cli.Wait()
	if cerr != nil {
		// A client that failed may leave the server waiting for it; one
		// that failed on a condition both sides find (a UD size above the
		// MTU) has the server exit with its own complaint, which must not
		// be cut short: it gets a few seconds to exit by itself.
		grace := time.NewTimer(5 * time.Second)
		select {
		case <-srv.Done():
		case <-grace.C:
		case <-ctx.Done():
		}
		grace.Stop()
		srv.Stop()
	}
	serr := srv.Wait()
	r.Server = strings.ReplaceAll(srv.Output(), "\r\n", "\n")
	r.Client = strings.ReplaceAll(cli.Output(), "\r\n", "\n")
	if cerr != nil || serr != nil {
		return fmt.Errorf("%s %s: server (%s %s): %v\n%s\nclient (%s %s): %v\n%s", r.Tool.Go, r.Pair,
			srvBin, strings.Join(r.Args(false), " "), serr, r.Server,
			cliBin, strings.Join(r.Args(true), " "), cerr, r.Client)
	}
	return nil
}

// serverGoneGrace is how long try lets a client run on after its server
// failed.
const serverGoneGrace = 10 * time.Second

// Addr is one "local address" or "remote address" line and the GID line
// after it.
type Addr struct {
	Remote   bool
	LID      string
	QPN, PSN string
	Rest     string // " OUT 0x80 RKey ... VAddr ..." (write, read)
	GID      string
}

var addrRE = regexp.MustCompile(`(?m)^ (local|remote) address: LID (\S+) QPN (\S+) PSN (\S+)(.*)\n GID: (\S+)$`)

// Addrs returns the address lines of out, local ones first.
func Addrs(out string) (local, remote []Addr) {
	for _, m := range addrRE.FindAllStringSubmatch(out, -1) {
		a := Addr{Remote: m[1] == "remote", LID: m[2], QPN: m[3], PSN: m[4], Rest: m[5], GID: m[6]}
		if a.Remote {
			remote = append(remote, a)
		} else {
			local = append(local, a)
		}
	}
	return local, remote
}

// sizes are the sizes a run prints a line for (UD, which UD tests run
// on rxe0: up to its MTU).
func (r *Run) sizes() []uint64 {
	if slices.Contains(r.Extra, "-a") {
		var s []uint64
		for i := 1; i < 24; i++ {
			if slices.Contains(r.Extra, "UD") && 1<<i > udMTU {
				break
			}
			s = append(s, 1<<i)
		}
		return s
	}
	return []uint64{uint64(r.Size)}
}

// qps is the run's -q (1 without).
func (r *Run) qps() int {
	if i := slices.Index(r.Extra, "-q"); i >= 0 && i+1 < len(r.Extra) {
		if n, err := strconv.Atoi(r.Extra[i+1]); err == nil {
			return n
		}
	}
	return 1
}

// Check verifies both outputs: an address line per QP (-q) and side, each
// side's remote address i is the other's local address i (QPN, PSN,
// rkey, address, GID), the QPNs differ, the GIDs are gid, every size has
// its result line with the run's iterations (on every QP) and a positive
// rate, and (write, read) the server printed the client's last line. It
// returns the last line of each side.
func (r *Run) Check(t testing.TB, gid string) (server, client bw.Report) {
	t.Helper()
	r.checkAddrs(t, gid)
	return r.checkReports(t)
}

// checkAddrs is Check's part about the address lines.
func (r *Run) checkAddrs(t testing.TB, gid string) {
	t.Helper()
	sl, sr := Addrs(r.Server)
	cl, cr := Addrs(r.Client)
	n := r.qps()
	if len(sl) != n || len(sr) != n || len(cl) != n || len(cr) != n {
		t.Errorf("address lines: server %d local %d remote, client %d local %d remote; want %d each\nserver:\n%s\nclient:\n%s",
			len(sl), len(sr), len(cl), len(cr), n, r.Server, r.Client)
	} else {
		// --dlid L: each side's remote address line names L, not the
		// peer's LID.
		dlid := ""
		if i := slices.Index(r.Extra, "--dlid"); i >= 0 && i+1 < len(r.Extra) {
			dlid = r.Extra[i+1]
		}
		// asLocal is remote address line a as the peer's local line l
		// reads.
		asLocal := func(a, l Addr) Addr {
			if dlid != "" && a.LID == dlid {
				a.LID = l.LID
			}
			a.Remote = false
			return a
		}
		qpns := map[string]bool{}
		for i := range n {
			if dlid != "" && (sr[i].LID != dlid || cr[i].LID != dlid) {
				t.Errorf("QP %d: remote LIDs %s (server) and %s (client), want --dlid's %s", i, sr[i].LID, cr[i].LID, dlid)
			}
			if sl[i] != asLocal(cr[i], sl[i]) || cl[i] != asLocal(sr[i], cl[i]) {
				t.Errorf("QP %d: server local %+v remote %+v; client local %+v remote %+v", i, sl[i], sr[i], cl[i], cr[i])
			}
			if g := gidLine(gid); sl[i].GID != g.server || cl[i].GID != g.client {
				t.Errorf("QP %d: GIDs %s and %s, want %s and %s", i, sl[i].GID, cl[i].GID, g.server, g.client)
			}
			qpns["s"+sl[i].QPN], qpns["c"+cl[i].QPN] = true, true
		}
		if len(qpns) != 2*n {
			t.Errorf("QPNs repeat: %v", qpns)
		}
	}
}

// checkReports is Check's part about the result lines.
func (r *Run) checkReports(t testing.TB) (server, client bw.Report) {
	t.Helper()
	n := r.qps()
	duplex := slices.Contains(r.Extra, "-b")
	srs, crs := r.sums(t, "server", r.Server), r.sums(t, "client", r.Client)
	want := r.sizes()
	wantSrv := want
	if r.Tool.Verb != bw.Send && !duplex {
		wantSrv = want[len(want)-1:]
	}
	for _, s := range []struct {
		name string
		rs   []bw.Report
		want []uint64
		out  string
	}{{"server", srs, wantSrv, r.Server}, {"client", crs, want, r.Client}} {
		if len(s.rs) != len(s.want) {
			t.Errorf("%s: %d result lines, want %d:\n%s", s.name, len(s.rs), len(s.want), s.out)
			continue
		}
		for i, rep := range s.rs {
			// 5 messages of 2 B print an average of 0.00 MB/s: the message
			// rate, with 6 decimals, shows that time passed.
			// With -D the line counts the messages of the measured stretch.
			itersOK := rep.Iters == uint64(r.Iters*n)
			if slices.Contains(r.Extra, "-D") {
				itersOK = rep.Iters > 0
			}
			if rep.Size != s.want[i] || !itersOK || !(rep.Avg > 0 || rep.MsgRate > 0) {
				t.Errorf("%s: line %d: %+v, want %d bytes, %d iterations, a positive rate:\n%s", s.name, i, rep, s.want[i], r.Iters*n, s.out)
			}
		}
	}
	if len(srs) == 0 || len(crs) == 0 {
		return bw.Report{}, bw.Report{}
	}
	server, client = srs[len(srs)-1], crs[len(crs)-1]
	// (A write or read server's --cpu_util column is its own: 0.00.)
	if sameLine := func(a, b bw.Report) bool { a.CPUUtil, b.CPUUtil = 0, 0; return a == b }; r.Tool.Verb != bw.Send && !duplex && !sameLine(server, client) {
		t.Errorf("the server printed %+v, the client %+v: the report exchange should carry the client's line", server, client)
	}
	timed := slices.Contains(r.Extra, "-D")
	if duplex && !(r.Tool.Verb == bw.Send && timed) {
		// Both print the sum of the same two lines (the report exchange;
		// ib_send_bw -b -D prints each side's own). The count is each
		// side's own, which with -D differ.
		rates := func(rs []bw.Report) []bw.Report {
			out := slices.Clone(rs)
			for i := range out {
				if timed {
					out[i].Iters = 0
				}
			}
			return out
		}
		if !slices.Equal(rates(srs), rates(crs)) {
			t.Errorf("-b: the server printed %+v, the client %+v", srs, crs)
		}
	}
	return server, client
}

// sums returns the result lines of a side's output. With --report-both
// each line (the sum of both directions) is followed by the side's own
// and the peer's line, under their headings: sums checks that the first
// is the sum of the other two (as printed, to 0.01) and returns the sums.
func (r *Run) sums(t testing.TB, side, out string) []bw.Report {
	t.Helper()
	rs := bw.ParseReports(out)
	if !slices.Contains(r.Extra, "--report-both") {
		return rs
	}
	if len(rs)%3 != 0 || strings.Count(out, "\n Local results: \n") != len(rs)/3 || strings.Count(out, "\n Remote results: \n") != len(rs)/3 {
		t.Errorf("%s: --report-both: %d lines:\n%s", side, len(rs), out)
		return nil
	}
	var sums []bw.Report
	for i := 0; i < len(rs); i += 3 {
		s, l, rm := rs[i], rs[i+1], rs[i+2]
		near := func(a, b float64) bool { return math.Abs(a-b) <= 0.011 }
		if s.Size != l.Size || s.Iters != l.Iters || !near(s.Avg, l.Avg+rm.Avg) || !near(s.Peak, l.Peak+rm.Peak) || !near(s.MsgRate, l.MsgRate+rm.MsgRate) {
			t.Errorf("%s: %+v is not the sum of %+v and %+v", side, s, l, rm)
		}
		sums = append(sums, s)
	}
	return sums
}

type gids struct{ server, client string }

// gidLine returns how perftest prints the IPv4-mapped GIDs of the server
// and client addresses: bytes in decimal, %02d each.
func gidLine(g string) gids {
	s, c, _ := strings.Cut(g, ",")
	if c == "" {
		c = s
	}
	return gids{v4GID(s), v4GID(c)}
}

func v4GID(ip string) string {
	parts := []string{"00", "00", "00", "00", "00", "00", "00", "00", "00", "00", "255", "255"}
	for _, p := range strings.Split(ip, ".") {
		n, _ := strconv.Atoi(p)
		parts = append(parts, fmt.Sprintf("%02d", n))
	}
	return strings.Join(parts, ":")
}

// Devices are the single-host devices: the name, the server's address
// and the IPv4 address behind GID 1.
var Devices = []struct {
	Name, Host string
}{
	{testkit.RxeDev, testkit.RxeAddr},
	{testkit.LoopDev, "127.0.0.1"},
}

// MatrixOn runs tool on the single-host device devName (every device
// for ""), for every pairing and size, as subtests dev/pair/size=N, with
// iters iterations and extra arguments on both sides, checks each run and
// that the kernel's resource counts of each device are back where they
// were.
func MatrixOn(t *testing.T, tool Tool, devName string, pairs []pptest.Pair, sizes []int, iters int, extra ...string) {
	matrix(t, tool, devName, pairs, sizes, iters, extra, func(t *testing.T, r *Run) bool {
		s, c := r.Check(t, r.Host)
		t.Logf("%s %s %d x %d B (client): server %.2f MB/s, client %.2f MB/s (peak %.2f)", r.Dev, r.Pair, c.Iters, r.Size, s.Avg, c.Avg, c.Peak)
		return true
	})
}

// matrix is MatrixOn and LatMatrixOn with the check of each run: check
// verifies a finished run and says whether its test descriptions count
// in the comparison of the Go tool's with the C tool's.
func matrix(t *testing.T, tool Tool, devName string, pairs []pptest.Pair, sizes []int, iters int, extra []string,
	check func(t *testing.T, r *Run) (headers bool)) {
	testkit.RequireVM(t)
	for _, dev := range Devices {
		if devName != "" && dev.Name != devName {
			continue
		}
		t.Run(dev.Name, func(t *testing.T) {
			before := testkit.Resources(t, dev.Name)
			headers := map[headerKey][]string{}
			together := (tool.Test == bw.BW || tool.Verb.ReadsBack() || slices.Contains(extra, "-D")) && concurrent(extra)
			for _, size := range sizes {
				for group := range slices.Chunk(pairs, 2) {
					runs := make([]*Run, len(group))
					for i, pair := range group {
						runs[i] = &Run{Tool: tool, Pair: pair, Dev: dev.Name, Host: dev.Host, Size: size, Iters: iters, Extra: extra}
					}
					var failed []error // set when the group ran at once
					if together && len(group) > 1 {
						ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
						failed = make([]error, len(group))
						var wg sync.WaitGroup
						for i := range group {
							wg.Go(func() {
								if errs, ok := runs[i].do(ctx, t, false); !ok {
									failed[i] = errs[len(errs)-1]
								}
							})
						}
						wg.Wait()
						cancel()
					}
					for i, pair := range group {
						t.Run(fmt.Sprintf("%s/size=%d", pair, size), func(t *testing.T) {
							r := runs[i]
							switch {
							case failed == nil:
								// One at a time: each run has its own
								// four minutes.
								ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
								defer cancel()
								r.Do(ctx, t)
							case failed[i] != nil:
								t.Fatal(failed[i])
							}
							if check(t, r) {
								headers[headerKey{size, false, pair.Server}] = Header(r.Server)
								headers[headerKey{size, true, pair.Client}] = Header(r.Client)
							}
						})
					}
				}
			}
			sameHeaders(t, headers)
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

// concurrent says whether matrix may run a size's two pairings at once
// (of a bandwidth tool, or of a latency tool whose server only answers:
// read, atomic): each has its own ports and QPs, and the checks do not
// measure, so only the time goes (timers and sleeps such as
// ib_write_bw's second after connecting overlap, and while one run's
// client polls, the other run has the second vCPU). The write and send
// latency tools run one pairing at a time, unless for a set time (-D):
// both sides of their ping-pong poll, so two runs of a count only share
// the two vCPUs. UC and
// UD are the exception among the others: they drop what arrives before
// its receive is posted, which the other run's load makes likelier, and
// a send server then waits for messages that never come.
func concurrent(extra []string) bool {
	for i, a := range extra {
		if a == "-c" && i+1 < len(extra) && (extra[i+1] == "UC" || extra[i+1] == "UD") {
			return false
		}
	}
	return true
}

// headerKey names one side's header in a MatrixOn: the size, the role
// and which tool played it.
type headerKey struct {
	size   int
	client bool
	side   pptest.Side
}

// Header returns the lines of a side's test description: those between
// the first two dashed rules (perftest's ctx_print_test_info), without
// empty lines; nil when there are not two rules.
func Header(out string) []string {
	var h []string
	rules := 0
	for _, l := range strings.Split(out, "\n") {
		if len(l) >= 20 && strings.Trim(l, "-") == "" {
			if rules++; rules == 2 {
				return h
			}
			continue
		}
		if rules == 1 && strings.TrimSpace(l) != "" {
			h = append(h, l)
		}
	}
	return nil
}

// sameHeaders fails t unless the Go tool described each run as the C tool
// did in the same role, with the same size and arguments: the same lines
// (the device, depths, MTU, link, GID index, inline size, relaxed
// ordering and so on).
func sameHeaders(t *testing.T, headers map[headerKey][]string) {
	t.Helper()
	for k, g := range headers {
		if k.side != pptest.Go {
			continue
		}
		ck := k
		ck.side = pptest.C
		c, ok := headers[ck]
		if !ok {
			continue
		}
		role := "server"
		if k.client {
			role = "client"
		}
		if len(g) == 0 || !slices.Equal(g, c) {
			t.Errorf("size %d, %s: the Go tool's test description differs from the C tool's\nGo:\n%s\nC:\n%s",
				k.size, role, strings.Join(g, "\n"), strings.Join(c, "\n"))
		}
	}
}

// Events is the test of -e (the CQs report to a completion channel and
// the loops sleep on it), for read and send: Go against C both ways on
// rxe0, moderated (2 B, a completion every 100 messages) and not (64 KiB:
// perftest keeps the moderation with events, so -Q 1 asks for it).
// perftest 6.06's client sleeps before every poll and, with a completion
// per message, waits for an event that never comes (docs/performance.md),
// so -Q 1 pairs a C server with the Go client only; then Go against Go
// with completions arriving faster than one poll reads them.
func Events(t *testing.T, tool Tool) {
	MatrixOn(t, tool, "rxe0", pptest.BothWays, []int{2, 65536}, 100, "-e")
	MatrixOn(t, tool, "rxe0", []pptest.Pair{{Server: pptest.C, Client: pptest.Go}}, []int{65536}, 100, "-e", "-Q", "1")
	MatrixOn(t, tool, "rxelo", []pptest.Pair{{Server: pptest.Go, Client: pptest.Go}}, []int{1024}, 2000, "-e", "-Q", "1", "-X", "0")
}

// Duration is the test of -D (run for a time and report the messages of
// the stretch between the margins): Go against C both ways on rxe0.
func Duration(t *testing.T, tool Tool) {
	MatrixOn(t, tool, "rxe0", pptest.BothWays, []int{4096}, 100, "-D", "3", "-f", "1")
}

// PostList is the test of -l (each post a chain of requests, a
// completion per list or per -Q of it): Go against C both ways on rxelo.
func PostList(t *testing.T, tool Tool) {
	MatrixOn(t, tool, "rxelo", pptest.BothWays, []int{64, 4096}, 400, "-l", "4")
	MatrixOn(t, tool, "rxelo", pptest.BothWays, []int{1024}, 400, "-l", "8", "-Q", "4")
}

// QPs is the test of -q (several RC QPs sharing the CQs, -n messages on
// each): Go against C both ways on rxe0, moderated and with a completion
// per message; and Go against Go on rxelo with a post list, a window of
// 8 per QP and 16 QPs.
func QPs(t *testing.T, tool Tool) {
	MatrixOn(t, tool, "rxe0", pptest.BothWays, []int{64, 65536}, 200, "-q", "4")
	MatrixOn(t, tool, "rxelo", []pptest.Pair{{Server: pptest.Go, Client: pptest.Go}}, []int{1024}, 400,
		"-q", "16", "-t", "8", "-l", "4", "-Q", "2")
}

// Forever is the test of --run_infinitely, Go against C both ways on
// rxe0 with -D 1 (a line a second): the client (and a send server)
// prints result lines with the size, the messages of that second and no
// peak, until it is killed, perftest's only way to end it. The client is
// killed after its third line; a write or read server, waiting for the
// client's last handshake, then fails on its own, a send server (which
// polls for ever, as perftest's) is stopped. Both sides printed each
// other's addresses, and the kernel's resource counts are back where
// they were.
func Forever(t *testing.T, tool Tool) {
	testkit.RequireVM(t)
	for _, pair := range pptest.BothWays {
		t.Run(pair.String(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			before := testkit.Resources(t, testkit.RxeDev)
			// perftest calibrates its clock before every line.
			clockRetry(t, pair.String(), func() string { return forever(ctx, t, tool, pair) })
			if after := testkit.Resources(t, testkit.RxeDev); !maps.Equal(after, before) {
				t.Errorf("resources after %v, before %v", after, before)
			}
		})
	}
}

// forever is one attempt of Forever. If a C peer ended early because
// perftest could not calibrate its clock, it stops both peers and
// returns that peer's output, without failing t; otherwise it returns "".
func forever(ctx context.Context, t *testing.T, tool Tool, pair pptest.Pair) (flake string) {
	r := &Run{Tool: tool, Pair: pair, Dev: testkit.RxeDev, Host: testkit.RxeAddr, Size: 4096, Iters: 1000,
		Extra: []string{"--run_infinitely", "-D", "1"}, Port: Port()}
	srv := testkit.StartPeer(ctx, t, tool.Bin(pair.Server), r.Args(false)...)
	if err := testkit.WaitTCPListen(ctx, r.Port); err != nil {
		t.Fatalf("%v\n%s", err, srv.Output())
	}
	cli := testkit.StartPeer(ctx, t, tool.Bin(pair.Client), r.Args(true)...)
	lines := func(n int) func(string) bool {
		return func(out string) bool { return len(bw.ParseReports(out)) >= n }
	}
	// waitLines waits for n lines from p; if p or the other peer ended
	// on perftest's clock, both are stopped and that output returned.
	waitLines := func(p *testkit.Peer, n int) string {
		err := p.WaitUntil(ctx, fmt.Sprintf("%d result lines", n), lines(n))
		if err == nil {
			return ""
		}
		if out := clockFlake(cli.Output(), srv.Output()); out != "" {
			cli.Stop()
			srv.Stop()
			return out
		}
		t.Fatal(err)
		return ""
	}
	if out := waitLines(cli, 3); out != "" {
		return out
	}
	if tool.Verb == bw.Send {
		if out := waitLines(srv, 2); out != "" {
			return out
		}
	}
	cli.Kill()
	if err := cli.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		// The C client's calibration can fail as it is killed.
		if out := clockFlake(cli.Output(), srv.Output()); out != "" {
			srv.Stop()
			return out
		}
		t.Errorf("client: %v, want killed", err)
	}
	if tool.Verb == bw.Send {
		srv.Stop()
	} else if err := srv.Wait(); err == nil {
		t.Errorf("the server exited 0 after its client was killed:\n%s", srv.Output())
	}
	r.Server, r.Client = srv.Output(), cli.Output()
	// A C send server that gave up on its clock after its lines leaves
	// the Go client's last lines without completions.
	if out := clockFlake(r.Server, r.Client); out != "" {
		return out
	}
	sl, sr := Addrs(r.Server)
	cl, cr := Addrs(r.Client)
	if len(sl) != 1 || len(sr) != 1 || len(cl) != 1 || len(cr) != 1 || sl[0].QPN != cr[0].QPN || cl[0].QPN != sr[0].QPN {
		t.Errorf("addresses: server %+v %+v, client %+v %+v", sl, sr, cl, cr)
	}
	for _, side := range []struct{ name, out string }{{"client", r.Client}, {"server", r.Server}} {
		rs := bw.ParseReports(side.out)
		if side.name == "server" && tool.Verb != bw.Send {
			if len(rs) != 0 {
				t.Errorf("a %v server printed result lines:\n%s", tool.Verb, side.out)
			}
			continue
		}
		for i, rep := range rs {
			if rep.Size != 4096 || rep.Iters == 0 || rep.Avg <= 0 || rep.Peak != 0 {
				t.Errorf("%s line %d: %+v:\n%s", side.name, i, rep, side.out)
			}
		}
		t.Logf("%s (%s): %d lines, the first %+v", side.name, tool.Bin(map[string]pptest.Side{"client": pair.Client, "server": pair.Server}[side.name]), len(rs), rs[0])
	}
	return ""
}

// Bidirectional is the test of -b (both sides send; each prints the sum
// of both sides' lines, which the report exchange brings): Go against C
// both ways on rxe0, moderated and not, with --report-both, and with -D
// (ib_send_bw: each side's own line, its sends and receives); then Go
// against Go on rxelo with -a, with -q, and (read, send) with events.
func Bidirectional(t *testing.T, tool Tool) {
	goGo := []pptest.Pair{{Server: pptest.Go, Client: pptest.Go}}
	MatrixOn(t, tool, "rxe0", pptest.BothWays, []int{64, 65536}, 200, "-b")
	MatrixOn(t, tool, "rxe0", pptest.BothWays, []int{4096}, 200, "-b", "--report-both")
	MatrixOn(t, tool, "rxe0", pptest.BothWays, []int{4096}, 100, "-b", "-D", "2")
	MatrixOn(t, tool, "rxelo", goGo, []int{65536}, 5, "-b", "-a")
	MatrixOn(t, tool, "rxelo", goGo, []int{1024}, 300, "-b", "-q", "3")
	if tool.Verb != bw.Write {
		MatrixOn(t, tool, "rxelo", goGo, []int{1024}, 1000, "-b", "-e", "-Q", "1")
	}
}

// RDMACM is the test of -R (the QPs connected through the RDMA CM) and
// -z (the data exchange over an rdma_cm QP; -R implies it): Go against C
// both ways on rxe0, the descriptions alike (rdma_cm QPs ON, Data ex.
// method rdma_cm, the TOS of -T), with -R also two QPs and -b, and for
// send UD (the UDP port space), one way and -b; Go against Go with -e.
func RDMACM(t *testing.T, tool Tool) {
	MatrixOn(t, tool, "rxe0", pptest.BothWays, []int{64, 65536}, 200, "-R")
	MatrixOn(t, tool, "rxe0", pptest.BothWays, []int{4096}, 200, "-z")
	MatrixOn(t, tool, "rxe0", pptest.BothWays, []int{4096}, 200, "-R", "-q", "2", "-b")
	MatrixOn(t, tool, "rxe0", pptest.BothWays, []int{4096}, 200, "-R", "-T", "32")
	if tool.Verb == bw.Send {
		MatrixOn(t, tool, "rxe0", pptest.BothWays, []int{64, udMTU}, 200, "-R", "-c", "UD")
		MatrixOn(t, tool, "rxe0", pptest.BothWays, []int{512}, 200, "-R", "-c", "UD", "-q", "2", "-b")
	}
	if tool.Verb != bw.Write {
		MatrixOn(t, tool, "rxe0", []pptest.Pair{{Server: pptest.Go, Client: pptest.Go}}, []int{1024}, 300, "-R", "-e")
	}
}

// TwoHostsRDMACM is the test of -R across the two hosts (the server on
// host A, the client on host B, over the wire's rxe device): Go against
// C both ways and Go against Go, one QP and two with -b.
func TwoHostsRDMACM(t *testing.T, tool Tool) {
	TwoHosts(t, tool, []string{"-R"}, []string{"-R", "-q", "2", "-b"})
}

// TwoHosts runs the tool across the two hosts of make vmtest2 (server on
// A, client on B, over the wire's rxew), once with each of extras: Go
// against Go and against C both ways, 200 messages of 4 KiB (8 B for
// the atomic tool), both sides' lines checked.
func TwoHosts(t *testing.T, tool Tool, extras ...[]string) {
	a, b := testkit.ThisHost(t), testkit.PeerHost(t)
	pairs := append([]pptest.Pair{{Server: pptest.Go, Client: pptest.Go}}, pptest.BothWays...)
	for _, extra := range extras {
		for _, pair := range pairs {
			t.Run(fmt.Sprintf("%s/%s", strings.Join(extra, ""), pair), func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
				defer cancel()
				r := &Run{Tool: tool, Pair: pair, Dev: testkit.WireDev, Host: a.Addr, Size: tool.Size(4096), Iters: 200, Extra: extra,
					Place: Place{Server: a, Client: b}}
				r.Do(ctx, t)
				s, c := r.Check(t, a.Addr+","+b.Addr)
				t.Logf("two hosts %s %s: server %.2f MB/s, client %.2f MB/s", extra, pair, s.Avg, c.Avg)
			})
		}
	}
}

// UC is the test of -c UC (write, send: unreliable connected QPs): Go
// against C both ways on rxe0, moderated and not; Go against Go on rxelo
// with -q 2 and -b.
func UC(t *testing.T, tool Tool) {
	MatrixOn(t, tool, "rxe0", pptest.BothWays, []int{64, 65536}, 200, "-c", "UC")
	MatrixOn(t, tool, "rxelo", []pptest.Pair{{Server: pptest.Go, Client: pptest.Go}}, []int{4096}, 300, "-c", "UC", "-q", "2", "-b")
}

// UD is the test of ib_send_bw -c UD (unreliable datagrams, a message
// per packet): Go against C both ways on rxe0, small and MTU-sized
// messages, -a (2 B up to the MTU) and -q 2 -b; then a size above the
// MTU, which both refuse after the MTU exchange, and the default size
// (64 KiB), which both lower to the MTU.
func UD(t *testing.T, tool Tool) {
	MatrixOn(t, tool, "rxe0", pptest.BothWays, []int{64, udMTU}, 200, "-c", "UD")
	MatrixOn(t, tool, "rxe0", pptest.BothWays, []int{udMTU}, 50, "-c", "UD", "-a")
	MatrixOn(t, tool, "rxe0", pptest.BothWays, []int{512}, 200, "-c", "UD", "-q", "2", "-b")
	for _, pair := range pptest.BothWays {
		t.Run(pair.String()+"/too-large", func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			r := &Run{Tool: tool, Pair: pair, Dev: testkit.RxeDev, Host: testkit.RxeAddr, Size: 4096, Iters: 50, Extra: []string{"-c", "UD"}}
			if err := r.try(ctx, t); err == nil {
				t.Fatalf("4096 B over UD with a 1024-byte MTU ran:\n%s\n%s", r.Server, r.Client)
			}
			for _, out := range []string{r.Server, r.Client} {
				if !strings.Contains(out, " Max message size in UD cannot be greater than MTU \n Couldn't get context for the device") {
					t.Errorf("want perftest's complaint:\n%s", out)
				}
			}
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, pair := range pptest.BothWays {
		r := &Run{Tool: tool, Pair: pair, Dev: testkit.RxeDev, Host: testkit.RxeAddr, Iters: 50, Extra: []string{"-c", "UD"}}
		args := func(client bool) []string { // without -s
			a := r.Args(client)
			return append(a[:6:6], a[8:]...)
		}
		clockRetry(t, pair.String()+", default size", func() string {
			r.Port = Port()
			srv := testkit.StartPeer(ctx, t, tool.Bin(pair.Server), args(false)...)
			if err := testkit.WaitTCPListen(ctx, r.Port); err != nil {
				t.Fatal(err)
			}
			cli := testkit.StartPeer(ctx, t, tool.Bin(pair.Client), args(true)...)
			cerr, serr := cli.Wait(), srv.Wait()
			if out := clockFlake(srv.Output(), cli.Output()); out != "" {
				return out
			}
			for _, p := range []struct {
				out string
				err error
			}{{srv.Output(), serr}, {cli.Output(), cerr}} {
				rs := bw.ParseReports(p.out)
				if p.err != nil || !strings.Contains(p.out, " Max msg size in UD is MTU 1024\n Changing to this MTU\n") || len(rs) != 1 || rs[0].Size != udMTU {
					t.Errorf("%s, default size: %v, %+v:\n%s", pair, p.err, rs, p.out)
				}
			}
			return ""
		})
	}
}

// SRQ is the test of ib_send_bw --use-srq (the receiving side's QPs
// share one SRQ): Go against C both ways on rxe0, one QP and four,
// moderated and not; Go against Go with -b and with UD.
func SRQ(t *testing.T, tool Tool) {
	MatrixOn(t, tool, "rxe0", pptest.BothWays, []int{64, 65536}, 200, "--use-srq")
	MatrixOn(t, tool, "rxe0", pptest.BothWays, []int{4096}, 200, "--use-srq", "-q", "4")
	MatrixOn(t, tool, "rxelo", []pptest.Pair{{Server: pptest.Go, Client: pptest.Go}}, []int{1024}, 300, "--use-srq", "-q", "2", "-b")
	MatrixOn(t, tool, "rxe0", []pptest.Pair{{Server: pptest.Go, Client: pptest.Go}}, []int{512}, 300, "--use-srq", "-c", "UD")
}

// RecvPostList is the test of ib_send_bw --recv_post_list (the
// receiving side posts its receives in chains, each again once all of
// its receives completed): Go against C both ways on rxe0, moderated
// and not; with four QPs on an SRQ; Go against Go with -b and with UD.
func RecvPostList(t *testing.T, tool Tool) {
	MatrixOn(t, tool, "rxe0", pptest.BothWays, []int{64, 65536}, 400, "--recv_post_list", "8")
	MatrixOn(t, tool, "rxe0", pptest.BothWays, []int{4096}, 200, "--recv_post_list", "4", "-q", "4", "--use-srq", "-r", "64")
	MatrixOn(t, tool, "rxelo", []pptest.Pair{{Server: pptest.Go, Client: pptest.Go}}, []int{1024}, 300, "--recv_post_list", "6", "-b")
	MatrixOn(t, tool, "rxe0", []pptest.Pair{{Server: pptest.Go, Client: pptest.Go}}, []int{512}, 320, "--recv_post_list", "16", "-c", "UD")
}

var rkeyRE = regexp.MustCompile(`RKey (0x[0-9a-f]+) VAddr (0x[0-9a-f]+)`)

// MRPerQP is the test of --mr_per_qp (each QP's slice of the buffer is
// its own MR): Go against C both ways on rxe0 with four QPs. For write
// and read, where the address lines carry them, each side's QPs name
// four different rkeys, and four areas.
func MRPerQP(t *testing.T, tool Tool) {
	testkit.RequireVM(t)
	matrix(t, tool, "rxe0", pptest.BothWays, []int{4096}, 200, []string{"-q", "4", "--mr_per_qp"}, func(t *testing.T, r *Run) bool {
		r.Check(t, r.Host)
		if tool.Verb == bw.Send {
			return true
		}
		for side, out := range map[string]string{"server": r.Server, "client": r.Client} {
			local, _ := Addrs(out)
			keys, areas := map[string]bool{}, map[string]bool{}
			for _, a := range local {
				m := rkeyRE.FindStringSubmatch(a.Rest)
				if m == nil {
					t.Fatalf("%s: no rkey in %+v", side, a)
				}
				keys[m[1]], areas[m[2]] = true, true
			}
			if len(keys) != 4 || len(areas) != 4 {
				t.Errorf("%s (%s): rkeys %v and areas %v, want four of each\n%s", side, r.Pair, keys, areas, out)
			}
		}
		return true
	})
}

// CPUUtil is the test of --cpu_util with -D: Go against C both ways on
// rxe0. Both sides' column headings end with perftest's CPU column and
// their one line carries it, a percentage (often 0.00 in the guest: the
// busy loops spend their time in the kernel's rxe, and a write or read
// server prints the client's line with its own 0.00: it sampled
// nothing). A latency tool's lines (ib_send_lat's: both sides time the
// stretch) are checked the same way.
// cpuColumnRE is a result line ended by the CPU column
// (REPORT_EXT_CPU_UTIL).
var cpuColumnRE = regexp.MustCompile(`(?m)^ \d+ .*\t    \d+\.\d\d\s*$`)

func CPUUtil(t *testing.T, tool Tool) {
	testkit.RequireVM(t)
	heading, size := "MsgRate[Mpps]    CPU_Util[%]\n", 4096
	if tool.Test == bw.LAT {
		heading, size = "tps average    CPU_Util[%]\n", 64
	}
	matrix(t, tool, "rxe0", pptest.BothWays, []int{size}, 100, []string{"-D", "3", "-f", "1", "--cpu_util"}, func(t *testing.T, r *Run) bool {
		if tool.Test == bw.LAT {
			r.CheckLat(t, r.Host)
		} else {
			r.Check(t, r.Host)
		}
		for side, out := range map[string]string{"server": r.Server, "client": r.Client} {
			if !strings.Contains(out, heading) {
				t.Errorf("%s (%s): no CPU column heading\n%s", side, r.Pair, out)
			}
			var cpu []float64
			if tool.Test == bw.LAT {
				for _, l := range bw.ParseLatDurReports(out) {
					cpu = append(cpu, l.CPUUtil)
				}
			} else {
				for _, l := range bw.ParseReports(out) {
					cpu = append(cpu, l.CPUUtil)
				}
			}
			if len(cpu) != 1 || cpu[0] < 0 || cpu[0] > 100 || len(cpuColumnRE.FindAllString(out, -1)) != 1 {
				t.Errorf("%s (%s): CPU column %v\n%s", side, r.Pair, cpu, out)
			}
		}
		return true
	})
}

// GIDChoice is the test of the GID the tools choose without -x: Go
// against C both ways on rxe0, by default (perftest's choice: the
// IPv4-mapped RoCE v2 GID) and with --ipv6 (an IPv6 one, RoCE v2: the
// link-local address). The Go tool describes each run as the C tool
// does (the GID index among it), and both sides' addresses carry the
// kind of GID chosen.
func GIDChoice(t *testing.T, tool Tool) {
	testkit.RequireVM(t)
	for _, ipv6 := range []bool{false, true} {
		t.Run(fmt.Sprintf("ipv6=%v", ipv6), func(t *testing.T) {
			headers := map[headerKey][]string{}
			for _, pair := range pptest.BothWays {
				t.Run(pair.String(), func(t *testing.T) {
					ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
					defer cancel()
					r := &Run{Tool: tool, Pair: pair, Dev: testkit.RxeDev, Host: testkit.RxeAddr, Size: 64, Iters: 100, NoGIDIndex: true}
					if ipv6 {
						r.Extra = []string{"--ipv6"}
					}
					r.Do(ctx, t)
					for side, out := range map[string]string{"server": r.Server, "client": r.Client} {
						local, remote := Addrs(out)
						if len(local) != 1 || len(remote) != 1 || local[0].GID != remote[0].GID {
							t.Fatalf("%s (%s): addresses %+v %+v\n%s", side, pair, local, remote, out)
						}
						if v6 := !strings.HasPrefix(local[0].GID, "00:00:00:00:00:00:00:00:00:00:255:255:"); v6 != ipv6 {
							t.Errorf("%s (%s): GID %s with ipv6=%v\n%s", side, pair, local[0].GID, ipv6, out)
						}
					}
					headers[headerKey{64, false, pair.Server}] = Header(r.Server)
					headers[headerKey{64, true, pair.Client}] = Header(r.Client)
				})
			}
			sameHeaders(t, headers)
		})
	}
}

// Output is the test of --output=bandwidth and --output=message_rate:
// Go against C both ways on rxe0, each side prints its one number (the
// line it would print: for write and read the client's, on both sides)
// and, around it, exactly the lines the C tool prints in the same role.
func Output(t *testing.T, tool Tool) {
	testkit.RequireVM(t)
	number := regexp.MustCompile(`^[0-9]+\.[0-9]{6}$`)
	for _, kind := range []string{"bandwidth", "message_rate"} {
		t.Run(kind, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			rest := map[string]string{} // role/side -> the lines that are not the number
			for _, pair := range pptest.BothWays {
				r := &Run{Tool: tool, Pair: pair, Dev: testkit.RxeDev, Host: testkit.RxeAddr, Size: 4096, Iters: 200, Extra: []string{"--output=" + kind}}
				r.Do(ctx, t)
				for _, side := range []struct {
					role string
					impl pptest.Side
					out  string
				}{{"server", pair.Server, r.Server}, {"client", pair.Client, r.Client}} {
					var nums []string
					var other []string
					for _, l := range strings.Split(strings.TrimSuffix(side.out, "\n"), "\n") {
						if number.MatchString(l) {
							nums = append(nums, l)
						} else {
							other = append(other, l)
						}
					}
					if len(nums) != 1 {
						t.Errorf("%s %s (%s): %d numbers, want 1:\n%s", pair, side.role, side.impl, len(nums), side.out)
					} else if v, _ := strconv.ParseFloat(nums[0], 64); v <= 0 {
						t.Errorf("%s %s (%s): %s", pair, side.role, side.impl, nums[0])
					}
					rest[side.role+"/"+string(side.impl)] = strings.Join(other, "\n")
				}
			}
			for _, role := range []string{"server", "client"} {
				if g, c := rest[role+"/"+string(pptest.Go)], rest[role+"/"+string(pptest.C)]; g != c {
					t.Errorf("%s: the Go tool prints\n%s\nbesides its number, the C tool\n%s", role, g, c)
				}
			}
		})
	}
}

// Limits is the test of -w (and -y): Go against C both ways on rxe0. A
// limit no run reaches fails the sides perftest checks (the client; a
// send server too), after their report, with perftest's line; one every
// run reaches passes.
func Limits(t *testing.T, tool Tool) {
	testkit.RequireVM(t)
	const below = "Error: BW result is below bw limit"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, pair := range pptest.BothWays {
		r := &Run{Tool: tool, Pair: pair, Dev: testkit.RxeDev, Host: testkit.RxeAddr, Size: 4096, Iters: 200, Extra: []string{"-w", "0.001", "-y", "0.000001"}}
		r.Do(ctx, t)
		// Both sides run to their end (try would stop a server whose
		// client failed, maybe before its own verdict).
		clockRetry(t, pair.String()+", -w 1000000", func() string {
			r := &Run{Tool: tool, Pair: pair, Dev: testkit.RxeDev, Host: testkit.RxeAddr, Size: 4096, Iters: 200, Extra: []string{"-w", "1000000"}, Port: Port()}
			cerr, serr := r.both(ctx, t)
			if out := clockFlake(r.Server, r.Client); out != "" {
				return out
			}
			if cerr == nil || (serr == nil) != (tool.Verb != bw.Send) {
				t.Errorf("%s: -w 1000000: client %v, server %v:\n%s\n%s", pair, cerr, serr, r.Server, r.Client)
			}
			if !strings.Contains(r.Client, below) || len(bw.ParseReports(r.Client)) != 1 {
				t.Errorf("%s client: want its line, then %q:\n%s", pair, below, r.Client)
			}
			if got := strings.Contains(r.Server, below); got != (tool.Verb == bw.Send) {
				t.Errorf("%s server: %q printed %v:\n%s", pair, below, got, r.Server)
			}
			return ""
		})
	}
}

// both runs r's server, then (once it listens on r.Port) its client, to
// their ends, both running to the end whatever the other does, and keeps
// their outputs in r.
func (r *Run) both(ctx context.Context, t *testing.T) (cerr, serr error) {
	t.Helper()
	srv := testkit.StartPeer(ctx, t, r.Tool.Bin(r.Pair.Server), r.Args(false)...)
	if err := testkit.WaitTCPListen(ctx, r.Port); err != nil {
		t.Fatal(err)
	}
	cli := testkit.StartPeer(ctx, t, r.Tool.Bin(r.Pair.Client), r.Args(true)...)
	cerr, serr = cli.Wait(), srv.Wait()
	r.Server, r.Client = srv.Output(), cli.Output()
	return cerr, serr
}

// DuplexDurationLimit is send_bw's -b -D with -w, Go against C both ways:
// each side prints its own line through a path of perftest's that checks
// no limit, so both fail the run with "BW result is below bw limit"
// whatever they measured, as perftest's does (the Go tools once checked
// the line and passed -w 0).
func DuplexDurationLimit(t *testing.T, tool Tool) {
	testkit.RequireVM(t)
	const below = "Error: BW result is below bw limit"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, pair := range pptest.BothWays {
		clockRetry(t, pair.String()+", -b -D 2 -w 0", func() string {
			r := &Run{Tool: tool, Pair: pair, Dev: testkit.RxeDev, Host: testkit.RxeAddr, Size: 4096, Iters: 100,
				Extra: []string{"-b", "-D", "2", "-w", "0"}, Port: Port()}
			cerr, serr := r.both(ctx, t)
			if out := clockFlake(r.Server, r.Client); out != "" {
				return out
			}
			for _, side := range []struct {
				name string
				err  error
				out  string
			}{{"client", cerr, r.Client}, {"server", serr, r.Server}} {
				if side.err == nil || !strings.Contains(side.out, below) || len(bw.ParseReports(side.out)) != 1 {
					t.Errorf("%s %s: exit %v; want its line, then %q:\n%s", pair, side.name, side.err, below, side.out)
				}
			}
			return ""
		})
	}
}

// DuplexDurationBoth: -b -D 1 --report-both, C-C then Go against C both
// ways. Every side exits 0 and prints what C-C's does: its own line, then
// the "Local results" and "Remote results" blocks, each once. (send_bw's
// remote block under -D reads a report it never exchanged, so only the
// structure is compared, not the numbers.)
func DuplexDurationBoth(t *testing.T, tool Tool) {
	testkit.RequireVM(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	shape := func(out string) string {
		return fmt.Sprintf("%d lines, %d Local results, %d Remote results", len(bw.ParseReports(out)),
			strings.Count(out, " Local results:"), strings.Count(out, " Remote results:"))
	}
	var want [2]string
	for i, pair := range append([]pptest.Pair{{Server: pptest.C, Client: pptest.C}}, pptest.BothWays...) {
		clockRetry(t, pair.String()+", -b -D 1 --report-both", func() string {
			r := &Run{Tool: tool, Pair: pair, Dev: testkit.RxeDev, Host: testkit.RxeAddr, Size: 4096, Iters: 100,
				Extra: []string{"-b", "-D", "1", "--report-both"}, Port: Port()}
			cerr, serr := r.both(ctx, t)
			if out := clockFlake(r.Server, r.Client); out != "" {
				return out
			}
			for j, side := range []struct {
				name string
				err  error
				out  string
			}{{"client", cerr, r.Client}, {"server", serr, r.Server}} {
				got := shape(side.out)
				switch {
				case side.err != nil:
					t.Errorf("%s %s: exit %v:\n%s", pair, side.name, side.err, side.out)
				case i == 0:
					want[j] = got
					if !strings.Contains(got, "1 Local results, 1 Remote results") {
						t.Errorf("C-C %s: %s; want each block once:\n%s", side.name, got, side.out)
					}
				case got != want[j]:
					t.Errorf("%s %s: %s, C-C's %s:\n%s", pair, side.name, got, want[j], side.out)
				}
			}
			return ""
		})
	}
}

// udMTU is the path MTU of rxe0 (over the dummy netdev d0): the largest
// UD message there.
const udMTU = 1024

// SameFailure runs the Go and the C tool with args, expects both to exit
// non-zero and the C tool's message, want, to appear in both outputs.
func SameFailure(t *testing.T, tool Tool, want string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, s := range []pptest.Side{pptest.C, pptest.Go} {
		out, err := testkit.RunPeer(ctx, t, tool.Bin(s), args...)
		if err == nil || !strings.Contains(out, want) {
			t.Errorf("%s %s: %v, output %q; want a failure saying %q", tool.Bin(s), strings.Join(args, " "), err, out, want)
		}
	}
}

// The knobs of the bandwidth comparison (TestVMBandwidth,
// TestTwoHostBandwidth of the three tools).
var (
	perfRounds    = flag.Int("bw.rounds", 1, "bandwidth comparison: rounds of every pair and size")
	perfIters     = flag.String("bw.iters", "200", "bandwidth comparison: iterations per run (-n), one for all sizes or one per size (comma-separated)")
	perfSizesFlag = flag.String("bw.sizes", "65536", "bandwidth comparison: message sizes (-s), comma-separated")
	perfDev       = flag.String("bw.dev", testkit.RxeDev, "bandwidth comparison on one host: device (rxe0 or rxelo)")
	perfArgs      = flag.String("bw.args", "", "bandwidth comparison: more arguments for both sides, space-separated")
)

// PerfPairs are the pairings of the comparison, rotated: round r starts
// with pair r mod 4.
var PerfPairs = []pptest.Pair{{Server: pptest.Go, Client: pptest.Go}, {Server: pptest.C, Client: pptest.C},
	{Server: pptest.Go, Client: pptest.C}, {Server: pptest.C, Client: pptest.Go}}

// PerfResult is what a comparison logs (one JSON line, "BWPERF {...}"),
// for make perf's generator: per size and pairing, each round's MB/s.
type PerfResult struct {
	Tool        string                          `json:"tool"`
	Kernel      string                          `json:"kernel"`
	Place       string                          `json:"place"` // "rxe0", "rxelo", "two hosts"
	Iters       map[string]int                  `json:"iters"` // size -> iterations per run
	Rounds      int                             `json:"rounds"`
	Args        string                          `json:"args"`
	Clocksource string                          `json:"clocksource"`
	Seconds     float64                         `json:"seconds"`
	MBs         map[string]map[string][]float64 `json:"mbs"`                // size -> pair -> per round
	Failures    []string                        `json:"failures,omitempty"` // runs that failed and were repeated
}

func clocksource() string {
	b, _ := os.ReadFile("/sys/devices/system/clocksource/clocksource0/current_clocksource")
	return strings.TrimSpace(string(b))
}

// perfSizes returns -bw.sizes and the iterations of each (-bw.iters);
// for the atomic tools, which run 8-byte messages only, 8 B with the
// first size's count.
func perfSizes(t *testing.T, tool Tool) (sizes, iters []int) {
	sizes, iters, err := pptest.SizesIters(*perfSizesFlag, *perfIters)
	if err != nil {
		t.Fatalf("-bw.sizes/-bw.iters: %v", err)
	}
	if tool.Verb == bw.Atomic {
		return []int{8}, iters[:1]
	}
	return sizes, iters
}

// Perf compares tool with perftest's on one host (-bw.dev): every round
// runs, for every size, the four pairings in rotated order; a run's
// figure is the mean of the two sides' average MB/s. It logs every round,
// a table of medians with Go/C, and the BWPERF line.
func Perf(t *testing.T, tool Tool) {
	testkit.RequireVM(t)
	host := perfHost(t)
	perf(t, tool, *perfDev, func(r *Run) { r.Dev, r.Host = *perfDev, host }, host)
}

// perfHost is the address of -bw.dev's host in the VM.
func perfHost(t *testing.T) string {
	for _, d := range Devices {
		if d.Name == *perfDev {
			return d.Host
		}
	}
	t.Fatalf("-bw.dev %q: not one of the VM's devices", *perfDev)
	return ""
}

// PerfTwoHosts is Perf across the two hosts: the server on this host (A),
// the client on the peer (B), over the wire device.
func PerfTwoHosts(t *testing.T, tool Tool) {
	a, b := testkit.ThisHost(t), testkit.PeerHost(t)
	perf(t, tool, "two hosts", func(r *Run) {
		r.Dev, r.Host, r.Place = testkit.WireDev, a.Addr, Place{Server: a, Client: b}
	}, a.Addr+","+b.Addr)
}

func perf(t *testing.T, tool Tool, place string, setup func(*Run), gid string) {
	sizes, iters := perfSizes(t, tool)
	res := PerfResult{Tool: tool.Go, Kernel: testkit.KernelRelease(), Place: place, Iters: map[string]int{}, Rounds: *perfRounds,
		Args: *perfArgs, Clocksource: clocksource(), MBs: map[string]map[string][]float64{}}
	for i, size := range sizes {
		res.Iters[strconv.Itoa(size)] = iters[i]
	}
	t.Logf("%s against %s: kernel %s, %s, %d rounds, sizes %s with %s iterations per run, arguments %q, clocksource %s",
		tool.Go, tool.C(), res.Kernel, place, res.Rounds, intList(sizes), intList(iters), res.Args, res.Clocksource)
	start := time.Now()
	for round := range *perfRounds {
		for si, size := range sizes {
			key := strconv.Itoa(size)
			if res.MBs[key] == nil {
				res.MBs[key] = map[string][]float64{}
			}
			var line []string
			for k := range PerfPairs {
				pair := PerfPairs[(round+k)%len(PerfPairs)]
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
				r := &Run{Tool: tool, Pair: pair, Size: size, Iters: iters[si], Extra: strings.Fields(*perfArgs)}
				setup(r)
				failed, ok := r.do(ctx, t, true)
				cancel()
				for _, err := range failed {
					res.Failures = append(res.Failures, fmt.Sprintf("round %d, %s, %d B: %s", round+1, pair, size, failureLine(err.Error())))
				}
				if !ok {
					t.Fatalf("%s %s size %d failed %d times; the last:\n%v", tool.Go, pair, size, len(failed), failed[len(failed)-1])
				}
				s, c := r.Check(t, gid)
				mbs := (s.Avg + c.Avg) / 2
				if tool.Verb == bw.Atomic {
					// perftest prints MB/s with two decimals, under 0.1
					// for 8-byte atomics across the wire; the message
					// rate (six decimals) times 8 B keeps the precision.
					mbs = (s.MsgRate + c.MsgRate) / 2 * 8e6 / (1 << 20)
				}
				res.MBs[key][pair.String()] = append(res.MBs[key][pair.String()], mbs)
				line = append(line, fmt.Sprintf("%s %.2f", pair, mbs))
			}
			t.Logf("round %d size %d: %s", round+1, size, strings.Join(line, ", "))
		}
	}
	res.Seconds = time.Since(start).Seconds()
	t.Logf("MB/s, median (best) over %d rounds (%s, %s, %s iterations, clocksource %s at the end, %v):\n%s",
		res.Rounds, res.Kernel, place, intList(iters), clocksource(), time.Since(start).Round(time.Second), Table(&res, sizes))
	js, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("BWPERF %s", js)
}

// intList is v as a comma-separated list.
func intList(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

// Table is the markdown table of a comparison: per size, the median (and
// best) MB/s of every pairing, Go/C of the medians and the median of the
// rounds' Go-Go/C-C ratios.
func Table(r *PerfResult, sizes []int) string {
	var b strings.Builder
	b.WriteString("| size | Go-Go | C-C | Go server, C client | C server, Go client | Go/C of the medians | median of the rounds' Go/C |\n")
	b.WriteString("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, size := range sizes {
		m := r.MBs[strconv.Itoa(size)]
		gg, cc := m[PerfPairs[0].String()], m[PerfPairs[1].String()]
		var ratios []float64
		for i := range min(len(gg), len(cc)) {
			ratios = append(ratios, gg[i]/cc[i])
		}
		cell := func(p pptest.Pair) string {
			v := m[p.String()]
			if len(v) == 0 {
				return "-"
			}
			if Median(v) < 10 {
				return fmt.Sprintf("%.2f (%.2f)", Median(v), slices.Max(v))
			}
			return fmt.Sprintf("%.1f (%.1f)", Median(v), slices.Max(v))
		}
		fmt.Fprintf(&b, "| %d B | %s | %s | %s | %s | %.2f | %.2f |\n", size, cell(PerfPairs[0]), cell(PerfPairs[1]),
			cell(PerfPairs[2]), cell(PerfPairs[3]), Median(gg)/Median(cc), Median(ratios))
	}
	return b.String()
}

// Median of v (0 for none).
func Median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// BadArgs are client command lines that fail, or reach the connect to a
// server that is not there, in every bandwidth tool: sizes, iterations,
// depths, MTUs, ports, GID indexes, timeouts, SLs, CQ moderation, inline
// sizes and outstanding reads out of range or malformed, an unknown
// device, an extra operand, long options, -a. CompareWithC runs them.
var BadArgs = [][]string{
	{"-s", "0"}, {"-s", "abc"}, {"-s", "-5"}, {"-s", "9000000000"},
	{"-n", "0"}, {"-n", "-1"}, {"-t", "0"}, {"-t", "100000"}, {"-r", "0"},
	{"-m", "9999"}, {"-m", "512"},
	{"-x", "99"}, {"-x", "5000"}, {"-i", "0"}, {"-i", "2"}, {"-p", "70000"},
	{"-u", "99"}, {"-S", "99"}, {"-Q", "0"}, {"-I", "1000"}, {"-o", "0"},
	{"-c", "UD"}, {"-a", "-s", "64"}, {"--size=64", "--iters=3"},
	// A device named "" is looked for by that name, not taken as "the
	// first device".
	{"extra"}, {"-d", "nosuchdev0"}, {"-d", ""},
	// In order: a bad size before an unknown option ends the run first.
	// (An unknown option first is not compared: perftest then prints its
	// whole usage, every option it has, where the Go tools name the
	// option.)
	{"-s", "0", "--nosuch"},
	// rdma_cm: nobody listens, so the connection of the data exchange
	// (-z, and -R with it) is rejected; UC has no rdma_cm.
	{"-z"}, {"-R"}, {"-R", "-c", "UC"}, {"--rdma_cm", "--retry_count", "3"}, {"-R", "-T", "300"},
	// Events: none on the write verb; a completion vector needs -e and
	// must be at most the device's count (rxe has one, and perftest lets
	// 1 through to the CQ).
	{"-e"}, {"-X", "0"}, {"-e", "-X", "1"}, {"-e", "-X", "2"}, {"-e", "-X", "x"}, {"-e", "-X", "3000"},
	// Duration: positive, more than twice the margin (also against the
	// default 5 s without -D), not with events or -a.
	{"-D", "0"}, {"-D", "x"}, {"-D", "4", "-f", "2"}, {"-f", "3"}, {"-f", "-1"}, {"-D", "4", "-e"}, {"-D", "4", "-a"},
	{"-D", "4", "-f", "1"},
	// Post lists: a multiple of it in iterations, of the moderation in it.
	{"-l", "3", "-n", "100"}, {"-l", "8", "-Q", "3"}, {"-l", "4"}, {"-l", "8", "-Q", "4", "-s", "64"},
	// Moderation asked for on large messages: a warning.
	{"-Q", "4"},
	// QPs: 1 to 16384.
	{"-q", "0"}, {"-q", "16385"}, {"-q", "x"}, {"-q", "4"},
	// A run without end: not with events (with -D, the duration's
	// complaint comes first); -a ignored.
	{"--run_infinitely", "-e"}, {"--run_infinitely", "-D", "2", "-e"}, {"--run_infinitely", "-f", "3"},
	{"--run_infinitely", "-a"},
	// Connection types: UC (not for read), an unknown one.
	{"-c", "UC"}, {"-c", "uc"},
	// Output: bandwidth or message rate only.
	{"--output=latency"}, {"--output=bw"},
	// Limits: not negative (what does not parse is 0).
	{"-w", "-1"}, {"-y", "-2"}, {"-w", "x"},
	// SRQ: send only, at least a receive per QP.
	{"--use-srq"}, {"--use-srq", "-q", "8", "-r", "4"},
	// Bidirectional: not with run_infinitely on send.
	{"-b", "--run_infinitely"}, {"-b", "--report-both"},
	// --latency_gap: latency tests only.
	{"--latency_gap=5"},
	// TOS and hop limit: for rdma_cm and raw Ethernet QPs only; the
	// values checked first.
	{"-T", "32"}, {"-L", "10"}, {"-L", "64"}, {"-T", "-1"}, {"-L", "256"},
	// Long options: checked as perftest's casts read them; a P_Key index
	// past the table becomes 0, with a complaint.
	{"--tclass", "x"}, {"--tclass", "300"}, {"--retry_count=-1"}, {"--flow_label", "-2"}, {"--wait_destroy", "x"},
	{"--pkey_index", "100"}, {"--pkey_index", "1"},
	// Receive post lists: an int, a multiple of it in iterations (send
	// runs them; the other verbs take the option and print it).
	{"--recv_post_list", "3"}, {"--recv_post_list", "x"}, {"--recv_post_list", "4", "-n", "100"},
	// CPU utilization: -D only; without, a warning.
	{"--cpu_util"}, {"--cpu_util", "-D", "4", "-f", "1"},
	{"--mr_per_qp", "-q", "2"}, {"--mmap-offset", "x"},
	// The rate limiter's options, checked as perftest checks them.
	{"-c", "UC", "--odp"}, {"--rate_limit", "7"}, {"--rate_limit", "0"}, {"--burst_size", "8"}, {"--rate_units", "G"},
	{"--rate_limit_type", "sw"}, {"--typical_pkt_size", "10"}, {"--rate_limit", "10", "--rate_units", "p"},
	{"--rate_limit", "10", "--rate_limit_type", "PP"}, {"--rate_limit", "5", "--rate_limit_type", "SW"},
	// -W: a counter that is not there, or a name the commas promise
	// and the list lacks, ends the run before the connection; the
	// options perftest parses and checks but does not use (--inline_recv,
	// --reply_every); --report-per-port, which needs -O and -D;
	// --force-link's argument.
	{"-W", "hw_counters/nosuch"}, {"-W", "hw_counters/sent_pkts,"}, {"--report-counters=hw_counters"},
	{"--inline_recv", "4k"}, {"--reply_every=x"}, {"--report-per-port"}, {"--force-link", "RoCE"},
	// -O (dual port): perftest's latency tests refuse it; its bandwidth
	// tests find no port 2 on rxe.
	{"-O"},
	{"--dlid", "x"},
	// -A: the atomic tests' operation; the other tests refuse it.
	{"-A", "CMP_AND_SWAP"}, {"-A", "FETCH_AND_ADD"}, {"-A", "fetch_and_add"},
	// Debian's perftest is built with DC streams and AES-XTS: checked
	// in perftest's order (DC is refused, so a stream count always
	// fails), the key paths given even when empty; raw_ipv6 is ignored
	// on a QP that is not raw Ethernet.
	{"--raw_ipv6"}, {"--log_dci_streams=2"}, {"--log_dci_streams=65536"}, {"--log_active_dci_streams", "1"},
	{"--log_active_dci_streams", "x"}, {"--aes_xts"}, {"--aes_xts", "-c", "UC"},
	{"--aes_xts", "--kek_path=", "--data_enc_key_app_path", "k"},
	{"--aes_xts", "--kek_path=k", "--data_enc_key_app_path=k", "--credentials_path=c", "--use_old_post_send"},
	{"--aes_xts", "--kek_path=k", "--data_enc_key_app_path=k", "--credentials_path=c", "-R"},
	{"--encrypt_on_tx"}, {"--sig_before"}, {"--credentials_path", "c", "--kek_path=k"}, {"--data_enc_key_app_path=k"},
	{"--aes_block_size=x"}, {"--data_enc_keys_number=3"},
	// perftest's raw Ethernet options: checked, then ignored on RC, UC
	// and UD (the client reaches the connect); a bad value's text; the
	// old options mixed with the new; --use_rss, which perftest's build
	// cannot run.
	{"-P"}, {"-Z", "--tcp", "--vlan_en"}, {"--promiscuous", "--raw_mcast", "-M", "ff02::1"},
	{"-B", "00:11:22:33:44:55", "-E", "00:11:22:33:44:zz"}, {"--local_mac", "100:11:22:33:44:5"},
	{"-J", "1.2.3.4", "-j", "1.2.3.256"}, {"--raw_ipv6", "--local_ip", "::1", "--remote_ip", "1.2.3.4"},
	{"-K", "x"}, {"--ethertype", "0x800"}, {"--flows", "4", "--flows_burst", "2", "--vlan_pcp", "8"},
	{"--flows", "0"}, {"-B", "00:11:22:33:44:55", "--remote_mac", "00:11:22:33:44:55"}, {"--use_rss"},
}

// SameAsC runs BadArgs-style cases (each after "-d rxe0 -x 1 -p PORT")
// with the Go tool and perftest's, through pptest.CompareWithC, then
// pptest.HostOperands in place of the server operand, on the socket
// exchange and on rdma_cm's (-R). skip names the cases where the Go port
// differs on purpose, and why.
//
// The cases are command lines perftest's parser refuses, or clients with
// no server: each kernel runs half of them (KernelHalf), the host
// operands on both.
func SameAsC(t *testing.T, tool Tool, cases [][]string, skip map[string]string) {
	t.Helper()
	lead := func() []string { return []string{"-d", testkit.RxeDev, "-x", "1", "-p", strconv.Itoa(Port())} }
	mine := KernelHalf(cases)
	t.Logf("%d of the %d cases on this kernel (KernelHalf)", len(mine), len(cases))
	pptest.CompareWithC(t, tool.Bin(pptest.Go), tool.C(), lead, mine, skip)
	hosts := slices.Clone(pptest.HostOperands)
	for _, h := range pptest.HostOperands {
		hosts = append(hosts, append([]string{"-R"}, h...))
	}
	pptest.CompareOperands(t, tool.Bin(pptest.Go), tool.C(), lead, hosts)
}

// AlternateWay is one of pptest.BothWays, chosen by the kernel: the Go
// server with the C client on 6.1, the C server with the Go client on
// later kernels. make test runs the VM suite on both, so a long run
// taken one way per kernel still covers both directions, at half the
// time. A run of one kernel (testkit.BothKernels) takes both ways.
func AlternateWay() []pptest.Pair {
	if !testkit.BothKernels() {
		return pptest.BothWays
	}
	if testkit.KernelAtLeast(6, 2) {
		return pptest.BothWays[1:]
	}
	return pptest.BothWays[:1]
}

// KernelHalf is the half of cases this kernel runs, as AlternateWay is
// the half of the pairings: the even ones on 6.1, the odd ones on later
// kernels. make test runs the VM suite on both, so every case still runs
// once (in TCG each takes about a second with perftest's start-up, and
// the bandwidth and latency tools' tables of bad arguments were 160 s of
// a make test whose hour is nearly spent, 2026-12-06). A run of one
// kernel (testkit.BothKernels) runs them all.
func KernelHalf[T any](cases []T) []T {
	if !testkit.BothKernels() {
		return cases
	}
	return half(cases, testkit.KernelAtLeast(6, 2))
}

// half is KernelHalf for a kernel from 6.2 on (later) or before.
func half[T any](cases []T, later bool) []T {
	var h []T
	for i := range cases {
		if (i%2 == 1) == later {
			h = append(h, cases[i])
		}
	}
	return h
}

// AllSizes is the test of -a (2 B to 8 MiB, a line per size: on the
// client, and the last one on a bandwidth tool's server; on both sides
// of a latency tool but the read one's): Go against C on rxelo, one way
// per kernel (AlternateWay; at 8 MiB each run takes seconds under TCG).
func AllSizes(t *testing.T, tool Tool) {
	if tool.Test == bw.LAT {
		LatMatrixOn(t, tool, "rxelo", AlternateWay(), []int{2}, 5, "-a")
		return
	}
	MatrixOn(t, tool, "rxelo", AlternateWay(), []int{65536}, 5, "-a")
}

// RcvdPkts reads dev's count of received packets (port 1's hw_counters).
func RcvdPkts(t testing.TB, dev string) int {
	t.Helper()
	b, err := os.ReadFile("/sys/class/infiniband/" + dev + "/ports/1/hw_counters/rcvd_pkts")
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// errPeerEnded is WaitReceived's error when done closed first.
var errPeerEnded = errors.New("the peer ended")

// WaitReceived waits, polling every 10 ms, until dev has received n
// packets in all (RcvdPkts): a transfer is under way. It returns
// ctx.Err() when ctx ends first and errPeerEnded when done (which may be
// nil) is closed first.
func WaitReceived(ctx context.Context, t testing.TB, dev string, n int, done <-chan struct{}) error {
	t.Helper()
	for RcvdPkts(t, dev) < n {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-done:
			return errPeerEnded
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

// WaitSending waits, polling every 10 ms, until one of p's QPs on dev
// has sent n packets since it was first seen in RTS (SendPSNs): p's
// transfer is under way. (A client whose connection was refused never
// gets there.) It returns ctx.Err() when ctx ends first and errPeerEnded
// when p exits first.
func WaitSending(ctx context.Context, t testing.TB, dev string, p *testkit.Peer, n uint32) error {
	t.Helper()
	first := testkit.SendPSNs(t, dev, p.Pid())
	for {
		for qpn, psn := range testkit.SendPSNs(t, dev, p.Pid()) {
			if start, ok := first[qpn]; !ok {
				first[qpn] = psn
			} else if (psn-start)&0xffffff >= n {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-p.Done():
			return errPeerEnded
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// killRetries is the retry count of ServerKilled's QPs. rxe takes a
// retry count of 7 to mean "retry for ever" (rxe_completer decrements
// it only when it is not 7, which the IB spec allows for the RNR retry
// count alone), and perftest sets 7 on every QP it connects itself
// (ctx_modify_qp_to_rts): there a client whose server has gone neither
// completes nor fails, C and Go clients alike. Only with -R (RDMA CM)
// does --retry_count reach the QP, through the connection's parameters.
const killRetries = "2"

// ServerKilled: the server (perftest's) dies by SIGKILL in the middle
// of a run, connected through the RDMA CM with --retry_count
// killRetries. The client, C or Go, has its requests retried that often
// (after the timeout the CM chose, not perftest's 14: 1.7 s from the
// kill to the exit on 6.12, 6.9 s on 6.1), gets a retry-exceeded
// completion and exits: both clients with the same exit status and the
// same error lines (the counters of posted and completed messages
// aside), the Go one leaving nothing in the kernel. The two clients run
// at the same time, each against a server of its own, and are bounded:
// one that keeps polling fails the test two minutes after the start. For
// ib_read_bw also with -a, whose loop exits with 17 and prints nothing
// of its own: on 6.12 only when the run boots both kernels
// (testkit.BothKernels), where the retries take a quarter of 6.1's time
// (the path is -s's, the kernel's part the same). Of the latency tools,
// ib_read_lat and ib_atomic_lat poll their send queue's completions and
// fail the same way; ib_write_lat
// and ib_send_lat wait for their server's next message (spinning on
// the buffer it writes, polling the receive queue) and so never learn
// of its death: their tests run PeerKilled instead, where the Go tools
// fail and perftest's would wait for ever.
func ServerKilled(t *testing.T, tool Tool) {
	testkit.RequireVM(t)
	modes := [][]string{{"-s", strconv.Itoa(tool.Size(4096))}}
	if tool.Verb == bw.Read && tool.Test == bw.BW && (testkit.KernelAtLeast(6, 2) || !testkit.BothKernels()) {
		modes = append(modes, []string{"-a"})
	}
	for _, mode := range modes {
		for attempt := 1; serverKilled(t, tool, mode); attempt++ {
			if attempt == 3 {
				t.Fatalf("%s: a client came before its server's listen was in place (%q) in 3 attempts", strings.Join(mode, " "), listenRace)
			}
			t.Logf("%s, attempt %d: a client came before its server's listen was in place (%q); running both again", strings.Join(mode, " "), attempt, listenRace)
		}
	}
}

// serverKilled is ServerKilled in one mode: the C client and the Go
// client run at the same time, each against a server of its own, so
// that the wait for the retries (6.9 s on 6.1) is spent once, not twice.
// It reports whether a client met the listen race (listenRace), having
// stopped every process and failed nothing: then the caller runs it
// again.
func serverKilled(t *testing.T, tool Tool, mode []string) (race bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	how := strings.Join(mode, " ")
	before := testkit.Resources(t, testkit.RxeDev)
	type run struct {
		bin      string
		srv, cli *testkit.Peer
		status   string
		lines    []string
	}
	var runs [2]*run
	for i, side := range []pptest.Side{pptest.C, pptest.Go} {
		port := Port()
		args := append([]string{"-d", testkit.RxeDev, "-x", "1", "-p", strconv.Itoa(port), "-n", "100000000", "-R", "--retry_count", killRetries}, mode...)
		r := &run{bin: tool.Bin(side)}
		r.srv = testkit.StartPeer(ctx, t, tool.C(), args...)
		if err := testkit.WaitCMListen(ctx, port); err != nil {
			t.Fatal(err)
		}
		r.cli = testkit.StartPeer(ctx, t, r.bin, append(args, testkit.RxeAddr)...)
		runs[i] = r
	}
	// Each client's kill waits for the proof that its transfer is under
	// way: one of its QPs has sent 300 packets. (The device's packet
	// counter cannot tell the two clients apart, and a client's header
	// line can come before its last handshake, as ib_send_bw's does.)
	for _, r := range runs {
		switch err := WaitSending(ctx, t, testkit.RxeDev, r.cli, 300); {
		case errors.Is(err, errPeerEnded) && strings.Contains(r.cli.Output(), listenRace):
			for _, r := range runs {
				r.cli.Stop()
				r.srv.Stop()
			}
			return true
		case errors.Is(err, errPeerEnded):
			t.Fatalf("%s %s ended before its server was killed:\n%s", r.bin, how, r.cli.Output())
		case err != nil:
			t.Fatalf("%s %s: no traffic (%v):\n%s\nits server:\n%s", r.bin, how, err, r.cli.Output(), r.srv.Output())
		}
	}
	t0 := time.Now()
	for _, r := range runs {
		r.srv.Kill()
	}
	for _, r := range runs {
		r.srv.Wait()
		err := r.cli.Wait()
		t.Logf("%s %s: ended %v after its server was killed: %v", r.bin, how, time.Since(t0).Round(time.Millisecond), err)
		if ctx.Err() != nil {
			t.Fatalf("%s %s still running two minutes after it started:\n%s", r.bin, how, r.cli.Output())
		}
		out := r.cli.Output()
		if err == nil {
			t.Errorf("%s %s: exit status 0 after its server was killed:\n%s", r.bin, how, out)
			continue
		}
		r.status, r.lines = exitStatus.FindString(err.Error()), errorReport(out)
		if !strings.Contains(out, "Failed status 12:") {
			t.Errorf("%s %s: no retry-exceeded completion (status 12):\n%s", r.bin, how, out)
		}
	}
	// Nothing of either run is left: the C processes' objects went with
	// them, so any difference is the Go client's.
	if after := testkit.Resources(t, testkit.RxeDev); !maps.Equal(after, before) {
		t.Errorf("%s: resources after %v, before %v", tool.Go, after, before)
	}
	c, g := runs[0], runs[1]
	if c.status != g.status || !slices.Equal(c.lines, g.lines) {
		t.Errorf("%s: %s %s %q, %s %s %q", how, tool.C(), c.status, c.lines, tool.Go, g.status, g.lines)
	}
	return false
}

// exitStatus finds the exit status in a peer's error.
var exitStatus = regexp.MustCompile(`exit status \d+|signal: .*`)

// counters matches the posted and completed counts an error report
// ends with ("scnt=12, ccnt=8"), which differ from run to run.
var counters = regexp.MustCompile(`scnt=\d+, ccnt=\d+`)

// errorReport returns the lines of a tool's output that report a
// failed run: perftest's (and the Go tools') completion error report
// and what the loop's caller adds, the counters masked.
func errorReport(out string) []string {
	var lines []string
	for l := range strings.Lines(out) {
		l = strings.TrimRight(l, "\n")
		if strings.Contains(l, "Completion with error") || strings.Contains(l, "Failed status") || counters.MatchString(l) ||
			strings.Contains(l, "run_iter") || strings.Contains(l, "aborting") {
			lines = append(lines, counters.ReplaceAllString(l, "scnt=N, ccnt=N"))
		}
	}
	return lines
}

// lostRace says whether a side's failure (exit status and the lines
// Mismatched keeps) is its write failing on a connection its failed peer
// has closed. Out of step, one side may go on alone through steps that
// need nothing more from the other (with -q 1 against -q 2, the server
// reads its five 8-byte reports out of the client's last address
// message) while the other fails and exits; its close, with bytes still
// unread, resets the connection. A side that writes before the reset
// gets as far as C-C's did; one that writes after it fails there.
// perftest's own tools lose that race too when they are slow, and then
// end as this matches (write(2) failing with ECONNRESET, or SIGPIPE
// killing them when it fails with EPIPE); C is just quick enough to win
// it nearly always (CI on 6.1 saw the Go server lose it once, with four
// pairings sharing two vCPUs).
func lostRace(status string, lines []string, client bool) bool {
	step := "Unable to write from socket/rdma_cm"
	if client {
		step = "Unable to write to socket/rdma_cm"
	}
	if status == "signal: broken pipe" {
		return true // perftest's write failing with EPIPE
	}
	return status == "exit status 1" && len(lines) >= 2 &&
		(lines[0] == "Couldn't send reports" || lines[0] == "Couldn't send local address") && lines[1] == step
}

// Mismatched runs a server and a client given options that put their
// exchanges out of step (srv and cli, after the usual ones; `-q 2`
// against `-q 1`: one side does a handshake the other does not), C-C,
// Go server/C client, C server/Go client and Go-Go, each pairing at once
// with the others. perftest reads each message with one read(2) and fails
// when the peer's message is shorter; the Go tools must fail as well,
// not wait for the rest while the peer waits for them. So every run must
// end within a minute, and each side must exit with the C-C run's status
// and print its failure lines (trimmed, the Go tools' detail lines left
// out), or have lost the race with its failed peer's close (lostRace),
// and the kernel's resource counts must be back where they were. A set
// in which a perftest could not calibrate its clock runs again
// (clockRetry).
func Mismatched(t *testing.T, tool Tool, srv, cli []string) {
	testkit.RequireVM(t)
	before := testkit.Resources(t, testkit.RxeDev)
	clockRetry(t, fmt.Sprintf("server %q, client %q", srv, cli), func() string { return mismatched(t, tool, srv, cli) })
	after := testkit.Resources(t, testkit.RxeDev)
	if !maps.Equal(before, after) {
		t.Errorf("resources after %v, before %v", after, before)
	}
}

// mismatched is one attempt of Mismatched: it returns the output of a
// perftest that could not calibrate its clock (clockFlake), whose
// ending then says nothing about the mismatch, without comparing.
func mismatched(t *testing.T, tool Tool, srv, cli []string) (flake string) {
	type side struct {
		status string
		lines  []string
		out    string
	}
	type result struct{ server, client side }
	report := func(p *testkit.Peer) side {
		err := p.Wait()
		s := side{status: "exit status 0", out: p.Output()}
		if err != nil {
			s.status = exitStatus.FindString(err.Error())
		}
		for l := range strings.Lines(strings.ReplaceAll(s.out, "\r\n", "\n")) {
			if strings.HasPrefix(l, "  (") {
				continue
			}
			if l = strings.TrimSpace(l); strings.Contains(l, "Couldn't") || strings.Contains(l, "Unable") || strings.Contains(l, "Failed") {
				s.lines = append(s.lines, l)
			}
		}
		return s
	}
	pairs := []pptest.Pair{{Server: pptest.C, Client: pptest.C}, {Server: pptest.Go, Client: pptest.C},
		{Server: pptest.C, Client: pptest.Go}, {Server: pptest.Go, Client: pptest.Go}}
	results := make([]result, len(pairs))
	var wg sync.WaitGroup
	for i, pair := range pairs {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			r := &Run{Tool: tool, Pair: pair, Dev: testkit.RxeDev, Host: testkit.RxeAddr, Size: tool.Size(64), Iters: 300,
				ServerExtra: srv, ClientExtra: cli, Port: Port()}
			s := testkit.StartPeer(ctx, t, tool.Bin(pair.Server), r.Args(false)...)
			if err := testkit.WaitTCPListen(ctx, r.Port); err != nil {
				t.Errorf("%s: server %s: %v\n%s", pair, tool.Bin(pair.Server), err, s.Output())
				return
			}
			c := testkit.StartPeer(ctx, t, tool.Bin(pair.Client), r.Args(true)...)
			results[i] = result{client: report(c), server: report(s)}
			if ctx.Err() != nil {
				t.Errorf("%s: still running after a minute (killed):\nserver:\n%s\nclient:\n%s", pair, s.Output(), c.Output())
			}
		})
	}
	wg.Wait()
	var outs []string
	for _, r := range results {
		outs = append(outs, r.server.out, r.client.out)
	}
	if f := clockFlake(outs...); f != "" {
		return f
	}
	want := results[0]
	if want.server.status == "exit status 0" || want.client.status == "exit status 0" {
		t.Fatalf("C-C with server %q and client %q: server %s, client %s; want both to fail", srv, cli, want.server.status, want.client.status)
	}
	for i, got := range results[1:] {
		pair := pairs[i+1]
		for _, w := range []struct {
			name      string
			want, got side
			peer      side
		}{{"server", want.server, got.server, got.client}, {"client", want.client, got.client, got.server}} {
			if w.got.status == w.want.status && slices.Equal(w.got.lines, w.want.lines) {
				continue
			}
			if w.peer.status != "exit status 0" && lostRace(w.got.status, w.got.lines, w.name == "client") {
				t.Logf("%s (server %q, client %q): the %s lost the race with its failed peer's close: %q (C-C's %s %q)",
					pair, srv, cli, w.name, w.got.lines, w.want.status, w.want.lines)
				continue
			}
			t.Errorf("%s (server %q, client %q): the %s's %s %q; C-C's %s %q", pair, srv, cli,
				w.name, w.got.status, w.got.lines, w.want.status, w.want.lines)
		}
	}
	return ""
}
