package bwtest

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/bw"
	"github.com/pureverbs/pureverbs/internal/pingpong/pptest"
	"github.com/pureverbs/pureverbs/internal/testkit"
)

// LatMatrixOn is MatrixOn for a latency tool: every pairing and size on
// the single-host device devName, each run checked with CheckLat, the Go
// tool's test description compared with the C tool's in the same role,
// and the device's resource counts back where they were.
func LatMatrixOn(t *testing.T, tool Tool, devName string, pairs []pptest.Pair, sizes []int, iters int, extra ...string) {
	matrix(t, tool, devName, pairs, sizes, iters, extra, func(t *testing.T, r *Run) bool {
		s, c := r.CheckLat(t, r.Host)
		if r.Tool.Verb.ReadsBack() {
			t.Logf("%s %s %d x %d B: average %.2f (client)", r.Dev, r.Pair, c.Iters, c.Size, c.Avg)
		} else {
			t.Logf("%s %s %d x %d B: average %.2f (server), %.2f (client)", r.Dev, r.Pair, c.Iters, c.Size, s.Avg, c.Avg)
		}
		return !slices.Contains(r.Extra, "--output=latency")
	})
}

// CheckLat verifies both outputs of a latency run: the address lines
// (as Check), the table's heading, and on both sides a line per size
// (every size of -a) with the run's iterations and sane numbers:
// positive, the minimum at most the typical, the average and the 99%
// percentile, the typical and the 99% at most the 99.9%, the
// standard deviation not negative. It returns the last line of each.
// ib_read_lat's server only serves the reads: it must print no heading
// and no line (its report is the zero LatReport).
func (r *Run) CheckLat(t testing.TB, gid string) (server, client bw.LatReport) {
	t.Helper()
	want := r.sizes()
	var last [2]bw.LatReport
	silent := func(i int, out string) bool {
		if i != 0 || !r.Tool.Verb.ReadsBack() {
			return false
		}
		if strings.Contains(out, "#bytes") || len(bw.ParseLatReports(out)) != 0 || len(bw.ParseLatDurReports(out)) != 0 ||
			slices.Contains(r.Extra, "--output=latency") && len(latencyLines(out)) != 0 {
			t.Errorf("server: the read server printed a heading or a result:\n%s", out)
		}
		return true
	}
	if slices.Contains(r.Extra, "--output=latency") {
		// The average of each size alone, on a line ("%lf").
		for i, side := range []struct{ name, out string }{{"server", r.Server}, {"client", r.Client}} {
			if silent(i, side.out) {
				continue
			}
			lines := latencyLines(side.out)
			if len(lines) != len(want) {
				t.Errorf("%s: --output=latency printed %d words, want %d:\n%s", side.name, len(lines), len(want), side.out)
				continue
			}
			for j, l := range lines {
				v, err := strconv.ParseFloat(l, 64)
				if err != nil || v <= 0 || !strings.Contains(l, ".") || len(l)-strings.Index(l, ".") != 7 {
					t.Errorf("%s: line %d %q is not a positive %%f", side.name, j, l)
				}
				last[i].Avg, last[i].Size, last[i].Iters = v, want[j], uint64(r.Iters)
			}
		}
		return last[0], last[1]
	}
	r.checkAddrs(t, gid)
	if slices.Contains(r.Extra, "-D") {
		// print_report_lat_duration: the turns of the measured stretch,
		// the average and the turns per second.
		for i, side := range []struct {
			name, out string
			tool      pptest.Side
		}{{"server", r.Server, r.Pair.Server}, {"client", r.Client, r.Pair.Client}} {
			if silent(i, side.out) {
				continue
			}
			rs := bw.ParseLatDurReports(side.out)
			// (--cpu_util adds a column.)
			hasHeading := slices.ContainsFunc(strings.Split(side.out, "\n"), func(l string) bool { return strings.HasPrefix(l, latHeadingDur) })
			sane := len(rs) == 1 && rs[0].Avg > 0 && rs[0].TPS > 0
			// As below: perftest's failed CPU MHz measure makes the C
			// tool's average inf and its rate 0 (seen on 6.12 with both
			// pairings at once, 2026-12-07); its turns still count.
			if len(rs) == 1 && mhzFailed(side.tool, side.out) && math.IsInf(rs[0].Avg, 1) && rs[0].TPS == 0 {
				t.Logf("%s (C): average inf after perftest's failed CPU MHz measure", side.name)
				sane = true
			}
			if !hasHeading || !sane || rs[0].Size != want[0] || rs[0].Iters == 0 {
				t.Errorf("%s: want the heading %q and one line of %d bytes with turns, a time and a rate:\n%s", side.name, latHeadingDur, want[0], side.out)
				continue
			}
			last[i] = bw.LatReport{Size: rs[0].Size, Iters: rs[0].Iters, Avg: rs[0].Avg}
		}
		return last[0], last[1]
	}
	for i, side := range []struct {
		name, out string
		tool      pptest.Side
	}{{"server", r.Server, r.Pair.Server}, {"client", r.Client, r.Pair.Client}} {
		if silent(i, side.out) {
			continue
		}
		if !slices.Contains(strings.Split(side.out, "\n"), latHeading) {
			t.Errorf("%s: no heading %q:\n%s", side.name, latHeading, side.out)
		}
		rs := bw.ParseLatReports(side.out)
		if len(rs) != len(want) {
			t.Errorf("%s: %d result lines, want %d:\n%s", side.name, len(rs), len(want), side.out)
			continue
		}
		for j, l := range rs {
			sane := l.Min > 0 && l.Min <= l.Typical && l.Min <= l.Avg && l.Typical <= l.Max && l.Min <= l.P99 &&
				l.P99 <= l.P99_9 && l.Typical <= l.P99_9 &&
				// perftest squares each sample's distance from the average
				// as a C int, which overflows ("-nan") in cycles, and in
				// microseconds once a sample is 46341 us (sqrt(2^31)) or
				// more from the average, as on a loaded host.
				(l.Stdev >= 0 || math.IsNaN(l.Stdev) && (slices.Contains(r.Extra, "-C") || l.Max-l.Avg >= 46340))
			// perftest measures the CPU's MHz again for each line; under
			// TCG load the measure can fail ("Correlation coefficient r^2:
			// ... < 0.9"), and the C tool's line is then all inf. That is
			// the C tool's own failure, not the Go peer's.
			if mhzFailed(side.tool, side.out) && math.IsInf(l.Avg, 1) && math.IsInf(l.Min, 1) {
				t.Logf("%s (C): line %d all inf after perftest's failed CPU MHz measure", side.name, j)
				sane = true
			}
			// --latency_gap=N: posts at least N us apart, so no sample
			// under N (read) or N/2 (write, send: halved round trips).
			if gap := r.latencyGap(); gap > 0 && !slices.Contains(r.Extra, "-C") {
				min := float64(gap) / 2
				if r.Tool.Verb.ReadsBack() {
					min = float64(gap)
				}
				if l.Min < min {
					t.Errorf("%s: line %d: t_min %.2f us under the gap's %.2f", side.name, j, l.Min, min)
				}
			}
			if l.Size != want[j] || l.Iters != uint64(r.Iters) || !sane {
				t.Errorf("%s: line %d: %+v, want %d bytes, %d iterations, sane times:\n%s", side.name, j, l, want[j], r.Iters, side.out)
			}
		}
		last[i] = rs[len(rs)-1]
	}
	return last[0], last[1]
}

