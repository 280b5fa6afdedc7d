package main

// VM tests (KERNEL=6.12 make vmtest VMPKGS=./cmd/rdmaclient): rdmaclient
// and rdmaserver against rdmacm-utils' rdma_client and rdma_server
// (rdma-core 44) on rxe0's address, and Main in the test's process.

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/testkit"
)

// The programs: the Go tools (rxevm installs every cmd/ tool in the
// guest's /usr/bin under its directory's name) and the C examples.
const (
	goServer = "rdmaserver"
	goClient = "rdmaclient"
	cServer  = "rdma_server"
	cClient  = "rdma_client"
)

var nextPort atomic.Int32

func init() { nextPort.Store(17400) }

func port() int { return int(nextPort.Add(1)) }

// text is a program's output with the Go tools' names as the C ones'
// (getopt's complaint and the usage name argv[0]), and no carriage
// returns.
func text(out string) string {
	return testkit.AsC(out, goServer, cServer, goClient, cClient)
}

// startServer starts bin on rxe0's address and port and waits until it
// listens.
func startServer(ctx context.Context, t *testing.T, bin string, p int) *testkit.Peer {
	t.Helper()
	return testkit.StartCMServer(ctx, t, p, bin, "-s", testkit.RxeAddr, "-p", strconv.Itoa(p))
}

// TestVMAgainstC: C-C, Go server with C client, C server with Go client
// and Go-Go: the client connects, sends 16 bytes, receives 16, both
// disconnect; every side prints its start and "end 0" lines, nothing
// else, and exits 0.
func TestVMAgainstC(t *testing.T) {
	testkit.RequireTools(t, []string{goServer, goClient}, []string{cServer, cClient})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, pr := range []struct{ server, client string }{
		{cServer, cClient}, {goServer, cClient}, {cServer, goClient}, {goServer, goClient},
	} {
		srv, serr, out, err := testkit.RunCMPair(ctx, t, port,
			func(p int) []string { return []string{pr.server, "-s", testkit.RxeAddr, "-p", strconv.Itoa(p)} },
			func(p int) []string { return []string{pr.client, "-s", testkit.RxeAddr, "-p", strconv.Itoa(p)} })
		if got, want := text(out), "rdma_client: start\nrdma_client: end 0\n"; err != nil || got != want {
			t.Errorf("%s against %s: client status %d, output %q; want 0, %q", pr.client, pr.server, testkit.ExitStatus(err), got, want)
		}
		if got, want := text(srv.Output()), "rdma_server: start\nrdma_server: end 0\n"; serr != nil || got != want {
			t.Errorf("%s with %s: server status %d, output %q; want 0, %q", pr.server, pr.client, testkit.ExitStatus(serr), got, want)
		}
	}
}

// TestVMFailures: the two clients, and the two servers, end alike where
// they fail: a bad command line, names and services getaddrinfo refuses,
// a connect nobody listens for (the CM's reject: "rdma_connect:
// Connection refused", end -1), the default server address (127.0.0.1),
// an address no device has, and a port another server holds.
func TestVMFailures(t *testing.T) {
	testkit.RequireTools(t, []string{goServer, goClient}, []string{cServer, cClient})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	same := func(what string, c, g []string) {
		t.Helper()
		testkit.SameAsC(ctx, t, what, c, g, text)
	}
	free := func() string { return strconv.Itoa(port()) }
	for _, args := range [][]string{
		{"-x"}, {"-s"}, {"-p", "1", "-q"},
		{"-s", "nosuchhost.invalid"}, {"-s", "1.2.3.256"}, {"-s", testkit.RxeAddr, "-p", "no-such-service"},
		{"-s", testkit.RxeAddr, "-p", free()}, {"-p", free()}, {"-s", "10.99.0.1", "-p", free()},
		// getaddrinfo's "" (no host) and "*" (its NULL node, the loopback).
		{"-s", ""}, {"-s", "*", "-p", free()},
	} {
		same("client "+strings.Join(args, " "), append([]string{cClient}, args...), append([]string{goClient}, args...))
	}
	for _, args := range [][]string{
		{"-x"}, {"-p"}, {"-s", "nosuchhost.invalid"}, {"-p", "7471x"}, {"-s", "10.99.0.250", "-p", free()},
		{"-s", ""},
	} {
		same("server "+strings.Join(args, " "), append([]string{cServer}, args...), append([]string{goServer}, args...))
	}
	// A port in use: a C server holds it while each second server tries.
	p := port()
	holder := startServer(ctx, t, cServer, p)
	same("server on a port in use", []string{cServer, "-s", testkit.RxeAddr, "-p", strconv.Itoa(p)},
		[]string{goServer, "-s", testkit.RxeAddr, "-p", strconv.Itoa(p)})
	holder.Stop()
}

// TestVMInProcessClient: Main as the client against the C server: its
// exact output, status 0, and nothing left behind (the leak checks).
func TestVMInProcessClient(t *testing.T) {
	testkit.RequireTools(t, []string{goServer, goClient}, []string{cServer, cClient})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := port()
	srv := startServer(ctx, t, cServer, p)
	var stdout, stderr testkit.Output
	st := Main(ctx, cClient, []string{"-s", testkit.RxeAddr, "-p", strconv.Itoa(p)}, &stdout, &stderr)
	if err := srv.Wait(); err != nil {
		t.Errorf("C server: %v\n%s", err, srv.Output())
	}
	if st != 0 || stdout.String() != "rdma_client: start\nrdma_client: end 0\n" || stderr.String() != "" {
		t.Errorf("Main as the client: status %d\nstdout:\n%s\nstderr:\n%s", st, &stdout, &stderr)
	}
	// And refused: the failed connect releases everything too.
	stdout, stderr = testkit.Output{}, testkit.Output{}
	st = Main(ctx, cClient, []string{"-s", testkit.RxeAddr, "-p", strconv.Itoa(port())}, &stdout, &stderr)
	if st != 255 || stdout.String() != "rdma_client: start\nrdma_client: end -1\n" || stderr.String() != "rdma_connect: Connection refused\n" {
		t.Errorf("Main as a client nobody listens for: status %d\nstdout:\n%s\nstderr:\n%s", st, &stdout, &stderr)
	}
}
