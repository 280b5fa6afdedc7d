package uverbs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// tree builds a fake sysfs under a temp dir. Files maps a path relative to
// the root to its contents; links maps a path to a symlink target.
type tree struct {
	files map[string]string
	links map[string]string
}

func (tr tree) write(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for p, content := range tr.files {
		full := filepath.Join(root, p)
		if strings.HasSuffix(p, "/") {
			if err := os.MkdirAll(full, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for p, target := range tr.links {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, full); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

const (
	rxeDir  = "devices/virtual/infiniband/rxe0"
	pciDev  = "devices/pci0000:00/0000:00:02.0/0000:03:00.0"
	mlx5Dir = pciDev + "/infiniband/mlx5_0"
)

// goodTree mirrors a host with rxe0 (uverbs0, on netdev d0) and a PCI mlx5
// device mlx5_0 (uverbs1) with two ports, laid out like real sysfs: class
// entries are symlinks into /sys/devices, and mlx5_0/device/driver leads to
// the PCI driver.
func goodTree() tree {
	return tree{
		files: map[string]string{
			"class/infiniband_verbs/abi_version": "6\n",

			"devices/virtual/infiniband_verbs/uverbs0/ibdev":       "rxe0\n",
			"devices/virtual/infiniband_verbs/uverbs0/abi_version": "2\n",
			"devices/virtual/infiniband_verbs/uverbs0/dev":         "231:192\n",
			rxeDir + "/node_guid":                                  "5254:00ff:fe12:3456\n",
			rxeDir + "/sys_image_guid":                             "5254:00ff:fe12:3456\n",
			rxeDir + "/node_type":                                  "1: CA\n",
			rxeDir + "/fw_ver":                                     "\n",
			rxeDir + "/node_desc":                                  "rxe\n",
			rxeDir + "/parent":                                     "d0\n",
			rxeDir + "/ports/1/state":                              "4: ACTIVE\n",

			pciDev + "/infiniband_verbs/uverbs1/ibdev":       "mlx5_0\n",
			pciDev + "/infiniband_verbs/uverbs1/abi_version": "1\n",
			pciDev + "/infiniband_verbs/uverbs1/dev":         "231:193\n",
			mlx5Dir + "/node_guid":                           "0c42:a103:0065:a0b2\n",
			mlx5Dir + "/sys_image_guid":                      "0c42:a103:0065:a0b0\n",
			mlx5Dir + "/node_type":                           "1: CA\n",
			mlx5Dir + "/fw_ver":                              "16.35.2000\n",
			mlx5Dir + "/node_desc":                           "host1 mlx5_0\n",
			mlx5Dir + "/ports/1/state":                       "4: ACTIVE\n",
			mlx5Dir + "/ports/2/state":                       "1: DOWN\n",
			"bus/pci/drivers/mlx5_core/bind":                 "",
		},
		links: map[string]string{
			"class/infiniband_verbs/uverbs0": "../../devices/virtual/infiniband_verbs/uverbs0",
			"class/infiniband_verbs/uverbs1": "../../" + pciDev + "/infiniband_verbs/uverbs1",
			"class/infiniband/rxe0":          "../../" + rxeDir,
			"class/infiniband/mlx5_0":        "../../" + mlx5Dir,
			mlx5Dir + "/device":              "../../../0000:03:00.0",
			pciDev + "/driver":               "../../../../bus/pci/drivers/mlx5_core",
		},
	}
}

var (
	wantRxe0 = Device{
		Name:         "rxe0",
		UverbsName:   "uverbs0",
		DevPath:      "/dev/infiniband/uverbs0",
		ABIVersion:   2,
		NodeGUID:     0x525400fffe123456,
		SysImageGUID: 0x525400fffe123456,
		NodeType:     NodeCA,
		Driver:       "rxe",
		DriverID:     14,
		FWVersion:    "",
		NumPorts:     1,
		Ports:        []int{1},
		NodeDesc:     "rxe",
		Index:        -1,
	}
	wantMlx5 = Device{
		Name:         "mlx5_0",
		UverbsName:   "uverbs1",
		DevPath:      "/dev/infiniband/uverbs1",
		ABIVersion:   1,
		NodeGUID:     0x0c42a1030065a0b2,
		SysImageGUID: 0x0c42a1030065a0b0,
		NodeType:     NodeCA,
		Driver:       "mlx5_core",
		DriverID:     1,
		FWVersion:    "16.35.2000",
		NumPorts:     2,
		Ports:        []int{1, 2},
		NodeDesc:     "host1 mlx5_0",
		Index:        -1,
	}
)

// softDevice returns files for a device without a device/ link, exposed
// as uverbsN with ibdev name.
func softDevice(uverbs, name, nodeType string, withParent bool) map[string]string {
	m := map[string]string{
		"class/infiniband_verbs/" + uverbs + "/ibdev":       name + "\n",
		"class/infiniband_verbs/" + uverbs + "/abi_version": "1\n",
		"class/infiniband/" + name + "/node_guid":           "0000:0000:0000:0001\n",
		"class/infiniband/" + name + "/sys_image_guid":      "0000:0000:0000:0001\n",
		"class/infiniband/" + name + "/node_type":           nodeType,
		"class/infiniband/" + name + "/ports/1/state":       "4: ACTIVE\n",
	}
	if withParent {
		m["class/infiniband/"+name+"/parent"] = "eth0\n"
	}
	return m
}

func TestDevicesAt(t *testing.T) {
	type tc struct {
		name string
		tree tree
		want []Device
	}
	// soft is a single device without a device/ link, as uverbs3.
	soft := func(name, devName, nodeTypeText string, withParent bool, driver string, id uint32, nt NodeType) tc {
		files := softDevice("uverbs3", devName, nodeTypeText, withParent)
		files["class/infiniband_verbs/abi_version"] = "6\n"
		return tc{name: name, tree: tree{files: files}, want: []Device{{
			Name:         devName,
			UverbsName:   "uverbs3",
			DevPath:      "/dev/infiniband/uverbs3",
			ABIVersion:   1,
			NodeGUID:     1,
			SysImageGUID: 1,
			NodeType:     nt,
			Driver:       driver,
			DriverID:     id,
			NumPorts:     1,
			Ports:        []int{1},
			Index:        -1,
		}}}
	}
	cases := []tc{
		{name: "rxe and mlx5, sorted by name", tree: goodTree(), want: []Device{wantMlx5, wantRxe0}},
		soft("renamed rxe identified by its parent attribute", "foo", "1: CA\n", true, "rxe", 14, NodeCA),
		soft("rxe without parent attribute identified by name prefix", "rxe_old", "1: CA\n", false, "rxe", 14, NodeCA),
		soft("siw identified by name prefix", "siw_eth0", "4: RNIC\n", false, "siw", 18, NodeRNIC),
		soft("unknown software driver and node type", "soft9", "9: <unknown>\n", false, "", 0, NodeUnknown),
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := c.tree.write(t)
			got, err := DevicesAt(root, "/dev")
			if err != nil {
				t.Fatalf("DevicesAt: %v", err)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("DevicesAt mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDevicesAtDevRoot(t *testing.T) {
	root := goodTree().write(t)
	got, err := DevicesAt(root, "/tmp/fakedev")
	if err != nil {
		t.Fatal(err)
	}
	if got[0].DevPath != "/tmp/fakedev/infiniband/uverbs1" || got[1].DevPath != "/tmp/fakedev/infiniband/uverbs0" {
		t.Errorf("DevPaths = %q, %q", got[0].DevPath, got[1].DevPath)
	}
}

func TestDevicesAtErrors(t *testing.T) {
	uv0 := "devices/virtual/infiniband_verbs/uverbs0/"
	cases := []struct {
		name     string
		mutate   func(tr *tree)
		want     error
		wantMsgs []string // substrings the message must contain; "ROOT" is replaced by the tree root
	}{
		{
			name:     "class dir missing",
			mutate:   func(tr *tree) { *tr = tree{files: map[string]string{"class/": ""}} },
			want:     ErrNoDevice,
			wantMsgs: []string{"ROOT/class/infiniband_verbs/abi_version", "ib_uverbs", "not loaded"},
		},
		{
			name:     "empty class dir: abi_version missing",
			mutate:   func(tr *tree) { *tr = tree{files: map[string]string{"class/infiniband_verbs/": ""}} },
			want:     ErrNoDevice,
			wantMsgs: []string{"ROOT/class/infiniband_verbs/abi_version", "ib_uverbs", "not loaded"},
		},
		{
			name: "abi_version only, no uverbsN",
			mutate: func(tr *tree) {
				*tr = tree{files: map[string]string{"class/infiniband_verbs/abi_version": "6\n"}}
			},
			want:     ErrNoDevice,
			wantMsgs: []string{"no RDMA devices found", "rdma_rxe", "docs/rxe.md"},
		},
		{
			name:     "ABI version 5",
			mutate:   func(tr *tree) { tr.files["class/infiniband_verbs/abi_version"] = "5\n" },
			want:     ErrABIVersion,
			wantMsgs: []string{"version 5", "version 6", "ROOT/class/infiniband_verbs/abi_version"},
		},
		{
			name:     "ABI version 7",
			mutate:   func(tr *tree) { tr.files["class/infiniband_verbs/abi_version"] = "7\n" },
			want:     ErrABIVersion,
			wantMsgs: []string{"version 7", "version 6"},
		},
		{
			name:     "ABI version garbage",
			mutate:   func(tr *tree) { tr.files["class/infiniband_verbs/abi_version"] = "six\n" },
			want:     ErrSysfs,
			wantMsgs: []string{"ROOT/class/infiniband_verbs/abi_version", `"six"`},
		},
		{
			name:     "missing ibdev",
			mutate:   func(tr *tree) { delete(tr.files, uv0+"ibdev") },
			want:     ErrSysfs,
			wantMsgs: []string{"ROOT/class/infiniband_verbs/uverbs0/ibdev", "no such file"},
		},
		{
			name:     "empty ibdev",
			mutate:   func(tr *tree) { tr.files[uv0+"ibdev"] = "\n" },
			want:     ErrSysfs,
			wantMsgs: []string{"ROOT/class/infiniband_verbs/uverbs0/ibdev", `""`},
		},
		{
			name:     "ibdev with a path separator",
			mutate:   func(tr *tree) { tr.files[uv0+"ibdev"] = "../rxe0\n" },
			want:     ErrSysfs,
			wantMsgs: []string{"uverbs0/ibdev", `"../rxe0"`},
		},
		{
			name:     "ibdev names a device missing from class/infiniband",
			mutate:   func(tr *tree) { tr.files[uv0+"ibdev"] = "rxe7\n" },
			want:     ErrSysfs,
			wantMsgs: []string{"uverbs0/ibdev", `"rxe7"`, "ROOT/class/infiniband/rxe7"},
		},
		{
			name:     "device abi_version garbage",
			mutate:   func(tr *tree) { tr.files[uv0+"abi_version"] = "2x\n" },
			want:     ErrSysfs,
			wantMsgs: []string{"ROOT/class/infiniband_verbs/uverbs0/abi_version", `"2x"`},
		},
		{
			name:     "device abi_version missing",
			mutate:   func(tr *tree) { delete(tr.files, uv0+"abi_version") },
			want:     ErrSysfs,
			wantMsgs: []string{"ROOT/class/infiniband_verbs/uverbs0/abi_version"},
		},
		{
			name:     "dev garbage",
			mutate:   func(tr *tree) { tr.files[uv0+"dev"] = "231-192\n" },
			want:     ErrSysfs,
			wantMsgs: []string{"ROOT/class/infiniband_verbs/uverbs0/dev", `"231-192"`},
		},
		{
			name:     "garbage node_guid",
			mutate:   func(tr *tree) { tr.files[rxeDir+"/node_guid"] = "zz54:00ff:fe12:3456\n" },
			want:     ErrSysfs,
			wantMsgs: []string{"ROOT/class/infiniband/rxe0/node_guid", `"zz54:00ff:fe12:3456"`},
		},
		{
			name:     "node_guid with three groups",
			mutate:   func(tr *tree) { tr.files[mlx5Dir+"/node_guid"] = "0c42:a103:0065\n" },
			want:     ErrSysfs,
			wantMsgs: []string{"ROOT/class/infiniband/mlx5_0/node_guid", `"0c42:a103:0065"`},
		},
		{
			name:     "node_guid group too long",
			mutate:   func(tr *tree) { tr.files[rxeDir+"/node_guid"] = "5254:00ff:fe12:34567\n" },
			want:     ErrSysfs,
			wantMsgs: []string{"rxe0/node_guid", `"5254:00ff:fe12:34567"`},
		},
		{
			name:     "garbage sys_image_guid",
			mutate:   func(tr *tree) { tr.files[rxeDir+"/sys_image_guid"] = "\n" },
			want:     ErrSysfs,
			wantMsgs: []string{"ROOT/class/infiniband/rxe0/sys_image_guid", `""`},
		},
		{
			name:     "garbage node_type",
			mutate:   func(tr *tree) { tr.files[rxeDir+"/node_type"] = "CA\n" },
			want:     ErrSysfs,
			wantMsgs: []string{"ROOT/class/infiniband/rxe0/node_type", `"CA"`},
		},
		{
			name:     "node_type with non-numeric prefix",
			mutate:   func(tr *tree) { tr.files[rxeDir+"/node_type"] = "x: CA\n" },
			want:     ErrSysfs,
			wantMsgs: []string{"rxe0/node_type", `"x: CA"`},
		},
		{
			name:     "missing ports dir",
			mutate:   func(tr *tree) { delete(tr.files, rxeDir+"/ports/1/state") },
			want:     ErrSysfs,
			wantMsgs: []string{"ROOT/class/infiniband/rxe0/ports"},
		},
		{
			name:     "non-numeric port entry",
			mutate:   func(tr *tree) { tr.files[rxeDir+"/ports/one/state"] = "" },
			want:     ErrSysfs,
			wantMsgs: []string{"ROOT/class/infiniband/rxe0/ports", `"one"`},
		},
		{
			name: "two broken devices: both named",
			mutate: func(tr *tree) {
				tr.files[rxeDir+"/node_guid"] = "bad\n"
				tr.files[mlx5Dir+"/node_type"] = "CA\n"
			},
			want:     ErrSysfs,
			wantMsgs: []string{"rxe0/node_guid", `"bad"`, "mlx5_0/node_type", `"CA"`},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr := goodTree()
			c.mutate(&tr)
			root := tr.write(t)
			got, err := DevicesAt(root, "/dev")
			if err == nil {
				t.Fatalf("DevicesAt succeeded with %d devices, want error %v", len(got), c.want)
			}
			if !errors.Is(err, c.want) {
				t.Errorf("error %q does not wrap %v", err, c.want)
			}
			for _, s := range []error{ErrNoDevice, ErrABIVersion, ErrSysfs} {
				if s != c.want && errors.Is(err, s) {
					t.Errorf("error %q also wraps %v", err, s)
				}
			}
			if got != nil {
				t.Errorf("got devices %v alongside the error, want nil", got)
			}
			for _, m := range c.wantMsgs {
				m = strings.ReplaceAll(m, "ROOT", root)
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not contain %q", err, m)
				}
			}
		})
	}
}

func TestDeviceByNameAt(t *testing.T) {
	root := goodTree().write(t)

	d, err := DeviceByNameAt(root, "/dev", "rxe0")
	if err != nil {
		t.Fatalf("DeviceByNameAt(rxe0): %v", err)
	}
	if diff := cmp.Diff(wantRxe0, d); diff != "" {
		t.Errorf("rxe0 mismatch (-want +got):\n%s", diff)
	}

	_, err = DeviceByNameAt(root, "/dev", "uverbs0")
	if !errors.Is(err, ErrNoDevice) {
		t.Fatalf("DeviceByNameAt(uverbs0) error = %v, want ErrNoDevice (lookup is by ibdev name)", err)
	}
	for _, s := range []string{`"uverbs0"`, "mlx5_0, rxe0"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not contain %q", err, s)
		}
	}

	empty := tree{files: map[string]string{"class/infiniband_verbs/abi_version": "6\n"}}.write(t)
	if _, err := DeviceByNameAt(empty, "/dev", "rxe0"); !errors.Is(err, ErrNoDevice) {
		t.Errorf("DeviceByNameAt on an empty tree: error = %v, want ErrNoDevice", err)
	}

	broken := goodTree()
	broken.files["class/infiniband_verbs/abi_version"] = "5\n"
	if _, err := DeviceByNameAt(broken.write(t), "/dev", "rxe0"); !errors.Is(err, ErrABIVersion) {
		t.Errorf("DeviceByNameAt with ABI 5: error = %v, want ErrABIVersion", err)
	}
}

// On a host without RDMA (such as the build machines) Devices reports
// ErrNoDevice rather than an empty list.
func TestDevicesHostWithoutRDMA(t *testing.T) {
	if _, err := os.Stat("/sys/class/infiniband_verbs/abi_version"); err == nil {
		t.Skip("host has ib_uverbs loaded")
	}
	devs, err := Devices()
	if !errors.Is(err, ErrNoDevice) {
		t.Fatalf("Devices() = %v, %v; want ErrNoDevice", devs, err)
	}
	if _, err := DeviceByName("rxe0"); !errors.Is(err, ErrNoDevice) {
		t.Fatalf("DeviceByName(rxe0) error = %v, want ErrNoDevice", err)
	}
}

func TestNodeTypeString(t *testing.T) {
	cases := []struct {
		t    NodeType
		want string
	}{
		{NodeCA, "InfiniBand channel adapter"},
		{NodeSwitch, "InfiniBand switch"},
		{NodeRouter, "InfiniBand router"},
		{NodeRNIC, "iWARP NIC"},
		{NodeUSNIC, "usNIC"},
		{NodeUSNICUDP, "usNIC UDP"},
		{NodeUnspecified, "unspecified"},
		{NodeUnknown, "unknown"},
		{NodeType(0), "unknown"},
		{NodeType(8), "unknown"},
	}
	for _, c := range cases {
		if got := c.t.String(); got != c.want {
			t.Errorf("NodeType(%d).String() = %q, want %q", int(c.t), got, c.want)
		}
	}
	// The numeric values are the kernel's enum rdma_node_type.
	if NodeCA != 1 || NodeSwitch != 2 || NodeRouter != 3 || NodeRNIC != 4 ||
		NodeUSNIC != 5 || NodeUSNICUDP != 6 || NodeUnspecified != 7 {
		t.Error("NodeType values do not match enum rdma_node_type")
	}
}

func TestDeviceProvider(t *testing.T) {
	for _, c := range []struct {
		d    Device
		want string
	}{
		{Device{Driver: "rxe", DriverID: 14}, "rxe"},
		{Device{Driver: "mlx5_core", DriverID: 1}, "mlx5"},
		{Device{Driver: "siw", DriverID: 18}, "siw"},
		{Device{Driver: "irdma"}, ""},
	} {
		if got := c.d.Provider(); got != c.want {
			t.Errorf("%s: Provider() = %q, want %q", c.d.Driver, got, c.want)
		}
	}
}