// mhzWarning begins what perftest prints when its CPU MHz measure
// fails (get_cpu_mhz: "Correlation coefficient r^2: ... < 0.9").
const mhzWarning = "Correlation coefficient r^2"

// mhzFailed reports whether out is a C tool's output after perftest's
// CPU MHz measure failed, which makes its times inf: the C tool's own
// failure under TCG load, not the Go peer's.
func mhzFailed(tool pptest.Side, out string) bool {
	return tool == pptest.C && strings.Contains(out, mhzWarning)
}

// latencyGap is the run's --latency_gap=N (0 without).
func (r *Run) latencyGap() int {
	for _, a := range r.Extra {
		if v, ok := strings.CutPrefix(a, "--latency_gap="); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return 0
}

// latencyLines returns the lines of --output=latency's output but the
// notices both perftest and the Go tools print before the run (a rule
// and "Device not recognized to implement inline feature. Disabling it"
// on read) and perftest's complaint about its CPU MHz measure
// ("Correlation coefficient r^2: ... < 0.9", after which it prints its
// line anyway).
func latencyLines(out string) []string {
	var ls []string
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.Trim(l, "-") == "" || strings.HasPrefix(l, "Device not recognized to implement inline feature") ||
			strings.HasPrefix(l, mhzWarning) {
			continue
		}
		ls = append(ls, l)
	}
	return ls
}

