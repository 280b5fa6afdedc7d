package main

// VM tests (KERNEL=6.12 make vmtest VMPKGS=./cmd/rdmaserver): Main as the
// server in the test's process, against rdmacm-utils' rdma_client; the
// comparisons of both tools with the C examples are in cmd/rdmaclient.

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/testkit"
)

// TestVMInProcessServer: Main as the server, the C client: the server's
// exact output, status 0, and nothing left behind (the leak checks).
func TestVMInProcessServer(t *testing.T) {
	testkit.RequireVM(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const p = 17390
	type ret struct {
		st       int
		out, err *testkit.Output
	}
	done := make(chan ret, 1)
	go func() {
		out, errw := &testkit.Output{}, &testkit.Output{}
		st := Main(ctx, "rdma_server", []string{"-s", testkit.RxeAddr, "-p", strconv.Itoa(p)}, out, errw)
		done <- ret{st, out, errw}
	}()
	if err := testkit.WaitCMListen(ctx, p); err != nil {
		t.Fatal(err)
	}
	out, err := testkit.RunPeer(ctx, t, "rdma_client", "-s", testkit.RxeAddr, "-p", strconv.Itoa(p))
	if err != nil {
		t.Errorf("C client: %v\n%s", err, out)
	}
	r := <-done
	if r.st != 0 || r.out.String() != "rdma_server: start\nrdma_server: end 0\n" || r.err.String() != "" {
		t.Errorf("Main as the server: status %d\nstdout:\n%s\nstderr:\n%s", r.st, r.out, r.err)
	}
}
