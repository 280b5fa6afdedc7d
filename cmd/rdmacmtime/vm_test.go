package main

// VM tests (KERNEL=6.12 make vmtest VMPKGS=./cmd/rdmacmtime): rdmacmtime
// against rdmacm-utils' cmtime (rdma-core 44) on rxe0's address, and Main
// in the test's process. cmtime's server runs until it is stopped, on
// port 7471 unless -p says otherwise.

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/testkit"
)

const (
	goTool = "rdmacmtime"
	cTool  = "cmtime"
	port   = 7471
)

// tableRow is a row of cmtime's table: the step's name, then its times.
var tableRow = regexp.MustCompile(`(?m)^([a-z ]{13}): .*$`)

// text is a program's output with the Go tool's name as the C one's, no
// carriage returns, and the table's times (which differ from run to
// run, and may be inf or -nan) left out: the rows and their order stay.
//
// Also left out: the line of cmtime's event thread when it first reads
// the channel after main has destroyed it (a client that ends before the
// thread first ran: no connection got as far as an event). A thread
// already waiting in read stays there until the process exits, so most
// runs do not print it; the Go tool never does.
func text(out string) string {
	out = tableRow.ReplaceAllString(testkit.AsC(out, goTool, cTool), "$1: T")
	var b strings.Builder
	for _, l := range strings.Split(out, "\n") {
		if l == "" || l == "failure in rdma_get_cm_event in process_server_events: Bad file descriptor" {
			continue
		}
		b.WriteString(l + "\n")
	}
	return b.String()
}

// connected checks a client's table: every step's row there, and every
// connection timed for connect and disconnect (their fastest is a real
// time, not the 1e9 of no connection).
func connected(t *testing.T, what, out string) {
	t.Helper()
	for _, step := range []string{"connect      :", "disconnect   :"} {
		i := strings.Index(out, "\n"+step)
		if i < 0 {
			t.Errorf("%s: no %q row:\n%s", what, step, out)
			continue
		}
		f := strings.Fields(out[i+1+len(step):])
		if len(f) < 4 || f[2] == "1000000000.00" {
			t.Errorf("%s: %q row without a timed connection:\n%s", what, step, out)
		}
	}
}

