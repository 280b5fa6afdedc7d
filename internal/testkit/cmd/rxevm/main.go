// Command rxevm runs Go test binaries (and arbitrary guest commands) inside
// a throw-away QEMU VM whose kernel has rdma_rxe loaded and two soft-RoCE
// devices configured: rxe0 on the dummy netdev d0 (10.99.0.1/24) and rxelo on
// lo. See docs/testing.md.
//
//	go run ./internal/testkit/cmd/rxevm [-kernel 6.1|6.12|all] [-timeout 10m] [-v] PKGS... [-- TESTFLAGS...]
//	go run ./internal/testkit/cmd/rxevm -kernel 6.1 -demo
//	go run ./internal/testkit/cmd/rxevm -kernel 6.1 -shell-cmd 'ibv_devinfo -l'
//	go run ./internal/testkit/cmd/rxevm -hosts 2 [-wire tcp|tcp-nagle|udp] ./internal/testkit/twohost
//
// TESTFLAGS are `go test` flags (-run, -v, -count, ...); they are rewritten
// to the -test.* form the compiled test binaries understand, and -test.v is
// always on. The run fails closed (report.go): a skip in the VM that is not
// on the allowlist (allowlist.go), a binary running no test, a -run
// selecting nothing, an unparsable status line or a binary that never
// reports fails it.
//
// With -hosts 2 it boots two guests per kernel joined by a virtual
// Ethernet wire (pair.go) and runs the TestTwoHost* tests on host A, with
// host B serving an agent; single-host runs skip those tests. A test on A
// may announce that host B loses its power (testkit.Host.PowerOff): the
// runner then kills B's QEMU and accepts B's end; such tests
// (TestTwoHostPowerOff*) run alone in their boot (pair.go).
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/pureverbs/pureverbs/internal/testkit"
)

type options struct {
	kernels   []kernelSpec
	timeout   time.Duration
	verbose   bool
	demo      bool
	shellCmd  string
	pkgs      []string
	testFlags []string
	// userTestFlags are testFlags as given, before twoHostFilter.
	userTestFlags []string
	cacheDir      string
	memMB         int
	smp           int    // vCPUs per guest
	bootArgs      string // added to the guest kernel's command line
	cpu           string // QEMU -cpu model ("": defaultCPU)
	hosts         int    // 1, or 2 for the two-host topology
	wire          string // -hosts 2: "tcp" (socket listen/connect) or "udp"
	race          bool   // build the test binaries with -race (cgo, glibc)
	valgrind      bool   // add valgrind to the guest root (its own cached base image)
	parallel      bool   // boot the kernels' guests at the same time (one host each)
}

