package uverbs_test

// The control-path comparison of docs/performance.md ("Control path"):
// the same loops through libibverbs (pv_ctlbench, a C program the rxevm
// runner compiles from internal/testkit/testdata/ctools) and through this
// library (this test binary re-executed with PUREVERBS_CTLBENCH set, so
// that neither the testing package nor TestMain's leak tracing runs), in
// the same VM: time per operation, and system calls per operation under
// strace -f -c. In the normal VM suite it runs one short round; the
// numbers in the document come from
//
//	KERNEL=6.1 make vmtest VMPKGS=./uverbs RUN=TestVMControlPath VMFLAGS='-timeout 40m' \
//	    TESTFLAGS='-timeout 40m -ctl.rounds=13 -ctl.iters=2000 -ctl.strace=500'
//
// (and the same with KERNEL=6.12; -ctl.before adds an older commit's test
// binary as a third side, see docs/performance.md).

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/uverbs"
)

var (
	ctlRounds = flag.Int("ctl.rounds", 1, "TestVMControlPath: timed rounds of every operation, Go and C")
	ctlIters  = flag.Int("ctl.iters", 200, "TestVMControlPath: iterations per timed run")
	ctlStrace = flag.Int("ctl.strace", 200, "TestVMControlPath: iterations of the runs under strace")
	ctlDev    = flag.String("ctl.dev", testkit.LoopDev, "TestVMControlPath: device")
	ctlOpList = flag.String("ctl.ops", "query_port,cq,open", "TestVMControlPath: operations, comma-separated")
	ctlBefore = flag.String("ctl.before", "", "TestVMControlPath: a uverbs test binary built from an older commit (with this file), measured beside this one")
)

// ctlOps are the operations compared, as pv_ctlbench names them.
var ctlOps = []string{"query_port", "cq", "open", "getppid"}

// ctlAllocBudget is the most heap allocations per operation the Go side
// may make (the test fails above it): a string built for a test hook on
// every destroy once went unnoticed, costing an allocation and about 370
// instructions per CQ (callgrind in the guest, docs/performance.md).
var ctlAllocBudget = map[string]float64{"query_port": 0, "cq": 2, "open": 6, "getppid": 0}

const ctlEnv = "PUREVERBS_CTLBENCH" // "DEVICE OP ITERS [traced]": run the Go loop and exit

// ctlProfEnv names a file for a CPU profile of the Go loop (run by hand in
// the guest; docs/performance.md).
const ctlProfEnv = "PUREVERBS_CTLBENCH_CPUPROFILE"

// ctlMemProfEnv names a file for a profile of every allocation the Go
// loop makes (MemProfileRate 1: the loop's timing means nothing then).
const ctlMemProfEnv = "PUREVERBS_CTLBENCH_MEMPROFILE"

func init() {
	if v := os.Getenv(ctlEnv); v != "" {
		os.Exit(ctlBenchMain(strings.Fields(v)))
	}
}

