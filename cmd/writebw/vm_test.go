package main

// VM tests (KERNEL=6.12 make vmtest VMPKGS=./cmd/writebw): writebw against
// perftest's ib_write_bw in both directions (on rxe0; -a and Go against Go on rxelo).

import (
	"testing"

	"github.com/pureverbs/pureverbs/internal/bw"
	"github.com/pureverbs/pureverbs/internal/bw/bwtest"
	"github.com/pureverbs/pureverbs/internal/pingpong/pptest"
	"github.com/pureverbs/pureverbs/internal/testkit"
)

var tool = bwtest.Tool{Verb: bw.Write, Go: "writebw"}

// TestVMAgainstC: Go server with C client and C server with Go client,
// 2 B (completions moderated every 100 messages) and 64 KiB (every
// message completes), on rxe0: both sides exit 0, print each
// other's QPN, PSN, rkey, address and GID, and a result line for the run.
func TestVMAgainstC(t *testing.T) {
	bwtest.MatrixOn(t, tool, "rxe0", pptest.BothWays, []int{2, 65536}, 100)
}

// TestVMGoGo: the Go tool against itself on rxelo, with other depths,
// moderation, and inline messages.
func TestVMGoGo(t *testing.T) {
	bwtest.MatrixOn(t, tool, "rxelo", []pptest.Pair{{Server: pptest.Go, Client: pptest.Go}}, []int{4096}, 300,
		"-t", "16", "-Q", "4")
	// Inline messages (perftest disables -I on devices it does not know,
	// rxe among them; the Go tools send inline whatever the QP allows).
	bwtest.MatrixOn(t, tool, "rxelo", []pptest.Pair{{Server: pptest.Go, Client: pptest.Go}}, []int{64}, 300, "-I", "64")
}

// TestVMLongOptions: perftest's --tclass (the GRH's traffic class),
// --pkey_index, --wait_destroy (the resources stay a second after the
// run, with perftest's line), and --retry_count and --flow_label (checked,
// and unused without rdma_cm), Go against C both ways.
func TestVMLongOptions(t *testing.T) {
	testkit.OneKernel(t, testkit.Kernel61)
	bwtest.MatrixOn(t, tool, "rxe0", pptest.BothWays, []int{4096}, 100,
		"--tclass", "32", "--pkey_index", "1", "--wait_destroy", "1", "--retry_count", "3", "--flow_label", "5")
}

// TestVMDuration: -D, Go against C both ways (bwtest.Duration).
func TestVMDuration(t *testing.T) {
	testkit.OneKernel(t, testkit.Kernel61)
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
	testkit.OneKernel(t, testkit.Kernel612)
	bwtest.Forever(t, tool)
}

// TestVMBidirectional: -b, Go against C both ways (bwtest.Bidirectional).
func TestVMBidirectional(t *testing.T) { bwtest.Bidirectional(t, tool) }

// TestVMWarmUp: --perform_warm_up, which write_bw.c honours as read_bw.c
// does (the Go tool once took it and did nothing): Go against C both
// ways at 64 KiB (a completion per write, where perftest's warm-up ends),
// and Go against Go with -a and the default moderation (where perftest's
// would wait for ever).
func TestVMWarmUp(t *testing.T) {
	testkit.OneKernel(t, testkit.Kernel61)
	bwtest.MatrixOn(t, tool, "rxe0", pptest.BothWays, []int{65536}, 200, "--perform_warm_up")
	bwtest.MatrixOn(t, tool, "rxelo", []pptest.Pair{{Server: pptest.Go, Client: pptest.Go}}, []int{64}, 5, "--perform_warm_up", "-a", "-b")
}

// TestVMUC: -c UC, Go against C both ways (bwtest.UC).
func TestVMUC(t *testing.T) { bwtest.UC(t, tool) }

// TestVMOutput: --output, Go against C both ways (bwtest.Output).
func TestVMOutput(t *testing.T) {
	testkit.OneKernel(t, testkit.Kernel61)
	bwtest.Output(t, tool)
}

// TestVMLimits: -w and -y, Go against C both ways (bwtest.Limits).
func TestVMLimits(t *testing.T) {
	testkit.OneKernel(t, testkit.Kernel612)
	bwtest.Limits(t, tool)
}

// TestVMMRPerQP: --mr_per_qp with four QPs, Go against C both ways (bwtest.MRPerQP).
func TestVMMRPerQP(t *testing.T) { bwtest.MRPerQP(t, tool) }

