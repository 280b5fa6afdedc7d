package main

// VM tests (KERNEL=6.12 make vmtest VMPKGS=./cmd/sendbw): sendbw against
// perftest's ib_send_bw in both directions (on rxe0; -a and Go against Go on rxelo).

import (
	"context"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/bw"
	"github.com/pureverbs/pureverbs/internal/bw/bwtest"
	"github.com/pureverbs/pureverbs/internal/pingpong/pptest"
	"github.com/pureverbs/pureverbs/internal/testkit"
)

var tool = bwtest.Tool{Verb: bw.Send, Go: "sendbw"}

// TestVMAgainstC: Go server with C client and C server with Go client,
// 2 B (completions moderated every 100 messages) and 64 KiB (every
// message completes), on rxe0: both sides exit 0, print each
// other's QPN, PSN and GID, and a result line for the run.
func TestVMAgainstC(t *testing.T) {
	bwtest.MatrixOn(t, tool, "rxe0", pptest.BothWays, []int{2, 65536}, 100)
}

// TestVMGoGo: the Go tool against itself on rxelo, with other depths,
// moderation, inline messages and an RX depth smaller than the
// iterations.
func TestVMGoGo(t *testing.T) {
	bwtest.MatrixOn(t, tool, "rxelo", []pptest.Pair{{Server: pptest.Go, Client: pptest.Go}}, []int{4096}, 300,
		"-t", "16", "-Q", "4", "-r", "32")
	// Inline messages (perftest disables -I on devices it does not know,
	// rxe among them; the Go tools send inline whatever the QP allows).
	bwtest.MatrixOn(t, tool, "rxelo", []pptest.Pair{{Server: pptest.Go, Client: pptest.Go}}, []int{64}, 300, "-I", "64")
}

// TestVMEvents: -e, Go against C (bwtest.Events).
func TestVMEvents(t *testing.T) { bwtest.Events(t, tool) }

// TestVMDuration: -D, Go against C both ways (bwtest.Duration).
func TestVMDuration(t *testing.T) {
	testkit.OneKernel(t, testkit.Kernel61)
	bwtest.Duration(t, tool)
}

// TestVMClientKilled: the client dies mid-run (SIGKILL). The Go server,
// polling or sleeping on events, gives up after a watchdog period
// without a receive, as perftest's check_alive does after 60-120 s
// (shortened here through PUREVERBS_BW_ALIVE), with perftest's lines and
// exit status, and leaves nothing behind in the kernel.
func TestVMClientKilled(t *testing.T) {
	testkit.RequireVM(t)
	for _, mode := range []struct {
		extra  []string
		status string
		line   string
	}{
		{nil, "exit status 17", "Total Iters Required=100000000"},
		{[]string{"-e"}, "exit status 1", "Perftest cannot produce a report when in event mode."},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		before := testkit.Resources(t, testkit.RxeDev)
		port := bwtest.Port()
		args := append([]string{"-d", testkit.RxeDev, "-x", "1", "-p", strconv.Itoa(port), "-s", "4096", "-n", "100000000"}, mode.extra...)
		srv := testkit.StartPeerEnv(ctx, t, []string{"PUREVERBS_BW_ALIVE=2s"}, "sendbw", args...)
		if err := testkit.WaitTCPListen(ctx, port); err != nil {
			t.Fatal(err)
		}
		// Mid-transfer: the device has received a few hundred more
		// packets than before the client started.
		base := bwtest.RcvdPkts(t, testkit.RxeDev)
		cli := testkit.StartPeer(ctx, t, "ib_send_bw", append(args, testkit.RxeAddr)...)
		if err := bwtest.WaitReceived(ctx, t, testkit.RxeDev, base+300, nil); err != nil {
			t.Fatalf("no traffic:\n%s\n%s", srv.Output(), cli.Output())
		}
		cli.Kill()
		err := srv.Wait()
		out := srv.Output()
		if err == nil || !strings.Contains(err.Error(), mode.status) || !strings.Contains(out, " Did not get Message for 120 Seconds, exiting..") ||
			!strings.Contains(out, mode.line) || strings.Contains(out, "Total Received=0,") {
			t.Errorf("sendbw %s after its client died: %v, want %s and perftest's lines:\n%s", strings.Join(mode.extra, " "), err, mode.status, out)
		}
		if after := testkit.Resources(t, testkit.RxeDev); !maps.Equal(after, before) {
			t.Errorf("resources after %v, before %v", after, before)
		}
	}
}