func parseArgs(args []string) (*options, error) {
	o := &options{}
	if i := slices.Index(args, "--"); i >= 0 {
		o.testFlags = goTestFlagsToBinary(args[i+1:])
		args = args[:i]
	}
	fs := flag.NewFlagSet("rxevm", flag.ContinueOnError)
	kernel := fs.String("kernel", "6.1", "kernel to boot: 6.1, 6.12, all (or a comma list)")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "limit per kernel for preparing, booting and running everything")
	fs.BoolVar(&o.verbose, "v", false, "show the whole guest console (kernel boot included) and build steps")
	fs.BoolVar(&o.demo, "demo", false, "run internal/testkit/demo.sh in the guest")
	fs.StringVar(&o.shellCmd, "shell-cmd", "", "run this shell command in the guest and print its output")
	fs.IntVar(&o.memMB, "mem", 1536, "guest memory in MiB (per guest)")
	fs.IntVar(&o.smp, "smp", 2, "vCPUs per guest, 1-16 (experiments: a spare vCPU beside two busy-polling processes; the suite and its timings assume 2)")
	fs.BoolVar(&o.race, "race", false, "build the test binaries with the race detector (CGO_ENABLED=1 -race: linked against glibc, which the guest root has from the same Debian 12 packages)")
	fs.BoolVar(&o.valgrind, "valgrind", false, "add valgrind to the guests (experiments: callgrind instruction counts of the Go and C tools, docs/performance.md); a base image of its own")
	fs.StringVar(&o.cpu, "cpu", defaultCPU, "QEMU's -cpu model and features for the guests (experiments: what the emulated CPU's features cost under TCG; the default leaves out ERMS, docs/testing.md)")
	fs.StringVar(&o.bootArgs, "boot-args", "", "more kernel command-line arguments for the guests (experiments: clocksource=..., ...)")
	fs.IntVar(&o.hosts, "hosts", 1, "1: one guest; 2: two guests joined by a virtual Ethernet wire, running the TestTwoHost* tests on host A")
	fs.BoolVar(&o.parallel, "parallel", false, "with several kernels and -hosts 1, boot their guests at the same time: the first kernel's output streams, each other's follows in order once it ends (its tests run slower, the whole sooner)")
	fs.StringVar(&o.wire, "wire", "tcp", "with -hosts 2, QEMU's socket netdev as a TCP stream (tcp: host A listens, B connects; tcp-nagle: without the runner's TCP_NODELAY on A's end) or UDP datagrams (udp)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: rxevm [-kernel 6.1|6.12|all] [-timeout 10m] [-v] [-hosts 1|2] [-wire tcp|tcp-nagle|udp] [-demo] [-shell-cmd CMD] PKGS... [-- TESTFLAGS...]")
		fs.PrintDefaults()
	}
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		o.pkgs = append(o.pkgs, rest[0])
		args = rest[1:]
	}
	raceSkips = o.race
	ks, err := selectKernels(*kernel)
	if err != nil {
		return nil, err
	}
	o.kernels = ks
	switch {
	case o.hosts != 1 && o.hosts != 2:
		return nil, fmt.Errorf("-hosts %d: want 1 or 2", o.hosts)
	case o.smp < 1 || o.smp > 16:
		return nil, fmt.Errorf("-smp %d: want 1 to 16", o.smp)
	case o.wire != "tcp" && o.wire != "tcp-nagle" && o.wire != "udp":
		return nil, fmt.Errorf("-wire %q: want tcp, tcp-nagle or udp", o.wire)
	case o.hosts == 2 && o.demo:
		return nil, errors.New("-demo runs on one host; drop -hosts 2")
	}
	o.userTestFlags = o.testFlags
	o.testFlags = twoHostFilter(o.testFlags, o.hosts)
	if len(o.pkgs) == 0 && !o.demo && o.shellCmd == "" {
		return nil, errors.New("nothing to run: give packages, -demo or -shell-cmd (-h for usage)")
	}
	o.cacheDir = os.Getenv("PUREVERBS_CACHE")
	if o.cacheDir == "" {
		d, err := os.UserCacheDir()
		if err != nil {
			return nil, fmt.Errorf("no cache dir: set PUREVERBS_CACHE: %w", err)
		}
		o.cacheDir = d + "/pureverbs"
	}
	// Absolute: the image build runs commands in other directories with
	// paths in the cache (a relative PUREVERBS_CACHE broke it).
	if o.cacheDir, err = filepath.Abs(o.cacheDir); err != nil {
		return nil, err
	}
	return o, nil
}

// makeWorkDir creates the run's temporary directory, in TMPDIR, and
// returns its absolute path (a relative TMPDIR broke the image build,
// which runs commands in other directories with paths in it).
func makeWorkDir() (string, error) {
	d, err := os.MkdirTemp("", "rxevm-")
	if err != nil {
		return "", err
	}
	abs, err := filepath.Abs(d)
	if err != nil {
		os.RemoveAll(d)
		return "", err
	}
	return abs, nil
}

// twoHostPattern selects the tests that need the two-host topology.
const twoHostPattern = "^TestTwoHost"

var twoHostRe = regexp.MustCompile(twoHostPattern)

// powerOffPattern selects the tests that power host B off
// (testkit.Host.PowerOff): each must run alone in its boot.
const powerOffPattern = "^" + testkit.PowerOffPrefix

// twoHostFilter keeps the TestTwoHost* tests out of single-host runs (they
// need the peer host: an added -test.skip, so that they neither run nor
// skip), and has two-host runs select only them unless -run says
// otherwise (buildPayload then checks that it selects nothing else). A
// two-host run without -run also leaves out the TestTwoHostPowerOff*
// tests (run names them: they power off host B and need a boot of their
// own, which make vmtest2 gives them); with -run, a selection that has
// one beside other tests fails before booting (powerOffProblem).
func twoHostFilter(flags []string, hosts int) []string {
	f := parseTestFilter(flags)
	skip := func(pattern string) []string {
		if f.hasSkip && f.skip != "" {
			// Top-level '|' is an alternative for the testing package too.
			return append(flags, "-test.skip", f.skip+"|"+pattern)
		}
		return append(flags, "-test.skip", pattern)
	}
	switch {
	case hosts == 1:
		return skip(twoHostPattern)
	case !f.hasRun:
		return append(skip(powerOffPattern), "-test.run", twoHostPattern)
	}
	return flags
}

