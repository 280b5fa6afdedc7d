package main

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
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
		!cmp.Equal(o.testFlags, []string{"-test.run", "X"}) {
		t.Errorf("parsed %+v", o)
	}
	if _, err := parseArgs([]string{"-kernel", "5.10", "./a"}); err == nil {
		t.Error("unknown kernel accepted")
	}
	if _, err := parseArgs([]string{"-kernel", "6.1"}); err == nil {
		t.Error("nothing to run accepted")
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
	want := []string{"crc32_generic", "ib_core", "ib_uverbs", "udp_tunnel", "ip6_udp_tunnel", "rdma_rxe", "dummy", "veth"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
}

func TestFollow(t *testing.T) {
	console := strings.Join([]string{
		"\x1bcSeaBIOS",
		"@@PUREVERBS BOOT 6.1.0-57-amd64",
		"@@PUREVERBS SETUP-OK",
		"@@PUREVERBS BEGIN pkg/a",
		"ok",
		"[ 3.1] rxe: something@@PUREVERBS END pkg/a rc=0",
		"@@PUREVERBS BEGIN pkg/b",
		"@@PUREVERBS END pkg/b rc=1",
		"@@PUREVERBS DONE",
	}, "\r\n")
	res := &kernelResult{}
	tail := follow(strings.NewReader(console), io.Discard, false, res, time.Now())
	if !res.setupOK || !res.done || res.ok() || len(res.bins) != 2 || res.bins[0].rc != 0 || res.bins[1].rc != 1 {
		t.Errorf("result %+v", res)
	}
	if tail[0] != "SeaBIOS" {
		t.Errorf("tail[0] = %q: control sequences not stripped", tail[0])
	}
	res = &kernelResult{}
	follow(strings.NewReader("@@PUREVERBS SETUP-OK\n@@PUREVERBS BEGIN x\nKernel panic - not syncing: not the kernel\n[    3.99] Kernel panic - not syncing: boom\n"), io.Discard, false, res, time.Now())
	if res.ok() || !res.panicked || !res.guestDied() {
		t.Errorf("panic not detected: %+v", res)
	}
}

// TestRunnerReportsFailures boots VMs, so it runs only with
// PUREVERBS_RUNNER_TEST=1 (about a minute once the cache is warm): a failing
// test, a kernel panic and a hang must each make rxevm exit non-zero with a
// clear report, within bounded time.
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
	cases := []struct {
		name    string
		args    []string
		want    []string
		maxTime time.Duration
	}{
		{"fail", []string{"./internal/testkit/testdata/failpkg", "--", "-v"},
			[]string{"deliberate failure inside the VM", "FAIL kernel", "(exit 1)"}, 5 * time.Minute},
		{"panic", []string{"./internal/testkit/testdata/crashpkg"},
			[]string{"guest console tail", "Kernel panic - not syncing", "KERNEL PANIC", "no end marker"}, 5 * time.Minute},
		{"hang", []string{"-timeout", "30s", "./internal/testkit/testdata/hangpkg", "--", "-v"},
			[]string{"guest console tail", "hanging until", "TIMEOUT"}, 2 * time.Minute},
		{"pass", []string{"./internal/testkit/testdata/failpkg", "--", "-run", "TestPasses"},
			[]string{"ok   kernel"}, 5 * time.Minute},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), c.maxTime)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, append([]string{"-kernel", kernel}, c.args...)...)
			cmd.Dir = root
			out, err := cmd.CombinedOutput()
			if ctx.Err() != nil {
				t.Fatalf("rxevm did not finish within %s:\n%s", c.maxTime, out)
			}
			if c.name == "pass" {
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
		})
	}
}
