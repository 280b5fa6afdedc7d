package uverbs

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pureverbs/pureverbs/internal/sys"
)

// irdmaTree adds to goodTree a PCI device irdma0 (uverbs2) whose parent is
// bound to ice: the sysfs table cannot name its driver id.
func irdmaTree() tree {
	tr := goodTree()
	const dev = "devices/pci0000:00/0000:00:03.0/0000:04:00.0"
	const ib = dev + "/infiniband/irdma0"
	for k, v := range map[string]string{
		dev + "/infiniband_verbs/uverbs2/ibdev":       "irdma0\n",
		dev + "/infiniband_verbs/uverbs2/abi_version": "1\n",
		ib + "/node_guid":                             "b496:91ff:fe00:0001\n",
		ib + "/sys_image_guid":                        "b496:91ff:fe00:0001\n",
		ib + "/node_type":                             "1: CA\n",
		ib + "/ports/1/state":                         "4: ACTIVE\n",
		"bus/pci/drivers/ice/bind":                    "",
	} {
		tr.files[k] = v
	}
	for k, v := range map[string]string{
		"class/infiniband_verbs/uverbs2": "../../" + dev + "/infiniband_verbs/uverbs2",
		"class/infiniband/irdma0":        "../../" + ib,
		ib + "/device":                   "../../../0000:04:00.0",
		dev + "/driver":                  "../../../../bus/pci/drivers/ice",
	} {
		tr.links[k] = v
	}
	return tr
}