// ctlBenchMain is the Go twin of pv_ctlbench: same set-up, warm-up, loop
// and output line.
func ctlBenchMain(args []string) int {
	if len(args) < 3 || len(args) > 4 {
		fmt.Fprintf(os.Stderr, "%s: want DEVICE OP ITERS [traced], got %q\n", ctlEnv, args)
		return 2
	}
	traced := len(args) == 4 && args[3] == "traced"
	op := args[1]
	iters, err := strconv.Atoi(args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	dev, err := uverbs.DeviceByName(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var c *uverbs.Context
	if op != "open" {
		if c, err = uverbs.Open(dev); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	var pa uverbs.PortAttr
	bg := context.Background()
	var one func() error
	switch op {
	case "getppid":
		one = func() error {
			if os.Getppid() <= 0 { // syscall.Getppid: a raw getppid(2)
				return errors.New("getppid failed")
			}
			return nil
		}
	case "query_port":
		one = func() error { return c.QueryPortInto(1, &pa) }
	case "cq":
		one = func() error {
			cq, err := c.CreateCQ(16, nil)
			if err != nil {
				return err
			}
			return cq.Destroy(bg)
		}
	case "open":
		one = func() error {
			c, err := uverbs.Open(dev)
			if err != nil {
				return err
			}
			return c.Close()
		}
	default:
		fmt.Fprintf(os.Stderr, "unknown op %q\n", op)
		return 2
	}
	for i := 0; iters > 0 && i < iters/10+1; i++ {
		if err := one(); err != nil {
			fmt.Fprintf(os.Stderr, "%s (warm-up): %v\n", op, err)
			return 1
		}
	}
	runtime.GC() // the warm-up's garbage is not the loop's
	waitCleanups(traced)
	// Context switches are counted from /proc (files read before and
	// after the loop), except under strace, whose counts those reads
	// would blur.
	var v0, iv0, v1, iv1 int
	if !traced {
		v0, iv0 = ctxSwitches()
	}
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	if f := os.Getenv(ctlProfEnv); f != "" {
		w, err := os.Create(f)
		if err == nil {
			err = pprof.StartCPUProfile(w)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer w.Close()
		defer pprof.StopCPUProfile()
	}
	memProf := os.Getenv(ctlMemProfEnv)
	if memProf != "" {
		runtime.MemProfileRate = 1
	}
	u0, s0 := cpuTicks()
	t0 := time.Now()
	for range iters {
		if err := one(); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", op, err)
			return 1
		}
	}
	loop := time.Since(t0)
	u1, s1 := cpuTicks()
	runtime.ReadMemStats(&m1)
	if memProf != "" {
		runtime.GC() // the profile shows allocations as of the last collection
		w, err := os.Create(memProf)
		if err == nil {
			err = pprof.Lookup("allocs").WriteTo(w, 0)
			w.Close()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	if !traced {
		v1, iv1 = ctxSwitches()
	}
	// The address ranges of destroyed rings go back to the kernel from
	// cleanups after a collection (sys.Mapping): their time counts, as
	// C's munmaps do. The collection itself is not the operation's: a
	// program collects when it allocated enough (allocs_per_op tells how
	// often), so it is reported apart (gc_ms).
	t1 := time.Now()
	runtime.GC()
	t2 := time.Now()
	waitCleanups(traced)
	cleanups := time.Since(t2)
	gc := t2.Sub(t1)
	ops, ns, loopNs := 0, 0.0, 0.0
	if iters > 0 {
		ops = iters + iters/10 + 1
		ns = float64((loop + cleanups).Nanoseconds()) / float64(iters)
		loopNs = float64(loop.Nanoseconds()) / float64(iters)
	}
	if c != nil {
		c.Close()
	}
	// Every cleanup of the run, so that strace counts those munmaps as the
	// loop's.
	for range 3 {
		runtime.GC()
		waitCleanups(traced)
	}
	allocs, bytes := 0.0, 0.0
	if iters > 0 {
		allocs = float64(m1.Mallocs-m0.Mallocs) / float64(iters)
		bytes = float64(m1.TotalAlloc-m0.TotalAlloc) / float64(iters)
	}
	vcsw, ivcsw, user, sys := 0.0, 0.0, 0.0, 0.0
	if iters > 0 {
		vcsw, ivcsw = float64(v1-v0)/float64(iters), float64(iv1-iv0)/float64(iters)
		user, sys = float64(u1-u0)*1e7/float64(iters), float64(s1-s0)*1e7/float64(iters)
	}
	fmt.Printf("ctlbench op=%s iters=%d ops=%d ns_per_op=%.0f vcsw_per_op=%.3f ivcsw_per_op=%.3f loop_ns_per_op=%.0f gc_ms=%.1f allocs_per_op=%.1f bytes_per_op=%.0f gcs=%d user_ns_per_op=%.0f sys_ns_per_op=%.0f\n",
		op, iters, ops, ns, vcsw, ivcsw, loopNs, float64(gc.Microseconds())/1000, allocs, bytes, m1.NumGC-m0.NumGC, user, sys)
	return 0
}

// cpuTicks returns the process's user and system CPU time so far (all
// threads, /proc/self/stat's utime and stime), in USER_HZ ticks of 10 ms:
// what getrusage gives the C side, without importing syscall.
func cpuTicks() (user, sys int64) {
	b, _ := os.ReadFile("/proc/self/stat")
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		s = s[i+1:] // the command name may hold spaces
	}
	f := strings.Fields(s) // f[0] is field 3 (state)
	if len(f) > 12 {
		user, _ = strconv.ParseInt(f[11], 10, 64) // field 14
		sys, _ = strconv.ParseInt(f[12], 10, 64)  // field 15
	}
	return user, sys
}

// ctxSwitches sums the voluntary and involuntary context switches of the
// process's threads (getrusage's figures, which the C side prints, without
// importing syscall).
func ctxSwitches() (vol, invol int) {
	ents, _ := os.ReadDir("/proc/self/task")
	for _, e := range ents {
		b, _ := os.ReadFile("/proc/self/task/" + e.Name() + "/status")
		for _, l := range strings.Split(string(b), "\n") {
			k, v, _ := strings.Cut(l, ":")
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			switch k {
			case "voluntary_ctxt_switches":
				vol += n
			case "nonvoluntary_ctxt_switches":
				invol += n
			}
		}
	}
	return vol, invol
}

// waitCleanups waits until the cleanups and finalizers (the Mappings')
// queued so far have run (or a few seconds passed). Under strace it
// yields rather than sleeps: a timer would make the runtime write and
// read its netpoller's eventfd, which strace would count as the loop's;
// timed, it sleeps, leaving the CPU to the finalizers.
func waitCleanups(traced bool) {
	m := []metrics.Sample{{Name: "/gc/cleanups/queued:cleanups"}, {Name: "/gc/cleanups/executed:cleanups"},
		{Name: "/gc/finalizers/queued:finalizers"}, {Name: "/gc/finalizers/executed:finalizers"}}
	pause := func() { time.Sleep(200 * time.Microsecond) }
	if traced {
		pause = runtime.Gosched
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); pause() {
		metrics.Read(m)
		if m[1].Value.Uint64() >= m[0].Value.Uint64() && m[3].Value.Uint64() >= m[2].Value.Uint64() &&
			(retiredRings == nil || retiredRings() == 0) {
			return
		}
	}
}

// retiredRings, when set (controlpath_retired_vm_test.go), counts the
// destroyed rings whose cleanup has not munmapped them yet: the cleanup
// metrics above may call the queue done before its last munmaps ran, and
// a ring still retired at Close is replaced there (one more mmap).
var retiredRings func() int

// ctlResult is one run's output line.
type ctlResult struct {
	ops           int
	nsPerOp       float64
	loopNs, gcMs  float64 // Go: the loop alone; the collection after it
	vcsw, ivcsw   float64 // context switches per operation
	allocs, bytes float64 // per operation (Go only)
	user, sys     float64 // CPU time per operation, ns (10 ms ticks over the loop)
}

// ctlSide is one implementation measured: a Go test binary that knows
// PUREVERBS_CTLBENCH (this one, or -ctl.before's), or pv_ctlbench.
type ctlSide struct {
	name  string
	goBin string // "" for the C program
}

// ctlCommand returns the command of one side's run.
func ctlCommand(s ctlSide, op string, iters int, strace []string) *exec.Cmd {
	var argv []string
	var env []string
	if s.goBin != "" {
		argv = []string{s.goBin}
		env = []string{fmt.Sprintf("%s=%s %s %d", ctlEnv, *ctlDev, op, iters)}
		if strace != nil {
			env[0] += " traced"
		}
	} else {
		argv = []string{"pv_ctlbench", *ctlDev, op, strconv.Itoa(iters)}
	}
	argv = append(strace, argv...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	return cmd
}

func ctlParse(t *testing.T, out string) ctlResult {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if !strings.HasPrefix(l, "ctlbench ") {
			continue
		}
		var r ctlResult
		for _, f := range strings.Fields(l) {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "ops":
				r.ops, _ = strconv.Atoi(v)
			case "ns_per_op":
				r.nsPerOp, _ = strconv.ParseFloat(v, 64)
			case "vcsw_per_op":
				r.vcsw, _ = strconv.ParseFloat(v, 64)
			case "ivcsw_per_op":
				r.ivcsw, _ = strconv.ParseFloat(v, 64)
			case "loop_ns_per_op":
				r.loopNs, _ = strconv.ParseFloat(v, 64)
			case "gc_ms":
				r.gcMs, _ = strconv.ParseFloat(v, 64)
			case "allocs_per_op":
				r.allocs, _ = strconv.ParseFloat(v, 64)
			case "bytes_per_op":
				r.bytes, _ = strconv.ParseFloat(v, 64)
			case "user_ns_per_op":
				r.user, _ = strconv.ParseFloat(v, 64)
			case "sys_ns_per_op":
				r.sys, _ = strconv.ParseFloat(v, 64)
			}
		}
		return r
	}
	t.Fatalf("no ctlbench line in %q", out)
	return ctlResult{}
}

// ctlRun runs one side untraced.
func ctlRun(t *testing.T, s ctlSide, op string, iters int) ctlResult {
	t.Helper()
	out, err := ctlCommand(s, op, iters, nil).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", s.name, op, err, out)
	}
	return ctlParse(t, string(out))
}

// ctlSyscalls runs one side under strace -f -c, with no iterations and
// with iters, and returns the difference per operation by system call:
// the loop's calls without the process's start and set-up. Tracing every
// call slows each by a ptrace stop, which makes the Go runtime's
// time-driven calls (sysmon's nanosleep, preemption signals, futex
// wake-ups of Ms that take over a P in a long system call) far more
// frequent than they are: those (ctlRuntimeCall) are left out of the full
// trace, and the telling ones (ctlRuntimeTraced) counted in separate runs
// that trace only them (--seccomp-bpf: the others run at full speed).
// Even so each of those stops the thread that makes it, so their counts
// are an indication; the context switches of untraced runs are the
// steadier measure of the runtime's thread wake-ups.
func ctlSyscalls(t *testing.T, s ctlSide, op string, iters int) map[string]float64 {
	t.Helper()
	all := ctlStraceDiff(t, s, op, iters, nil)
	rt := ctlStraceDiff(t, s, op, iters, []string{"--seccomp-bpf", "-e", "trace=" + strings.Join(ctlRuntimeTraced, ",")})
	per := map[string]float64{}
	for k, v := range all {
		if !ctlRuntimeCall[k] {
			per[k] = v
		}
	}
	for k, v := range rt {
		per[k] = v
	}
	return per
}

// ctlStraceDiff is one pair of strace -f -c runs (0 and iters iterations)
// with the extra strace flags.
func ctlStraceDiff(t *testing.T, s ctlSide, op string, iters int, flags []string) map[string]float64 {
	t.Helper()
	count := func(n int) (map[string]int, int) {
		f, err := os.CreateTemp("", "strace")
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		defer os.Remove(f.Name())
		out, err := ctlCommand(s, op, n, append([]string{"strace", "-f", "-c", "-o", f.Name()}, flags...)).CombinedOutput()
		if err != nil {
			t.Fatalf("strace %s %s: %v\n%s", s.name, op, err, out)
		}
		r := ctlParse(t, string(out))
		b, err := os.ReadFile(f.Name())
		if err != nil {
			t.Fatal(err)
		}
		return parseStraceC(t, string(b)), r.ops
	}
	base, _ := count(0)
	loop, ops := count(iters)
	per := map[string]float64{}
	for name, n := range loop {
		if d := n - base[name]; d != 0 {
			per[name] = float64(d) / float64(ops)
		}
	}
	return per
}

// parseStraceC reads strace -c's table: "% time seconds usecs/call calls
// [errors] syscall".
func parseStraceC(t *testing.T, s string) map[string]int {
	t.Helper()
	m := map[string]int{}
	for _, l := range strings.Split(s, "\n") {
		f := strings.Fields(l)
		if len(f) < 5 || len(f) > 6 || f[len(f)-1] == "total" || f[len(f)-1] == "syscall" {
			continue
		}
		n, err := strconv.Atoi(f[3])
		if err != nil {
			continue
		}
		m[f[len(f)-1]] = n
	}
	return m
}

func fmtCalls(m map[string]float64) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if v := m[k]; v >= 0.005 || v <= -0.005 {
			parts = append(parts, fmt.Sprintf("%s %.2f", k, v))
		}
	}
	return strings.Join(parts, ", ")
}

