package twohost

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/pingpong"
	"github.com/pureverbs/pureverbs/internal/pingpong/pptest"
	"github.com/pureverbs/pureverbs/internal/testkit"
)

var nextPort atomic.Int32

func init() { nextPort.Store(21000) }

// run is one client/server program pair across the wire.
type run struct {
	srvHost, cliHost *testkit.Host
	srv, cli         string   // programs
	args             []string // for both sides (the client also gets the server's address)
	ready            string   // what the server prints before it listens ("" = nothing)
	port             int

	srvOut, cliOut string
}

func (r *run) String() string {
	return fmt.Sprintf("%s on host %s, %s on host %s", r.srv, r.srvHost.Name, r.cli, r.cliHost.Name)
}

// do runs the server on srvHost, waits until it listens, runs the client on
// cliHost against the server's wire address, and waits for both; either
// exiting non-zero fails the test with both outputs.
func (r *run) do(ctx context.Context, t *testing.T) {
	t.Helper()
	r.port = int(nextPort.Add(1))
	args := append([]string{"-p", strconv.Itoa(r.port)}, r.args...)
	srv := r.srvHost.Start(ctx, t, r.srv, args...)
	if r.ready != "" {
		if err := srv.WaitForOutput(ctx, r.ready); err != nil {
			t.Fatalf("server %s on host %s: %v", r.srv, r.srvHost.Name, err)
		}
	}
	if err := r.srvHost.WaitListen(ctx, t, r.port); err != nil {
		t.Fatalf("server %s: %v\n%s", r.srv, err, srv.Output())
	}
	cli := r.cliHost.Start(ctx, t, r.cli, append(args, r.srvHost.Addr)...)
	cerr := cli.Wait()
	serr := srv.Wait()
	r.srvOut = strings.ReplaceAll(srv.Output(), "\r\n", "\n")
	r.cliOut = strings.ReplaceAll(cli.Output(), "\r\n", "\n")
	if cerr != nil || serr != nil {
		t.Fatalf("%s:\nserver (%s %s): %v\n%s\nclient (%s %s %s): %v\n%s", r,
			r.srv, strings.Join(args, " "), serr, r.srvOut, r.cli, strings.Join(args, " "), r.srvHost.Addr, cerr, r.cliOut)
	}
}

// checkPingPong checks a ping-pong run of size bytes and iters exchanges
// over nqp QPs: each side's remote address lines are the other side's
// local ones, each side's GID is its own host's wire GID, both summaries
// report size*iters*2 bytes, and -c found nothing invalid. It returns the
// summaries.
func (r *run) checkPingPong(t *testing.T, size, iters, nqp int) (srv, cli pingpong.Result) {
	t.Helper()
	sl, sr := pptest.Addrs(r.srvOut)
	cl, cr := pptest.Addrs(r.cliOut)
	if len(sl) != nqp || len(sr) != nqp || len(cl) != nqp || len(cr) != nqp {
		t.Errorf("%s: address lines: server %d local %d remote, client %d local %d remote; want %d each\nserver:\n%s\nclient:\n%s",
			r, len(sl), len(sr), len(cl), len(cr), nqp, r.srvOut, r.cliOut)
	} else {
		for i := range nqp {
			if sl[i] != asLocal(cr[i]) || cl[i] != asLocal(sr[i]) {
				t.Errorf("%s: QP %d: server local %+v remote %+v; client local %+v remote %+v", r, i, sl[i], sr[i], cl[i], cr[i])
			}
			if sl[i].GID != r.srvHost.GID() || cl[i].GID != r.cliHost.GID() {
				t.Errorf("%s: QP %d: server GID %s, client GID %s; want %s and %s", r, i, sl[i].GID, cl[i].GID, r.srvHost.GID(), r.cliHost.GID())
			}
		}
	}
	want := int64(size) * int64(iters) * 2
	for _, o := range []struct {
		name string
		out  string
		res  *pingpong.Result
	}{{"server", r.srvOut, &srv}, {"client", r.cliOut, &cli}} {
		res, err := pingpong.ParseSummary(o.out)
		if err != nil {
			t.Errorf("%s: %s: %v", r, o.name, err)
			continue
		}
		*o.res = res
		if res.Bytes != want || res.Iters != int64(iters) {
			t.Errorf("%s: %s: summary says %d bytes and %d iters, want %d and %d:\n%s", r, o.name, res.Bytes, res.Iters, want, iters, o.out)
		}
		if strings.Contains(strings.ToLower(o.out), "invalid data") {
			t.Errorf("%s: %s: -c found invalid data:\n%s", r, o.name, o.out)
		}
	}
	return srv, cli
}

func asLocal(a pptest.Addr) pptest.Addr {
	a.Remote = false
	return a
}