// goTestFlags are the `go test` flags that map to -test.NAME in a test binary.
var goTestFlags = map[string]bool{
	"bench": true, "benchmem": true, "benchtime": true, "blockprofile": true,
	"blockprofilerate": true, "count": true, "cpu": true, "cpuprofile": true,
	"failfast": true, "fullpath": true, "list": true, "memprofile": true,
	"memprofilerate": true, "mutexprofile": true, "mutexprofilefraction": true,
	"outputdir": true, "parallel": true, "run": true, "short": true,
	"shuffle": true, "skip": true, "timeout": true, "trace": true, "v": true,
	"coverprofile": true,
}

func goTestFlagsToBinary(in []string) []string {
	out := make([]string, 0, len(in))
	for _, a := range in {
		if strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "-test.") {
			name := strings.TrimLeft(a, "-")
			if i := strings.IndexByte(name, '='); i >= 0 {
				name = name[:i]
			}
			if goTestFlags[name] {
				a = "-test." + strings.TrimLeft(a, "-")
			}
		}
		out = append(out, a)
	}
	return out
}

// stopSignals end a run cleanly (its guests stopped, its temporary
// directory of hundreds of MB removed): Ctrl-C, kill, and SIGHUP, which a
// dropped ssh session sends, unless the run was started with SIGHUP
// ignored (nohup): a handler would undo that. SIGQUIT keeps Go's default,
// a dump of every goroutine, to see where a run hangs.
func stopSignals() []os.Signal {
	s := []os.Signal{os.Interrupt, syscall.SIGTERM}
	if !sighupIgnored() {
		s = append(s, syscall.SIGHUP)
	}
	return s
}

// sighupIgnored is signal.Ignored(SIGHUP) (a variable for tests: the
// runtime keeps a signal it was told to ignore marked so for good).
var sighupIgnored = func() bool { return signal.Ignored(syscall.SIGHUP) }

func main() {
	o, err := parseArgs(os.Args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "rxevm:", err)
		os.Exit(2)
	}
	marker = "@@PUREVERBS-" + rand.Text()[:8] + " "
	ctx, stop := signal.NotifyContext(context.Background(), stopSignals()...)
	defer stop()
	os.Exit(run(ctx, o))
}

// summary is one kernel's line in the runner's summary.
type summary struct {
	kernel string
	ok     bool
	msg    string
	dur    time.Duration
	fails  []string // failureLines
	// One guest per kernel: the tests that skipped as another kernel's
	// (testkit.OneKernel), and whether a test passed on this one.
	splits []splitSkip
	passed func(pkg, test string) bool
}

// checkSplits holds each test that a kernel of sums skipped with
// testkit.OneKernel to its promise: it must have passed on the kernel it
// named. That kernel is one this run booted: the guest's run script says
// which (testkit.RunKernelsEnv), and OneKernel skips for no other.
func checkSplits(sums []summary) (fails []string) {
	for _, s := range sums {
		for _, sp := range s.splits {
			i := slices.IndexFunc(sums, func(o summary) bool { return o.kernel == string(sp.on) })
			switch {
			case i < 0:
				fails = append(fails, fmt.Sprintf("%s %s skipped on %s as a test of %s (testkit.OneKernel), which this run did not boot",
					sp.pkg, sp.test, s.kernel, sp.on))
			case sums[i].passed == nil || !sums[i].passed(sp.pkg, sp.test):
				fails = append(fails, fmt.Sprintf("%s %s skipped on %s as a test of %s (testkit.OneKernel), and did not pass on %s",
					sp.pkg, sp.test, s.kernel, sp.on, sp.on))
			}
		}
	}
	return fails
}

// runParallel runs one for every kernel at the same time (-parallel).
// The first kernel's output goes to stdout as it comes; every other
// kernel's is kept and printed, whole and in the order of kernels, once
// the kernels before it have ended, so that each kernel's part of the
// log reads as in a run of one kernel at a time.
func runParallel(kernels []kernelSpec, one func(kernelSpec, io.Writer) summary) []summary {
	sums := make([]summary, len(kernels))
	bufs := make([]*testkit.Output, len(kernels))
	done := make([]chan struct{}, len(kernels))
	for i, k := range kernels {
		done[i] = make(chan struct{})
		var w io.Writer = os.Stdout
		if i > 0 {
			bufs[i] = &testkit.Output{}
			w = bufs[i]
		}
		go func() {
			defer close(done[i])
			sums[i] = one(k, w)
		}()
	}
	for i := range kernels {
		<-done[i]
		if i > 0 {
			fmt.Printf("rxevm: (kernel %s ran at the same time as kernel %s: its output follows)\n", kernels[i].short, kernels[0].short)
			os.Stdout.WriteString(bufs[i].String())
		}
	}
	return sums
}

