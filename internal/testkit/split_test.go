package testkit

import "testing"

func TestOneKernelSplit(t *testing.T) {
	for _, c := range []struct {
		k     Kernel
		later bool
		run   string // RunKernelsEnv
		runs  bool
	}{
		{Kernel61, false, "6.1,6.12", true},
		{Kernel61, true, "6.1,6.12", false},
		{Kernel612, true, "6.1,6.12", true},
		{Kernel612, false, "6.1,6.12", false},
		{Kernel612, false, "6.12,6.1", false},
		// A run that does not boot the test's kernel runs it on its own.
		{Kernel61, true, "6.12", true},
		{Kernel612, false, "6.1", true},
		{Kernel61, false, "6.1", true},
		{Kernel612, false, "", true},
		{Kernel61, true, "", true},
		{Kernel612, false, "6.11,6.120", true},
	} {
		reason := splitSkip(c.k, c.later, bothKernels(c.run))
		if (reason == "") != c.runs {
			t.Errorf("%s on a later kernel %v, run of %q: skip reason %q, want it to run: %v", c.k, c.later, c.run, reason, c.runs)
			continue
		}
		if reason == "" {
			continue
		}
		// The runner reads the kernel back from the logged reason.
		if k, ok := SplitKernel("vm_test.go:12: " + reason); !ok || k != c.k {
			t.Errorf("SplitKernel(%q) = %q, %v; want %q", reason, k, ok, c.k)
		}
	}
	for _, reason := range []string{"", "perftest hangs", SplitMarker, SplitMarker + "6.6, not here", "runs on 6.1"} {
		if k, ok := SplitKernel(reason); ok {
			t.Errorf("SplitKernel(%q) = %q, true; want false", reason, k)
		}
	}
}
