package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pureverbs/pureverbs/internal/testkit"
)

type testBinary struct {
	importPath string
	rel        string // package dir relative to the module root ("." for the root)
	file       string // host path of the compiled binary
	label      string
}

type payload struct {
	modDir  string
	overlay string // directory staged for the per-run cpio
	tests   []testBinary
	broken  []string // packages whose test binary did not build
	// Packages with no test that -run/-skip/-bench select, left out of
	// the guest (none of them matching at all fails the run).
	unmatched []string
	// -hosts 2: selected tests that are not TestTwoHost* (pkg.TestX); any
	// fails the run before booting.
	notTwoHost []string
	// Single host: some package had nothing to run only because -run
	// selected TestTwoHost* tests.
	twoHostOnly bool
	// -hosts 2: the tests selected (pkg.TestX), the TestTwoHostPowerOff*
	// ones among them, those left out because -run was not given, and
	// whether some package's selection could not be told
	// (powerOffProblem).
	selected, powerOff, powerOffLeftOut []string
	selectionUnknown                    bool
}

// powerOffProblem says why the -hosts 2 selection cannot run in one boot
// ("" if it can): a test that powers host B off
// (testkit.PowerOffPrefix) must be the only test of its boot, run once,
// since nothing after it can reach host B.
func (p *payload) powerOffProblem(count int) string {
	switch {
	case len(p.powerOff) == 0:
		return ""
	case len(p.selected) > 1:
		first := p.powerOff[0]
		others := slices.DeleteFunc(slices.Clone(p.selected), func(s string) bool { return s == first })
		return fmt.Sprintf("%s powers off host B, so it must run alone in its boot, but the selection also runs %s: "+
			"select it alone (-run '^%s$') and the rest with -skip '^%s' (make vmtest2 does both)",
			first, strings.Join(others, ", "), first[strings.LastIndexByte(first, '.')+1:], testkit.PowerOffPrefix)
	case p.selectionUnknown:
		return fmt.Sprintf("%s powers off host B, so it must run alone in its boot, and the tests of some packages could not be listed", p.powerOff[0])
	case count > 1:
		return fmt.Sprintf("%s powers off host B: it can run only once per boot, not -count=%d", p.powerOff[0], count)
	}
	return ""
}

