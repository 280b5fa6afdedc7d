package testkit_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/uverbs"
)

type devSummary struct {
	Name     string
	NodeGUID string // "f0ed:90ff:fee5:d3e8", as ibv_devinfo and sysfs print it
	Ports    int
}

func guidString(g uint64) string {
	return fmt.Sprintf("%04x:%04x:%04x:%04x", g>>48, g>>32&0xffff, g>>16&0xffff, g&0xffff)
}

// sysfsDevices reads /sys/class/infiniband directly.
func sysfsDevices(t *testing.T) []devSummary {
	dirs, err := filepath.Glob("/sys/class/infiniband/*")
	if err != nil {
		t.Fatal(err)
	}
	var out []devSummary
	for _, d := range dirs {
		guid, err := os.ReadFile(filepath.Join(d, "node_guid"))
		if err != nil {
			t.Fatal(err)
		}
		ports, err := os.ReadDir(filepath.Join(d, "ports"))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, devSummary{filepath.Base(d), strings.TrimSpace(string(guid)), len(ports)})
	}
	return out
}

var (
	hcaRe   = regexp.MustCompile(`(?m)^hca_id:\s*(\S+)`)
	guidRe  = regexp.MustCompile(`(?m)^\s*node_guid:\s*(\S+)`)
	portsRe = regexp.MustCompile(`(?m)^\s*phys_port_cnt:\s*(\d+)`)
)

// ibvDevinfo parses `ibv_devinfo` (rdma-core's C view of the devices).
func ibvDevinfo(ctx context.Context, t *testing.T) []devSummary {
	out, err := testkit.RunPeer(ctx, t, "ibv_devinfo")
	if err != nil {
		t.Fatalf("ibv_devinfo: %v\n%s", err, out)
	}
	var res []devSummary
	blocks := hcaRe.FindAllStringSubmatchIndex(out, -1)
	for i, b := range blocks {
		end := len(out)
		if i+1 < len(blocks) {
			end = blocks[i+1][0]
		}
		blk := out[b[0]:end]
		d := devSummary{Name: out[b[2]:b[3]]}
		if m := guidRe.FindStringSubmatch(blk); m != nil {
			d.NodeGUID = m[1]
		}
		if m := portsRe.FindStringSubmatch(blk); m != nil {
			d.Ports, _ = strconv.Atoi(m[1])
		}
		res = append(res, d)
	}
	return res
}

func sortDevs(d []devSummary) []devSummary {
	slices.SortFunc(d, func(a, b devSummary) int { return strings.Compare(a.Name, b.Name) })
	return d
}

