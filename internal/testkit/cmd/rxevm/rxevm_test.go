package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/pureverbs/pureverbs/internal/testkit"
)

func TestGoTestFlagsToBinary(t *testing.T) {
	got := goTestFlagsToBinary([]string{"-run", "Smoke", "-v", "-count=1", "--timeout=5m", "-test.short", "-custom", "x"})
	want := []string{"-test.run", "Smoke", "-test.v", "-test.count=1", "-test.timeout=5m", "-test.short", "-custom", "x"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestParseArgs(t *testing.T) {
	o, err := parseArgs([]string{"-kernel", "all", "./a", "-v", "./b/...", "--", "-run", "X"})
	if err != nil {
		t.Fatal(err)
	}
	if len(o.kernels) != 2 || !o.verbose || !cmp.Equal(o.pkgs, []string{"./a", "./b/..."}) ||
		!cmp.Equal(o.testFlags, []string{"-test.run", "X", "-test.skip", twoHostPattern}) || o.hosts != 1 || o.smp != 2 {
		t.Errorf("parsed %+v", o)
	}
	if _, err := parseArgs([]string{"-kernel", "5.10", "./a"}); err == nil {
		t.Error("unknown kernel accepted")
	}
	if _, err := parseArgs([]string{"-kernel", "6.1"}); err == nil {
		t.Error("nothing to run accepted")
	}
	o, err = parseArgs([]string{"-hosts", "2", "-wire", "udp", "./a"})
	if err != nil || o.hosts != 2 || o.wire != "udp" || !cmp.Equal(o.testFlags, []string{"-test.skip", powerOffPattern, "-test.run", twoHostPattern}) {
		t.Errorf("-hosts 2: %+v, %v", o, err)
	}
	o, err = parseArgs([]string{"-smp", "3", "./a"})
	if err != nil || o.smp != 3 {
		t.Errorf("-smp 3: %+v, %v", o, err)
	} else if q := qemuArgs(o, &kernelAssets{}, "initrd", ""); !slices.Contains(q, "-smp") || q[slices.Index(q, "-smp")+1] != "3" {
		t.Errorf("-smp 3: QEMU's arguments %q", q)
	}
	for _, bad := range [][]string{{"-hosts", "3", "./a"}, {"-hosts", "2", "-wire", "tap", "./a"}, {"-hosts", "2", "-demo"}, {"-smp", "0", "./a"}, {"-smp", "17", "./a"}} {
		if _, err := parseArgs(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestTwoHostFilter: single-host runs skip the TestTwoHost* tests (added to
// a -skip the user gave as an alternative), two-host runs select only them
// unless -run says otherwise, and the testing package's matching agrees.
func TestTwoHostFilter(t *testing.T) {
	names := []string{"TestA", "TestTwoHostX", "TestTwoHostY", "TestB", "TestTwoHostPowerOffZ"}
	for _, c := range []struct {
		hosts int
		in    []string
		want  []string
	}{
		{1, nil, []string{"TestA", "TestB"}},
		{1, []string{"-test.skip", "TestA"}, []string{"TestB"}},
		{1, []string{"-test.skip=TestA/sub"}, []string{"TestA", "TestB"}},
		{1, []string{"-test.run", "TestTwoHostX"}, nil},
		{1, []string{"-test.run", "TestTwoHostPowerOff"}, nil},
		// Without -run, two hosts leave the power-off tests out (they
		// need a boot of their own), after a -skip given.
		{2, nil, []string{"TestTwoHostX", "TestTwoHostY"}},
		{2, []string{"-test.skip", "TestTwoHostY"}, []string{"TestTwoHostX"}},
		{2, []string{"-test.run", "TestTwoHostPowerOff"}, []string{"TestTwoHostPowerOffZ"}},
		{2, []string{"-test.run", "TestTwoHost"}, []string{"TestTwoHostX", "TestTwoHostY", "TestTwoHostPowerOffZ"}},
		{2, []string{"-test.run", "TestTwoHostY"}, []string{"TestTwoHostY"}},
		{2, []string{"-test.run", "TestA|TestTwoHostX"}, []string{"TestA", "TestTwoHostX"}},
	} {
		f := parseTestFilter(twoHostFilter(c.in, c.hosts))
		got, err := f.selected(names)
		if err != nil || !cmp.Equal(got, c.want) {
			t.Errorf("-hosts %d %q: selects %q (%v), want %q", c.hosts, c.in, got, err, c.want)
		}
	}
}

// TestPrefixWriter: host B's console lines are prefixed whole.
func TestPrefixWriter(t *testing.T) {
	var b strings.Builder
	w := &prefixWriter{prefix: "B| ", w: &b}
	w.Write([]byte("one\ntw"))
	w.Write([]byte("o\n\nthree"))
	w.Flush()
	if want := "B| one\nB| two\nB| \nB| three\n"; b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}

// TestTwoHostScripts: the init script has every placeholder filled in, host
// A's run script stops host B's agent at the end, host B's runs the agent
// between markers, and the wire options pair a listener with a connector.
func TestTwoHostScripts(t *testing.T) {
	init := initText()
	if strings.Contains(init, "@@WIRE") || strings.Contains(init, "@@AGENT") {
		t.Errorf("init script keeps a placeholder:\n%s", init)
	}
	for _, w := range []string{"me=" + testkit.WireAddrA + " peer=" + testkit.WireAddrB, "rxectl add rxew eth0", "pv[.]host="} {
		if !strings.Contains(init, w) {
			t.Errorf("init script lacks %q", w)
		}
	}
	o := &options{hosts: 2, testFlags: []string{"-test.run", twoHostPattern}}
	if !strings.Contains(init, "export "+testkit.MarkerEnv+"='"+m+"'\n") {
		t.Errorf("init script does not pass the marker in %s:\n%s", testkit.MarkerEnv, init)
	}
	s := runScript(o, &payload{tests: []testBinary{{label: "pkg/a", rel: "a", file: "/x/pv/t/a.test"}}})
	if !strings.HasSuffix(s, "if [ -e "+testkit.PowerOffFile+" ]; then echo 'rxevm: host B was powered off ("+testkit.PowerOffFile+"): its agent is not stopped'\n"+
		"else rxectl agent-stop "+agentAddr+" || echo 'rxevm: could not stop the agent on host B'; fi\n") {
		t.Errorf("host A's run.sh:\n%s", s)
	}
	// The script runs in sh: no syntax error.
	if out, err := exec.Command("sh", "-n", "-c", s).CombinedOutput(); err != nil {
		t.Errorf("sh -n run.sh: %v\n%s", err, out)
	}
	// The tests learn which kernels the run boots (testkit.OneKernel).
	for _, c := range []struct{ kernel, want string }{{"all", "6.1,6.12"}, {"6.12", "6.12"}, {"6.1", "6.1"}} {
		ks, err := selectKernels(c.kernel)
		if err != nil {
			t.Fatal(err)
		}
		s := runScript(&options{hosts: 1, kernels: ks}, &payload{tests: []testBinary{{label: "pkg/a", rel: "a", file: "/x/pv/t/a.test"}}})
		if !strings.HasPrefix(s, "# generated by rxevm\nexport "+testkit.RunKernelsEnv+"='"+c.want+"'\n") {
			t.Errorf("-kernel %s: run.sh does not begin by exporting %s=%s:\n%s", c.kernel, testkit.RunKernelsEnv, c.want, s)
		}
	}
	if s := runScriptB(); !strings.Contains(s, m+"BEGIN agent;'\nrxectl agent "+agentAddr+" </dev/null\necho \""+m+"END agent rc=$?;\"") {
		t.Errorf("host B's run-b.sh:\n%s", s)
	}
	for _, wire := range []string{"tcp", "tcp-nagle", "udp"} {
		a, b, listen, err := wireArgs(wire)
		if err != nil {
			t.Fatal(err)
		}
		sa, sb := strings.Join(a, " "), strings.Join(b, " ")
		if !strings.Contains(sa, "mac="+wireMACA) || !strings.Contains(sb, "mac="+wireMACB) || (wire == "udp") != (listen == 0) ||
			wire != "udp" && (!strings.Contains(sa, fmt.Sprintf("listen=127.0.0.1:%d", listen)) || !strings.Contains(sb, fmt.Sprintf("connect=127.0.0.1:%d", listen))) {
			t.Errorf("%s: A %q, B %q, listen %d", wire, sa, sb, listen)
		}
	}
}

// TestSetNoDelay: the runner finds the connection a process accepted on a
// port and switches Nagle's algorithm off in it, as it does for host A's
// QEMU (here the process is the test itself).
func TestSetNoDelay(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			t.Error(err)
		}
		accepted <- c
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := acceptedFD(os.Getpid(), port); err == nil {
		t.Fatal("found a connection before there was one")
	}
	d, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	c := (<-accepted).(*net.TCPConn)
	defer c.Close()
	// Go turns Nagle off by default; QEMU's accepted socket has it on.
	if err := c.SetNoDelay(false); err != nil {
		t.Fatal(err)
	}
	nodelay := func() int {
		raw, err := c.SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		var v int
		raw.Control(func(fd uintptr) { v, _ = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NODELAY) })
		return v
	}
	if nodelay() != 0 {
		t.Fatal("TCP_NODELAY still on")
	}
	if err := setNoDelay(ctx, os.Getpid(), port); err != nil {
		t.Fatal(err)
	}
	if nodelay() == 0 {
		t.Fatal("setNoDelay left TCP_NODELAY off")
	}
}

// TestPairResult: a two-host run passes only if both hosts do; host B's
// agent must report like a program, and a guest the runner stopped fails.
func TestPairResult(t *testing.T) {
	p := &payload{tests: []testBinary{{label: "pkg/a"}}}
	o := &options{hosts: 2}
	feed := func(r *kernelResult, l []string) {
		follow(strings.NewReader(strings.Join(l, "\r\n")), io.Discard, false, r, time.Now())
	}
	agentOK := lines(boot, []string{m + "BEGIN agent;", "agent: listening", m + "END agent rc=0;"}, done)
	r := newPairResult("6.1", p, o)
	feed(r.a, lines(boot, passing("pkg/a"), done))
	feed(r.b, agentOK)
	if !r.ok() || !strings.Contains(r.String(), "host A: ") || !strings.Contains(r.String(), " | host B: ") {
		t.Errorf("clean pair fails: %s", r)
	}
	r = newPairResult("6.1", p, o)
	feed(r.a, lines(boot, passing("pkg/a"), done))
	feed(r.b, lines(boot, []string{m + "BEGIN agent;", m + "END agent rc=1;"}, done))
	if r.ok() || !strings.Contains(r.String(), "agent (exit 1)") {
		t.Errorf("agent failure passes: %s", r)
	}
	r = newPairResult("6.1", p, o)
	feed(r.a, lines(boot, []string{m + "BEGIN pkg/a;", "=== RUN   TestOK"}))
	r.a.stopped = "host B died"
	feed(r.b, lines(boot, []string{m + "BEGIN agent;", "[   3.99] Kernel panic - not syncing: sysrq"}))
	if r.ok() || !r.a.guestDied() || !strings.Contains(r.String(), "stopped by the runner: host B died") || !strings.Contains(r.String(), "KERNEL PANIC") {
		t.Errorf("dead peer passes: %s", r)
	}
}

// TestPairPowerOff: a test on host A may announce that host B loses its
// power (POWEROFF B, once, from a test binary on A); B is then accepted
// without its agent's END and its DONE, and only then, and only if it
// died by the runner's SIGKILL.
func TestPairPowerOff(t *testing.T) {
	p := &payload{tests: []testBinary{{label: "pkg/a"}}}
	o := &options{hosts: 2}
	feed := func(r *kernelResult, l []string) string {
		var out strings.Builder
		follow(strings.NewReader(strings.Join(l, "\r\n")), &out, false, r, time.Now())
		return out.String()
	}
	announcing := []string{m + "BEGIN pkg/a;", "=== RUN   TestTwoHostPowerOffX", m + "POWEROFF B;", "    x_test.go:1: survivor ok",
		"--- PASS: TestTwoHostPowerOffX (2.00s)", "PASS", m + "END pkg/a rc=0;"}
	agentCut := lines(boot, []string{m + "BEGIN agent;", "agent: run pkg/a.test"})
	r := newPairResult("6.1", p, o)
	out := feed(r.a, lines(boot, announcing, done))
	select {
	case got := <-r.a.powerOff:
		if got != "pkg/a TestTwoHostPowerOffX" || !strings.Contains(out, "rxevm: pkg/a TestTwoHostPowerOffX asks to power off host B") {
			t.Errorf("request %q; console:\n%s", got, out)
		}
	default:
		t.Fatalf("no power-off request from A's console:\n%s", out)
	}
	feed(r.b, agentCut)
	r.b.poweredOff = r.a.powerOffBy
	if !r.ok() || r.b.guestDied() || !strings.Contains(r.String(), "powered off by the runner at the request of pkg/a TestTwoHostPowerOffX") ||
		!strings.Contains(r.String(), "agent cut off by the power-off") {
		t.Errorf("announced power-off fails: %s", r)
	}

	// The same death of B, unannounced.
	r = newPairResult("6.1", p, o)
	feed(r.a, lines(boot, passing("pkg/a"), done))
	feed(r.b, agentCut)
	if r.ok() || !r.b.guestDied() || !strings.Contains(r.String(), "agent (no end marker: guest died)") {
		t.Errorf("unannounced death of B passes: %s", r)
	}
	// Announced, but B panicked (or anything else went wrong on it).
	r = newPairResult("6.1", p, o)
	feed(r.a, lines(boot, announcing, done))
	feed(r.b, lines(agentCut, []string{"[   3.99] Kernel panic - not syncing: sysrq"}))
	r.b.poweredOff = r.a.powerOffBy
	if r.ok() || !strings.Contains(r.String(), "KERNEL PANIC") {
		t.Errorf("panicked B passes: %s", r)
	}
	// Requests the runner must refuse: twice, outside a test binary, from
	// a single guest.
	for name, c := range map[string][]string{
		"twice":   lines(boot, announcing[:3], []string{m + "POWEROFF B;"}, announcing[3:], done),
		"outside": lines(boot, passing("pkg/a"), []string{m + "POWEROFF B;"}, done),
	} {
		r = newPairResult("6.1", p, o)
		out := feed(r.a, c)
		if r.a.ok() || !strings.Contains(out, "rxevm: console: POWEROFF B") {
			t.Errorf("%s: accepted: %s\n%s", name, r.a, out)
		}
	}
	res, out := consoleRun([]string{"pkg/a"}, lines(boot, announcing, done)...)
	if res.ok() || !strings.Contains(out, "POWEROFF B from a guest that cannot ask for it") {
		t.Errorf("single guest: accepted: %s", out)
	}

	// finish: the guest the runner powered off must have died of its
	// SIGKILL, not of anything before it.
	for _, c := range []struct {
		cmd    string
		kill   bool
		wantOK bool
	}{{"exec sleep 60", true, true}, {"exit 3", false, false}} {
		cmd := exec.Command("sh", "-c", c.cmd)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if c.kill {
			cmd.Process.Kill()
		}
		g := &guest{res: &kernelResult{}, exited: make(chan struct{}), off: "pkg/a TestX", werr: cmd.Wait()}
		close(g.exited)
		g.finish(context.Background())
		if (g.res.qemuErr == nil) != c.wantOK || g.res.poweredOff != "pkg/a TestX" {
			t.Errorf("%s: qemu error %v, powered off %q", c.cmd, g.res.qemuErr, g.res.poweredOff)
		}
	}
}

// TestPowerOffProblem: a test that powers off host B runs alone in its
// boot, once, or the run fails before booting.
func TestPowerOffProblem(t *testing.T) {
	const po = "x/pkg.TestTwoHostPowerOffX"
	for _, c := range []struct {
		p    payload
		n    int
		want string // "" for no problem
	}{
		{payload{selected: []string{"x/pkg.TestTwoHostA", "y.TestTwoHostB"}}, 1, ""},
		{payload{selected: []string{po}, powerOff: []string{po}}, 1, ""},
		{payload{selected: []string{"x/pkg.TestTwoHostA", po}, powerOff: []string{po}}, 1,
			"x/pkg.TestTwoHostPowerOffX powers off host B, so it must run alone in its boot, but the selection also runs x/pkg.TestTwoHostA: select it alone (-run '^TestTwoHostPowerOffX$')"},
		{payload{selected: []string{po, "x/pkg.TestTwoHostPowerOffY"}, powerOff: []string{po, "x/pkg.TestTwoHostPowerOffY"}}, 1, "also runs x/pkg.TestTwoHostPowerOffY"},
		{payload{selected: []string{po}, powerOff: []string{po}, selectionUnknown: true}, 1, "could not be listed"},
		{payload{selected: []string{po}, powerOff: []string{po}}, 2, "not -count=2"},
	} {
		got := c.p.powerOffProblem(c.n)
		if (got == "") != (c.want == "") || !strings.Contains(got, c.want) {
			t.Errorf("%+v, count %d: %q, want %q", c.p, c.n, got, c.want)
		}
	}
	for _, c := range []struct {
		flags []string
		want  int
	}{{nil, 1}, {[]string{"-test.count=1"}, 1}, {[]string{"-test.count", "3", "-test.v"}, 3}, {[]string{"-test.count=2", "-test.count=1"}, 1}} {
		if got := testCount(c.flags); got != c.want {
			t.Errorf("testCount(%q) = %d, want %d", c.flags, got, c.want)
		}
	}
}

func TestModuleOrder(t *testing.T) {
	dir := t.TempDir()
	dep := `kernel/drivers/infiniband/sw/rxe/rdma_rxe.ko.xz: kernel/drivers/infiniband/core/ib_uverbs.ko.xz kernel/net/ipv6/ip6_udp_tunnel.ko.xz kernel/net/ipv4/udp_tunnel.ko.xz kernel/drivers/infiniband/core/ib_core.ko.xz
kernel/drivers/infiniband/core/ib_uverbs.ko.xz: kernel/drivers/infiniband/core/ib_core.ko.xz
kernel/drivers/infiniband/core/ib_core.ko.xz:
kernel/net/ipv6/ip6_udp_tunnel.ko.xz:
kernel/net/ipv4/udp_tunnel.ko.xz:
kernel/crypto/crc32_generic.ko.xz:
kernel/drivers/net/dummy.ko.xz:
kernel/drivers/net/veth.ko.xz:
kernel/drivers/net/ethernet/intel/e1000/e1000.ko.xz:
`
	if err := os.WriteFile(filepath.Join(dir, "modules.dep"), []byte(dep), 0o644); err != nil {
		t.Fatal(err)
	}
	mods, err := moduleOrder(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range mods {
		names = append(names, m.name)
	}
	want := []string{"crc32_generic", "ib_core", "ib_uverbs", "udp_tunnel", "ip6_udp_tunnel", "rdma_rxe", "dummy", "veth", "e1000"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
}

// consoleRun feeds console lines to follow with go test binaries bins
// expected, as runKernel does, and returns the result and what the runner
// printed (the skip list and the summary included).
func consoleRun(bins []string, lines ...string) (*kernelResult, string) {
	res := &kernelResult{short: "6.1"}
	for _, b := range bins {
		res.bins = append(res.bins, &binResult{label: b, goTest: true})
	}
	var out strings.Builder
	follow(strings.NewReader(strings.Join(lines, "\r\n")), &out, false, res, time.Now())
	res.printSkips(&out)
	out.WriteString(res.String())
	return res, out.String()
}

const m = "@@PUREVERBS "

// passing is a test binary's whole -test.v output for one passing test.
func passing(label string) []string {
	return []string{m + "BEGIN " + label + ";", "=== RUN   TestOK", "--- PASS: TestOK (0.00s)", "PASS", m + "END " + label + " rc=0;"}
}

func lines(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

var (
	boot = []string{"\x1bcSeaBIOS", m + "BOOT 6.1.0-57-amd64", m + "SETUP-OK"}
	done = []string{m + "DONE", "[   30.1] reboot: Power down"}
)

func TestFollow(t *testing.T) {
	res, out := consoleRun([]string{"pkg/a", "pkg/b"}, lines(boot,
		[]string{m + "BEGIN pkg/a;", "=== RUN   TestOK", "partial--- PASS: TestOK (0.00s)",
			"[ 3.1] rxe: something" + m + "END pkg/a rc=0;"},
		[]string{m + "BEGIN pkg/b;", "=== RUN   TestX", "--- FAIL: TestX (0.00s)", m + "END pkg/b rc=1;[   12.3] rxe: after the marker"},
		done)...)
	if !res.setupOK || !res.done || res.ok() || len(res.bins) != 2 || res.bins[0].rc != 0 || res.bins[1].rc != 1 {
		t.Errorf("result %+v", res)
	}
	if p := res.bins[0].problems(); len(p) != 0 {
		t.Errorf("pkg/a: %v", p)
	}
	if !strings.Contains(out, "pkg/b (exit 1)") {
		t.Errorf("output:\n%s", out)
	}
	res = &kernelResult{}
	tail := follow(strings.NewReader(strings.Join(boot, "\r\n")), io.Discard, false, res, time.Now())
	if tail[0] != "SeaBIOS" {
		t.Errorf("tail[0] = %q: control sequences not stripped", tail[0])
	}
	res, _ = consoleRun([]string{"x"}, m+"SETUP-OK", m+"BEGIN x;", "Kernel panic - not syncing: not the kernel", "[    3.99] Kernel panic - not syncing: boom")
	if res.ok() || !res.panicked || !res.guestDied() {
		t.Errorf("panic not detected: %+v", res)
	}
	res, _ = consoleRun([]string{"pkg/a"}, lines(boot, passing("pkg/a"), done)...)
	if !res.ok() {
		t.Errorf("a clean run fails: %s", res)
	}
}

func TestParseMarker(t *testing.T) {
	for _, c := range []struct {
		in   string
		want markerLine // kind "" for an error
	}{
		{"BEGIN pkg/a;", markerLine{kind: "BEGIN", label: "pkg/a"}},
		{"BEGIN pkg/a;[   12.3] rxe: x", markerLine{kind: "BEGIN", label: "pkg/a"}},
		{"END pkg/a rc=0;", markerLine{kind: "END", label: "pkg/a", rc: 0}},
		{"END pkg/a rc=137;", markerLine{kind: "END", label: "pkg/a", rc: 137}},
		{"END pkg/a rc=1;[   12.3] rxe: something", markerLine{kind: "END", label: "pkg/a", rc: 1}},
		{"SETUP-OK", markerLine{kind: "SETUP-OK"}},
		{"SETUP-FAIL insmod x", markerLine{kind: "SETUP-FAIL", text: "insmod x"}},
		{"DONE", markerLine{kind: "DONE"}},
		{"POWEROFF B;", markerLine{kind: "POWEROFF", label: "B"}},
		{"POWEROFF B;[   12.3] rxe: x", markerLine{kind: "POWEROFF", label: "B"}},
		{"POWEROFF A;", markerLine{}},
		{"POWEROFF B", markerLine{}},
		{"POWEROFF", markerLine{}},
		// The rc is not proven: the digits may go on after the kernel's text.
		{"END pkg/a rc=1[   12.3] rxe: something", markerLine{}},
		{"END pkg/a rc=1", markerLine{}},
		{"END pkg/a rc=[   12.3] rxe: x", markerLine{}},
		{"END pkg/a rc=;", markerLine{}},
		{"END pkg/a rc=01;", markerLine{}},
		{"END pkg/a rc=256;", markerLine{}},
		{"END pkg/a rc=-1;", markerLine{}},
		{"END pkg/a;", markerLine{}},
		{"END  rc=0;", markerLine{}},
		{"BEGIN pkg/a", markerLine{}},
		{"BEGIN pkg/a[ 1.2] x;", markerLine{}},
		{"BEGIN ;", markerLine{}},
		{"garbage", markerLine{}},
		{"", markerLine{}},
		{"\x00\xff END", markerLine{}},
	} {
		got, err := parseMarker(c.in)
		if (err != nil) != (c.want.kind == "") || got != c.want {
			t.Errorf("parseMarker(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
}

// TestFollowFailsClosed: each way a console can fail to prove that every
// test binary ran tests and passed fails the run, naming the cause.
func TestFollowFailsClosed(t *testing.T) {
	for _, c := range []struct {
		name  string
		bins  []string
		lines []string
		want  []string
	}{
		{"unparsable status", []string{"pkg/a"}, lines(boot,
			[]string{m + "BEGIN pkg/a;", "=== RUN   TestOK", "--- PASS: TestOK (0.00s)", m + "END pkg/a rc=1[   12.3] rxe: something"}, done),
			[]string{`pkg/a (unparsable status line "END pkg/a rc=1[   12.3] rxe: something": exit status unknown)`}},
		{"garbage marker", []string{"pkg/a"}, lines(boot, passing("pkg/a"), []string{m + "\x00garbage"}, done),
			[]string{`console: unparsable marker line "\x00garbage"`}},
		{"binary never reports", []string{"pkg/a", "pkg/b"}, lines(boot, passing("pkg/a"), done),
			[]string{"pkg/b (never started (no BEGIN marker))"}},
		{"no END", []string{"pkg/a", "pkg/b"}, lines(boot, []string{m + "BEGIN pkg/a;", "=== RUN   TestOK"}, passing("pkg/b"), done),
			[]string{"pkg/a (no end marker: guest died during TestOK; no END marker before pkg/b began)"}},
		{"END for another binary", []string{"pkg/a", "pkg/b"}, lines(boot, []string{m + "BEGIN pkg/a;", m + "END pkg/b rc=0;"}, done),
			[]string{"END for pkg/b, which is not the binary running", "pkg/a (no end marker"}},
		{"unknown binary", []string{"pkg/a"}, lines(boot, passing("pkg/a"), passing("pkg/z"), done),
			[]string{"BEGIN for pkg/z, which is not one of this run's binaries"}},
		{"twice", []string{"pkg/a"}, lines(boot, passing("pkg/a"), passing("pkg/a"), done),
			[]string{"pkg/a (started twice)"}},
		{"no DONE", []string{"pkg/a"}, lines(boot, passing("pkg/a")),
			[]string{"guest stopped before the end marker"}},
		{"no tests to run", []string{"pkg/a"}, lines(boot,
			[]string{m + "BEGIN pkg/a;", "testing: warning: no tests to run", "PASS", m + "END pkg/a rc=0;"}, done),
			[]string{"pkg/a (ran no tests (testing: warning: no tests to run))"}},
		{"silent binary", []string{"pkg/a"}, lines(boot, []string{m + "BEGIN pkg/a;", m + "END pkg/a rc=0;"}, done),
			[]string{"pkg/a (ran no tests)"}},
		{"all skipped", []string{"pkg/a"}, lines(boot, []string{m + "BEGIN pkg/a;", "=== RUN   TestA",
			"    a_test.go:5: not today", "--- SKIP: TestA (0.00s)", m + "END pkg/a rc=0;"}, done),
			[]string{"pkg/a (ran no tests (all 1 skipped); skipped in the VM: TestA)", "SKIP pkg/a TestA: not today"}},
		{"no result line", []string{"pkg/a"}, lines(boot, []string{m + "BEGIN pkg/a;", "=== RUN   TestOK", "--- PASS: TestOK (0.00s)",
			"=== RUN   TestB", "=== RUN   TestB/x", "--- PA[ 3.2] rxe: x", "SS: TestB/x (0.00s)", "--- PASS: TestB (0.00s)", m + "END pkg/a rc=0;"}, done),
			[]string{"pkg/a (no result line for TestB/x (output garbled?))"}},
		{"FAIL with exit 0", []string{"pkg/a"}, lines(boot, []string{m + "BEGIN pkg/a;", "=== RUN   TestOK", "--- FAIL: TestOK (0.00s)", m + "END pkg/a rc=0;"}, done),
			[]string{"--- FAIL: TestOK but exit 0"}},
		{"skips", []string{"pkg/a"}, lines(boot, []string{m + "BEGIN pkg/a;",
			"=== RUN   TestA", "    a_test.go:5: hello", "    a_test.go:5: skip reason A", "--- SKIP: TestA (0.00s)",
			"=== RUN   TestB", "=== RUN   TestB/sub1", "    x_test.go:7: sub reason", "        second line",
			"=== RUN   TestB/sub2", "=== PAUSE TestB/sub2", "=== CONT  TestB/sub2", "    x_test.go:8: x",
			"--- PASS: TestB (0.00s)", "    --- SKIP: TestB/sub1 (0.00s)", "    --- PASS: TestB/sub2 (0.00s)",
			"=== RUN   TestC", "=== PAUSE TestC", "=== CONT  TestC", "--- SKIP: TestC (0.00s)",
			"=== RUN   TestVM", "    vm_test.go:9: " + testkit.SkipMessage, "--- SKIP: TestVM (0.00s)",
			"BenchmarkS", "    x_test.go:14: bench skip", "--- SKIP: BenchmarkS",
			"PASS", m + "END pkg/a rc=0;"}, done),
			[]string{"5 tests skipped in the VM, 5 not on the allowlist", "1 tests ran, 5 skipped",
				"SKIP pkg/a TestA: skip reason A\n", "SKIP pkg/a TestB/sub1: sub reason second line\n",
				"SKIP pkg/a TestC: (no reason given)\n", "SKIP pkg/a TestVM: " + testkit.SkipMessage,
				"SKIP pkg/a BenchmarkS: bench skip\n",
				"NOT ALLOWED: RequireVM skipped inside the VM (the guest did not set PUREVERBS_VM=1)",
				"pkg/a (skipped in the VM: TestA, TestB/sub1, TestC, TestVM, BenchmarkS)"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, out := consoleRun(c.bins, c.lines...)
			if res.ok() {
				t.Errorf("run passes:\n%s", out)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

func TestFollowCountsTests(t *testing.T) {
	res, out := consoleRun([]string{"pkg/a", "pkg/b"}, lines(boot,
		[]string{m + "BEGIN pkg/a;", "goos: linux", "BenchmarkX", "BenchmarkX-2   \t      10\t        21.00 ns/op", "PASS", m + "END pkg/a rc=0;"},
		[]string{m + "BEGIN pkg/b;", "=== RUN   TestD", "=== PAUSE TestD", "=== CONT  TestD", "noline--- PASS: TestD (0.00s)",
			"=== RUN   Example_e", "--- PASS: Example_e (0.00s)", "PASS", m + "END pkg/b rc=0;"},
		done)...)
	if !res.ok() {
		t.Fatalf("fails:\n%s", out)
	}
	if !strings.Contains(out, "3 tests ran, 0 skipped") {
		t.Errorf("output:\n%s", out)
	}
}

// TestFailureLines: the summary names each failing test, innermost
// only, with the last log entries it wrote (continuation lines joined,
// earlier entries dropped, long ones cut to their head and tail, as they
// grow too) and then the last of testkit's
// peer reports (which do not push the test's own entries out), and
// nothing for a passing one.
func TestFailureLines(t *testing.T) {
	head, tail := strings.Repeat("h", keptHeadBytes), strings.Repeat("t", keptTailBytes)
	long := head + strings.Repeat("x", 50+len(cutMark)) + tail
	// A quoted output: a banner, many continuation lines, the verdict last.
	quoted := []string{"    e_test.go:7: server: want a result line:"}
	for i := range 100 {
		quoted = append(quoted, fmt.Sprintf("        banner line %d", i))
	}
	quoted = append(quoted, "        result 64 0 inf 0.00")
	res, _ := consoleRun([]string{"pkg/a"}, lines(boot,
		[]string{m + "BEGIN pkg/a;", "=== RUN   TestA", "=== RUN   TestA/sub",
			"    a_test.go:1: one", "    a_test.go:2: two", "    a_test.go:3: three", "    a_test.go:4: four",
			"        continued", "=== RUN   TestB", "    b_test.go:9: " + long,
			"=== RUN   TestC", "    c_test.go:1: fine", "--- PASS: TestC (0.00s)",
			"=== RUN   TestD", "    d_test.go:5: Go and C differ", "        Go: x", "    d_test.go:6: also",
			"    peer.go:121: peer a output:", "        out a", "    peer.go:121: peer b output:", "        out b",
			"    peer.go:179: peers of TestD:", "        a: exited", "        b: exited",
			"=== RUN   TestE"}, quoted, []string{
			"--- FAIL: TestA (0.00s)", "    --- FAIL: TestA/sub (0.00s)", "--- FAIL: TestB (0.00s)", "--- FAIL: TestD (0.00s)",
			"--- FAIL: TestE (0.00s)", "FAIL", m + "END pkg/a rc=1;"},
		done)...)
	var joined []string
	for _, l := range quoted {
		joined = append(joined, strings.TrimSpace(strings.TrimPrefix(l, "    e_test.go:7:")))
	}
	e := strings.Join(joined, " ")
	got := res.failureLines()
	want := []string{"FAIL pkg/a TestA/sub", "    two", "    three", "    four continued",
		"FAIL pkg/a TestB", "    " + head + cutMark + tail,
		"FAIL pkg/a TestD", "    Go and C differ Go: x", "    also", "    peers of TestD: a: exited b: exited",
		"FAIL pkg/a TestE", "    " + e[:keptHeadBytes] + cutMark + e[len(e)-keptTailBytes:]}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("failure lines (-want +got):\n%s", diff)
	}
}

func TestAllowlist(t *testing.T) {
	list := []allowedSkip{
		{pkg: "p", test: "TestA", reason: "host only", why: "because"},
		{pkg: "p", test: "TestK", kernel: "6.12", reason: "not on 6.12", why: "kernel"},
		{pkg: "p", test: "TestVM", reason: "needs the rdma_rxe VM", why: "must never apply"},
	}
	for _, c := range []struct {
		kernel, pkg, test, reason string
		want                      string
	}{
		{"6.1", "p", "TestA", "x: host only here", "because"},
		{"6.1", "p", "TestA", "another reason", ""},
		{"6.1", "q", "TestA", "host only", ""},
		{"6.1", "p", "TestA/sub", "host only", ""},
		{"6.12", "p", "TestK", "not on 6.12", "kernel"},
		{"6.1", "p", "TestK", "not on 6.12", ""},
		{"6.1", "p", "TestVM", testkit.SkipMessage, ""},
		{"6.1", "p", "TestA", "host only; " + testkit.SkipMessage, ""},
		// testkit.OneKernel's skips: allowed on the kernel they do not name.
		{"6.1", "q", "TestS", "vm_test.go:9: " + testkit.SplitMarker + "6.12, not here", "testkit.OneKernel: runs on 6.12 (checked there)"},
		{"6.12", "q", "TestS", testkit.SplitMarker + "6.1, not here", "testkit.OneKernel: runs on 6.1 (checked there)"},
		{"6.12", "q", "TestS", testkit.SplitMarker + "6.12, not here", ""},
		{"6.1", "q", "TestS", testkit.SplitMarker + "6.6, not here", ""},
		{"6.1", "q", "TestS", testkit.SkipMessage + " " + testkit.SplitMarker + "6.12", ""},
	} {
		if got := allowSkip(list, c.kernel, c.pkg, c.test, c.reason); got != c.want {
			t.Errorf("allowSkip(%s %s %s %q) = %q, want %q", c.kernel, c.pkg, c.test, c.reason, got, c.want)
		}
	}
	for _, a := range vmSkipAllowlist {
		if a.why == "" || a.reason == "" || strings.Contains(testkit.SkipMessage, a.reason) {
			t.Errorf("allowlist entry %+v: needs a why and a reason that is not RequireVM's", a)
		}
	}
	// An allowlisted skip passes and is still listed.
	res, out := consoleRun([]string{mod + "uverbs"}, lines(boot, []string{m + "BEGIN " + mod + "uverbs;", "=== RUN   TestOK", "--- PASS: TestOK (0.00s)",
		"=== RUN   TestDevicesHostWithoutRDMA", "    device_test.go:418: host has ib_uverbs loaded", "--- SKIP: TestDevicesHostWithoutRDMA (0.00s)",
		"PASS", m + "END " + mod + "uverbs rc=0;"}, done)...)
	if !res.ok() || !strings.Contains(out, "1 tests skipped in the VM, 0 not on the allowlist") || !strings.Contains(out, "allowed: host-only") {
		t.Errorf("allowlisted skip:\n%s", out)
	}
}

func TestNothingToRun(t *testing.T) {
	res, out := consoleRun(nil, lines(boot, done)...)
	if res.ok() {
		t.Errorf("a run without binaries passes: %s", out)
	}
}

func TestBinaryTestFlags(t *testing.T) {
	got := binaryTestFlags([]string{"-test.run", "X", "-test.v=false", "-test.v", "-test.count=1"})
	if want := []string{"-test.v", "-test.run", "X", "-test.count=1"}; !cmp.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	o := &options{testFlags: []string{"-test.run", "X"}, shellCmd: "true"}
	s := runScript(o, &payload{tests: []testBinary{{label: "pkg/a", rel: "a", file: "/x/pv/t/a.test"}}})
	for _, w := range []string{m + "BEGIN pkg/a;'", "exec /pv/t/a.test '-test.v' '-test.run' 'X')", m + "END pkg/a rc=$?;\"", m + "END shell-cmd rc=$?;\""} {
		if !strings.Contains(s, w) {
			t.Errorf("run.sh lacks %q:\n%s", w, s)
		}
	}
}

func TestTestFilter(t *testing.T) {
	names := []string{"TestA", "TestAB", "TestB", "BenchmarkX", "Example_e", "FuzzF"}
	for _, c := range []struct {
		flags []string
		want  []string
	}{
		{[]string{"-test.run", "TestA"}, []string{"TestA", "TestAB"}},
		{[]string{"-test.run=^TestA$"}, []string{"TestA"}},
		{[]string{"-test.run", "NoSuchTest"}, nil},
		{[]string{"-test.run", "TestB/sub"}, []string{"TestB"}},
		{[]string{"-test.run", "TestX/a|TestB"}, []string{"TestB"}},
		{[]string{"-test.run", "Test[AB]/x"}, []string{"TestA", "TestAB", "TestB"}},
		{[]string{"-test.run", "/sub"}, []string{"TestA", "TestAB", "TestB", "Example_e", "FuzzF"}},
		{[]string{"-test.skip", "TestA"}, []string{"TestB", "Example_e", "FuzzF"}},
		{[]string{"-test.skip", "TestA/sub"}, []string{"TestA", "TestAB", "TestB", "Example_e", "FuzzF"}},
		{[]string{"-test.run", "^$", "-test.bench", "."}, []string{"BenchmarkX"}},
		{[]string{"-test.run", "^$"}, nil},
	} {
		f := parseTestFilter(c.flags)
		got, err := f.selected(names)
		if err != nil || !cmp.Equal(got, c.want) || !f.active() {
			t.Errorf("%q: %q, %v; want %q", c.flags, got, err, c.want)
		}
	}
	if f := parseTestFilter([]string{"-test.count=1", "-test.bench=."}); f.active() {
		t.Errorf("%+v is active", f)
	}
}

// TestRunnerReportsFailures boots VMs, so it runs only with
// PUREVERBS_RUNNER_TEST=1 (about a minute and a half once the cache is
// warm): a failing test, a test that skips in the VM, a binary that runs no
// test, a kernel panic, a hang and, with two hosts, a panic of the peer
// host must each make rxevm exit non-zero with a clear report, within
// bounded time; a -run that matches nothing fails before booting; an
// allowlisted skip passes.
func TestRunnerReportsFailures(t *testing.T) {
	if os.Getenv("PUREVERBS_RUNNER_TEST") != "1" {
		t.Skip("boots QEMU guests; set PUREVERBS_RUNNER_TEST=1 to run")
	}
	modDir, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		t.Fatal(err)
	}
	root := strings.TrimSpace(string(modDir))
	bin := filepath.Join(t.TempDir(), "rxevm")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	kernel := os.Getenv("KERNEL")
	if kernel == "" {
		kernel = "6.1"
	}
	const td = "./internal/testkit/cmd/rxevm/testdata/"
	cases := []struct {
		name    string
		args    []string
		want    []string
		maxTime time.Duration
	}{
		// Both kernels at once (-parallel): each one's failure is
		// reported, the second's output after the first's.
		{"fail", []string{"-kernel", "6.1,6.12", "-parallel", "./internal/testkit/testdata/failpkg", td + "skippkg", td + "emptypkg"},
			[]string{"deliberate failure inside the VM", "FAIL kernel 6.1 ", "FAIL kernel 6.12", "failpkg (exit 1)",
				"rxevm: (kernel 6.12 ran at the same time as kernel 6.1: its output follows)",
				"SKIP " + mod + "internal/testkit/cmd/rxevm/testdata/skippkg TestSkipsInVM: deliberate skip inside the VM",
				"RequireVM skipped inside the VM (the guest did not set PUREVERBS_VM=1)",
				"skippkg (skipped in the VM: TestSkipsInVM, TestRequireVMWithoutMarker)",
				"emptypkg (ran no tests)"}, 5 * time.Minute},
		{"panic", []string{"./internal/testkit/testdata/crashpkg"},
			[]string{"guest console tail", "Kernel panic - not syncing", "KERNEL PANIC", "no end marker"}, 5 * time.Minute},
		// (60 s: building, booting and reaching the hang, beside
		// another case's guests.)
		{"hang", []string{"-timeout", "60s", "./internal/testkit/testdata/hangpkg"},
			[]string{"guest console tail", "hanging until", "TIMEOUT"}, 3 * time.Minute},
		{"norun", []string{"./internal/testkit/testdata/failpkg", "--", "-run", "NoSuchTest"},
			[]string{"FAIL: -run 'NoSuchTest' -skip '^TestTwoHost' matches no test in " + mod + "internal/testkit/testdata/failpkg: nothing ran"}, time.Minute},
		// Two hosts: host B's kernel panics under a test on host A. Both
		// guests must be reported (B's panic, A stopped), with both
		// consoles' tails.
		{"peer-dies", []string{"-hosts", "2", td + "peerdiespkg"},
			[]string{"host B console tail", "host A console tail", "Kernel panic - not syncing", "KERNEL PANIC",
				"host A stopped by the runner: host B died", "FAIL kernel"}, 5 * time.Minute},
		// Host B loses its power: accepted when a test on A announced it
		// (testkit.Host.PowerOff: the runner kills B's QEMU) ...
		{"poweroff-announced", []string{"-hosts", "2", td + "poweroffpkg", "--", "-run", "TestTwoHostPowerOffAnnounced"},
			[]string{"asks to power off host B", "host B powered off (its QEMU killed) at the request of " + mod + "internal/testkit/cmd/rxevm/testdata/poweroffpkg TestTwoHostPowerOffAnnounced",
				"--- PASS: TestTwoHostPowerOffAnnounced", "agent cut off by the power-off", "ok   kernel"}, 5 * time.Minute},
		// ... and failing the run when B powers off unannounced (sysrq o
		// inside B), with both consoles' tails.
		{"poweroff-unannounced", []string{"-hosts", "2", td + "poweroffpkg", "--", "-run", "TestTwoHostPeerPowersOffUnannounced"},
			[]string{"host B console tail", "host A console tail", "peer powering off", "host A stopped by the runner: host B died",
				"agent (no end marker: guest died)", "FAIL kernel"}, 5 * time.Minute},
		// A power-off test selected with another fails before booting.
		{"poweroff-not-alone", []string{"-hosts", "2", td + "poweroffpkg", "--", "-run", "TestTwoHost"},
			[]string{"FAIL: " + mod + "internal/testkit/cmd/rxevm/testdata/poweroffpkg.TestTwoHostPowerOffAnnounced powers off host B, so it must run alone in its boot"}, time.Minute},
		{"pass", []string{"./internal/testkit/testdata/failpkg", td + "skippkg", "--", "-run", "TestPasses|TestAllowlistedSkip"},
			[]string{"ok   kernel", "SKIP " + mod + "internal/testkit/cmd/rxevm/testdata/skippkg TestAllowlistedSkip",
				"allowed: the runner's self-test", "2 tests ran, 1 skipped"}, 5 * time.Minute},
	}
	// The cases are independent runner invocations (each on its own
	// free ports, sharing the cache under its lock): they run -parallel
	// at a time (GOMAXPROCS, 2 on CI), which halves the test's time.
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), c.maxTime)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, append([]string{"-kernel", kernel}, c.args...)...)
			cmd.Dir = root
			out, err := cmd.CombinedOutput()
			if ctx.Err() != nil {
				t.Fatalf("rxevm did not finish within %s:\n%s", c.maxTime, out)
			}
			if c.name == "pass" || c.name == "poweroff-announced" {
				if err != nil {
					t.Errorf("rxevm failed on a passing test: %v\n%s", err, out)
				}
			} else if err == nil {
				t.Errorf("rxevm exited 0 for %s:\n%s", c.name, out)
			}
			for _, w := range c.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			if n := strings.Count(string(out), "--- FAIL: TestFailsInVM"); c.name == "fail" && n != 2 {
				t.Errorf("%d failures of TestFailsInVM reported, want one per kernel:\n%s", n, out)
			}
			if (c.name == "norun" || c.name == "poweroff-not-alone") && strings.Contains(string(out), "rxevm: booting") {
				t.Errorf("booted a guest for a -run that matches nothing:\n%s", out)
			}
		})
	}
}

// TestBootPanic: only a panic before the guest's setup finished and
// before any program began is the emulator's (booted again); any other
// panic is the run's failure.
func TestBootPanic(t *testing.T) {
	mk := func(panicked, setupOK, began bool) *kernelResult {
		return &kernelResult{panicked: panicked, setupOK: setupOK, bins: []*binResult{{label: "a", began: began}, {label: "b"}}}
	}
	for _, c := range []struct {
		r    *kernelResult
		want bool
	}{
		{mk(true, false, false), true},
		{mk(true, true, false), false},   // after setup: the tests' kernel
		{mk(true, false, true), false},   // a program ran
		{mk(false, false, false), false}, // no panic
		{&kernelResult{panicked: true, prepErr: os.ErrNotExist}, false},
	} {
		if got := c.r.bootPanic(); got != c.want {
			t.Errorf("panicked %v setupOK %v began %v: bootPanic = %v, want %v", c.r.panicked, c.r.setupOK, len(c.r.bins) > 0 && c.r.bins[0].began, got, c.want)
		}
	}
}

// TestPairBootPanic: a two-host run is repeated only when a host's kernel
// panicked before its setup finished and no test program began on host A;
// host B's agent having started does not count.
func TestPairBootPanic(t *testing.T) {
	host := func(panicked, setupOK, began bool) *kernelResult {
		return &kernelResult{panicked: panicked, setupOK: setupOK, bins: []*binResult{{label: "x", began: began}}}
	}
	for _, c := range []struct {
		name string
		r    *pairResult
		want bool
		who  string
	}{
		{"B panics booting", &pairResult{a: host(false, true, false), b: host(true, false, false)}, true, "B"},
		{"A panics booting, B's agent up", &pairResult{a: host(true, false, false), b: host(false, true, true)}, true, "A"},
		{"B panics after A's tests began", &pairResult{a: host(false, true, true), b: host(true, false, false)}, false, ""},
		{"B panics after its setup", &pairResult{a: host(false, true, false), b: host(true, true, true)}, false, ""},
		{"A panics after setup", &pairResult{a: host(true, true, false), b: host(false, true, true)}, false, ""},
		{"no panic", &pairResult{a: host(false, true, false), b: host(false, false, false)}, false, ""},
		{"prepare failed", &pairResult{a: host(true, false, false), b: host(true, false, false), prepErr: os.ErrNotExist}, false, ""},
	} {
		if got := c.r.bootPanic(); got != c.want {
			t.Errorf("%s: bootPanic = %v, want %v", c.name, got, c.want)
		}
		if c.want && c.r.panickedHost() != c.who {
			t.Errorf("%s: panickedHost = %s, want %s", c.name, c.r.panickedHost(), c.who)
		}
	}
}

// TestQemuCPU: guests get every emulated feature but ERMS and FSRM
// unless -cpu names another model. FSRM without ERMS hangs 6.1 at boot on
// QEMU 10, whose max has FSRM (vm.go, defaultCPU): a default that turns
// ERMS off must turn FSRM off too.
func TestQemuCPU(t *testing.T) {
	a := &kernelAssets{vmlinuz: "vmlinuz"}
	cpuArg := func(o *options) string {
		args := qemuArgs(o, a, "initrd", "")
		for i, x := range args {
			if x == "-cpu" && i+1 < len(args) {
				return args[i+1]
			}
		}
		return ""
	}
	got := cpuArg(&options{smp: 2, memMB: 1536})
	if got != "max,erms=off,fsrm=off" {
		t.Errorf("default -cpu %q, want max,erms=off,fsrm=off", got)
	}
	feats := strings.Split(got, ",")[1:]
	if slices.Contains(feats, "erms=off") && !slices.Contains(feats, "fsrm=off") {
		t.Errorf("default -cpu %q turns ERMS off but leaves FSRM on: 6.1 hangs at boot on QEMU 10", got)
	}
	if got := cpuArg(&options{smp: 2, memMB: 1536, cpu: "qemu64"}); got != "qemu64" {
		t.Errorf("-cpu qemu64 gave %q", got)
	}
}

// TestCheckSplits: a test skipped with testkit.OneKernel must pass on the
// kernel it names, which the run must have booted.
func TestCheckSplits(t *testing.T) {
	pass := func(tests ...string) func(pkg, test string) bool {
		return func(pkg, test string) bool { return pkg == "p" && slices.Contains(tests, test) }
	}
	to612 := []splitSkip{{pkg: "p", test: "TestA", on: testkit.Kernel612}}
	to61 := []splitSkip{{pkg: "p", test: "TestB", on: testkit.Kernel61}}
	for _, c := range []struct {
		name  string
		sums  []summary
		fails int
	}{
		{"both ran", []summary{{kernel: "6.1", splits: to612, passed: pass("TestB")}, {kernel: "6.12", splits: to61, passed: pass("TestA")}}, 0},
		{"skipped on both", []summary{{kernel: "6.1", splits: to612, passed: pass()}, {kernel: "6.12", splits: to61, passed: pass()}}, 2},
		{"failed on the other", []summary{{kernel: "6.1", splits: to612, passed: pass("TestB")}, {kernel: "6.12", passed: pass("TestC")}}, 1},
		// OneKernel skips only for a kernel the run boots
		// (testkit.RunKernelsEnv): anything else ran nowhere.
		{"other kernel not booted", []summary{{kernel: "6.1", splits: append(to612, splitSkip{pkg: "p", test: "TestC", on: testkit.Kernel612}), passed: pass()}}, 2},
		{"two hosts: no results", []summary{{kernel: "6.1", splits: to612}, {kernel: "6.12"}}, 1},
	} {
		if fails := checkSplits(c.sums); len(fails) != c.fails {
			t.Errorf("%s: fails %q; want %d", c.name, fails, c.fails)
		}
	}
	// What a console says becomes the summary's splits and passes.
	res, _ := consoleRun([]string{mod + "cmd/x"}, lines(boot, []string{m + "BEGIN " + mod + "cmd/x;",
		"=== RUN   TestOK", "--- PASS: TestOK (0.00s)",
		"=== RUN   TestSplit", "    vm_test.go:9: " + testkit.SplitMarker + "6.12, not here (testkit.OneKernel)", "--- SKIP: TestSplit (0.00s)",
		"PASS", m + "END " + mod + "cmd/x rc=0;"}, done)...)
	if !res.ok() {
		t.Fatal("a split skip failed the kernel's run")
	}
	var out strings.Builder
	res.printSkips(&out)
	if want := "rxevm:   SKIP 1 tests split to 6.12 (testkit.OneKernel; allowed, and checked there): cmd/x.TestSplit\n"; !strings.HasSuffix(out.String(), want) {
		t.Errorf("skip list:\n%s\nwant it to end with\n%s", out.String(), want)
	}
	want := []splitSkip{{pkg: mod + "cmd/x", test: "TestSplit", on: testkit.Kernel612}}
	if diff := cmp.Diff(want, res.splitSkips(), cmp.AllowUnexported(splitSkip{})); diff != "" {
		t.Errorf("split skips (-want +got):\n%s", diff)
	}
	if !res.passed(mod+"cmd/x", "TestOK") || res.passed(mod+"cmd/x", "TestSplit") {
		t.Error("passed: TestOK should have, TestSplit not")
	}
}