// buildPayload compiles the test binaries and guest tools and stages them in
// work/overlay, laid out as the guest will see them.
func buildPayload(ctx context.Context, o *options, work string) (*payload, error) {
	modLine, err := cmdOutput(ctx, "", nil, "go", "list", "-m", "-f", "{{.Path}}|{{.Dir}}")
	if err != nil {
		return nil, err
	}
	modPath, modDir, _ := strings.Cut(strings.TrimSpace(strings.Split(modLine, "\n")[0]), "|")
	p := &payload{modDir: modDir, overlay: filepath.Join(work, "overlay")}
	for _, d := range []string{"pv/t", "pv/src", "usr/bin"} {
		if err := os.MkdirAll(filepath.Join(p.overlay, d), 0o755); err != nil {
			return nil, err
		}
	}
	env := []string{"CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64"}
	// Test binaries: static, or with -race linked against glibc (the
	// race runtime needs cgo), which the guest root has: the guest's
	// own, Debian 12's, from the C tools' sysroot (raceEnv).
	testEnv, testBuild := env, []string{"test", "-c"}
	var raceLibDirs []string
	if o.race {
		if err := ensureCToolPkgs(ctx); err != nil {
			return nil, err
		}
		sysroot, err := cToolSysroot(ctx, o.cacheDir)
		if err != nil {
			return nil, fmt.Errorf("the sysroot of the -race binaries: %w", err)
		}
		testEnv, raceLibDirs = raceEnv(sysroot), sysrootLibDirs(sysroot)
		testBuild = append(testBuild, "-race")
	}
	filter := parseTestFilter(o.testFlags)

	if len(o.pkgs) > 0 {
		out, err := cmdOutput(ctx, "", nil, "go", append([]string{"list", "-e", "-f",
			"{{.ImportPath}}|{{.Dir}}|{{len .TestGoFiles}}|{{len .XTestGoFiles}}|{{if .Error}}{{.Error}}{{end}}"}, o.pkgs...)...)
		if err != nil {
			return nil, err
		}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			f := strings.SplitN(line, "|", 5)
			if len(f) != 5 {
				continue
			}
			if f[4] != "" {
				return nil, fmt.Errorf("package %s: %s", f[0], f[4])
			}
			if f[2] == "0" && f[3] == "0" {
				if o.verbose {
					fmt.Printf("rxevm: %s has no tests; skipped\n", f[0])
				}
				continue
			}
			rel, err := filepath.Rel(modDir, f[1])
			if err != nil || strings.HasPrefix(rel, "..") {
				return nil, fmt.Errorf("package %s is outside module %s", f[0], modPath)
			}
			label := strings.TrimPrefix(strings.TrimPrefix(f[0], modPath), "/")
			if label == "" {
				label = "root"
			}
			label = strings.ReplaceAll(label, "/", "_")
			tb := testBinary{importPath: f[0], rel: rel, label: f[0],
				file: filepath.Join(p.overlay, "pv/t", label+".test")}
			t0 := time.Now()
			if err := runCmd(ctx, "", testEnv, "go", append(testBuild, "-o", tb.file, f[0])...); err != nil {
				if ctx.Err() != nil {
					return nil, err
				}
				// Like go test: report the package as failed, run the rest.
				fmt.Printf("rxevm: FAIL %s [build failed]: %v\n", f[0], err)
				p.broken = append(p.broken, f[0])
				continue
			}
			if o.race {
				// A binary the guest's glibc cannot start would fail
				// every test of the package with a loader message.
				if err := checkLibVersions(tb.file, raceLibDirs); err != nil {
					return nil, fmt.Errorf("-race: %w", err)
				}
			}
			if o.verbose {
				fmt.Printf("rxevm: built %s (%s)\n", f[0], time.Since(t0).Round(time.Millisecond))
			}
			if filter.active() {
				sel, all, known := selectedTests(ctx, filter, tb, f[1], o.verbose)
				if known && len(sel) == 0 && o.hosts == 1 {
					// Only because single-host runs skip TestTwoHost*?
					user := parseTestFilter(o.userTestFlags)
					for _, n := range all {
						if u, _ := user.selected([]string{n}); twoHostRe.MatchString(n) && len(u) > 0 {
							p.twoHostOnly = true
						}
					}
				}
				if o.hosts == 2 {
					p.noteTwoHost(o, f[0], sel, all, known)
				}
				if known && len(sel) == 0 {
					p.unmatched = append(p.unmatched, f[0])
					if err := os.Remove(tb.file); err != nil {
						return nil, err
					}
					continue
				}
				if o.hosts == 2 {
					for _, n := range sel {
						if !twoHostRe.MatchString(n) {
							p.notTwoHost = append(p.notTwoHost, f[0]+"."+n)
						}
					}
				}
			}
			// Tests run in (a copy of) their package directory; only testdata is copied.
			dst := filepath.Join(p.overlay, "pv/src", rel)
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return nil, err
			}
			if fi, err := os.Stat(filepath.Join(f[1], "testdata")); err == nil && fi.IsDir() {
				if err := runCmd(ctx, "", nil, "cp", "-a", filepath.Join(f[1], "testdata"), dst); err != nil {
					return nil, err
				}
			}
			p.tests = append(p.tests, tb)
		}
	}

	// A run that will fail before booting (nothing to run, or a
	// selection the runner refuses; run reports it) needs no guest
	// programs: the tools below take seconds to link.
	if (len(p.tests) == 0 && !o.demo && o.shellCmd == "") || len(p.notTwoHost) > 0 || p.powerOffProblem(testCount(o.testFlags)) != "" {
		return p, nil
	}
	// Guest helper for rdma links.
	if err := runCmd(ctx, modDir, env, "go", "build", "-o", filepath.Join(p.overlay, "usr/bin/rxectl"), "./internal/testkit/cmd/rxectl"); err != nil {
		return nil, err
	}
	// cmd/* tools of the project (not abigen): always in the guest's PATH,
	// so tests can run them beside the C tools, and for -demo/-shell-cmd.
	{
		out, err := cmdOutput(ctx, modDir, nil, "go", "list", "-e", "-f", "{{.ImportPath}}|{{.Name}}|{{if .Error}}err{{end}}", "./cmd/...")
		if err == nil {
			var tools []string
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				f := strings.Split(line, "|")
				if len(f) != 3 || f[1] != "main" || f[2] != "" || strings.HasSuffix(f[0], "/cmd/abigen") {
					continue
				}
				tools = append(tools, f[0])
			}
			// One go build links them all, in parallel; if any fails,
			// each is built alone so that the rest still reach the guest.
			// Under -race the tools are race-built too: a race in a tool
			// then prints its report and fails the test that ran it.
			bin := filepath.Join(p.overlay, "usr/bin") + "/"
			toolEnv, build := env, []string{"build"}
			if o.race {
				toolEnv, build = testEnv, []string{"build", "-race"}
			}
			if len(tools) > 0 && runCmd(ctx, modDir, toolEnv, "go", append(append(build, "-o", bin), tools...)...) != nil {
				for _, t := range tools {
					if err := runCmd(ctx, modDir, toolEnv, "go", append(build, "-o", bin+filepath.Base(t), t)...); err != nil {
						fmt.Printf("rxevm: warning: %s does not build; left out of the guest: %v\n", t, err)
					}
				}
			}
		}
	}
	// C programs for VM tests (ctools.go).
	if err := buildCTools(ctx, o.cacheDir, modDir, filepath.Join(p.overlay, "usr/bin"), o.verbose); err != nil {
		return nil, err
	}
	if o.demo {
		demo, err := os.ReadFile(filepath.Join(modDir, "internal/testkit/demo.sh"))
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(p.overlay, "pv/demo.sh"), demo, 0o755); err != nil {
			return nil, err
		}
	}
	if err := os.WriteFile(filepath.Join(p.overlay, "init"), []byte(initText()), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(p.overlay, "pv/run.sh"), []byte(runScript(o, p)), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(p.overlay, "pv/run-b.sh"), []byte(runScriptB()), 0o644); err != nil {
		return nil, err
	}
	return p, nil
}