func run(ctx context.Context, o *options) int {
	if err := ensureHostTools(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "rxevm:", err)
		return 2
	}
	work, err := makeWorkDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, "rxevm:", err)
		return 2
	}
	defer os.RemoveAll(work)

	start := time.Now()
	payload, err := buildPayload(ctx, o, work)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rxevm: build:", err)
		return 2
	}
	fmt.Printf("rxevm: built %d test binaries in %s\n", len(payload.tests), time.Since(start).Round(100*time.Millisecond))
	if len(payload.tests) == 0 && !o.demo && o.shellCmd == "" {
		switch {
		case len(payload.broken) > 0:
			fmt.Printf("rxevm: FAIL: %d packages did not build: %s\n", len(payload.broken), strings.Join(payload.broken, " "))
		case len(payload.unmatched) > 0:
			hint := ""
			if payload.twoHostOnly {
				hint = " (it selects TestTwoHost* tests, which run only with -hosts 2)"
			}
			fmt.Printf("rxevm: FAIL: %s matches no test in %s: nothing ran%s\n", parseTestFilter(o.testFlags), strings.Join(payload.unmatched, " "), hint)
		default:
			fmt.Printf("rxevm: FAIL: no test files in %s: nothing ran\n", strings.Join(o.pkgs, " "))
		}
		return 1
	}
	if len(payload.unmatched) > 0 {
		fmt.Printf("rxevm: %d packages have no test matching %s; not run\n", len(payload.unmatched), parseTestFilter(o.testFlags))
	}
	if len(payload.notTwoHost) > 0 {
		fmt.Printf("rxevm: FAIL: -hosts 2 runs only TestTwoHost* tests, and %s also selects %s\n",
			parseTestFilter(o.testFlags), strings.Join(payload.notTwoHost, ", "))
		return 1
	}
	if msg := payload.powerOffProblem(testCount(o.testFlags)); msg != "" {
		fmt.Printf("rxevm: FAIL: %s\n", msg)
		return 1
	}
	if len(payload.powerOffLeftOut) > 0 {
		fmt.Printf("rxevm: not run in this boot: %s (they power off host B, so each needs a boot of its own: -run '^NAME$'; make vmtest2 runs them)\n",
			strings.Join(payload.powerOffLeftOut, ", "))
	}

	var sums []summary
	failed := false
	one := func(k kernelSpec, w io.Writer) summary {
		t0 := time.Now()
		if o.hosts == 2 {
			res := runPair(ctx, o, k, payload, work)
			return summary{kernel: k.short, ok: res.ok(), msg: res.String(), dur: time.Since(t0),
				fails: append(res.a.failureLines(), res.b.failureLines()...)}
		}
		res := runKernel(ctx, o, k, payload, work, w)
		return summary{kernel: k.short, ok: res.ok(), msg: res.String(), dur: time.Since(t0), fails: res.failureLines(),
			splits: res.splitSkips(), passed: res.passed}
	}
	if o.parallel && o.hosts == 1 && len(o.kernels) > 1 {
		sums = runParallel(o.kernels, one)
	} else {
		for _, k := range o.kernels {
			if ctx.Err() != nil {
				break
			}
			sums = append(sums, one(k, os.Stdout))
		}
	}
	for _, s := range sums {
		if !s.ok {
			failed = true
		}
	}
	fmt.Println("rxevm: ---- summary ----")
	for _, s := range sums {
		status := "ok  "
		if !s.ok {
			status = "FAIL"
		}
		fmt.Printf("rxevm: %s kernel %-5s %6.1fs  %s\n", status, s.kernel, s.dur.Seconds(), s.msg)
		for _, l := range s.fails {
			fmt.Printf("rxevm:   %s\n", l)
		}
	}
	if ctx.Err() != nil {
		fmt.Println("rxevm: interrupted")
		return 1
	}
	for _, l := range checkSplits(sums) {
		fmt.Printf("rxevm: FAIL: %s\n", l)
		failed = true
	}
	if len(payload.broken) > 0 {
		fmt.Printf("rxevm: FAIL: %d packages did not build: %s\n", len(payload.broken), strings.Join(payload.broken, " "))
		failed = true
	}
	if failed {
		return 1
	}
	return 0
}