// latHeading is RESULT_FMT_LAT, as the tools print it.
const latHeading = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] "

// latHeadingDur is RESULT_FMT_LAT_DUR.
const latHeadingDur = " #bytes        #iterations       t_avg[usec]    tps average"

// LatBadArgs are client command lines that fail, or reach the connect to
// a server that is not there, in the latency tools: perftest's
// refusals that are the latency tests' own (-b, -N, --run_infinitely,
// --output), and a few the bandwidth tools share (sizes, iterations,
// depths, connection types, GID indexes, an unknown device, an extra
// operand), -D's checks, and accepted options (-C, -U, -H, -a, -F, -D).
// Also the bandwidth tests' options as perftest's latency tests take
// them: -q and -l refused, -T and -L refused for want of rdma_cm and raw
// Ethernet, --use-srq refused but by send, and -Q, -w, -y, --report_gbits
// and --report-both accepted, without effect but send's -Q.
var LatBadArgs = [][]string{
	{"-b"}, {"-N"}, {"--run_infinitely"}, {"--output=bandwidth"}, {"--output=message_rate"}, {"--output=bw"},
	{"-s", "0"}, {"-s", "abc"}, {"-n", "0"}, {"-n", "4"}, {"-t", "0"}, {"-r", "2"},
	{"-x", "99"}, {"-i", "0"}, {"-u", "99"}, {"-S", "99"}, {"-I", "1000"}, {"-o", "4"},
	{"-c", "UD"}, {"-c", "uc"}, {"-e"}, {"-X", "0"},
	{"extra"}, {"-d", "nosuchdev0"}, {"-d", ""},
	{"-z"}, {"-R"}, {"-R", "-c", "UC"},
	{"-C"}, {"-U", "-H"}, {"-a"}, {"-F"}, {"--output=latency"}, {"-c", "UC"},
	// Duration: positive, more than twice the margin, not with -a.
	{"-D", "0"}, {"-D", "4", "-f", "2"}, {"-D", "4", "-a"}, {"-D", "4"},
	// --latency_gap: an int, not negative.
	{"--latency_gap=-1"}, {"--latency_gap", "x"}, {"--latency_gap=10"},
	{"-q", "2"}, {"-l", "2"}, {"-T", "32"}, {"-L", "10"}, {"-T", "300"}, {"--use-srq"},
	{"-Q", "4"}, {"-w", "10"}, {"-y", "10"}, {"--report_gbits"}, {"--report-both"},
	{"--tclass", "x"}, {"--retry_count=-1"}, {"--pkey_index", "100"}, {"--wait_destroy", "x"},
	{"--recv_post_list", "2"}, {"--recv_post_list", "x"}, {"--cpu_util"}, {"--mr_per_qp"},
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
	// -A: the atomic tests' operation; the other tests refuse it.
	{"-A", "CMP_AND_SWAP"}, {"-A", "fetch_and_add"},
	{"--dlid", "x"},
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

// LatTwoHosts runs a latency tool across the two hosts of make vmtest2
// (the server on this host, A; the client on the peer, B; over the wire
// device): Go against C both ways and Go against Go, each size with iters
// iterations and extra arguments on both sides, each run checked with
// CheckLat against both hosts' GIDs. The test descriptions of the Go and
// C tools in the same role must match, as on one host.
func LatTwoHosts(t *testing.T, tool Tool, sizes []int, iters int, extra ...string) {
	a, b := testkit.ThisHost(t), testkit.PeerHost(t)
	headers := map[headerKey][]string{}
	pairs := append([]pptest.Pair{{Server: pptest.Go, Client: pptest.Go}}, pptest.BothWays...)
	for _, pair := range pairs {
		for _, size := range sizes {
			t.Run(fmt.Sprintf("%s/size=%d", pair, size), func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
				defer cancel()
				r := &Run{Tool: tool, Pair: pair, Dev: testkit.WireDev, Host: a.Addr, Size: size, Iters: iters, Extra: extra,
					Place: Place{Server: a, Client: b}}
				r.Do(ctx, t)
				s, c := r.CheckLat(t, a.Addr+","+b.Addr)
				if tool.Verb.ReadsBack() {
					t.Logf("two hosts %s %d x %d B: average %.2f (client)", pair, c.Iters, c.Size, c.Avg)
				} else {
					t.Logf("two hosts %s %d x %d B: average %.2f (server), %.2f (client)", pair, c.Iters, c.Size, s.Avg, c.Avg)
				}
				if !slices.Contains(extra, "--output=latency") {
					headers[headerKey{size, false, pair.Server}] = Header(r.Server)
					headers[headerKey{size, true, pair.Client}] = Header(r.Client)
				}
			})
		}
	}
	sameHeaders(t, headers)
}

