package sys_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/abi"
	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/internal/testkit"
)

// sysfsUverbs maps ibdev name to uverbsN and its "major:minor", from
// /sys/class/infiniband_verbs.
func sysfsUverbs(t *testing.T) map[string][2]string {
	t.Helper()
	dirs, err := filepath.Glob("/sys/class/infiniband_verbs/uverbs*")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][2]string{}
	for _, d := range dirs {
		ib, err1 := os.ReadFile(filepath.Join(d, "ibdev"))
		dev, err2 := os.ReadFile(filepath.Join(d, "dev"))
		if err1 != nil || err2 != nil {
			t.Fatalf("%s: %v %v", d, err1, err2)
		}
		out[strings.TrimSpace(string(ib))] = [2]string{filepath.Base(d), strings.TrimSpace(string(dev))}
	}
	return out
}

func TestVMNLChardevs(t *testing.T) {
	testkit.RequireVM(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cds, err := sys.UverbsChardevs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	uv := sysfsUverbs(t)
	for _, name := range []string{testkit.RxeDev, testkit.LoopDev} {
		cd, ok := cds[name]
		if !ok {
			t.Errorf("%s: not in netlink answer %v", name, cds)
			continue
		}
		if !cd.HasDriverID || cd.DriverID != abi.RDMA_DRIVER_RXE {
			t.Errorf("%s: driver id %d (reported %v), want RDMA_DRIVER_RXE", name, cd.DriverID, cd.HasDriverID)
		}
		if got := [2]string{cd.Name, fmt.Sprintf("%d:%d", cd.Major, cd.Minor)}; got != uv[name] {
			t.Errorf("%s: netlink chardev %v, sysfs %v", name, got, uv[name])
		}
		if cd.ABI != 2 {
			t.Errorf("%s: chardev ABI %d, want rxe's 2", name, cd.ABI)
		}
		if cd.Device.Name != name || cd.Device.Ports != 1 {
			t.Errorf("%s: device %+v", name, cd.Device)
		}
	}
	ids, err := sys.UverbsDriverIDs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ids[testkit.RxeDev] != 14 || ids[testkit.LoopDev] != 14 {
		t.Errorf("UverbsDriverIDs = %v", ids)
	}
}

func TestVMNLErrors(t *testing.T) {
	testkit.RequireVM(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := sys.DialNL()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// RxeNetdev already carries rxe0.
	if err := c.AddLink(ctx, "rxe_dup", "rxe", testkit.RxeNetdev); !errors.Is(err, sys.EEXIST) {
		t.Errorf("second rxe on %s: %v, want EEXIST", testkit.RxeNetdev, err)
	}
	if err := c.DelLink(ctx, "no_such_dev"); !errors.Is(err, sys.ENODEV) {
		t.Errorf("DelLink of a missing device: %v, want ENODEV", err)
	}
	if _, err := c.Chardev(ctx, 1<<30, "uverbs"); !errors.As(err, new(sys.Errno)) {
		t.Errorf("Chardev of a missing index: %v, want an errno", err)
	}
	devs, err := c.Devices(ctx)
	if err != nil || len(devs) < 2 {
		t.Fatalf("Devices after errors: %v, %v", devs, err)
	}
}

// TestVMNLLinkCycle adds an rxe link on a fresh veth, finds it in the dump
// and the chardev lookup, and deletes it again.
func TestVMNLLinkCycle(t *testing.T) {
	testkit.RequireVM(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	ip("link", "add", "pvnl0", "type", "veth", "peer", "name", "pvnl1")
	t.Cleanup(func() { exec.Command("ip", "link", "del", "pvnl0").Run() })

	c, err := sys.DialNL()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const dev = "rxe_nltest"
	if err := c.AddLink(ctx, dev, "rxe", "pvnl0"); err != nil {
		t.Fatal(err)
	}
	deleted := false
	t.Cleanup(func() {
		if !deleted {
			c.DelLink(context.Background(), dev)
		}
	})
	cds, err := sys.UverbsChardevs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cd, ok := cds[dev]
	if !ok || cd.DriverID != abi.RDMA_DRIVER_RXE {
		t.Fatalf("%s after AddLink: %+v (found %v)", dev, cd, ok)
	}
	if got := sysfsUverbs(t)[dev][0]; got != cd.Name {
		t.Errorf("%s: netlink chardev %s, sysfs %s", dev, cd.Name, got)
	}
	if err := c.DelLink(ctx, dev); err != nil {
		t.Fatal(err)
	}
	deleted = true
	devs, err := c.Devices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range devs {
		if d.Name == dev {
			t.Errorf("%s still listed after DelLink", dev)
		}
	}
}
