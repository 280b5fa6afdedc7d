// Package skippkg skips tests inside the rxevm guest, so the runner's own
// test (cmd/rxevm, PUREVERBS_RUNNER_TEST=1) can check that a skip fails the
// run unless it is on the allowlist. Under testdata: never part of ./... .
package skippkg

import (
	"testing"

	"github.com/pureverbs/pureverbs/internal/testkit"
)

func TestPasses(t *testing.T) {}

func TestSkipsInVM(t *testing.T) {
	if testkit.InVM() {
		t.Skip("deliberate skip inside the VM")
	}
}

// TestRequireVMWithoutMarker does what every VM test would do if the guest
// stopped setting PUREVERBS_VM=1: RequireVM skips.
func TestRequireVMWithoutMarker(t *testing.T) {
	t.Setenv("PUREVERBS_VM", "")
	testkit.RequireVM(t)
	t.Error("RequireVM did not skip without PUREVERBS_VM=1")
}

// TestAllowlistedSkip is on the runner's allowlist: its skip is listed but
// does not fail the run.
func TestAllowlistedSkip(t *testing.T) {
	if testkit.InVM() {
		t.Skip("allowlisted skip for the runner's self-test")
	}
}
