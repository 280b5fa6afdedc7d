package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/uverbs"
)

// TestVMSameAsIbvDevices runs ibv_devices and the Go devices tool (as a
// program, from the guest's PATH, and in process) with several argument
// lists, which both ignore, with the VM's devices and again after adding
// one; every output must be ibv_devices' byte for byte, and list the
// devices with the node GUIDs sysfs gives.
func TestVMSameAsIbvDevices(t *testing.T) {
	testkit.RequireVM(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	check := func(t *testing.T, wantDevs ...string) {
		t.Helper()
		for _, args := range [][]string{{}, {"-d", testkit.RxeDev}, {"--help"}, {"x", "y"}} {
			want, err := testkit.RunPeer(ctx, t, "ibv_devices", args...)
			if err != nil {
				t.Fatalf("ibv_devices %s: %v\n%s", strings.Join(args, " "), err, want)
			}
			got, err := testkit.RunPeer(ctx, t, "devices", args...)
			if err != nil {
				t.Fatalf("devices %s: %v\n%s", strings.Join(args, " "), err, got)
			}
			if got != want {
				t.Errorf("devices %s differs from ibv_devices:\nibv_devices:\n%s\ndevices:\n%s", strings.Join(args, " "), want, got)
			}
		}
		var out, errb bytes.Buffer
		if rc := run(uverbs.Devices, &out, &errb); rc != 0 || errb.Len() != 0 {
			t.Fatalf("run: exit %d, stderr %q", rc, errb.String())
		}
		text := out.String()
		for _, name := range wantDevs {
			d, err := uverbs.DeviceByName(name)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := os.ReadFile("/sys/class/infiniband/" + name + "/node_guid")
			if err != nil {
				t.Fatal(err)
			}
			guid := strings.ReplaceAll(strings.TrimSpace(string(raw)), ":", "")
			line := "    " + name + strings.Repeat(" ", max(0, 16-len(name))) + "\t" + guid + "\n"
			if !strings.Contains(text, line) || d.NodeGUID == 0 {
				t.Errorf("the output lacks %q (sysfs node_guid):\n%s", line, text)
			}
		}
	}
	check(t, testkit.RxeDev, testkit.LoopDev)
	testkit.AddRxeDevice(t, "pvdevs0")
	check(t, testkit.RxeDev, testkit.LoopDev, "pvdevs0")
}