// noteTwoHost records what a -hosts 2 run selects of package pkg (sel of
// all, if known) for powerOffProblem, and the power-off tests the default
// selection leaves out.
func (p *payload) noteTwoHost(o *options, pkg string, sel, all []string, known bool) {
	if !known {
		p.selectionUnknown = true
		return
	}
	for _, n := range sel {
		p.selected = append(p.selected, pkg+"."+n)
		if strings.HasPrefix(n, testkit.PowerOffPrefix) {
			p.powerOff = append(p.powerOff, pkg+"."+n)
		}
	}
	if parseTestFilter(o.userTestFlags).hasRun {
		return
	}
	for _, n := range all {
		if strings.HasPrefix(n, testkit.PowerOffPrefix) && !slices.Contains(sel, n) {
			p.powerOffLeftOut = append(p.powerOffLeftOut, pkg+"."+n)
		}
	}
}

// testCount returns the -test.count of binary-form test flags (1 if not
// given or unreadable).
func testCount(flags []string) int {
	n := 1
	for i := 0; i < len(flags); i++ {
		name, val, hasVal := strings.Cut(strings.TrimPrefix(flags[i], "-"), "=")
		if name != "test.count" {
			continue
		}
		if !hasVal && i+1 < len(flags) {
			i++
			val = flags[i]
		}
		if v, err := strconv.Atoi(val); err == nil {
			n = v
		}
	}
	return n
}

// shellQuote quotes s for sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// binaryTestFlags are the flags every test binary gets in the guest: the
// user's, with -test.v forced on (the runner reads the -test.v output to
// find skipped tests and tests without a result).
func binaryTestFlags(user []string) []string {
	flags := []string{"-test.v"}
	for _, f := range user {
		if f == "-test.v" || strings.HasPrefix(f, "-test.v=") {
			continue
		}
		flags = append(flags, f)
	}
	return flags
}