// TestSmokeDevices compares five views of the RDMA devices in the VM: sysfs,
// uverbs.Devices, RDMA netlink, and rdma-core's ibv_devinfo and ibv_devinfo -l.
func TestSmokeDevices(t *testing.T) {
	testkit.RequireVM(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t.Logf("kernel %s", testkit.KernelRelease())

	want := sortDevs(ibvDevinfo(ctx, t))
	if !slices.ContainsFunc(want, func(d devSummary) bool { return d.Name == testkit.RxeDev }) ||
		!slices.ContainsFunc(want, func(d devSummary) bool { return d.Name == testkit.LoopDev }) {
		t.Fatalf("ibv_devinfo lists %v; want %s and %s", want, testkit.RxeDev, testkit.LoopDev)
	}

	list, err := testkit.RunPeer(ctx, t, "ibv_devinfo", "-l")
	if err != nil {
		t.Fatalf("ibv_devinfo -l: %v\n%s", err, list)
	}
	var listed []string
	for _, l := range strings.Split(list, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.Contains(l, "HCA") {
			listed = append(listed, l)
		}
	}
	slices.Sort(listed)
	var wantNames []string
	for _, d := range want {
		wantNames = append(wantNames, d.Name)
	}
	if diff := cmp.Diff(wantNames, listed); diff != "" {
		t.Errorf("ibv_devinfo -l vs ibv_devinfo (-devinfo +list):\n%s", diff)
	}

	if diff := cmp.Diff(want, sortDevs(sysfsDevices(t))); diff != "" {
		t.Errorf("sysfs vs ibv_devinfo (-ibv_devinfo +sysfs):\n%s", diff)
	}

	devs, err := uverbs.Devices()
	if err != nil {
		t.Fatalf("uverbs.Devices: %v", err)
	}
	var fromUverbs []devSummary
	for _, d := range devs {
		fromUverbs = append(fromUverbs, devSummary{d.Name, guidString(d.NodeGUID), d.NumPorts})
	}
	if diff := cmp.Diff(want, sortDevs(fromUverbs)); diff != "" {
		t.Errorf("uverbs.Devices vs ibv_devinfo (-ibv_devinfo +uverbs):\n%s", diff)
	}

	c, err := sys.DialNL()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	nl, err := c.Devices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []devSummary
	for _, d := range nl {
		got = append(got, devSummary{d.Name, guidString(d.NodeGUID), int(d.Ports)})
	}
	if diff := cmp.Diff(want, sortDevs(got)); diff != "" {
		t.Errorf("RDMA netlink vs ibv_devinfo (-ibv_devinfo +netlink):\n%s", diff)
	}
}

// TestSmokeAsyncEvents drives a link down and up under ibv_asyncwatch and
// waits for the port events: it exercises StartPeer, WaitForOutput and
// SetLink/AddAddr/DelAddr.
func TestSmokeAsyncEvents(t *testing.T) {
	testkit.RequireVM(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := testkit.StartPeer(ctx, t, "ibv_asyncwatch", "-d", testkit.RxeDev)
	// ibv_asyncwatch announces itself once its async fd is ready.
	if err := p.WaitForOutput(ctx, "async event FD"); err != nil {
		t.Fatal(err)
	}
	testkit.SetLink(t, testkit.RxeNetdev, false)
	if err := p.WaitForOutput(ctx, "IBV_EVENT_PORT_ERR"); err != nil {
		t.Fatal(err)
	}
	testkit.SetLink(t, testkit.RxeNetdev, true)
	if err := p.WaitForOutput(ctx, "IBV_EVENT_PORT_ACTIVE"); err != nil {
		t.Fatal(err)
	}
	testkit.AddAddr(t, testkit.RxeNetdev, "10.99.0.7/24")
	testkit.AddAddr(t, testkit.RxeNetdev, "fd99::7/64")
	if err := p.WaitForOutput(ctx, "IBV_EVENT_GID_CHANGE"); err != nil {
		t.Fatal(err)
	}
	testkit.DelAddr(t, testkit.RxeNetdev, "fd99::7/64")
	testkit.DelAddr(t, testkit.RxeNetdev, "10.99.0.7/24")
	p.Stop()
	t.Logf("ibv_asyncwatch:\n%s", p.Output())
}

// TestSmokePingPongResources runs rdma-core's ibv_rc_pingpong server and
// client on rxe0 and checks the restrack counts return to where they were.
func TestSmokePingPongResources(t *testing.T) {
	testkit.RequireVM(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	before := testkit.Resources(t, testkit.RxeDev)
	for _, k := range []string{"pd", "cq", "qp", "mr"} {
		if _, ok := before[k]; !ok {
			t.Fatalf("Resources(%s) = %v: no %q count", testkit.RxeDev, before, k)
		}
	}
	srv := testkit.StartPeer(ctx, t, "ibv_rc_pingpong", "-d", testkit.RxeDev, "-g", "1", "-n", "100", "-p", "18515")
	if err := srv.WaitForOutput(ctx, "local address"); err != nil {
		t.Fatal(err)
	}
	during := testkit.Resources(t, testkit.RxeDev)
	if during["qp"] <= before["qp"] || during["pd"] <= before["pd"] {
		t.Errorf("server running: resources %v, before %v; want more qp and pd", during, before)
	}
	out, err := testkit.RunPeer(ctx, t, "ibv_rc_pingpong", "-d", testkit.RxeDev, "-g", "1", "-n", "100", "-p", "18515", "127.0.0.1")
	if err != nil {
		t.Fatalf("client: %v\n%s", err, out)
	}
	if err := srv.Wait(); err != nil {
		t.Fatalf("server: %v\n%s", err, srv.Output())
	}
	if !strings.Contains(out, "iters in") {
		t.Errorf("client output lacks the iteration summary:\n%s", out)
	}
	if after := testkit.Resources(t, testkit.RxeDev); !cmp.Equal(before, after) {
		t.Errorf("resources after the pingpong %v, before %v", after, before)
	}
}

// TestSmokeNetnsPair checks that NetnsPair's namespaces and devices exist.
func TestSmokeNetnsPair(t *testing.T) {
	testkit.RequireVM(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a, b := testkit.NetnsPair(t)
	out, err := testkit.RunPeer(ctx, t, "ip", "netns", "exec", a, "ping", "-c", "1", "-W", "5", testkit.NetnsAddrB)
	if err != nil {
		t.Fatalf("ping %s from %s: %v\n%s", testkit.NetnsAddrB, a, err, out)
	}
	for _, ns := range []string{a, b} {
		gid, err := os.ReadFile(filepath.Join("/sys/class/infiniband", testkit.NetnsDev(ns), "ports/1/gids/1"))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %s GID 1 %s", ns, testkit.NetnsDev(ns), strings.TrimSpace(string(gid)))
	}
}

// TestRequireVM: on the host RequireVM skips with SkipMessage; in the VM it
// lets the test run (and this test does not skip there either, so the
// runner, which fails on skips in the VM, checks both sides).
func TestRequireVM(t *testing.T) {
	var inner *testing.T
	ran := false
	t.Run("inner", func(t *testing.T) {
		inner = t
		testkit.RequireVM(t)
		ran = true
	})
	if testkit.InVM() {
		if !ran || inner.Skipped() {
			t.Error("RequireVM skipped inside the VM")
		}
		return
	}
	if ran || !inner.Skipped() {
		t.Error("RequireVM returned on the host instead of skipping")
	}
}