// settled waits until the kernel's counts of rdma_cm IDs and QPs on rxe0
// are want's: a server's connections are all taken down once their
// client has gone. (CQs are not counted: cmtime's servers share the
// first connection's, which its DestroyQP cannot destroy while the
// others' QPs live, and which then stay for later clients.)
func settled(ctx context.Context, t *testing.T, what string, want map[string]int) {
	t.Helper()
	var got map[string]int
	for {
		got = testkit.Resources(t, "rxe0")
		if got["cm_id"] == want["cm_id"] && got["qp"] == want["qp"] {
			return
		}
		select {
		case <-ctx.Done():
			t.Errorf("%s: the server left kernel objects: %v, want cm_id and qp as %v", what, got, want)
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestVMAgainstC: C-C, Go server with C client, C server with Go client
// and Go-Go, for 20 connections and for 5 bound to rxe0's address: the
// clients exit 0 and print what the C pair's client prints (the times
// aside), every connection is set up and taken down, and each server,
// still running, has destroyed every connection's ID and QP.
func TestVMAgainstC(t *testing.T) {
	testkit.RequireTools(t, []string{goTool}, []string{cTool})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	for _, extra := range [][]string{{"-c", "20"}, {"-c", "5", "-b", testkit.RxeAddr}} {
		var want string
		for i, pr := range []struct{ server, client string }{
			{cTool, cTool}, {goTool, cTool}, {cTool, goTool}, {goTool, goTool},
		} {
			what := fmt.Sprintf("%q %s server, %s client", extra, pr.server, pr.client)
			srv := testkit.StartCMServer(ctx, t, port, pr.server)
			base := testkit.Resources(t, "rxe0")
			out, err := testkit.RunPeer(ctx, t, pr.client, append([]string{"-s", testkit.RxeAddr}, extra...)...)
			got := text(out)
			if err != nil {
				t.Errorf("%s: client status %d\n%s\nserver:\n%s", what, testkit.ExitStatus(err), out, srv.Output())
			} else {
				connected(t, what, out)
			}
			settled(ctx, t, what, base)
			if !srv.Running() {
				t.Errorf("%s: the server ended: %v\n%s", what, srv.Wait(), srv.Output())
			}
			srv.Stop()
			if s := strings.TrimSpace(text(srv.Output())); s != "" && !strings.HasPrefix(s, "^C") {
				t.Errorf("%s: the server printed:\n%s", what, s)
			}
			if i == 0 {
				want = got
				t.Logf("%s:\n%s", what, out)
				continue
			}
			if got != want {
				t.Errorf("%s: the client's output differs from C-C's:\n%s\nC-C:\n%s", what, got, want)
			}
		}
	}
}

// TestVMFailures: both tools end alike where they fail: bad command
// lines, names that do not resolve (the server's with -c 0, where cmtime
// does not then crash in cleanup_nodes), no server listening on the port
// (every connection rejected), an address with no route, and connection
// counts of 0 and -1 (the
// table's inf and -nan, and a count calloc refuses).
func TestVMFailures(t *testing.T) {
	testkit.RequireTools(t, []string{goTool}, []string{cTool})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, args := range [][]string{
		{"-x"}, {"-s"}, {"-s", testkit.RxeAddr, "-c"},
		{"-s", "nosuchhost.invalid", "-c", "2"},
		{"-s", testkit.RxeAddr, "-b", "nosuchhost.invalid", "-c", "2"},
		{"-s", testkit.RxeAddr, "-b", "", "-c", "2"},
		{"-b", "nosuchhost.invalid", "-c", "0"},
		{"-s", testkit.RxeAddr, "-p", "7999", "-c", "3"},
		{"-s", "192.0.2.1", "-c", "2", "-t", "200", "-r", "1"},
		{"-s", testkit.RxeAddr, "-c", "0"},
		{"-s", testkit.RxeAddr, "-c", "-1"},
		{"-s", testkit.RxeAddr, "-p", "x", "-c", "1"},
	} {
		testkit.SameAsC(ctx, t, fmt.Sprintf("%q", args), append([]string{cTool}, args...), append([]string{goTool}, args...), text)
	}
}

// TestVMInProcess: Main as the server for the C client (10 connections),
// stopped by its context once the client is done, and as the client of
// the C server: the C tool's lines, and nothing left behind (the leak
// checks).
func TestVMInProcess(t *testing.T) {
	testkit.RequireTools(t, []string{goTool}, []string{cTool})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	base := testkit.Resources(t, "rxe0")
	sctx, stop := context.WithCancel(ctx)
	done := make(chan int, 1)
	var stdout, stderr testkit.Output
	go func() { done <- Main(sctx, cTool, []string{"-c", "0"}, &stdout, &stderr) }()
	if err := testkit.WaitCMListen(ctx, port); err != nil {
		t.Fatal(err)
	}
	out, err := testkit.RunPeer(ctx, t, cTool, "-s", testkit.RxeAddr, "-c", "10")
	if err != nil {
		t.Errorf("C client: %v\n%s", err, out)
	}
	connected(t, "C client of Main", out)
	base["cm_id"]++ // the server's listener (and the C server's, below)
	settled(ctx, t, "Main as the server", base)
	stop()
	if st := <-done; st != 0 || stderr.String() != "" || !strings.HasPrefix(stdout.String(), "destroying id\nstep ") {
		t.Errorf("Main as the server: status %d\nstdout:\n%s\nstderr:\n%s", st, &stdout, &stderr)
	}

	srv := testkit.StartCMServer(ctx, t, port, cTool)
	stdout, stderr = testkit.Output{}, testkit.Output{}
	st := Main(ctx, cTool, []string{"-s", testkit.RxeAddr, "-c", "10"}, &stdout, &stderr)
	const wantC = "creating id\nresolving address\nresolving route\ncreating qp\nconnecting\ndisconnecting\ndestroying id\n" +
		"step              total ms     max ms     min us  us / conn\n"
	if st != 0 || !strings.HasPrefix(stdout.String(), wantC) || stderr.String() != "" {
		t.Errorf("Main as the client: status %d\nstdout:\n%s\nstderr:\n%s", st, &stdout, &stderr)
	}
	connected(t, "Main as the client", stdout.String())
	settled(ctx, t, "the C server", base)
	srv.Stop()
}