// TestVMPostList: -l, Go against C both ways (bwtest.PostList); and
// inline messages with a completion for each, which keep both flags.
func TestVMPostList(t *testing.T) {
	bwtest.PostList(t, tool)
	bwtest.MatrixOn(t, tool, "rxelo", []pptest.Pair{{Server: pptest.Go, Client: pptest.Go}}, []int{64}, 200, "-I", "64", "-Q", "1")
}

// TestVMAllSizes: -a (2 B to 8 MiB, a line per size on both sides),
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
	bwtest.SameAsC(t, tool, bwtest.BadArgs, nil)
}

// TestVMQPs: -q, Go against C both ways (bwtest.QPs).
func TestVMQPs(t *testing.T) { bwtest.QPs(t, tool) }

// TestVMForever: --run_infinitely, Go against C both ways (bwtest.Forever).
func TestVMForever(t *testing.T) {
	testkit.OneKernel(t, testkit.Kernel612)
	bwtest.Forever(t, tool)
}

// TestVMBidirectional: -b, Go against C both ways (bwtest.Bidirectional).
func TestVMBidirectional(t *testing.T) { bwtest.Bidirectional(t, tool) }

// TestVMUC: -c UC, Go against C both ways (bwtest.UC).
func TestVMUC(t *testing.T) { bwtest.UC(t, tool) }

// TestVMUD: -c UD, Go against C both ways (bwtest.UD).
func TestVMUD(t *testing.T) { bwtest.UD(t, tool) }

// TestVMSRQ: --use-srq, Go against C both ways (bwtest.SRQ).
func TestVMSRQ(t *testing.T) { bwtest.SRQ(t, tool) }

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

// TestVMDuplexDurationLimit: -b -D with -w, Go against C both ways
// (bwtest.DuplexDurationLimit).
func TestVMDuplexDurationLimit(t *testing.T) { bwtest.DuplexDurationLimit(t, tool) }

// TestVMDuplexDurationBoth: -b -D --report-both prints both blocks, as
// send_bw does (bwtest.DuplexDurationBoth).
func TestVMDuplexDurationBoth(t *testing.T) { bwtest.DuplexDurationBoth(t, tool) }

// TestVMRecvPostList: --recv_post_list, Go against C both ways (bwtest.RecvPostList).
func TestVMRecvPostList(t *testing.T) { bwtest.RecvPostList(t, tool) }

// TestVMMRPerQP: --mr_per_qp with four QPs, Go against C both ways (bwtest.MRPerQP).
func TestVMMRPerQP(t *testing.T) { bwtest.MRPerQP(t, tool) }

// TestVMCPUUtil: --cpu_util with -D, Go against C both ways (bwtest.CPUUtil).
func TestVMCPUUtil(t *testing.T) {
	testkit.OneKernel(t, testkit.Kernel61)
	bwtest.CPUUtil(t, tool)
}

// TestVMOutJSON: --out_json and --out_json_file, Go against C both ways (bwtest.OutJSON).
func TestVMOutJSON(t *testing.T) {
	testkit.OneKernel(t, testkit.Kernel61)
	bwtest.OutJSON(t, tool)
}

// TestVMHugePages: --use_hugepages, failing without huge pages and running with them, Go against C both ways (bwtest.HugePages).
func TestVMHugePages(t *testing.T) { bwtest.HugePages(t, tool) }

// TestVMODP: --odp on rxe (no on-demand paging), Go against C both ways (bwtest.ODP).
func TestVMODP(t *testing.T) { bwtest.ODP(t, tool) }

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

// TestVMRDMACM: -R and -z, Go against C both ways (bwtest.RDMACM).
func TestVMRDMACM(t *testing.T) { bwtest.RDMACM(t, tool) }

// TestVMServerKilled: the server dies mid-run; the Go client fails as
// perftest's does, within a bound (bwtest.ServerKilled).
func TestVMServerKilled(t *testing.T) { bwtest.ServerKilled(t, tool) }

// TestVMServerGone: perftest's server dies mid-run, one way, both ways
// (-b) and over the RDMA CM (-R): the Go client, whose sends rxe retries
// for ever at perftest's retry count of 7, exits with an error where
// ib_send_bw's would wait for ever (bwtest.PeerKilled).
func TestVMServerGone(t *testing.T) {
	bwtest.PeerKilled(t, tool, bwtest.KillMode{}, bwtest.KillMode{Both: []string{"-b"}}, bwtest.KillMode{Both: []string{"-R"}})
}