func medianOf(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// TestVMControlPath compares the control path with libibverbs: per
// operation, rounds of a timed Go run and a timed C run (the order
// alternating), then both under strace. It logs a table of medians and
// system calls per operation, and fails if Go makes more system calls per
// operation than C for the verbs themselves (the Go runtime's own calls,
// futex and the like, are reported, not judged: they are not per
// operation, see docs/performance.md).
func TestVMControlPath(t *testing.T) {
	testkit.RequireVM(t)
	testkit.SkipUnderRace(t, "timings and system call counts against libibverbs")
	if _, err := exec.LookPath("pv_ctlbench"); err != nil {
		t.Fatalf("pv_ctlbench (internal/testkit/testdata/ctools, compiled by the rxevm runner) is not in the guest: %v", err)
	}
	if _, err := exec.LookPath("strace"); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// C first: ratios are against it. Rounds rotate the order.
	sides := []ctlSide{{"C", ""}, {"Go", self}}
	if *ctlBefore != "" {
		sides = append(sides, ctlSide{"Go before", *ctlBefore})
	}
	start := time.Now()
	t.Logf("kernel %s, device %s, %d rounds of %d iterations, strace runs of %d iterations, clocksource %s",
		testkit.KernelRelease(), *ctlDev, *ctlRounds, *ctlIters, *ctlStrace, ctlClocksource())
	var times, calls, cpu, detail strings.Builder
	fmt.Fprintf(&times, "| operation |")
	fmt.Fprintf(&calls, "| operation |")
	fmt.Fprintf(&cpu, "| operation |")
	for _, s := range sides {
		fmt.Fprintf(&times, " %s ns/op |", s.name)
		fmt.Fprintf(&calls, " %s calls/op |", s.name)
		fmt.Fprintf(&cpu, " %s CPU user + sys ns/op |", s.name)
	}
	fmt.Fprintf(&cpu, "\n|%s\n", strings.Repeat(" ---: |", 1+len(sides)))
	for _, s := range sides[1:] {
		fmt.Fprintf(&times, " %s/C |", s.name)
	}
	fmt.Fprintf(&calls, " context switches/op, %s | Go allocs/op |\n", strings.Join(func() []string {
		var n []string
		for _, s := range sides {
			n = append(n, s.name)
		}
		return n
	}(), " / "))
	fmt.Fprintf(&times, "\n|%s\n", strings.Repeat(" ---: |", 1+2*len(sides)-1))
	fmt.Fprintf(&calls, "|%s\n", strings.Repeat(" ---: |", 1+len(sides)+2))
	for _, op := range strings.Split(*ctlOpList, ",") {
		if !slices.Contains(ctlOps, op) {
			t.Fatalf("-ctl.ops: unknown operation %q (want some of %v)", op, ctlOps)
		}
		ns := make([][]float64, len(sides))       // per side, per round
		ratio := make([][]float64, len(sides))    // per side, per round: against C
		switches := make([][]float64, len(sides)) // per side, per round
		user := make([][]float64, len(sides))     // per side, per round: CPU ns/op
		sysT := make([][]float64, len(sides))
		last := make([]ctlResult, len(sides))
		for r := range *ctlRounds {
			res := make([]ctlResult, len(sides))
			for k := range sides {
				i := (r + k) % len(sides)
				res[i] = ctlRun(t, sides[i], op, *ctlIters)
			}
			var line []string
			for i, g := range res {
				ns[i] = append(ns[i], g.nsPerOp)
				ratio[i] = append(ratio[i], g.nsPerOp/res[0].nsPerOp)
				switches[i] = append(switches[i], g.vcsw+g.ivcsw)
				last[i] = g
				if sides[i].goBin != "" {
					line = append(line, fmt.Sprintf("%s %.0f ns/op (loop %.0f, then a %.1f ms collection; context switches %.3f+%.3f/op; CPU user %.0f + sys %.0f ns/op)",
						sides[i].name, g.nsPerOp, g.loopNs, g.gcMs, g.vcsw, g.ivcsw, g.user, g.sys))
				} else {
					line = append(line, fmt.Sprintf("%s %.0f ns/op (context switches %.3f+%.3f/op; CPU user %.0f + sys %.0f ns/op)", sides[i].name, g.nsPerOp, g.vcsw, g.ivcsw, g.user, g.sys))
				}
				user[i] = append(user[i], g.user)
				sysT[i] = append(sysT[i], g.sys)
			}
			t.Logf("%s round %d: %s", op, r+1, strings.Join(line, "; "))
		}
		fmt.Fprintf(&times, "| %s |", op)
		fmt.Fprintf(&calls, "| %s |", op)
		for i := range sides {
			fmt.Fprintf(&times, " %.0f (%.0f) |", medianOf(ns[i]), slices.Min(ns[i]))
		}
		for i := range sides[1:] {
			fmt.Fprintf(&times, " %.2f |", medianOf(ratio[i+1]))
		}
		fmt.Fprintf(&times, "\n")
		fmt.Fprintf(&cpu, "| %s |", op)
		for i := range sides {
			fmt.Fprintf(&cpu, " %.0f + %.0f |", medianOf(user[i]), medianOf(sysT[i]))
		}
		fmt.Fprintf(&cpu, "\n")
		var cl float64
		var sw []string
		for i, sd := range sides {
			sc := ctlSyscalls(t, sd, op, *ctlStrace)
			l, rt := 0.0, 0.0
			for k, v := range sc {
				if ctlRuntimeCall[k] {
					rt += v
				} else {
					l += v
				}
			}
			if i == 0 {
				cl = l
				fmt.Fprintf(&calls, " %.2f |", l+rt)
			} else {
				fmt.Fprintf(&calls, " %.2f + %.2f |", l, rt)
			}
			fmt.Fprintf(&detail, "%s: %-9s %s", op, sd.name, fmtCalls(sc))
			if sd.goBin != "" {
				fmt.Fprintf(&detail, " (%.1f allocations, %.0f bytes per operation)", last[i].allocs, last[i].bytes)
			}
			// The slack is the few dozen objects the rest of the process
			// (the ring returner, timers) allocates during a loop.
			if slack := 0.05 + 50/float64(*ctlIters); sd.goBin == self && last[i].allocs > ctlAllocBudget[op]+slack {
				t.Errorf("%s: Go allocates %.2f objects per operation, the budget is %.0f", op, last[i].allocs, ctlAllocBudget[op])
			}
			fmt.Fprintf(&detail, "\n")
			sw = append(sw, fmt.Sprintf("%.3f", medianOf(switches[i])))
			// The library's calls are exact counts; the runtime's and the
			// heap's are noise around them: an arena mmap now and then,
			// and the netpoller's eventfd write and read when a timer
			// wakes it, which a loaded host makes more frequent (0.02
			// each per operation were seen on 6.12 at load 5). A change
			// of the library's own adds a call per operation or half one.
			if sd.goBin == self && l > cl+0.1 {
				t.Errorf("%s: Go makes %.2f system calls per operation outside the runtime's own, C %.2f (%s)", op, l, cl, fmtCalls(sc))
			}
		}
		fmt.Fprintf(&calls, " %s | %.1f |\n", strings.Join(sw, " / "), last[1].allocs)
	}
	t.Logf("ns/op median (best) over %d rounds of %d iterations, X/C the median of the rounds' ratios; calls per operation from strace -f -c of %d iterations: the library's + the runtime's (futex, nanosleep, epoll_pwait, tgkill, traced apart with --seccomp-bpf); context switches from /proc, medians; CPU time of all the process's threads during the loop, medians (getrusage, /proc/self/stat: 10 ms ticks) (%s, %s, clocksource %s at the end, %v):\n%s\n%s\n%s\n%s",
		*ctlRounds, *ctlIters, *ctlStrace, testkit.KernelRelease(), *ctlDev, ctlClocksource(), time.Since(start).Round(time.Second),
		times.String(), calls.String(), cpu.String(), detail.String())
}

// ctlRuntimeTraced are the runtime's calls TestVMControlPath counts:
// thread sleeps and wake-ups (futex), sysmon's sleeps (nanosleep), the
// netpoller's waits and preemption signals. Tracing the others (spinning
// Ms' sched_yield above all) feeds back on itself.
var ctlRuntimeTraced = []string{"epoll_pwait", "futex", "nanosleep", "tgkill"}

// ctlRuntimeCall names the system calls the Go runtime makes on its own
// (scheduling, timers, signals), which TestVMControlPath does not count
// against the library.
var ctlRuntimeCall = map[string]bool{
	"futex": true, "nanosleep": true, "epoll_pwait": true, "epoll_wait": true, "tgkill": true,
	"getpid": true, "gettid": true, "rt_sigreturn": true, "sched_yield": true, "rt_sigprocmask": true,
	"sigaltstack": true, "clone": true, "clone3": true, "madvise": true, "sched_getaffinity": true,
}

func ctlClocksource() string {
	b, _ := os.ReadFile("/sys/devices/system/clocksource/clocksource0/current_clocksource")
	return strings.TrimSpace(string(b))
}
