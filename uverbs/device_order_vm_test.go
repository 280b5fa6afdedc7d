package uverbs

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/internal/testkit"
)

// orderDev is the rxe device TestVMDeviceOrder adds after the VM's rxe0
// and rxelo: by name it sorts between them, by creation it comes last.
const orderDev = "rxe2"

// ibvList runs `ibv_devinfo -l` (prefixed by wrap, e.g. strace) and returns
// the device names it lists, in its order.
func ibvList(ctx context.Context, t *testing.T, wrap ...string) []string {
	t.Helper()
	args := append(wrap, "ibv_devinfo", "-l")
	out, err := testkit.RunPeer(ctx, t, args[0], args[1:]...)
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	lines := strings.Split(strings.TrimSpace(strings.ReplaceAll(out, "\r", "")), "\n")
	if len(lines) == 0 || !strings.Contains(lines[0], "HCA") {
		t.Fatalf("%s: unexpected output:\n%s", strings.Join(args, " "), out)
	}
	var list []string
	for _, l := range lines[1:] {
		list = append(list, strings.TrimSpace(l))
	}
	return list
}

// TestVMDeviceOrder adds a third rxe device, rxe2, after rxe0 and rxelo and
// checks that Devices lists the devices as libibverbs does (ibv_devinfo -l),
// creation order rxe0, rxelo, rxe2 rather than name order, and that without
// netlink Devices' sysfs order is libibverbs' sysfs fallback order (ibv_devinfo
// -l with its netlink socket failing under strace).
func TestVMDeviceOrder(t *testing.T) {
	testkit.RequireVM(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	testkit.AddRxeDevice(t, orderDev)

	want := ibvList(ctx, t)
	for _, d := range []string{testkit.RxeDev, testkit.LoopDev, orderDev} {
		if !slices.Contains(want, d) {
			t.Fatalf("ibv_devinfo -l lists %q, without %s", want, d)
		}
	}
	if sorted := slices.Sorted(slices.Values(want)); slices.Equal(sorted, want) {
		t.Fatalf("ibv_devinfo -l lists %q, in name order: the test proves nothing", want)
	}
	devs, err := Devices()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, devNames(devs)); diff != "" {
		t.Errorf("Devices vs ibv_devinfo -l (-ibv_devinfo +Devices):\n%s", diff)
	}
	// The kernel dumps devices in index order, which is creation order.
	c, err := sys.DialNL()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	dump, err := c.Devices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(dump); i++ {
		if dump[i-1].Index >= dump[i].Index {
			t.Errorf("netlink dump not in index order: %+v", dump)
		}
	}

	// Without netlink: libibverbs falls back to reading
	// /sys/class/infiniband_verbs (find_sysfs_devs). strace makes its
	// socket(AF_NETLINK) calls fail.
	log := filepath.Join(t.TempDir(), "strace.log")
	fallback := ibvList(ctx, t, "strace", "-f", "-qq", "-o", log, "-e", "trace=socket", "-e", "inject=socket:error=EPROTONOSUPPORT")
	if b, err := os.ReadFile(log); err != nil || !strings.Contains(string(b), "INJECTED") {
		t.Fatalf("strace did not fail ibv_devinfo's netlink socket (log: %q, %v)", b, err)
	}
	noNL, err := devicesNetlink(DefaultSysfsRoot, DefaultDevRoot, func() ([]nlDevice, error) { return nil, sys.EPROTONOSUPPORT })
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(fallback, devNames(noNL)); diff != "" {
		t.Errorf("sysfs order vs ibv_devinfo -l without netlink (-ibv_devinfo +ours):\n%s", diff)
	}
	entries, _ := readDirNames(filepath.Join(DefaultSysfsRoot, "class", "infiniband_verbs"), false)
	t.Logf("ibv_devinfo -l: %q; without netlink: %q (readdir of /sys/class/infiniband_verbs: %q)", want, fallback, entries)
}