// ppTools are the ping-pong tools, each with the arguments both sides get
// across the wire: -c validates every buffer; 4 KiB messages are four
// packets at the path MTU of 1024 (e1000's 1500-byte frames); UD
// messages must fit one. The -e rows sleep on completion events, which
// here come from the wire: the channel's arm bookkeeping (uverbs/arm.go)
// parks most waits without a read, and a wait that slept through an
// event would hang the run.
var ppTools = []struct {
	tool        pptest.Tool
	size, iters int
	nqp         int
	extra       []string
	label       string // added to the subtest's name
}{
	{pptest.Tool{Kind: pingpong.RC, Go: "rcpingpong", C: "ibv_rc_pingpong"}, 4096, 100, 1, nil, ""},
	{pptest.Tool{Kind: pingpong.UC, Go: "ucpingpong", C: "ibv_uc_pingpong"}, 4096, 100, 1, nil, ""},
	{pptest.Tool{Kind: pingpong.UD, Go: "udpingpong", C: "ibv_ud_pingpong"}, 1000, 100, 1, nil, ""},
	{pptest.Tool{Kind: pingpong.SRQ, Go: "srqpingpong", C: "ibv_srq_pingpong"}, 4096, 50, 4, []string{"-q", "4"}, ""},
	{pptest.Tool{Kind: pingpong.RC, Go: "rcpingpong", C: "ibv_rc_pingpong"}, 4096, 100, 1, []string{"-e"}, "-events"},
	{pptest.Tool{Kind: pingpong.UD, Go: "udpingpong", C: "ibv_ud_pingpong"}, 1000, 100, 1, []string{"-e"}, "-events"},
	{pptest.Tool{Kind: pingpong.SRQ, Go: "srqpingpong", C: "ibv_srq_pingpong"}, 4096, 50, 4, []string{"-q", "4", "-e"}, "-events"},
}

// TestTwoHostPingPong runs every Go ping-pong tool against its rdma-core
// counterpart across the wire, both ways: the Go server on host A with the
// C client on host B, and the C server on host B with the Go client on
// host A. Both sides must exit 0, agree on each other's QPN, PSN and GID
// (each its own host's), report size*iters*2 bytes, and -c must find every
// buffer intact.
func TestTwoHostPingPong(t *testing.T) {
	a, b := testkit.ThisHost(t), testkit.PeerHost(t)
	for _, tt := range ppTools {
		for _, dir := range []struct {
			name             string
			srvHost, cliHost *testkit.Host
			srv, cli         pptest.Side
		}{
			{"go-server-A-c-client-B", a, b, pptest.Go, pptest.C},
			{"c-server-B-go-client-A", b, a, pptest.C, pptest.Go},
		} {
			t.Run(tt.tool.Go+tt.label+"/"+dir.name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
				defer cancel()
				args := append([]string{"-d", testkit.WireDev, "-g", "1", "-s", strconv.Itoa(tt.size), "-n", strconv.Itoa(tt.iters), "-c"}, tt.extra...)
				r := &run{srvHost: dir.srvHost, cliHost: dir.cliHost, srv: tt.tool.Bin(dir.srv), cli: tt.tool.Bin(dir.cli),
					args: args, ready: "local address"}
				r.do(ctx, t)
				s, c := r.checkPingPong(t, tt.size, tt.iters, tt.nqp)
				t.Logf("%s: %d x %d B: server %.0f usec/iter, client %.0f usec/iter", r, tt.iters, tt.size, s.USecPerIter, c.USecPerIter)
			})
		}
	}
}

// bwLine is perftest's result line: #bytes #iterations BW peak BW average
// MsgRate.
var bwLine = regexp.MustCompile(`(?m)^\s*(\d+)\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s*$`)

// TestTwoHostCTools: rdma-core's own tools across the wire, as the
// topology was first verified with: ibv_rc_pingpong (server on A) and
// ibv_ud_pingpong (server on B), and perftest's ib_write_bw (server on A,
// RDMA writes from B).
func TestTwoHostCTools(t *testing.T) {
	a, b := testkit.ThisHost(t), testkit.PeerHost(t)
	for _, c := range []struct {
		name             string
		srvHost, cliHost *testkit.Host
		size, iters      int
	}{
		{"ibv_rc_pingpong", a, b, 4096, 100},
		{"ibv_ud_pingpong", b, a, 1000, 100},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			r := &run{srvHost: c.srvHost, cliHost: c.cliHost, srv: c.name, cli: c.name, ready: "local address",
				args: []string{"-d", testkit.WireDev, "-g", "1", "-s", strconv.Itoa(c.size), "-n", strconv.Itoa(c.iters), "-c"}}
			r.do(ctx, t)
			s, cl := r.checkPingPong(t, c.size, c.iters, 1)
			t.Logf("%s: %d x %d B: server %.0f usec/iter, client %.0f usec/iter", r, c.iters, c.size, s.USecPerIter, cl.USecPerIter)
		})
	}
	t.Run("ib_write_bw", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		const size, iters = 65536, 500
		r := &run{srvHost: a, cliHost: b, srv: "ib_write_bw", cli: "ib_write_bw",
			args: []string{"-d", testkit.WireDev, "-x", "1", "-s", strconv.Itoa(size), "-n", strconv.Itoa(iters)}}
		r.do(ctx, t)
		for _, o := range []struct{ name, out string }{{"server", r.srvOut}, {"client", r.cliOut}} {
			m := bwLine.FindStringSubmatch(o.out)
			if m == nil || m[1] != strconv.Itoa(size) || m[2] != strconv.Itoa(iters) {
				t.Errorf("%s: no result line for %d x %d B:\n%s", o.name, iters, size, o.out)
				continue
			}
			avg, _ := strconv.ParseFloat(m[4], 64)
			if avg <= 0 {
				t.Errorf("%s: average bandwidth %s MB/s:\n%s", o.name, m[4], o.out)
			}
			t.Logf("%s: %s: %d x %d B, average %s MB/s (peak %s)", r, o.name, iters, size, m[4], m[3])
		}
	})
}
