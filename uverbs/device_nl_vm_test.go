package uverbs_test

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/uverbs"
)

// TestVMNetlinkDriverIDs checks that RDMA netlink and sysfs agree on the
// rxe devices: driver id RDMA_DRIVER_RXE, the uverbs char device name and
// the driver ABI version, and that Devices/DeviceByName carry the netlink
// driver id.
func TestVMNetlinkDriverIDs(t *testing.T) {
	testkit.RequireVM(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ids, err := sys.UverbsDriverIDs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cds, err := sys.UverbsChardevs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	devs, err := uverbs.Devices()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]uverbs.Device{}
	for _, d := range devs {
		byName[d.Name] = d
	}
	for _, name := range []string{testkit.RxeDev, testkit.LoopDev} {
		if ids[name] != 14 {
			t.Errorf("%s: netlink driver id %d, want RDMA_DRIVER_RXE (14)", name, ids[name])
		}
		d, err := uverbs.DeviceByName(name)
		if err != nil {
			t.Fatal(err)
		}
		cd := cds[name]
		if cd.Name != d.UverbsName {
			t.Errorf("%s: netlink chardev %q, Device.UverbsName %q", name, cd.Name, d.UverbsName)
		}
		if cd.ABI != uint64(d.ABIVersion) {
			t.Errorf("%s: netlink chardev ABI %d, Device.ABIVersion %d", name, cd.ABI, d.ABIVersion)
		}
		if d.DriverID != ids[name] || byName[name].DriverID != ids[name] {
			t.Errorf("%s: DeviceByName DriverID %d, Devices DriverID %d, netlink %d", name, d.DriverID, byName[name].DriverID, ids[name])
		}
		if d.Provider() != "rxe" {
			t.Errorf("%s: Provider() = %q", name, d.Provider())
		}
	}
}

// TestVMDeviceIndexAgainstC compares Devices with libibverbs' list
// (pv_devindex: ibv_get_device_index and ibv_get_device_guid of each
// device, in its order), with the VM's devices and after adding one, and
// the indexes with `rdma dev`'s numbering.
func TestVMDeviceIndexAgainstC(t *testing.T) {
	testkit.RequireVM(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	check := func() {
		t.Helper()
		want, err := testkit.RunPeer(ctx, t, "pv_devindex")
		if err != nil {
			t.Fatalf("pv_devindex: %v\n%s", err, want)
		}
		devs, err := uverbs.Devices()
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, d := range devs {
			fmt.Fprintf(&b, "%s %d %016x\n", d.Name, d.Index, d.NodeGUID)
		}
		if got := b.String(); got != strings.ReplaceAll(want, "\r", "") {
			t.Errorf("Devices differ from libibverbs:\nlibibverbs:\n%s\nGo:\n%s", want, got)
		}
		rdma, err := exec.CommandContext(ctx, "rdma", "dev").Output()
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range devs {
			if d.Index < 0 || !strings.Contains(string(rdma), fmt.Sprintf("%d: %s:", d.Index, d.Name)) {
				t.Errorf("%s: Index %d, not what `rdma dev` prints:\n%s", d.Name, d.Index, rdma)
			}
			at, err := uverbs.DeviceByNameAt("/sys", "/dev", d.Name)
			if err != nil || at.Index != -1 {
				t.Errorf("DeviceByNameAt(%s): Index %d, %v; want -1 (sysfs has no index)", d.Name, at.Index, err)
			}
		}
	}
	check()
	testkit.AddRxeDevice(t, "pvidx0")
	check()
}
