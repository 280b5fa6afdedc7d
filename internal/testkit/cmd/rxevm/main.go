// Command rxevm runs Go test binaries (and arbitrary guest commands) inside
// a throw-away QEMU VM whose kernel has rdma_rxe loaded and two soft-RoCE
// devices configured: rxe0 on the dummy netdev d0 (10.99.0.1/24) and rxelo on
// lo. See docs/testing.md.
//
//	go run ./internal/testkit/cmd/rxevm [-kernel 6.1|6.12|all] [-timeout 10m] [-v] PKGS... [-- TESTFLAGS...]
//	go run ./internal/testkit/cmd/rxevm -kernel 6.1 -demo
//	go run ./internal/testkit/cmd/rxevm -kernel 6.1 -shell-cmd 'ibv_devinfo -l'
//
// TESTFLAGS are `go test` flags (-run, -v, -count, ...); they are rewritten
// to the -test.* form the compiled test binaries understand, and -test.v is
// always on. The run fails closed (report.go): a skip in the VM that is not
// on the allowlist (allowlist.go), a binary running no test, a -run
// selecting nothing, an unparsable status line or a binary that never
// reports fails it.
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"
)

type options struct {
	kernels   []kernelSpec
	timeout   time.Duration
	verbose   bool
	demo      bool
	shellCmd  string
	pkgs      []string
	testFlags []string
	cacheDir  string
	memMB     int
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
	fs.IntVar(&o.memMB, "mem", 1536, "guest memory in MiB")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: rxevm [-kernel 6.1|6.12|all] [-timeout 10m] [-v] [-demo] [-shell-cmd CMD] PKGS... [-- TESTFLAGS...]")
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
	ks, err := selectKernels(*kernel)
	if err != nil {
		return nil, err
	}
	o.kernels = ks
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
	return o, nil
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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, o))
}

func run(ctx context.Context, o *options) int {
	if err := ensureHostTools(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "rxevm:", err)
		return 2
	}
	work, err := os.MkdirTemp("", "rxevm-")
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
			fmt.Printf("rxevm: FAIL: %s matches no test in %s: nothing ran\n", parseTestFilter(o.testFlags), strings.Join(payload.unmatched, " "))
		default:
			fmt.Printf("rxevm: FAIL: no test files in %s: nothing ran\n", strings.Join(o.pkgs, " "))
		}
		return 1
	}
	if len(payload.unmatched) > 0 {
		fmt.Printf("rxevm: %d packages have no test matching %s; not run\n", len(payload.unmatched), parseTestFilter(o.testFlags))
	}

	type summary struct {
		kernel string
		ok     bool
		msg    string
		dur    time.Duration
	}
	var sums []summary
	failed := false
	for _, k := range o.kernels {
		if ctx.Err() != nil {
			break
		}
		t0 := time.Now()
		res := runKernel(ctx, o, k, payload, work)
		s := summary{kernel: k.short, ok: res.ok(), msg: res.String(), dur: time.Since(t0)}
		if !s.ok {
			failed = true
		}
		sums = append(sums, s)
	}
	fmt.Println("rxevm: ---- summary ----")
	for _, s := range sums {
		status := "ok  "
		if !s.ok {
			status = "FAIL"
		}
		fmt.Printf("rxevm: %s kernel %-5s %6.1fs  %s\n", status, s.kernel, s.dur.Seconds(), s.msg)
	}
	if ctx.Err() != nil {
		fmt.Println("rxevm: interrupted")
		return 1
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