// runScript is /pv/run.sh. Every program it runs is bracketed by
// "BEGIN label;" and "END label rc=N;" markers; the ';' ends the marker, so
// kernel messages the console appends to the line cannot alter it.
func runScript(o *options, p *payload) string {
	var b strings.Builder
	b.WriteString("# generated by rxevm\n")
	// Which of make test's kernels this run boots: testkit.OneKernel
	// splits a test between them only when both are.
	var shorts []string
	for _, k := range o.kernels {
		shorts = append(shorts, k.short)
	}
	fmt.Fprintf(&b, "export %s=%s\n", testkit.RunKernelsEnv, shellQuote(strings.Join(shorts, ",")))
	var flags []string
	for _, f := range binaryTestFlags(o.testFlags) {
		flags = append(flags, shellQuote(f))
	}
	bracket := func(label, cmd string) {
		fmt.Fprintf(&b, "echo '%sBEGIN %s;'\n", marker, label)
		fmt.Fprintf(&b, "%s </dev/null\n", cmd)
		fmt.Fprintf(&b, "echo \"%sEND %s rc=$?;\"\n", marker, label)
	}
	for _, t := range p.tests {
		bracket(t.label, fmt.Sprintf("(cd %s && exec /pv/t/%s %s)",
			shellQuote(filepath.Join("/pv/src", t.rel)), filepath.Base(t.file), strings.Join(flags, " ")))
	}
	if o.demo {
		bracket("demo", "(cd /tmp && sh /pv/demo.sh)")
	}
	if o.shellCmd != "" {
		bracket("shell-cmd", "(cd /tmp && sh -c "+shellQuote(o.shellCmd)+")")
	}
	if o.hosts == 2 {
		// Host B ends once its agent stops; if this fails, B never
		// ends and the runner fails the run. A test that had the runner
		// power B off (testkit.Host.PowerOff) left PowerOffFile: B's
		// agent is gone, and the runner expects B never to finish.
		fmt.Fprintf(&b, "if [ -e %s ]; then echo 'rxevm: host B was powered off (%s): its agent is not stopped'\n", testkit.PowerOffFile, testkit.PowerOffFile)
		fmt.Fprintf(&b, "else rxectl agent-stop %s || echo 'rxevm: could not stop the agent on host B'; fi\n", agentAddr)
	}
	return b.String()
}

// initScript is the guest's PID 1 (busybox sh). It loads the RDMA modules,
// configures networking and the rxe links, runs /pv/run.sh and powers off.
// Markers on the console (@@PUREVERBS ...) let the host follow along.
//
// In the two-host topology the kernel command line says pv.host=a or
// pv.host=b: the guest then also brings up the wire (eth0, the e1000 NIC on
// QEMU's socket netdev) with its address and an rxe device on it; host B
// runs /pv/run-b.sh (the agent) and host A, once the agent answers,
// /pv/run.sh (the tests). @@WIRE_A@@ and the like are filled in from
// internal/testkit's constants (initText).
const initScript = `#!/bin/sh
export PATH=/usr/bin:/usr/sbin:/bin:/sbin
export LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu
export HOME=/root TMPDIR=/tmp TERM=dumb
export PUREVERBS_VM=1
# The run's marker tag, for testkit.Host.PowerOff's announcement.
export @@MARKER_ENV@@='@@PUREVERBS '
off() { sync; poweroff -f; echo o > /proc/sysrq-trigger; sleep 10; }
fail() { echo "@@PUREVERBS SETUP-FAIL $*"; off; }
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run
mkdir -p /run/netns
hostname rxevm
export PUREVERBS_KERNEL="$(uname -r)"
echo "@@PUREVERBS BOOT $PUREVERBS_KERNEL"
host=$(sed -n 's/.*pv[.]host=\([ab]\).*/\1/p' /proc/cmdline)
for m in $(cat /etc/pureverbs/modules); do
	insmod "/lib/modules/$PUREVERBS_KERNEL/$m" || fail "insmod $m"
done
ip link set lo up || fail "lo up"
ip link add d0 address 02:00:00:99:00:01 type dummy || fail "add d0"
ip addr add 10.99.0.1/24 dev d0 || fail "addr d0"
ip link set d0 up || fail "d0 up"
rxectl add rxe0 d0 || fail "rxe0"
rxectl add rxelo lo || fail "rxelo"
rxectl wait -timeout 30s rxe0 rxelo || fail "ports not active"
if [ -n "$host" ]; then
	if [ "$host" = a ]; then me=@@WIRE_A@@ peer=@@WIRE_B@@; else me=@@WIRE_B@@ peer=@@WIRE_A@@; fi
	export PUREVERBS_HOST=$host PUREVERBS_WIRE_ADDR=$me PUREVERBS_PEER_ADDR=$peer
	hostname rxevm-$host
	ip link set @@WIRE_NETDEV@@ up || fail "@@WIRE_NETDEV@@ up (no e1000 NIC?)"
	ip addr add $me/24 dev @@WIRE_NETDEV@@ || fail "addr @@WIRE_NETDEV@@"
	rxectl add @@WIRE_DEV@@ @@WIRE_NETDEV@@ || fail "@@WIRE_DEV@@"
	rxectl wait -timeout 60s @@WIRE_DEV@@ || fail "@@WIRE_DEV@@ not active (no carrier on @@WIRE_NETDEV@@?)"
	if [ "$host" = a ]; then
		rxectl agent-wait -timeout 240s $peer:@@AGENT_PORT@@ || fail "host B's agent does not answer on $peer:@@AGENT_PORT@@"
	fi
fi
# From here on only KERN_EMERG reaches the console: kernel messages stay in
# dmesg instead of splitting the tests' output lines (an rxe error printed
# in the middle of '=== RUN TestX' made a run fail as garbled). A panic or
# an oops raises the console level itself (console_verbose), so the runner
# still sees those in full.
echo 1 > /proc/sys/kernel/printk
echo "@@PUREVERBS SETUP-OK"
if [ "$host" = b ]; then . /pv/run-b.sh; else . /pv/run.sh; fi
echo "@@PUREVERBS DONE"
off
`