// TestDevicesNetlinkIndex: Index is the dump's DEV_INDEX of the device's
// name (GET_CHARDEV or not), -1 for a device the dump lacks and for all
// when netlink fails.
func TestDevicesNetlinkIndex(t *testing.T) {
	root := irdmaTree().write(t)
	for _, c := range []struct {
		name string
		nl   func() ([]nlDevice, error)
		want map[string]int
	}{
		{"dump", func() ([]nlDevice, error) {
			return []nlDevice{
				{NLDevice: sys.NLDevice{Index: 7, Name: "rxe0"}},
				{NLDevice: sys.NLDevice{Index: 3, Name: "irdma0"}, Chardev: sys.NLChardev{Name: "uverbs2"}, HasChardev: true},
				{NLDevice: sys.NLDevice{Index: 9, Name: "rxe0"}}, // a second entry of a name: the first counts
			}, nil
		}, map[string]int{"rxe0": 7, "irdma0": 3, "mlx5_0": -1}},
		{"netlink fails", func() ([]nlDevice, error) { return nil, sys.EOPNOTSUPP },
			map[string]int{"rxe0": -1, "irdma0": -1, "mlx5_0": -1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			devs, err := devicesNetlink(root, "/dev", c.nl)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]int{}
			for _, d := range devs {
				got[d.Name] = d.Index
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestDevicesNetlinkDriverIDs(t *testing.T) {
	root := irdmaTree().write(t)
	cd := func(name, chardev string, id uint32, has bool) nlDevice {
		return nlDevice{NLDevice: sys.NLDevice{Name: name}, Chardev: sys.NLChardev{Name: chardev, DriverID: id, HasDriverID: has}, HasChardev: true}
	}
	type want struct {
		ids       map[string]uint32
		providers map[string]string
	}
	sysfsOnly := want{
		ids:       map[string]uint32{"irdma0": 0, "mlx5_0": 1, "rxe0": 14},
		providers: map[string]string{"irdma0": "", "mlx5_0": "mlx5", "rxe0": "rxe"},
	}
	for _, c := range []struct {
		name string
		nl   func() ([]nlDevice, error)
		want want
	}{
		{"netlink fills the unknown driver", func() ([]nlDevice, error) {
			return []nlDevice{
				cd("irdma0", "uverbs2", 9, true),
				cd("mlx5_0", "uverbs1", 1, true),
				cd("rxe0", "uverbs0", 14, true),
			}, nil
		}, want{
			ids:       map[string]uint32{"irdma0": 9, "mlx5_0": 1, "rxe0": 14},
			providers: map[string]string{"irdma0": "irdma", "mlx5_0": "mlx5", "rxe0": "rxe"},
		}},
		{"netlink is authoritative over the table", func() ([]nlDevice, error) {
			return []nlDevice{cd("rxe0", "uverbs0", 18, true)}, nil
		}, want{
			ids:       map[string]uint32{"irdma0": 0, "mlx5_0": 1, "rxe0": 18},
			providers: map[string]string{"irdma0": "", "mlx5_0": "mlx5", "rxe0": "siw"},
		}},
		{"netlink fails: sysfs table", func() ([]nlDevice, error) {
			return nil, sys.EOPNOTSUPP
		}, sysfsOnly},
		{"no UVERBS_DRIVER_ID (old kernel): sysfs table", func() ([]nlDevice, error) {
			return []nlDevice{cd("irdma0", "uverbs2", 0, false), cd("rxe0", "uverbs0", 0, false)}, nil
		}, sysfsOnly},
		{"GET_CHARDEV unanswered: sysfs table", func() ([]nlDevice, error) {
			return []nlDevice{{NLDevice: sys.NLDevice{Name: "irdma0"}}, {NLDevice: sys.NLDevice{Name: "rxe0"}}}, nil
		}, sysfsOnly},
		{"char device name mismatch (device replaced): sysfs table", func() ([]nlDevice, error) {
			return []nlDevice{cd("irdma0", "uverbs7", 9, true), cd("rxe0", "uverbs5", 18, true)}, nil
		}, sysfsOnly},
	} {
		t.Run(c.name, func(t *testing.T) {
			devs, err := devicesNetlink(root, "/dev", c.nl)
			if err != nil {
				t.Fatal(err)
			}
			ids := map[string]uint32{}
			providers := map[string]string{}
			for _, d := range devs {
				ids[d.Name] = d.DriverID
				providers[d.Name] = d.Provider()
			}
			if diff := cmp.Diff(c.want, want{ids, providers}, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}

	// When sysfs has no uverbs class: with RDMA netlink answering (the
	// RDMA core, no device) libibverbs lists nothing; without it
	// ibv_get_device_list fails with ENOSYS. Both are ErrNoDevice.
	for _, nlWorks := range []bool{true, false} {
		called := false
		_, err := devicesNetlink(t.TempDir(), "/dev", func() ([]nlDevice, error) {
			called = true
			if !nlWorks {
				return nil, sys.EPROTONOSUPPORT
			}
			return nil, nil
		})
		if !errors.Is(err, ErrNoDevice) || !called || errors.Is(err, sys.ENOSYS) == nlWorks {
			t.Errorf("no uverbs class, netlink works %v: err %v, netlink called %v, want ENOSYS %v", nlWorks, err, called, !nlWorks)
		}
	}
	// The class directory without abi_version (or without devices): no
	// ENOSYS, and netlink is not asked.
	root = t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "class", "infiniband_verbs"), 0o755); err != nil {
		t.Fatal(err)
	}
	called := false
	_, err := devicesNetlink(root, "/dev", func() ([]nlDevice, error) {
		called = true
		return nil, sys.EPROTONOSUPPORT
	})
	if !errors.Is(err, ErrNoDevice) || errors.Is(err, sys.ENOSYS) || called {
		t.Errorf("class directory alone: err %v, netlink called %v", err, called)
	}
}

func TestProviderNamesCoverDriverIDs(t *testing.T) {
	// Every enum rdma_driver_id but UNKNOWN has a provider name.
	for id := uint32(1); id <= 19; id++ {
		if (Device{DriverID: id}).Provider() == "" {
			t.Errorf("driver id %d has no provider name", id)
		}
	}
	if p := (Device{}).Provider(); p != "" {
		t.Errorf("RDMA_DRIVER_UNKNOWN provider = %q", p)
	}
}

// devNames returns the devices' names in order.
func devNames(devs []Device) []string {
	out := make([]string, len(devs))
	for i, d := range devs {
		out[i] = d.Name
	}
	return out
}

// dumpOf is a netlink dump of the named devices, indexes 0, 1, ...
func dumpOf(names ...string) []nlDevice {
	out := make([]nlDevice, len(names))
	for i, n := range names {
		out[i] = nlDevice{NLDevice: sys.NLDevice{Index: uint32(i), Name: n}}
	}
	return out
}

func TestOrderByDump(t *testing.T) {
	devs := func(names ...string) []Device {
		out := make([]Device, len(names))
		for i, n := range names {
			out[i] = Device{Name: n}
		}
		return out
	}
	for _, c := range []struct {
		name string
		devs []Device // in sysfs directory order
		dump []nlDevice
		want []string
	}{
		{"creation order, not name order", devs("rxe0", "rxe2", "rxelo"), dumpOf("rxe0", "rxelo", "rxe2"), []string{"rxe0", "rxelo", "rxe2"}},
		{"dump order whatever the sysfs order", devs("rxelo", "rxe2", "mlx5_0", "rxe0"), dumpOf("mlx5_0", "rxe0", "rxelo", "rxe2"), []string{"mlx5_0", "rxe0", "rxelo", "rxe2"}},
		{"devices the dump lacks follow in sysfs order", devs("b", "x", "a", "y"), dumpOf("a", "b"), []string{"a", "b", "x", "y"}},
		{"dump names without a sysfs device are ignored", devs("b", "a"), dumpOf("gone", "a", "new", "b"), []string{"a", "b"}},
		{"a name twice in the dump: the first counts", devs("b", "a"), dumpOf("a", "b", "a"), []string{"a", "b"}},
		{"empty dump: sysfs order", devs("rxe2", "rxe0"), nil, []string{"rxe2", "rxe0"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			orderByDump(c.devs, c.dump)
			if diff := cmp.Diff(c.want, devNames(c.devs)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestDevicesOrder checks the order of devicesNetlink (Devices) against
// DevicesAt on a tree of three rxe devices created as rxe0, rxelo, rxe2
// (uverbs0, 1, 2), which sort by name as rxe0, rxe2, rxelo.
func TestDevicesOrder(t *testing.T) {
	tr := tree{files: map[string]string{"class/infiniband_verbs/abi_version": "6\n"}}
	for i, name := range []string{"rxe0", "rxelo", "rxe2"} {
		for k, v := range softDevice("uverbs"+string(rune('0'+i)), name, "1: CA\n", true) {
			tr.files[k] = v
		}
	}
	root := tr.write(t)

	byName, err := DevicesAt(root, "/dev")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"rxe0", "rxe2", "rxelo"}, devNames(byName)); diff != "" {
		t.Errorf("DevicesAt: want name order (-want +got):\n%s", diff)
	}

	// Netlink answers: the dump's order (libibverbs' find_sysfs_devs_nl).
	nl, err := devicesNetlink(root, "/dev", func() ([]nlDevice, error) { return dumpOf("rxe0", "rxelo", "rxe2"), nil })
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"rxe0", "rxelo", "rxe2"}, devNames(nl)); diff != "" {
		t.Errorf("with netlink: want the dump's order (-want +got):\n%s", diff)
	}

	// No netlink: the directory's own order (libibverbs' find_sysfs_devs),
	// whatever it is on the file system holding the tree.
	sysfs, err := devicesNetlink(root, "/dev", func() ([]nlDevice, error) { return nil, sys.EPROTONOSUPPORT })
	if err != nil {
		t.Fatal(err)
	}
	entries, err := readDirNames(filepath.Join(root, "class", "infiniband_verbs"), false)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, e := range entries {
		if i := slices.IndexFunc(byName, func(d Device) bool { return d.UverbsName == e }); i >= 0 {
			want = append(want, byName[i].Name)
		}
	}
	if diff := cmp.Diff(want, devNames(sysfs)); diff != "" {
		t.Errorf("without netlink: want directory order %q (-want +got):\n%s", entries, diff)
	}
}

// TestDevicesSkipsBrokenEntries: Devices' path leaves out a device whose
// sysfs entry cannot be read (libibverbs' setup_sysfs_dev skips it, as
// when it is being removed while the list is read) and lists the rest;
// DevicesAt still reports it; with every entry broken the error is
// ErrNoDevice with the entries' errors.
func TestDevicesSkipsBrokenEntries(t *testing.T) {
	tr := tree{files: map[string]string{"class/infiniband_verbs/abi_version": "6\n"}}
	for k, v := range softDevice("uverbs0", "rxe0", "1: CA\n", true) {
		tr.files[k] = v
	}
	tr.files["class/infiniband_verbs/uverbs1/ibdev"] = "rxe1\n" // no class/infiniband/rxe1
	tr.files["class/infiniband_verbs/uverbs1/abi_version"] = "1\n"
	root := tr.write(t)
	noNL := func() ([]nlDevice, error) { return nil, sys.EPROTONOSUPPORT }
	devs, err := devicesNetlink(root, "/dev", noNL)
	if err != nil || len(devs) != 1 || devs[0].Name != "rxe0" {
		t.Errorf("devicesNetlink: %v, %v; want rxe0 alone", devNames(devs), err)
	}
	if _, err := DevicesAt(root, "/dev"); !errors.Is(err, ErrSysfs) {
		t.Errorf("DevicesAt: %v, want ErrSysfs naming rxe1's entry", err)
	}
	if err := os.RemoveAll(filepath.Join(root, "class", "infiniband", "rxe0")); err != nil {
		t.Fatal(err)
	}
	if _, err := devicesNetlink(root, "/dev", noNL); !errors.Is(err, ErrNoDevice) || !errors.Is(err, ErrSysfs) {
		t.Errorf("every entry broken: %v, want ErrNoDevice with the ErrSysfs details", err)
	}
}

// TestWithNodes: Devices drops a device whose /dev node is missing, as
// libibverbs' try_access_device does; none left is ErrNoDevice.
func TestWithNodes(t *testing.T) {
	dir := t.TempDir()
	there := filepath.Join(dir, "uverbs0")
	if err := os.WriteFile(there, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	devs := []Device{{Name: "rxe0", DevPath: there}, {Name: "rxe1", DevPath: filepath.Join(dir, "uverbs1")}}
	got, err := withNodes(devs, nil)
	if err != nil || len(got) != 1 || got[0].Name != "rxe0" {
		t.Errorf("withNodes: %v, %v; want rxe0 alone", devNames(got), err)
	}
	if _, err := withNodes([]Device{{Name: "rxe1", DevPath: filepath.Join(dir, "uverbs1")}}, nil); !errors.Is(err, ErrNoDevice) {
		t.Errorf("no node at all: %v, want ErrNoDevice", err)
	}
	if _, err := withNodes(nil, ErrSysfs); err != ErrSysfs {
		t.Errorf("an error passes through: %v", err)
	}
}
