package main

import (
	"strings"

	"github.com/pureverbs/pureverbs/internal/testkit"
)

// allowedSkip is a test that may skip inside the VM.
type allowedSkip struct {
	pkg    string // import path
	test   string // full test name (TestA or TestA/sub)
	kernel string // "6.1" or "6.12"; "" for every kernel
	reason string // the skip message must contain this
	why    string // printed beside the skip
}

const mod = "github.com/pureverbs/pureverbs/"

// vmSkipAllowlist is the only place a test may be excused for skipping in
// the VM; every other skip fails the run. Keep it short: each entry says why
// the test cannot run in the VM. A skip with testkit.SkipMessage (RequireVM
// found no PUREVERBS_VM=1) is never allowed, whatever this list says.
var vmSkipAllowlist = []allowedSkip{
	{
		pkg: mod + "cmd/asyncwatch", test: "TestRunNoDeviceOnHost", reason: "this machine has RDMA devices",
		why: "host-only: checks the no-device error, and the VM always has rxe0 and rxelo",
	},
	{
		pkg: mod + "uverbs", test: "TestDevicesHostWithoutRDMA", reason: "host has ib_uverbs loaded",
		why: "host-only: checks ErrNoDevice without ib_uverbs, which the VM always loads",
	},
	{
		pkg: mod + "uverbs", test: "TestVMReregMRConcurrent", kernel: "6.1", reason: "rxe has no rereg",
		why: "6.1's rxe has no rereg_user_mr, so there is no Rereg to race with (TestVMReregMR checks the refusal)",
	},
	{
		pkg: mod + "rdmacm", test: "TestVMMulticastAgainstC/c-sender", kernel: "6.12", reason: "mckey's multicast sends reach no receiver",
		why: "on 6.12 mckey -s's ten back-to-back sends reach no member, mckey's own receiver included (C to C: 0 of 3 runs); the Go receiver gets them on 6.1, and from Go senders on both",
	},
	{
		pkg: mod + "internal/testkit/twohost", test: "TestTwoHostMulticast/c-sender-on-B", kernel: "6.12", reason: "mckey's multicast sends reach no receiver",
		why: "as TestVMMulticastAgainstC/c-sender: on 6.12 mckey -s reaches no member across the wire either (Go to mckey works)",
	},
	{
		pkg: mod + "cmd/sendlat", test: "TestVMEventsAgainstC", kernel: "6.12", reason: "ib_send_lat -e hangs on this kernel",
		why: "on 6.12 perftest's ib_send_lat -e hangs in either role, against itself too (9 of 24 C-C runs); Go against Go runs there (TestVMEvents), Go against C on 6.1",
	},
	{
		pkg: mod + "cmd/rdmaudaddy", test: "TestVMReplyAHFails", kernel: "6.12", reason: "6.12's rxe completes no receive for a UD message longer than it",
		why: "on 6.12 a UD message longer than the receive is dropped without a completion, so neither udaddy server reaches its reply AH (C to C waits for ever); 6.1 completes it with an error, and there the Go server fails as udaddy does",
	},
	{
		pkg: mod + "cmd/rdmaping", test: "TestMainNoDevice", reason: "this machine has RDMA devices",
		why: "host-only: checks the no-device failure, and the VM always has rxe0 and rxelo (vm_test.go runs the tool there)",
	},
	{
		pkg: mod + "cmd/devinfo", test: "TestRunNoDevice", reason: "this machine has RDMA devices",
		why: "host-only: checks the no-device output, and the VM always has rxe0 and rxelo (vm_test.go runs the tool there)",
	},
	{
		pkg: mod + "cmd/rdmacmatose", test: "TestMainNoDevice", reason: "this machine has RDMA devices",
		why: "host-only: checks the no-device failure, and the VM always has rxe0 and rxelo (vm_test.go runs the tool there)",
	},
	{
		pkg: mod + "internal/testkit/sweep", test: "TestVMSweep", reason: "the differential sweep runs with -sweep.n",
		why: "make sweep runs it with its flags; make test leaves the package out (VMPKGS), and a plain run of it has nothing to do",
	},
	{
		pkg: mod + "internal/bw/bwtest", test: "TestOneKernelCoversBoth", reason: "host-only: parses the module's sources",
		why: "host-only: checks the testkit.OneKernel splits in cmd/*/*_test.go, which the guest does not have (make unit runs it)",
	},
	{
		pkg: mod + "internal/testkit/cmd/rxevm", test: "TestRunnerReportsFailures", reason: "boots QEMU guests",
		why: "host-only: boots QEMU itself (make runnertest)",
	},
	{
		pkg: mod + "internal/testkit/cmd/rxevm", test: "TestPrepareKernelFallsBack", reason: "host tools missing",
		why: "host-only: unpacks fake kernel packages with dpkg-deb, which the guest lacks (make unit)",
	},
	{
		pkg: mod + "internal/testkit/cmd/rxevm", test: "TestMakeCpioFails", reason: "host tools missing",
		why: "host-only: runs the image build's bash pipeline, and the guest has no bash (make unit)",
	},
	{
		pkg: mod + "internal/testkit/cmd/rxevm", test: "TestCToolLibVersions", reason: "host tools missing",
		why: "host-only: compiles a C program with gcc, which the guest lacks (make unit)",
	},
	{
		pkg: mod + "internal/testkit/cmd/rxevm", test: "TestRaceEnvSysroot", reason: "host tools missing",
		why: "host-only: race-builds a Go program with gcc, which the guest lacks (make unit)",
	},
	{
		pkg: mod + "internal/testkit/cmd/rxevm/testdata/skippkg", test: "TestAllowlistedSkip", reason: "allowlisted skip for the runner's self-test",
		why: "the runner's self-test: an allowlisted skip must not fail the run",
	},
}

// raceSkips is set by -race: the test binaries have the race detector,
// under which testkit.NoAllocs and testkit.SkipUnderRace skip (the reason
// has testkit.RaceSkipMarker), in any test; the run without -race
// measures what they skip.
var raceSkips bool

// allowSkip returns why test of pkg may skip on kernel (the short name,
// "6.1") with reason, or "" if it may not.
func allowSkip(list []allowedSkip, kernel, pkg, test, reason string) string {
	if strings.Contains(reason, testkit.SkipMessage) {
		return ""
	}
	if raceSkips && strings.Contains(reason, testkit.RaceSkipMarker) {
		return "-race: measured by the run without the race detector"
	}
	if k, ok := testkit.SplitKernel(reason); ok && string(k) != kernel {
		return "testkit.OneKernel: runs on " + string(k) + " (checked there)"
	}
	for _, a := range list {
		if a.pkg == pkg && a.test == test && (a.kernel == "" || a.kernel == kernel) &&
			a.reason != "" && strings.Contains(reason, a.reason) {
			return a.why
		}
	}
	return ""
}
