package uverbs_test

import "github.com/pureverbs/pureverbs/internal/sys"

// Apart from controlpath_vm_test.go so that file still builds in trees
// from before sys.RetiredMappings (TestVMControlPath's -ctl.before). A
// variable, not an init: package variables are set before any init runs,
// and controlpath_vm_test.go's init may run the benchmark and exit.
var _ = func() bool {
	retiredRings = func() int { n, _ := sys.RetiredMappings(); return n + sys.PendingDeadRanges() }
	return true
}()
