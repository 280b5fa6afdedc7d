package main

// VM tests (KERNEL=6.12 make vmtest VMPKGS=./cmd/rdmaudaddy): rdmaudaddy
// against rdmacm-utils' udaddy (rdma-core 44) on rxe0's address, and Main
// in the test's process. udaddy's port is fixed (7174), so the runs take
// turns.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/testkit"
)

const (
	goTool = "rdmaudaddy"
	cTool  = "udaddy"
)

// text is a program's output with the Go tool's name as the C one's and
// no carriage returns.
func text(out string) string {
	return testkit.AsC(out, goTool, cTool)
}

// udaddyPort is udaddy's fixed port.
const udaddyPort = 7174

// TestVMAgainstC: C-C, Go server with C client, C server with Go client
// and Go-Go, for the defaults (ten 100-byte messages), two connections of
// five 1000-byte messages, and no messages: both sides exit 0 and print
// exactly what the C pair prints.
func TestVMAgainstC(t *testing.T) {
	testkit.RequireTools(t, []string{goTool}, []string{cTool})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, extra := range [][]string{nil, {"-c", "2", "-C", "5", "-S", "1000"}, {"-C", "0"}} {
		var wantS, wantC string
		for i, pr := range []struct{ server, client string }{
			{cTool, cTool}, {goTool, cTool}, {cTool, goTool}, {goTool, goTool},
		} {
			srv, serr, out, err := testkit.RunCMPair(ctx, t, func() int { return udaddyPort },
				func(int) []string { return append([]string{pr.server}, extra...) },
				func(int) []string { return append([]string{pr.client, "-s", testkit.RxeAddr}, extra...) })
			gotS, gotC := text(srv.Output()), text(out)
			if err != nil || serr != nil {
				t.Errorf("%q %s server, %s client: status %d and %d\nserver:\n%s\nclient:\n%s", extra, pr.server, pr.client, testkit.ExitStatus(serr), testkit.ExitStatus(err), gotS, gotC)
				continue
			}
			if i == 0 {
				wantS, wantC = gotS, gotC
				if strings.Contains(wantC, "data transfers complete") != (len(extra) != 2) { // {"-C", "0"} sends none
					t.Errorf("%q: C-C client output:\n%s", extra, wantC)
				}
				t.Logf("%q C-C:\nserver:\n%s\nclient:\n%s", extra, wantS, wantC)
				continue
			}
			if gotS != wantS || gotC != wantC {
				t.Errorf("%q %s server, %s client differ from C-C:\nserver:\n%s\nclient:\n%s", extra, pr.server, pr.client, gotS, gotC)
			}
		}
	}
}

