package uverbs

import (
	"errors"
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

func TestDevicesNetlinkDriverIDs(t *testing.T) {
	root := irdmaTree().write(t)
	cd := func(chardev string, id uint32, has bool) sys.UverbsChardev {
		return sys.UverbsChardev{NLChardev: sys.NLChardev{Name: chardev, DriverID: id, HasDriverID: has}}
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
		nl   func() (map[string]sys.UverbsChardev, error)
		want want
	}{
		{"netlink fills the unknown driver", func() (map[string]sys.UverbsChardev, error) {
			return map[string]sys.UverbsChardev{
				"irdma0": cd("uverbs2", 9, true),
				"mlx5_0": cd("uverbs1", 1, true),
				"rxe0":   cd("uverbs0", 14, true),
			}, nil
		}, want{
			ids:       map[string]uint32{"irdma0": 9, "mlx5_0": 1, "rxe0": 14},
			providers: map[string]string{"irdma0": "irdma", "mlx5_0": "mlx5", "rxe0": "rxe"},
		}},
		{"netlink is authoritative over the table", func() (map[string]sys.UverbsChardev, error) {
			return map[string]sys.UverbsChardev{"rxe0": cd("uverbs0", 18, true)}, nil
		}, want{
			ids:       map[string]uint32{"irdma0": 0, "mlx5_0": 1, "rxe0": 18},
			providers: map[string]string{"irdma0": "", "mlx5_0": "mlx5", "rxe0": "siw"},
		}},
		{"netlink fails: sysfs table", func() (map[string]sys.UverbsChardev, error) {
			return nil, sys.EOPNOTSUPP
		}, sysfsOnly},
		{"no UVERBS_DRIVER_ID (old kernel): sysfs table", func() (map[string]sys.UverbsChardev, error) {
			return map[string]sys.UverbsChardev{"irdma0": cd("uverbs2", 0, false), "rxe0": cd("uverbs0", 0, false)}, nil
		}, sysfsOnly},
		{"char device name mismatch (device replaced): sysfs table", func() (map[string]sys.UverbsChardev, error) {
			return map[string]sys.UverbsChardev{"irdma0": cd("uverbs7", 9, true), "rxe0": cd("uverbs5", 18, true)}, nil
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

	// The netlink step is skipped when sysfs already fails.
	called := false
	_, err := devicesNetlink(t.TempDir(), "/dev", func() (map[string]sys.UverbsChardev, error) {
		called = true
		return nil, nil
	})
	if !errors.Is(err, ErrNoDevice) || called {
		t.Errorf("empty sysfs: err %v, netlink called %v", err, called)
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
