package main

import (
	"os"
	"testing"

	"github.com/pureverbs/pureverbs/internal/testkit/leakmain"
)

// TestMain traces every fd and mapping the tests create and fails the run
// when any is left open; in the VM each test is also checked on its own
// (testkit.LeakCheck: goroutines, fds, mappings, kernel objects).
// The tools run as child processes (testkit.StartPeer, RunPeer); each
// test waits for its children to exit (Peer.Wait, or Peer.Stop at
// cleanup), so the kernel's RDMA resource counts the check compares
// include none of theirs.
func TestMain(m *testing.M) {
	os.Exit(leakmain.Run(m))
}
