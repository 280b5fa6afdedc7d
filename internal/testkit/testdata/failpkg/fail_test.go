// Package failpkg fails on purpose inside the rxevm guest. It lives under
// testdata so `go test ./...` never sees it; the runner's own test
// (cmd/rxevm, PUREVERBS_RUNNER_TEST=1) checks that rxevm reports the failure.
package failpkg

import (
	"os"
	"testing"
)

func TestPasses(t *testing.T) {}

func TestFailsInVM(t *testing.T) {
	if os.Getenv("PUREVERBS_VM") != "1" {
		t.Skip("fails only inside the rxevm guest")
	}
	t.Fatal("deliberate failure inside the VM")
}