// initText is initScript with the run's marker and the two-host topology's
// names and addresses.
func initText() string {
	return strings.NewReplacer("@@PUREVERBS ", marker,
		"@@WIRE_A@@", testkit.WireAddrA, "@@WIRE_B@@", testkit.WireAddrB,
		"@@WIRE_NETDEV@@", testkit.WireNetdev, "@@WIRE_DEV@@", testkit.WireDev,
		"@@AGENT_PORT@@", strconv.Itoa(testkit.AgentPort), "@@MARKER_ENV@@", testkit.MarkerEnv).Replace(initScript)
}

// agentAddr is the agent's address on host B.
var agentAddr = net.JoinHostPort(testkit.WireAddrB, strconv.Itoa(testkit.AgentPort))

// runScriptB is host B's /pv/run-b.sh: the agent, bracketed like a test
// binary, until host A's run.sh stops it.
func runScriptB() string {
	return fmt.Sprintf("# generated by rxevm\necho '%sBEGIN %s;'\nrxectl agent %s </dev/null\necho \"%sEND %s rc=$?;\"\n",
		marker, agentLabel, agentAddr, marker, agentLabel)
}

// agentLabel names host B's agent in its BEGIN/END markers.
const agentLabel = "agent"

// testFilter is what -test.run, -test.skip and -test.bench select, as far
// as top-level names go: enough to tell whether a package has anything to
// run before booting a guest for it.
type testFilter struct {
	run, skip, bench string
	hasRun, hasSkip  bool
}

// parseTestFilter reads the filters from binary-form test flags
// ("-test.run=X" or "-test.run X"; the last one counts, as in the flag
// package).
func parseTestFilter(flags []string) testFilter {
	var f testFilter
	for i := 0; i < len(flags); i++ {
		name, val, hasVal := strings.Cut(strings.TrimPrefix(flags[i], "-"), "=")
		var dst *string
		switch name {
		case "test.run":
			dst, f.hasRun = &f.run, true
		case "test.skip":
			dst, f.hasSkip = &f.skip, true
		case "test.bench":
			dst = &f.bench
		default:
			continue
		}
		if !hasVal && i+1 < len(flags) {
			i++
			val = flags[i]
		}
		*dst = val
	}
	return f
}

