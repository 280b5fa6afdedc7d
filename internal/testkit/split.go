package testkit

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// Kernel is one of the two kernels make test boots for the VM suite.
type Kernel string

// The kernels of make test: Kernel61 stands for every kernel before 6.2,
// Kernel612 for every later one (as KernelAtLeast(6, 2) divides them).
const (
	Kernel61  Kernel = "6.1"
	Kernel612 Kernel = "6.12"
)

// RunKernelsEnv names the environment variable in which rxevm tells the
// guest's tests which of make test's kernels its run boots, as a comma
// list ("6.1,6.12"). OneKernel splits a test only when both are booted.
const RunKernelsEnv = "PUREVERBS_RUN_KERNELS"

// SplitMarker begins the reason of every OneKernel skip. rxevm allows
// such a skip, and fails the run unless the test passed on the kernel the
// reason names, which OneKernel names only when the run boots it
// (docs/testing.md).
const SplitMarker = "split between make test's kernels: runs on "

// OneKernel runs t on kernel k only and skips it on the other kernel of
// make test, which runs the VM suite on both: a test split that way still
// runs once per make test. A run that does not boot both (KERNEL=6.1 make
// vmtest; see BothKernels) runs the test on the kernel it has. It is for
// tests of a tool's own code (its options, output and loops, shared with
// the other perftest ports), alternated between the tools that have the
// test, so that each kernel still runs every such test with some tool;
// what the kernel does for a tool is tested on both by its unsplit tests.
// Call it before anything else in the test.
func OneKernel(tb testing.TB, k Kernel) {
	tb.Helper()
	if reason := splitSkip(k, KernelAtLeast(6, 2), BothKernels()); reason != "" {
		tb.Skip(reason)
	}
}

// BothKernels reports whether this run boots both of make test's kernels
// (RunKernelsEnv), so that a test may leave part of its work to the other
// one (OneKernel, and the halved cases of internal/bw/bwtest). Outside
// such a run (one kernel, or a guest without the variable) every test
// does all of its work.
func BothKernels() bool { return bothKernels(os.Getenv(RunKernelsEnv)) }

func bothKernels(run string) bool {
	l := strings.Split(run, ",")
	return slices.Contains(l, string(Kernel61)) && slices.Contains(l, string(Kernel612))
}

// splitSkip is OneKernel's skip reason on a kernel from 6.2 on (later) or
// before, in a run that boots both kernels or not, or "" where the test
// runs.
func splitSkip(k Kernel, later, both bool) string {
	if (k == Kernel612) == later || !both {
		return ""
	}
	return SplitMarker + string(k) + ", not here (testkit.OneKernel)"
}

// SplitKernel returns the kernel a OneKernel skip's reason names, and
// whether reason is one.
func SplitKernel(reason string) (Kernel, bool) {
	_, rest, ok := strings.Cut(reason, SplitMarker)
	if !ok {
		return "", false
	}
	k, _, _ := strings.Cut(rest, ",")
	switch Kernel(k) {
	case Kernel61, Kernel612:
		return Kernel(k), true
	}
	return "", false
}
