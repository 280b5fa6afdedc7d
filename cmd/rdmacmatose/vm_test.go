package main

// VM tests (KERNEL=6.12 make vmtest VMPKGS=./cmd/rdmacmatose): rdmacmatose
// against rdmacm-utils' ucmatose (rdma-core 44) on rxe0's address, and
// Main in the test's process.

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/testkit"
)

const (
	goTool = "rdmacmatose"
	cTool  = "ucmatose"
)

var nextPort atomic.Int32

func init() { nextPort.Store(17500) }

func port() string { return strconv.Itoa(int(nextPort.Add(1))) }

func requireTools(t *testing.T) { testkit.RequireTools(t, []string{goTool}, []string{cTool}) }

// text is a program's output with the Go tool's name as the C one's and
// no carriage returns.
func text(out string) string {
	return testkit.AsC(out, goTool, cTool)
}

// TestVMAgainstC: C-C, Go server with C client, C server with Go client
// and Go-Go, for the defaults (ten 100-byte messages), two connections of
// five 1000-byte messages, the IB port space, -m on both sides (every ID
// moved to a new channel before the disconnect), an ACK timeout and a
// TOS, and no messages: both
// sides exit 0 and print exactly what the C pair prints.
func TestVMAgainstC(t *testing.T) {
	requireTools(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, extra := range [][]string{nil, {"-c", "2", "-C", "5", "-S", "1000"}, {"-P", "ib"}, {"-m", "-c", "2"}, {"-a", "14", "-t", "32"}, {"-C", "0"}} {
		var wantS, wantC string
		for i, pr := range []struct{ server, client string }{
			{cTool, cTool}, {goTool, cTool}, {cTool, goTool}, {goTool, goTool},
		} {
			srv, serr, out, err := testkit.RunCMPair(ctx, t, func() int { return atoi(port()) },
				func(p int) []string {
					return append([]string{pr.server, "-b", testkit.RxeAddr, "-p", strconv.Itoa(p)}, extra...)
				},
				func(p int) []string {
					return append([]string{pr.client, "-s", testkit.RxeAddr, "-p", strconv.Itoa(p)}, extra...)
				})
			gotS, gotC := text(srv.Output()), text(out)
			if err != nil || serr != nil {
				t.Errorf("%q %s server, %s client: status %d and %d\nserver:\n%s\nclient:\n%s", extra, pr.server, pr.client,
					testkit.ExitStatus(serr), testkit.ExitStatus(err), gotS, gotC)
				continue
			}
			if i == 0 {
				wantS, wantC = gotS, gotC
				if !strings.HasSuffix(wantS, "disconnected\ntest complete\nreturn status 0\n") {
					t.Errorf("%q: C-C server output:\n%s", extra, wantS)
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

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

// TestVMFailures: both clients end alike where they fail: bad options,
// nobody listening (REJECTED, reason 8: status 8), the IB port space
// against a TCP-space server, and an unresolvable name.
func TestVMFailures(t *testing.T) {
	requireTools(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	same := func(args []string) {
		t.Helper()
		testkit.SameAsC(ctx, t, fmt.Sprintf("%q", args), append([]string{cTool}, args...), append([]string{goTool}, args...), text)
	}
	for _, args := range [][]string{
		{"-x"}, {"-s"}, {"-s", testkit.RxeAddr, "-p", port()}, {"-s", "nosuchhost.invalid"},
		// getaddrinfo's "" (no host: a client all the same) and "*" (its
		// NULL node, the loopback, which rxe cannot route).
		{"-s", ""}, {"-s", testkit.RxeAddr, "-b", ""}, {"-s", "*", "-p", port()},
		// "*" with no service has neither node nor service for getaddrinfo;
		// a negative -C is a negative CQ size, which fails (-ENOMEM).
		{"-s", testkit.RxeAddr, "-b", "*"}, {"-s", testkit.RxeAddr, "-p", port(), "-C", "-1"},
		// getaddrinfo looks the service up before the node: -b "" with a
		// service it does not know is EAI_SERVICE, for a server and for
		// a client; a service given as "" is port 0 (a server of no
		// connections binds it and is done).
		{"-b", "", "-p", "x"}, {"-s", "", "-p", "x"}, {"-c", "0", "-p", ""},
		// Messages of 2 GiB - 1 (atoi's wrap of -2147483649 too) are more
		// than the guest has: the allocation fails after the route
		// resolves, as malloc's does (a heap slice was the runtime's
		// fatal out of memory; sweep seed 114).
		{"-s", testkit.RxeAddr, "-p", port(), "-S", "2147483647"}, {"-s", testkit.RxeAddr, "-p", port(), "-S-2147483649"},
		// Services as glibc's getaddrinfo reads them: strtoul over the
		// whole string (white space and a sign allowed), an int that
		// must not be negative, of which 16 bits are the port; else a
		// name of the services database (none of these is one).
		{"-s", testkit.RxeAddr, "-p", "+" + port()}, {"-s", testkit.RxeAddr, "-p", " " + port()},
		{"-s", testkit.RxeAddr, "-p", fmt.Sprint(65536 + atoi(port()))}, {"-s", testkit.RxeAddr, "-p", "-80"},
		{"-s", testkit.RxeAddr, "-p", "4294967295"}, {"-s", testkit.RxeAddr, "-p", port() + " "},
		// -S 0 zeroes -C only in create_message, after the CQ is made
		// with it; a server of no nodes keeps a negative -C, which is
		// "if (message_count)" true.
		{"-s", testkit.RxeAddr, "-p", port(), "-S", "0", "-C", "-1"}, {"-c", "0", "-C", "-1", "-p", port()},
	} {
		same(args)
	}
	p := port()
	srv := testkit.StartCMServer(ctx, t, atoi(p), cTool, "-b", testkit.RxeAddr, "-p", p, "-C", "0")
	same([]string{"-s", testkit.RxeAddr, "-p", p, "-P", "ib", "-C", "0"})
	srv.Stop()
}

// TestVMInProcess: Main as the server against the C client and as the
// client against the C server, two connections each with -m: exit 0, the
// C tool's lines, and nothing left behind (the leak checks).
func TestVMInProcess(t *testing.T) {
	requireTools(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := port()
	args := []string{"-p", p, "-c", "2", "-C", "4", "-m"}
	done := make(chan int, 1)
	var stdout, stderr testkit.Output
	go func() { done <- Main(ctx, cTool, append([]string{"-b", testkit.RxeAddr}, args...), &stdout, &stderr) }()
	if err := testkit.WaitCMListen(ctx, atoi(p)); err != nil {
		t.Fatal(err)
	}
	out, err := testkit.RunPeer(ctx, t, cTool, append([]string{"-s", testkit.RxeAddr}, args...)...)
	if err != nil {
		t.Errorf("C client: %v\n%s", err, out)
	}
	const wantS = "cmatose: starting server\ninitiating data transfers\ncompleting sends\nreceiving data transfers\ndata transfers complete\n" +
		"migrating to new event channel\ncmatose: disconnecting\ndisconnected\ntest complete\nreturn status 0\n"
	if st := <-done; st != 0 || stdout.String() != wantS || stderr.String() != "" {
		t.Errorf("Main as the server: status %d\nstdout:\n%s\nstderr:\n%s", st, &stdout, &stderr)
	}

	p = port()
	args[1] = p
	srv := testkit.StartCMServer(ctx, t, atoi(p), cTool, append([]string{"-b", testkit.RxeAddr}, args...)...)
	stdout, stderr = testkit.Output{}, testkit.Output{}
	st := Main(ctx, cTool, append([]string{"-s", testkit.RxeAddr}, args...), &stdout, &stderr)
	if err := srv.Wait(); err != nil {
		t.Errorf("C server: %v\n%s", err, srv.Output())
	}
	const wantC = "cmatose: starting client\ncmatose: connecting\nreceiving data transfers\nsending replies\ndata transfers complete\n" +
		"migrating to new event channel\ntest complete\nreturn status 0\n"
	if st != 0 || stdout.String() != wantC || stderr.String() != "" {
		t.Errorf("Main as the client: status %d\nstdout:\n%s\nstderr:\n%s", st, &stdout, &stderr)
	}
}