// active reports whether the filter can leave a package with nothing to run.
func (f testFilter) active() bool { return f.hasRun || f.hasSkip }

func (f testFilter) String() string {
	var s []string
	if f.hasRun {
		s = append(s, "-run "+shellQuote(f.run))
	}
	if f.hasSkip {
		s = append(s, "-skip "+shellQuote(f.skip))
	}
	if f.bench != "" {
		s = append(s, "-bench "+shellQuote(f.bench))
	}
	return strings.Join(s, " ")
}

// splitPattern splits a -run style pattern as the testing package does:
// into alternatives at top-level '|', each a list of per-level patterns
// split at top-level '/' (brackets, parentheses and escapes respected).
func splitPattern(s string) [][]string {
	var alts [][]string
	var levels []string
	cs, cp := 0, 0
	for i := 0; i < len(s); {
		switch s[i] {
		case '[':
			cs++
		case ']':
			if cs--; cs < 0 {
				cs = 0
			}
		case '(':
			if cs == 0 {
				cp++
			}
		case ')':
			if cs == 0 {
				cp--
			}
		case '\\':
			i++
		case '/', '|':
			if cs == 0 && cp == 0 {
				levels = append(levels, s[:i])
				if s[i] == '|' {
					alts = append(alts, levels)
					levels = nil
				}
				s = s[i+1:]
				i = 0
				continue
			}
		}
		i++
	}
	return append(alts, append(levels, s))
}

// matchTop reports whether a top-level test name is selected by pattern
// (some alternative's first level matches it). whole requires that the
// alternative has only that level (for -skip: "A/B" skips only subtests).
func matchTop(pattern, name string, whole bool) (bool, error) {
	for _, alt := range splitPattern(pattern) {
		if whole && len(alt) > 1 {
			continue
		}
		re, err := regexp.Compile(alt[0])
		if err != nil {
			return false, err
		}
		if re.MatchString(name) {
			return true, nil
		}
	}
	return false, nil
}

// selected returns the names (from a test binary's -test.list output) that
// the filter runs.
func (f testFilter) selected(names []string) ([]string, error) {
	var out []string
	for _, n := range names {
		var ok bool
		var err error
		if strings.HasPrefix(n, "Benchmark") {
			if f.bench != "" {
				ok, err = matchTop(f.bench, n, false)
			}
		} else {
			ok, err = matchTop(f.run, n, false)
		}
		if err != nil {
			return nil, err
		}
		if ok && f.hasSkip && f.skip != "" {
			skip, err := matchTop(f.skip, n, true)
			if err != nil {
				return nil, err
			}
			ok = !skip
		}
		if ok {
			out = append(out, n)
		}
	}
	return out, nil
}

// selectedTests returns the top-level tests of tb (whose sources are in
// dir) that filter selects, all of them, and whether that could be told. When it cannot
// (the binary does not run on this host, a pattern does not compile) the
// package is kept: in the guest it then fails if it runs nothing.
func selectedTests(ctx context.Context, filter testFilter, tb testBinary, dir string, verbose bool) (sel, all []string, known bool) {
	names, err := listedTests(ctx, tb.file, dir)
	if err != nil {
		fmt.Printf("rxevm: %s: cannot list its tests on the host (%v); running it\n", tb.importPath, err)
		return nil, nil, false
	}
	sel, err = filter.selected(names)
	if err != nil {
		return nil, names, false
	}
	if verbose {
		fmt.Printf("rxevm: %s: %d of %d tests match %s\n", tb.importPath, len(sel), len(names), filter)
	}
	return sel, names, true
}

// listedTests runs the compiled test binary on the host with -test.list to
// name its top-level tests, benchmarks, fuzz targets and examples.
func listedTests(ctx context.Context, bin, dir string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := cmdOutput(ctx, dir, nil, bin, "-test.list", ".")
	if err != nil {
		return nil, err
	}
	var names []string
	for _, l := range strings.Split(out, "\n") {
		if listNameRe.MatchString(l) {
			names = append(names, l)
		}
	}
	return names, nil
}

var listNameRe = regexp.MustCompile(`^(Test|Benchmark|Fuzz|Example)[^\s/]*$`)
