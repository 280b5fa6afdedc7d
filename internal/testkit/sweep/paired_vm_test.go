package sweep

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pureverbs/pureverbs/internal/pingpong/pptest"
	"github.com/pureverbs/pureverbs/internal/testkit"
)

// pairing is which tool runs each side.
type pairing struct{ server, client string }

// sweepPaired runs the connected lines (-sweep.paired): each line in the
// four pairings, one after the other, and fails on each pairing whose
// two outputs and exit statuses (Mask, then pptest.Normalize) differ from
// C-C's in two runs. A line whose C-C run does not repeat itself is left
// out with a log line: there is nothing to hold the Go tools to.
func sweepPaired(t *testing.T) {
	total, differ, unstable, excused := 0, 0, 0, map[string]int{}
	for _, f := range strings.Split(*families, ",") {
		cases := PairedCases(Family(f), *seedFlag, *casesFlag, basePort)
		if *respell {
			cases = RespellPaired(cases, *seedFlag)
		}
		t.Logf("%s: %d connected lines, seed %d", f, len(cases), *seedFlag)
		for i, c := range cases {
			total++
			// A subtest per line: only a failing line's peers are logged.
			t.Run(fmt.Sprintf("%s/%d/%s", f, i, c.Go), func(t *testing.T) {
				d, u, why := pairedLine(t, c)
				differ += d
				unstable += u
				for _, w := range why {
					excused[w]++
				}
			})
		}
	}
	for why, n := range excused {
		t.Logf("by design, %d pairings: %s", n, why)
	}
	t.Logf("%d connected lines: %d pairings differ, %d lines with a C-C run that does not repeat", total, differ, unstable)
}

// pairedLine runs connected line c in the four pairings and fails t on
// each pairing that differs from C-C twice. It returns how many did
// (differ), whether C-C did not repeat itself (unstable: 1, and nothing
// else is checked), and the ByDesign reasons that excused the others.
func pairedLine(t *testing.T, c Paired) (differ, unstable int, excused []string) {
	pairings := []pairing{{c.C, c.ClientC()}, {c.Go, c.ClientGo()}, {c.Go, c.ClientC()}, {c.C, c.ClientGo()}}
	var outs [4]outcome
	for i, pr := range pairings {
		outs[i] = runPaired(t, c, pr)
	}
	late := testkit.KernelAtLeast(6, 12)
	var bad []int
	for i := 1; i < 4; i++ {
		if got, want := compared(c, i, outs[i], outs, late); got != want {
			bad = append(bad, i)
		}
	}
	if len(bad) == 0 {
		return 0, 0, nil
	}
	// Once more: C-C, then each pairing that differed.
	if again, want := compared(c, 0, runPaired(t, c, pairings[0]), outs, late); again != want {
		t.Logf("%s: C-C differs from itself; left out (-first +second):\n%s", c, cmp.Diff(outs[0].String(), again.String()))
		return 0, 1, nil
	}
	for _, i := range bad {
		first, _ := compared(c, i, outs[i], outs, late)
		again, want := compared(c, i, runPaired(t, c, pairings[i]), outs, late)
		if again == want {
			t.Logf("%s: %s-server-%s-client differed once, then agreed (-reference +first):\n%s", c, pairings[i].server, pairings[i].client, cmp.Diff(want.String(), first.String()))
			continue
		}
		if why := pairedByDesign(c, again, want); why != "" {
			excused = append(excused, why)
			continue
		}
		differ++
		t.Errorf("%s: %s-server-%s-client differs from its reference twice (-reference +pairing):\n%s", c, pairings[i].server, pairings[i].client, cmp.Diff(strings.Split(want.String(), "\n"), strings.Split(again.String(), "\n")))
	}
	return differ, 0, excused
}

// pairedByDesign is ByDesign for a connected line's pairing (o) against
// C-C's run (cc).
func pairedByDesign(c Paired, o, cc outcome) string {
	if pingpongTools[c.Go] && itersOf(c.Server) != itersOf(c.Client) {
		return "the ping-pong server and client run different -n: each ends after its own count, and whether the longer one's is met " +
			"depends on how send completions race receives (scnt counts completed sends), in C as in Go"
	}
	for _, args := range [][]string{c.Server, c.Client} {
		if why := ByDesign(Case{C: c.C, Go: c.Go, Args: args}, o.server+"\n"+o.client, cc.server+"\n"+cc.client, ""); why != "" {
			return why
		}
	}
	return ""
}

// serverGrace is how long a server may go on after its client ended
// before it is stopped (a server whose client gave up may wait for it
// for ever, in C as in Go).
const serverGrace = 5 * time.Second

// runPaired runs line c's server (pr.server), waits until it listens (or
// exits), runs the client (pr.client) and waits for both, stopping the
// server serverGrace after the client's end. Each side's output is
// masked and normalized with its status.
func runPaired(t *testing.T, c Paired, pr pairing) outcome {
	ctx, cancel := context.WithTimeout(context.Background(), c.RunLimit())
	defer cancel()
	srv := testkit.StartPeer(ctx, t, pr.server, c.ServerLine()...)
	wctx, wcancel := srv.UntilExit(ctx)
	switch {
	case c.Ready != "":
		_ = srv.WaitForOutput(wctx, c.Ready) // a server that never gets there shows in its output
	case c.CM:
		_ = testkit.WaitCMListen(wctx, c.Port) // a server that never listens shows in its output
	default:
		_ = testkit.WaitTCPListen(wctx, c.Port)
	}
	wcancel()
	cli := testkit.StartPeer(ctx, t, pr.client, c.ClientLine()...)
	cerr := cli.Wait()
	select {
	case <-srv.Done():
	case <-time.After(serverGrace):
		srv.Kill()
	}
	serr := srv.Wait()
	if ctx.Err() != nil {
		cerr = errors.Join(cerr, errors.New("the run timed out"))
	}
	names := []string{c.Go, c.C, c.ClientGo(), c.ClientC()}
	return outcome{
		server: pptest.Normalize(Mask(srv.Output()), serr, names...),
		client: pptest.Normalize(Mask(cli.Output()), cerr, names...),
	}
}

// pingpongTools are the Go ping-pong ports (Paired.Go).
var pingpongTools = map[string]bool{"rcpingpong": true, "ucpingpong": true, "udpingpong": true, "srqpingpong": true}

// itersOf is the last -n (or --iters, abbreviated as getopt_long takes
// it) of a ping-pong command line, "" when none is given.
func itersOf(args []string) string {
	last := ""
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-n" && i+1 < len(args):
			last, i = args[i+1], i+1
		case strings.HasPrefix(a, "-n") && len(a) > 2:
			last = a[2:]
		case strings.HasPrefix(a, "--it"):
			name, v, eq := strings.Cut(a[2:], "=")
			if !strings.HasPrefix("iters", name) {
				continue
			}
			if eq {
				last = v
			} else if i+1 < len(args) {
				last, i = args[i+1], i+1
			}
		}
	}
	return last
}