// LatRDMACM is the test of -R and -z in the latency tools: Go against C
// both ways on rxe0, the descriptions alike.
func LatRDMACM(t *testing.T, tool Tool) {
	LatMatrixOn(t, tool, "rxe0", pptest.BothWays, []int{2, 4096}, 300, "-R")
	LatMatrixOn(t, tool, "rxe0", pptest.BothWays, []int{64}, 300, "-z")
	if tool.Verb == bw.Send {
		LatMatrixOn(t, tool, "rxe0", pptest.BothWays, []int{2, 1024}, 300, "-R", "-c", "UD")
	}
}

// killBound is how soon after the kill PeerKilled's Go sides must have
// ended: they take the grace (3 s) after the peer's connection or rdma_cm
// ID is gone. A watch that does not run while the loop spins (sys.Yield)
// ended them about a minute late.
const killBound = 20 * time.Second

// PeerKilled is the test of a tool whose peer dies mid-run:
// ib_write_lat and ib_send_lat wait for the peer's next message
// (spinning on the buffer it writes, or polling the receive queue), and
// ib_read_lat's and ib_atomic_lat's clients and the bandwidth tools'
// clients for their own requests' completions, which rxe retries for
// ever at perftest's retry count of 7; nothing there says that the peer
// is no more, so perftest's side waits for ever. The Go tools watch the
// exchange's TCP connection (or, with -R and -z, its RDMA CM event
// channel) while they run (bw.peerWatch): once it closes and what they
// wait for has not come within the grace, they fail. Each run has a
// perftest peer that is killed once the client's traffic is under way:
// a Go client whose server dies, and for the latency tools, at the same
// time, a Go server whose client dies. Each Go side must exit non-zero
// within killBound of the kill, saying the peer has gone (a read or
// atomic latency server, which waits in the closing handshake, that the
// connection closed), and the kernel's resource counts must be back. For
// each mode (none: the defaults): the first on both kernels, the others
// split between them (KernelHalf; each mode waits out the grace, 3 s, and
// its set-up, one after the other).
func PeerKilled(t *testing.T, tool Tool, modes ...KillMode) {
	testkit.RequireVM(t)
	if len(modes) == 0 {
		modes = []KillMode{{}}
	}
	if len(modes) > 1 {
		others := KernelHalf(modes[1:])
		t.Logf("%d of the %d modes after the first on this kernel (KernelHalf)", len(others), len(modes)-1)
		modes = append(modes[:1:1], others...)
	}
	for _, m := range modes {
		mode := m.Both
		how := strings.Join(append([]string{"default"}, mode...), " ")
		if len(m.Go) > 0 {
			how += ", Go side " + strings.Join(m.Go, " ")
		}
		limit := killBound
		viaCM := slices.Contains(mode, "-R") || slices.Contains(mode, "-z")
		ctx, cancel := context.WithTimeout(context.Background(), limit+time.Minute)
		before := testkit.Resources(t, testkit.RxeDev)
		type run struct {
			goSide, victim *testkit.Peer
			client         *testkit.Peer // the side that sends
			role, says     string        // says: the Go side's error
		}
		var runs []run
		sides := []bool{false, true} // a Go client, a Go server
		if tool.Test == bw.BW {
			// The bandwidth servers wait in the closing handshake
			// (write, read), or have perftest's watchdog (send).
			sides = sides[:1]
		}
		for _, goServer := range sides {
			port := Port()
			args := append([]string{"-d", testkit.RxeDev, "-x", "1", "-p", strconv.Itoa(port), "-n", "100000000"}, mode...)
			srvBin, cliBin, role := tool.C(), tool.Go, "client"
			srvArgs, cliArgs := args, append(slices.Clone(args), m.Go...)
			if goServer {
				srvBin, cliBin, role = tool.Go, tool.C(), "server"
				srvArgs, cliArgs = cliArgs, args
			}
			srv := testkit.StartPeer(ctx, t, srvBin, srvArgs...)
			listen := testkit.WaitTCPListen
			if viaCM {
				listen = testkit.WaitCMListen
			}
			if err := listen(ctx, port); err != nil {
				t.Fatalf("%s: %v\n%s", how, err, srv.Output())
			}
			cli := testkit.StartPeer(ctx, t, cliBin, append(slices.Clone(cliArgs), testkit.RxeAddr)...)
			r := run{goSide: cli, victim: srv, role: role, client: cli, says: "The peer has gone"}
			if goServer {
				r.goSide, r.victim = srv, cli
				if tool.Verb == bw.Read || tool.Verb == bw.Atomic {
					r.says = "Failed to close connection between server and client"
				}
			}
			runs = append(runs, r)
		}
		for _, r := range runs {
			if err := WaitSending(ctx, t, testkit.RxeDev, r.client, 300); err != nil {
				t.Fatalf("%s, Go %s: no traffic (%v):\n%s\nits peer:\n%s", how, r.role, err, r.goSide.Output(), r.victim.Output())
			}
		}
		t0 := time.Now()
		for _, r := range runs {
			r.victim.Kill()
		}
		for _, r := range runs {
			select {
			case <-r.goSide.Done():
			case <-ctx.Done():
			}
		}
		for _, r := range runs {
			out := r.goSide.Output()
			select {
			case <-r.goSide.Done():
			default:
				t.Errorf("%s, Go %s: still running %v after its peer was killed:\n%s", how, r.role, time.Since(t0).Round(time.Second), out)
				continue
			}
			err := r.goSide.Wait()
			t.Logf("%s, Go %s: ended %v after its peer was killed: %v", how, r.role, r.goSide.Exited().Sub(t0).Round(time.Millisecond), err)
			switch {
			case r.goSide.Exited().Sub(t0) > limit:
				t.Errorf("%s, Go %s: ended %v after the kill, more than %v", how, r.role, r.goSide.Exited().Sub(t0), limit)
			case err == nil:
				t.Errorf("%s, Go %s: exit status 0 after its peer was killed:\n%s", how, r.role, out)
			case !strings.Contains(out, r.says):
				t.Errorf("%s, Go %s: no word of the peer's going:\n%s", how, r.role, out)
			}
		}
		cancel()
		if after := testkit.Resources(t, testkit.RxeDev); !maps.Equal(after, before) {
			t.Errorf("%s: resources after %v, before %v", how, after, before)
		}
	}
}

// KillMode is one run of PeerKilled: arguments for both sides, and for
// the Go side alone (-e: perftest's event mode against itself stalls on
// 6.12, docs/testing.md).
type KillMode struct{ Both, Go []string }