// TestVMReplyAHFails: a C client sending 500-byte messages to a server
// posting 100-byte receives (plus the GRH): the server's receives
// complete with an error, which carries no GRH flag, so the reply AH
// cannot be built on RoCE. The Go server ends as the C one does (its
// output and status); the client, left waiting for replies, is stopped.
// 6.1 only: 6.12's rxe drops such a message without a completion, and
// both servers wait for ever.
func TestVMReplyAHFails(t *testing.T) {
	testkit.RequireTools(t, []string{goTool}, []string{cTool})
	if testkit.KernelAtLeast(6, 12) {
		t.Skip("6.12's rxe completes no receive for a UD message longer than it")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var want string
	var wantStatus int
	for i, server := range []string{cTool, goTool} {
		srv := testkit.StartCMServer(ctx, t, udaddyPort, server, "-S", "100")
		cli := testkit.StartPeer(ctx, t, cTool, "-s", testkit.RxeAddr, "-S", "500")
		serr := srv.Wait()
		cli.Stop()
		cli.Wait()
		got, status := text(srv.Output()), testkit.ExitStatus(serr)
		if i == 0 {
			want, wantStatus = got, status
			t.Logf("C server (status %d):\n%s\nclient:\n%s", status, got, cli.Output())
			if !strings.Contains(got, "failed to create reply AH") {
				t.Fatalf("the C server did not fail on the reply AH: status %d\n%s", status, got)
			}
			continue
		}
		if got != want || status != wantStatus {
			t.Errorf("Go server (status %d):\n%s\nC server (status %d):\n%s", status, got, wantStatus, want)
		}
	}
}

// TestVMFailures: both clients end alike where they fail: a bad command
// line, a message larger than rxe0's active MTU (checked once the route
// is resolved), a server nobody runs (the SIDR request is unreachable),
// an unresolvable name, the UDP port space by number (-p 0x111, the
// default) and the IPoIB port space (-P ipoib: the kernel cannot resolve
// an address in it on RoCE).
func TestVMFailures(t *testing.T) {
	testkit.RequireTools(t, []string{goTool}, []string{cTool})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, args := range [][]string{
		{"-x"}, {"-s"}, {"-s", testkit.RxeAddr, "-S", "5000"}, {"-s", testkit.RxeAddr},
		{"-s", "nosuchhost.invalid"}, {"-s", testkit.RxeAddr, "-p", "0x111", "-C", "0"},
		{"-s", testkit.RxeAddr, "-P", "ipoib"}, {"-b", testkit.RxeAddr, "-P", "ipoib"},
		{"-s", ""}, {"-s", testkit.RxeAddr, "-b", ""}, // getaddrinfo refuses "", a client all the same
		{"-s", testkit.RxeAddr, "-b", "*"}, {"-s", testkit.RxeAddr, "-C", "-1"}, // no node nor service; a negative CQ size
		// -p is the port space: one the kernel does not know is EINVAL,
		// for a server and for a client.
		{"-p", "21003"}, {"-s", testkit.RxeAddr, "-p", "7471"}, {"-p", "0"},
		// -S 0 zeroes -C only in create_message, after the MTU check and
		// the CQ: a negative -C still fails the CQ, and is a count for
		// the MTU check; a server of no nodes keeps -C and prints the
		// transfers' lines.
		{"-s", testkit.RxeAddr, "-S", "0", "-C", "-1"}, {"-s", testkit.RxeAddr, "-C", "-1", "-S", "2000"}, {"-S", "0", "-c", "0"},
	} {
		testkit.SameAsC(ctx, t, fmt.Sprintf("%q", args), append([]string{cTool}, args...), append([]string{goTool}, args...), text)
	}
}

// TestVMInProcess: Main as the server against the C client and as the
// client against the C server, two connections each: exit 0, the C
// tool's lines, and nothing left behind (the leak checks).
func TestVMInProcess(t *testing.T) {
	testkit.RequireTools(t, []string{goTool}, []string{cTool})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := []string{"-c", "2", "-C", "4"}
	done := make(chan int, 1)
	var stdout, stderr testkit.Output
	go func() { done <- Main(ctx, cTool, args, &stdout, &stderr) }()
	if err := testkit.WaitCMListen(ctx, udaddyPort); err != nil {
		t.Fatal(err)
	}
	out, err := testkit.RunPeer(ctx, t, cTool, append([]string{"-s", testkit.RxeAddr}, args...)...)
	if err != nil {
		t.Errorf("C client: %v\n%s", err, out)
	}
	const wantS = "udaddy: starting server\nreceiving data transfers\nsending replies\ndata transfers complete\ntest complete\nreturn status 0\n"
	if st := <-done; st != 0 || stdout.String() != wantS || stderr.String() != "" {
		t.Errorf("Main as the server: status %d\nstdout:\n%s\nstderr:\n%s", st, &stdout, &stderr)
	}

	srv := testkit.StartCMServer(ctx, t, udaddyPort, cTool, args...)
	stdout, stderr = testkit.Output{}, testkit.Output{}
	st := Main(ctx, cTool, append([]string{"-s", testkit.RxeAddr}, args...), &stdout, &stderr)
	if err := srv.Wait(); err != nil {
		t.Errorf("C server: %v\n%s", err, srv.Output())
	}
	const wantC = "udaddy: starting client\nudaddy: connecting\ninitiating data transfers\nreceiving data transfers\ndata transfers complete\ntest complete\nreturn status 0\n"
	if st != 0 || stdout.String() != wantC || stderr.String() != "" {
		t.Errorf("Main as the client: status %d\nstdout:\n%s\nstderr:\n%s", st, &stdout, &stderr)
	}
}
