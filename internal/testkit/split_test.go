package testkit

import "testing"

func TestOneKernelSplit(t *testing.T) {
	for _, c := range []struct {
		k     Kernel
		later bool
		runs  bool
	}{
		{Kernel61, false, true},
		{Kernel61, true, false},
		{Kernel612, true, true},
		{Kernel612, false, false},
	} {
		reason := splitSkip(c.k, c.later)
		if (reason == "") != c.runs {
			t.Errorf("%s on a later kernel %v: skip reason %q, want it to run: %v", c.k, c.later, reason, c.runs)
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
