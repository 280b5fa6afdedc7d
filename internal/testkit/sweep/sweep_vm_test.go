package sweep

import (
	"context"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pureverbs/pureverbs/internal/pingpong/pptest"
	"github.com/pureverbs/pureverbs/internal/testkit"
)

var (
	casesFlag = flag.Int("sweep.n", 0, "command lines per family (0: the sweep does not run; make sweep sets it)")
	seedFlag  = flag.Uint64("sweep.seed", 1, "the seed the lines are drawn from")
	server    = flag.Bool("sweep.server", false, "server lines (no operand, each stopped after -sweep.wait) instead of client lines")
	families  = flag.String("sweep.families", "pingpong,perftest,cm", "the families to draw from, comma-separated")
	wait      = flag.Duration("sweep.wait", 2*time.Second, "how long a server line runs before it is stopped")
	paired    = flag.Bool("sweep.paired", false, "connected lines (a server and a client, in the four pairings) instead of client lines")
	respell   = flag.Bool("sweep.respell", false, "run each line in another spelling getopt_long reads (Respell), drawn from the seed")
)

// basePort is the port of a sweep's first case (the next ones count up
// from it): above the suite's.
const basePort = 21000

// TestVMSweep runs the sweep that the flags ask for: every line with the
// C tool and the Go tool, in the same guest, and fails on each line
// where their normalized outputs and exit statuses (pptest.Normalize)
// differ, unless ByDesign explains it. Client lines run two at a time,
// each line's two programs at once (they reach for a port where nothing
// listens); server lines one program at a time, each killed after the
// wait, since both would listen on the line's port.
func TestVMSweep(t *testing.T) {
	testkit.RequireVM(t)
	if *casesFlag <= 0 {
		t.Skip("the differential sweep runs with -sweep.n (make sweep), not in make test")
	}
	if *paired {
		sweepPaired(t)
		return
	}
	total, differ, excused := 0, 0, map[string]int{}
	for _, f := range strings.Split(*families, ",") {
		cases := Cases(Family(f), *seedFlag, *casesFlag, *server, basePort)
		if *respell {
			cases = RespellCases(cases, *seedFlag)
		}
		t.Logf("%s: %d %s lines, seed %d", f, len(cases), map[bool]string{false: "client", true: "server"}[*server], *seedFlag)
		results := make(chan result, len(cases))
		if *server {
			for _, c := range cases {
				results <- runServer(t, c)
			}
		} else {
			runClients(t, cases, results)
		}
		close(results)
		for r := range results {
			total++
			if r.goNorm == r.cNorm {
				continue
			}
			if why := ByDesign(r.c, r.goOut, r.cOut, r.cEnd); why != "" {
				excused[why]++
				continue
			}
			differ++
			t.Errorf("%s: Go and C differ (-C +Go):\n%s\nGo:\n%s\nC:\n%s", r.c, cmp.Diff(strings.Split(r.cNorm, "\n"), strings.Split(r.goNorm, "\n")), r.goNorm, r.cNorm)
		}
	}
	designed := 0
	for why, n := range excused {
		t.Logf("by design, %d lines: %s", n, why)
		designed += n
	}
	t.Logf("%d lines: %d differ, %d differ by design, %d alike", total, differ, designed, total-differ-designed)
}

// result is one line's two runs.
type result struct {
	c             Case
	goOut, cOut   string // as printed
	goNorm, cNorm string // pptest.Normalize'd
	cEnd          string // how the C tool ended ("" for exit 0)
}

func newResult(c Case, goPeer, cPeer *testkit.Peer, goErr, cErr error) result {
	r := result{c: c, goOut: goPeer.Output(), cOut: cPeer.Output()}
	r.goNorm = pptest.Normalize(maskPointers(c, r.goOut), goErr, c.Go, c.C)
	r.cNorm = pptest.Normalize(maskPointers(c, r.cOut), cErr, c.Go, c.C)
	if cErr != nil {
		r.cEnd = cErr.Error()
	}
	return r
}

// runClients runs the client lines two at a time, each line's programs
// at once.
func runClients(t *testing.T, cases []Case, results chan<- result) {
	type run struct {
		c       Case
		cancel  context.CancelFunc
		goP, cP *testkit.Peer
	}
	finish := func(r run) {
		goErr, cErr := r.goP.Wait(), r.cP.Wait()
		r.cancel()
		results <- newResult(r.c, r.goP, r.cP, goErr, cErr)
	}
	var inFlight []run
	for _, c := range cases {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		r := run{c: c, cancel: cancel, goP: testkit.StartPeer(ctx, t, c.Go, c.Line()...), cP: testkit.StartPeer(ctx, t, c.C, c.Line()...)}
		inFlight = append(inFlight, r)
		if len(inFlight) == 2 {
			finish(inFlight[0])
			inFlight = inFlight[1:]
		}
	}
	for _, r := range inFlight {
		finish(r)
	}
}

// runServer runs a server line with the C tool, then with the Go tool,
// each killed after the wait if it has not ended by then. When only one
// of them was killed and the difference is not by design, that one runs
// again with five times the wait: the sweep compares what the tools do,
// not how fast (a client line of ucmatose -c 65536 that fails at once
// still creates and destroys 65536 IDs, about a second in the guest).
func runServer(t *testing.T, c Case) result {
	var peers [2]*testkit.Peer
	var errs [2]error
	var killed [2]bool
	run := func(i int, bin string, d time.Duration) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		p := testkit.StartPeer(ctx, t, bin, c.Line()...)
		killed[i] = false
		select {
		case <-p.Done():
		case <-time.After(d):
			p.Kill()
			killed[i] = true
		}
		errs[i] = p.Wait()
		peers[i] = p
	}
	bins := []string{c.C, c.Go}
	for i, bin := range bins {
		run(i, bin, *wait)
	}
	first := newResult(c, peers[1], peers[0], errs[1], errs[0])
	if killed[0] != killed[1] && ByDesign(c, first.goOut, first.cOut, first.cEnd) == "" {
		i := 0
		if killed[1] {
			i = 1
		}
		t.Logf("%s %v: killed after %v, run again with %v", bins[i], c.Line(), *wait, 5**wait)
		run(i, bins[i], 5**wait)
		return newResult(c, peers[1], peers[0], errs[1], errs[0])
	}
	return first
}
