package main

// VM tests (KERNEL=6.12 make vmtest VMPKGS=./cmd/readbw): readbw against
// perftest's ib_read_bw in both directions (on rxe0; -a and Go against Go on rxelo).

import (
	"testing"

	"github.com/pureverbs/pureverbs/internal/bw"
	"github.com/pureverbs/pureverbs/internal/bw/bwtest"
	"github.com/pureverbs/pureverbs/internal/pingpong/pptest"
	"github.com/pureverbs/pureverbs/internal/testkit"
)

var tool = bwtest.Tool{Verb: bw.Read, Go: "readbw"}

// TestVMAgainstC: Go server with C client and C server with Go client,
// 2 B (completions moderated every 100 messages) and 64 KiB (every
// message completes), on rxe0: both sides exit 0, print each
// other's QPN, PSN, rkey, address and GID, and a result line for the run.
func TestVMAgainstC(t *testing.T) {
	bwtest.MatrixOn(t, tool, "rxe0", pptest.BothWays, []int{2, 65536}, 100)
}

// TestVMGoGo: the Go tool against itself on rxelo, with other depths and
// moderation.
func TestVMGoGo(t *testing.T) {
	bwtest.MatrixOn(t, tool, "rxelo", []pptest.Pair{{Server: pptest.Go, Client: pptest.Go}}, []int{4096}, 300,
		"-t", "16", "-Q", "4")
}

// TestVMEvents: -e, Go against C (bwtest.Events).
func TestVMEvents(t *testing.T) { bwtest.Events(t, tool) }

// TestVMDuration: -D, Go against C both ways (bwtest.Duration).
func TestVMDuration(t *testing.T) {
	testkit.OneKernel(t, testkit.Kernel612)
	bwtest.Duration(t, tool)
}

// TestVMPostList: -l, Go against C both ways (bwtest.PostList).
func TestVMPostList(t *testing.T) { bwtest.PostList(t, tool) }

// TestVMQPs: -q, Go against C both ways (bwtest.QPs).
func TestVMQPs(t *testing.T) { bwtest.QPs(t, tool) }

// TestVMAllSizes: -a (2 B to 8 MiB, a line per size on the client, the last one on the server),
// Go against C on rxelo, one way per kernel (bwtest.AllSizes).
func TestVMAllSizes(t *testing.T) { bwtest.AllSizes(t, tool) }

// TestVMUnsupported: an unknown device fails in both tools with
// perftest's message.
func TestVMUnsupported(t *testing.T) {
	bwtest.SameFailure(t, tool, "IB device nosuchdev0 not found", "-d", "nosuchdev0")
}

// TestVMBadArgs: the client command lines of bwtest.BadArgs fail (or
// reach the connect to a server that is not there) exactly as perftest's
// do: same exit status, same lines.
func TestVMBadArgs(t *testing.T) {
	bwtest.SameAsC(t, tool, append([][]string{{"-g"}}, bwtest.BadArgs...), nil)
}

// TestVMForever: --run_infinitely, Go against C both ways (bwtest.Forever).
func TestVMForever(t *testing.T) {
	testkit.OneKernel(t, testkit.Kernel61)
	bwtest.Forever(t, tool)
}

// TestVMBidirectional: -b, Go against C both ways (bwtest.Bidirectional).
func TestVMBidirectional(t *testing.T) { bwtest.Bidirectional(t, tool) }

// TestVMOutput: --output, Go against C both ways (bwtest.Output).
func TestVMOutput(t *testing.T) {
	testkit.OneKernel(t, testkit.Kernel612)
	bwtest.Output(t, tool)
}

// TestVMLimits: -w and -y, Go against C both ways (bwtest.Limits).
func TestVMLimits(t *testing.T) {
	testkit.OneKernel(t, testkit.Kernel61)
	bwtest.Limits(t, tool)
}

// TestVMMRPerQP: --mr_per_qp with four QPs, Go against C both ways (bwtest.MRPerQP).
func TestVMMRPerQP(t *testing.T) { bwtest.MRPerQP(t, tool) }

// TestVMOutJSON: --out_json and --out_json_file, Go against C both ways (bwtest.OutJSON).
func TestVMOutJSON(t *testing.T) {
	testkit.OneKernel(t, testkit.Kernel612)
	bwtest.OutJSON(t, tool)
}

// TestVMWarmUp: --perform_warm_up, Go against C both ways at 64 KiB
// (a completion per read, where perftest's warm-up ends), and Go
// against Go with -a and the default moderation (where perftest's would
// wait for ever).
func TestVMWarmUp(t *testing.T) {
	testkit.OneKernel(t, testkit.Kernel612)
	bwtest.MatrixOn(t, tool, "rxe0", pptest.BothWays, []int{65536}, 200, "--perform_warm_up")
	bwtest.MatrixOn(t, tool, "rxelo", []pptest.Pair{{Server: pptest.Go, Client: pptest.Go}}, []int{64}, 5, "--perform_warm_up", "-a", "-b")
}

// TestVMODP: --odp on rxe (no on-demand paging), Go against C both ways (bwtest.ODP).
func TestVMODP(t *testing.T) { bwtest.ODP(t, tool) }

// TestVMRateLimit: --rate_limit and its options, Go against C both ways (bwtest.RateLimit).
func TestVMRateLimit(t *testing.T) {
	testkit.OneKernel(t, testkit.Kernel612)
	bwtest.RateLimit(t, tool)
}

// TestVMCounters: -W (--report-counters) with rxe's packet counters, Go against C both ways (bwtest.Counters).
func TestVMCounters(t *testing.T) {
	testkit.OneKernel(t, testkit.Kernel612)
	bwtest.Counters(t, tool)
}

// TestVMRDMACM: -R and -z, Go against C both ways (bwtest.RDMACM).
func TestVMRDMACM(t *testing.T) { bwtest.RDMACM(t, tool) }

// TestTwoHostRDMACM: -R across the two hosts, Go against C both ways
// (bwtest.TwoHostsRDMACM).
func TestTwoHostRDMACM(t *testing.T) { bwtest.TwoHostsRDMACM(t, tool) }

// TestVMServerKilled: the server dies mid-run; the Go client fails as
// perftest's does, within a bound (bwtest.ServerKilled).
func TestVMServerKilled(t *testing.T) { bwtest.ServerKilled(t, tool) }

// TestVMMismatched: a server with two QPs against a client with one; the
// exchanges fall out of step, and every pairing of Go and C ends as C-C
// does (bwtest.Mismatched).
func TestVMMismatched(t *testing.T) {
	testkit.OneKernel(t, testkit.Kernel612)
	bwtest.Mismatched(t, tool, []string{"-q", "2"}, []string{"-q", "1"})
}

// TestVMServerGone: perftest's server dies mid-run, the Go client polling
// or sleeping on events (-e): the client, whose reads rxe retries for
// ever at perftest's retry count of 7, exits with an error where
// ib_read_bw's would wait for ever (bwtest.PeerKilled).
func TestVMServerGone(t *testing.T) {
	bwtest.PeerKilled(t, tool, bwtest.KillMode{}, bwtest.KillMode{Go: []string{"-e"}})
}