// TestVMCPUUtil: --cpu_util with -D, Go against C both ways (bwtest.CPUUtil).
func TestVMCPUUtil(t *testing.T) {
	testkit.OneKernel(t, testkit.Kernel612)
	bwtest.CPUUtil(t, tool)
}

// TestVMOutJSON: --out_json and --out_json_file, Go against C both ways (bwtest.OutJSON).
func TestVMOutJSON(t *testing.T) {
	testkit.OneKernel(t, testkit.Kernel61)
	bwtest.OutJSON(t, tool)
}

// TestVMGIDChoice: the GID chosen without -x, and with --ipv6, Go against C both ways (bwtest.GIDChoice).
func TestVMGIDChoice(t *testing.T) {
	testkit.OneKernel(t, testkit.Kernel612)
	bwtest.GIDChoice(t, tool)
}

// TestVMHugePages: --use_hugepages, failing without huge pages and running with them, Go against C both ways (bwtest.HugePages).
func TestVMHugePages(t *testing.T) { bwtest.HugePages(t, tool) }

// TestVMMmap: --mmap and --mmap-offset, Go against C both ways (bwtest.Mmap).
func TestVMMmap(t *testing.T) { bwtest.Mmap(t, tool) }

// TestVMODP: --odp on rxe (no on-demand paging), Go against C both ways (bwtest.ODP).
func TestVMODP(t *testing.T) { bwtest.ODP(t, tool) }

// TestVMNoVersions: --dont_xchg_versions, Go against C both ways (bwtest.NoVersions).
func TestVMNoVersions(t *testing.T) {
	testkit.OneKernel(t, testkit.Kernel61)
	bwtest.NoVersions(t, tool)
}

// TestVMRateLimit: --rate_limit and its options, Go against C both ways (bwtest.RateLimit).
func TestVMRateLimit(t *testing.T) {
	testkit.OneKernel(t, testkit.Kernel61)
	bwtest.RateLimit(t, tool)
}

// TestVMCounters: -W (--report-counters) with rxe's packet counters, Go against C both ways (bwtest.Counters).
func TestVMCounters(t *testing.T) {
	testkit.OneKernel(t, testkit.Kernel61)
	bwtest.Counters(t, tool)
}

// TestVMForceLink: --force-link=Ethernet and =IB, Go against C both ways (bwtest.ForceLink).
func TestVMForceLink(t *testing.T) {
	testkit.OneKernel(t, testkit.Kernel61)
	bwtest.ForceLink(t, tool)
}

// TestVMDLID: --dlid, Go against C both ways (bwtest.DLID).
func TestVMDLID(t *testing.T) {
	testkit.OneKernel(t, testkit.Kernel612)
	bwtest.DLID(t, tool)
}

// TestVMRDMACM: -R and -z, Go against C both ways (bwtest.RDMACM).
func TestVMRDMACM(t *testing.T) { bwtest.RDMACM(t, tool) }

// TestTwoHostRDMACM: -R across the two hosts, Go against C both ways
// (bwtest.TwoHostsRDMACM).
func TestTwoHostRDMACM(t *testing.T) { bwtest.TwoHostsRDMACM(t, tool) }

// TestVMServerKilled: the server dies mid-run; the Go client fails as
// perftest's does, within a bound (bwtest.ServerKilled).
func TestVMServerKilled(t *testing.T) { bwtest.ServerKilled(t, tool) }

// TestVMMismatched: a server and a client with different numbers of QPs
// (-q 2 against -q 1, and -q 1 against -q 2) fall out of step in their
// handshakes, and a client that writes more than the server's buffer
// (-s 65536 against -s 4096) fails with a remote access error and leaves
// its server to find the connection closed; every pairing of Go and C
// ends as C-C does (bwtest.Mismatched).
func TestVMMismatched(t *testing.T) {
	testkit.OneKernel(t, testkit.Kernel61)
	bwtest.Mismatched(t, tool, []string{"-q", "2"}, []string{"-q", "1"})
	bwtest.Mismatched(t, tool, []string{"-q", "1"}, []string{"-q", "2"})
	bwtest.Mismatched(t, tool, []string{"-s", "4096"}, []string{"-s", "65536"})
}

// TestVMServerGone: perftest's server dies mid-run: the Go client, whose
// writes rxe retries for ever at perftest's retry count of 7, exits with
// an error where ib_write_bw's would wait for ever (bwtest.PeerKilled).
func TestVMServerGone(t *testing.T) { bwtest.PeerKilled(t, tool) }
