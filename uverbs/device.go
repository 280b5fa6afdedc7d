package uverbs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/pureverbs/pureverbs/abi"
)

// Default roots used by Devices and DeviceByName.
const (
	DefaultSysfsRoot = "/sys"
	DefaultDevRoot   = "/dev"
)

// SupportedABIVersion is the core uverbs ABI version this library speaks,
// as read from /sys/class/infiniband_verbs/abi_version. rdma-core accepts
// 3..6 (IB_USER_VERBS_MIN/MAX_ABI_VERSION in libibverbs/kern-abi.h); every
// kernel since 2.6.x reports 6 and this library implements 6 only.
const SupportedABIVersion = 6

// NodeType is the kernel's RDMA node type (enum rdma_node_type), as shown
// in /sys/class/infiniband/<dev>/node_type.
type NodeType int

// Node types. Values match the kernel's enum rdma_node_type and
// libibverbs' enum ibv_node_type.
const (
	NodeUnknown     NodeType = -1 // a value the kernel reported that this package does not know (IBV_NODE_UNKNOWN)
	NodeCA          NodeType = 1  // InfiniBand channel adapter (also RoCE devices such as rxe and mlx5)
	NodeSwitch      NodeType = 2
	NodeRouter      NodeType = 3
	NodeRNIC        NodeType = 4 // iWARP NIC (siw, irdma in iWARP mode, cxgb4)
	NodeUSNIC       NodeType = 5
	NodeUSNICUDP    NodeType = 6
	NodeUnspecified NodeType = 7
)

// String returns the same text as libibverbs' ibv_node_type_str.
func (t NodeType) String() string {
	switch t {
	case NodeCA:
		return "InfiniBand channel adapter"
	case NodeSwitch:
		return "InfiniBand switch"
	case NodeRouter:
		return "InfiniBand router"
	case NodeRNIC:
		return "iWARP NIC"
	case NodeUSNIC:
		return "usNIC"
	case NodeUSNICUDP:
		return "usNIC UDP"
	case NodeUnspecified:
		return "unspecified"
	}
	return "unknown"
}

// Device describes one uverbs device as found in sysfs. It is plain data;
// opening the device is a separate step.
type Device struct {
	Name         string   // ibdev name, e.g. "rxe0"
	UverbsName   string   // uverbs char device name, e.g. "uverbs0"
	DevPath      string   // devRoot/infiniband/<UverbsName>, e.g. "/dev/infiniband/uverbs0" (not checked for existence)
	ABIVersion   int      // driver uverbs ABI version (uverbsN/abi_version): rxe 2, mlx5 1
	NodeGUID     uint64   // node_guid "0011:2233:4455:6677" read as one big-endian number: 0x0011223344556677
	SysImageGUID uint64   // sys_image_guid, same encoding
	NodeType     NodeType // from node_type "1: CA"
	Driver       string   // basename of the ibdev's device/driver link, the kernel driver of its parent device ("mlx5_core", "efa"), or "rxe"/"siw" for software devices (told by rxe's parent attribute, else by the name prefix); "" if unknown
	DriverID     uint32   // enum rdma_driver_id (RDMA_DRIVER_RXE 14, RDMA_DRIVER_MLX5 1, ...): from RDMA netlink in Devices/DeviceByName when the kernel reports it, else from Driver's table entry, else 0 (RDMA_DRIVER_UNKNOWN)
	FWVersion    string   // fw_ver, "" if absent or empty (rxe)
	NumPorts     int      // len(Ports)
	Ports        []int    // port numbers found under ports/, ascending (1-based for CAs)
	NodeDesc     string   // node_desc ("rxe" for rxe until changed), "" if absent
	Index        int      // ibv_get_device_index(3): the kernel's device index (RDMA netlink's DEV_INDEX, as `rdma dev` numbers devices) in Devices/DeviceByName; -1 when netlink does not answer, and always from the *At functions (sysfs has no index)
}

// Devices lists the uverbs devices (ibv_get_device_list(3)) under /sys in
// libibverbs' order (that of ibv_get_device_list in a new process: the RDMA netlink device dump's
// order, which is the order the devices were created in, or when netlink
// is unusable the readdir order of /sys/class/infiniband_verbs), with
// DriverID and Index taken from RDMA netlink where the kernel reports
// them (see the package documentation; netlink failures fall back to
// sysfs silently). The netlink part may take up to 5 seconds when the
// kernel does not answer before Devices gives up on it. The errors are
// DevicesAt's; when the kernel has no RDMA support at all (RDMA netlink
// unusable and no /sys/class/infiniband_verbs) the ErrNoDevice also
// matches unix.ENOSYS, libibverbs' errno there. Unlike DevicesAt, and as
// libibverbs, it leaves out a device whose sysfs entry cannot be read or
// whose /dev node does not exist; none left is ErrNoDevice.
func Devices() ([]Device, error) {
	return withNodes(devicesNetlink(DefaultSysfsRoot, DefaultDevRoot, netlinkDevices))
}

// withNodes drops the devices whose /dev node does not exist, as
// libibverbs' try_access_device does (a container without
// /dev/infiniband lists none); none left is ErrNoDevice.
func withNodes(devs []Device, err error) ([]Device, error) {
	if err != nil {
		return nil, err
	}
	kept := devs[:0]
	var missing []string
	for _, d := range devs {
		if _, err := os.Stat(d.DevPath); err != nil {
			missing = append(missing, d.DevPath)
			continue
		}
		kept = append(kept, d)
	}
	if len(kept) == 0 {
		return nil, fmt.Errorf("%w: no device node (%s): is /dev/infiniband there (a container needs it passed in)?", ErrNoDevice, strings.Join(missing, ", "))
	}
	return kept, nil
}

// DeviceByName returns the device whose ibdev name is name, with DriverID
// and Index from RDMA netlink as in Devices, which it calls: it too may
// wait up to 5 seconds for netlink. It returns an error wrapping
// ErrNoDevice when no device has that name, and any error Devices
// returns.
func DeviceByName(name string) (Device, error) {
	devs, err := withNodes(devicesNetlink(DefaultSysfsRoot, DefaultDevRoot, netlinkDevices))
	return findDevice(devs, err, name)
}

// DeviceByNameAt is DeviceByName with explicit sysfs and /dev roots, from
// sysfs alone (no netlink). It returns an error wrapping ErrNoDevice when
// no device has that name, and any error DevicesAt returns.
func DeviceByNameAt(sysRoot, devRoot, name string) (Device, error) {
	devs, err := DevicesAt(sysRoot, devRoot)
	return findDevice(devs, err, name)
}

func findDevice(devs []Device, err error, name string) (Device, error) {
	if err != nil {
		return Device{}, err
	}
	names := make([]string, 0, len(devs))
	for _, d := range devs {
		if d.Name == name {
			return d, nil
		}
		names = append(names, d.Name)
	}
	return Device{}, fmt.Errorf("%w: no device named %q (found: %s)", ErrNoDevice, name, strings.Join(names, ", "))
}

// DevicesAt lists the uverbs devices found under sysRoot (normally "/sys"),
// with DevPath built under devRoot (normally "/dev"), from sysfs alone,
// sorted by Name. The order is deliberately not libibverbs' (Devices has
// that): it is the same whatever file system holds the tree, so a copied
// or fake sysfs lists the same way everywhere.
//
// Errors:
//   - ErrNoDevice: sysRoot/class/infiniband_verbs or its abi_version is
//     missing (ib_uverbs not loaded), or no uverbsN entry exists.
//   - ErrABIVersion: the core ABI version is not SupportedABIVersion.
//   - ErrSysfs: a file is unreadable or malformed; the error names the path
//     and the bad value. One broken device fails the whole call.
func DevicesAt(sysRoot, devRoot string) ([]Device, error) {
	devs, err := sysfsDevices(sysRoot, devRoot, true)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(devs, func(a, b Device) int { return strings.Compare(a.Name, b.Name) })
	return devs, nil
}

// sysfsDevices reads the uverbs devices under sysRoot (see DevicesAt for
// the errors). With sorted, the uverbsN entries are read in name order,
// which makes the order of the result and of joined errors independent of
// the file system; otherwise in directory (readdir) order, the order
// libibverbs' find_sysfs_devs gives them.
func sysfsDevices(sysRoot, devRoot string, sorted bool) ([]Device, error) {
	return sysfsDevicesMode(sysRoot, devRoot, sorted, false)
}

// sysfsDevicesMode is sysfsDevices; with lenient (Devices' path) a device
// whose entry is unreadable or malformed is left out, as libibverbs'
// setup_sysfs_dev leaves it (one being removed while the list is read,
// say), and only when no device is left do the errors come back, as
// ErrNoDevice's detail.
func sysfsDevicesMode(sysRoot, devRoot string, sorted, lenient bool) ([]Device, error) {
	classDir := filepath.Join(sysRoot, "class", "infiniband_verbs")
	abiPath := filepath.Join(classDir, "abi_version")
	abiText, err := os.ReadFile(abiPath)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s does not exist: the ib_uverbs kernel module is not loaded (modprobe ib_uverbs; see docs/rxe.md)", ErrNoDevice, abiPath)
		}
		return nil, fmt.Errorf("%w: %w", ErrSysfs, err)
	}
	abi, err := parseInt(abiPath, abiText)
	if err != nil {
		return nil, err
	}
	if abi != SupportedABIVersion {
		return nil, fmt.Errorf("%w: kernel reports uverbs ABI version %d in %s, this library supports only version %d",
			ErrABIVersion, abi, abiPath, SupportedABIVersion)
	}

	names, err := readDirNames(classDir, sorted)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSysfs, err)
	}
	var devs []Device
	var errs []error
	for _, name := range names {
		if !isUverbsName(name) {
			continue
		}
		d, err := readDevice(sysRoot, devRoot, name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		devs = append(devs, d)
	}
	if len(errs) > 0 && !lenient {
		return nil, errors.Join(errs...)
	}
	if len(devs) == 0 && len(errs) > 0 {
		return nil, fmt.Errorf("%w: every device's sysfs entry failed: %w", ErrNoDevice, errors.Join(errs...))
	}
	if len(devs) == 0 {
		return nil, fmt.Errorf("%w: no RDMA devices found in %s: load rdma_rxe and add a link, see docs/rxe.md", ErrNoDevice, classDir)
	}
	return devs, nil
}

// readDirNames returns the names in dir, sorted or in directory order
// (File.Readdirnames keeps the order getdents gives; os.ReadDir sorts).
func readDirNames(dir string, sorted bool) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	if sorted {
		slices.Sort(names)
	}
	return names, nil
}

// isUverbsName reports whether s is "uverbs" followed by decimal digits.
func isUverbsName(s string) bool {
	n, ok := strings.CutPrefix(s, "uverbs")
	if !ok || n == "" {
		return false
	}
	for _, c := range n {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func readDevice(sysRoot, devRoot, uverbs string) (Device, error) {
	uvDir := filepath.Join(sysRoot, "class", "infiniband_verbs", uverbs)
	d := Device{
		Index:      -1,
		UverbsName: uverbs,
		DevPath:    filepath.Join(devRoot, "infiniband", uverbs),
	}

	ibdevPath := filepath.Join(uvDir, "ibdev")
	name, err := readTrimmed(ibdevPath)
	if err != nil {
		return Device{}, err
	}
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return Device{}, fmt.Errorf("%w: %s: invalid device name %q", ErrSysfs, ibdevPath, name)
	}
	d.Name = name

	abiPath := filepath.Join(uvDir, "abi_version")
	abiText, err := readFile(abiPath)
	if err != nil {
		return Device{}, err
	}
	if d.ABIVersion, err = parseInt(abiPath, abiText); err != nil {
		return Device{}, err
	}

	// dev ("major:minor") is optional; when present it must be well formed.
	devFile := filepath.Join(uvDir, "dev")
	if text, err := readOptional(devFile); err != nil {
		return Device{}, err
	} else if text != "" {
		if err := checkDevNumber(devFile, text); err != nil {
			return Device{}, err
		}
	}

	ibDir := filepath.Join(sysRoot, "class", "infiniband", name)
	if _, err := os.Stat(ibDir); err != nil {
		return Device{}, fmt.Errorf("%w: %s names ibdev %q: %w", ErrSysfs, ibdevPath, name, err)
	}
	if d.NodeGUID, err = readGUID(filepath.Join(ibDir, "node_guid")); err != nil {
		return Device{}, err
	}
	if d.SysImageGUID, err = readGUID(filepath.Join(ibDir, "sys_image_guid")); err != nil {
		return Device{}, err
	}
	if d.NodeType, err = readNodeType(filepath.Join(ibDir, "node_type")); err != nil {
		return Device{}, err
	}
	if d.FWVersion, err = readOptional(filepath.Join(ibDir, "fw_ver")); err != nil {
		return Device{}, err
	}
	descPath := filepath.Join(ibDir, "node_desc")
	switch b, err := os.ReadFile(descPath); {
	case err == nil:
		d.NodeDesc = strings.TrimSuffix(string(b), "\n")
	case !errors.Is(err, fs.ErrNotExist):
		return Device{}, fmt.Errorf("%w: %w", ErrSysfs, err)
	}
	if d.Ports, err = readPorts(filepath.Join(ibDir, "ports")); err != nil {
		return Device{}, err
	}
	d.NumPorts = len(d.Ports)
	if d.Driver, err = deriveDriver(ibDir, name); err != nil {
		return Device{}, err
	}
	d.DriverID = driverIDs[d.Driver]
	return d, nil
}

// deriveDriver names the kernel driver behind an ib device, from sysfs only:
//
//  1. ibDir/device/driver symlink: its basename, the driver bound to the
//     parent bus device (PCI or auxiliary), e.g. "mlx5_core", "efa". For
//     drivers layered on a NIC (irdma on ice, bnxt_re on bnxt_en) this is
//     the NIC's driver.
//  2. No device link and an ibDir/parent file: "rxe". rdma_rxe registers its
//     ib_device without a parent device (so there is no device/ link) and
//     adds a driver-specific "parent" attribute naming its netdev
//     (rxe_verbs.c rxe_attr_group); no other in-tree RDMA driver has it.
//     This works whatever name the link was given ("rdma link add foo type
//     rxe ...").
//  3. No device link: the name prefixes "rxe" and "siw", the last-resort
//     name match rdma-core's providers use (VERBS_NAME_MATCH).
//
// Otherwise the driver is unknown (""). The authoritative driver id comes
// from netlink (RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID), which Devices and
// DeviceByName apply on top of this; see devicesNetlink.
func deriveDriver(ibDir, name string) (string, error) {
	link := filepath.Join(ibDir, "device", "driver")
	target, err := os.Readlink(link)
	switch {
	case err == nil:
		return filepath.Base(target), nil
	case errors.Is(err, fs.ErrNotExist):
		// Software device without a parent; fall through.
	default:
		// device/driver exists but is not a symlink, or is unreadable.
		return "", fmt.Errorf("%w: %w", ErrSysfs, err)
	}
	if _, err := os.Stat(filepath.Join(ibDir, "device")); err == nil {
		// A parent device with no driver bound: nothing to go on.
		return "", nil
	}
	if fi, err := os.Stat(filepath.Join(ibDir, "parent")); err == nil && fi.Mode().IsRegular() {
		return "rxe", nil
	}
	for _, p := range []string{"rxe", "siw"} {
		if strings.HasPrefix(name, p) {
			return p, nil
		}
	}
	return "", nil
}

// driverIDs maps Driver values to enum rdma_driver_id
// (include/uapi/rdma/ib_user_ioctl_verbs.h), the fallback when netlink
// does not answer. Only kernel drivers that unambiguously carry one RDMA
// driver are listed: NIC drivers with a separate RDMA driver on top (ice
// and irdma, bnxt_en and bnxt_re, ...) are not, since the NIC can be bound
// without it.
var driverIDs = map[string]uint32{
	"mlx5_core":  abi.RDMA_DRIVER_MLX5,
	"mlx4_core":  abi.RDMA_DRIVER_MLX4,
	"cxgb4":      abi.RDMA_DRIVER_CXGB4,
	"ib_mthca":   abi.RDMA_DRIVER_MTHCA,
	"vmw_pvrdma": abi.RDMA_DRIVER_VMW_PVRDMA,
	"rxe":        abi.RDMA_DRIVER_RXE,
	"hfi1":       abi.RDMA_DRIVER_HFI1,
	"ib_qib":     abi.RDMA_DRIVER_QIB,
	"efa":        abi.RDMA_DRIVER_EFA,
	"siw":        abi.RDMA_DRIVER_SIW,
	"erdma":      abi.RDMA_DRIVER_ERDMA,
}

func readFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSysfs, err)
	}
	return b, nil
}

func readTrimmed(path string) (string, error) {
	b, err := readFile(path)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// readOptional returns the trimmed contents of path, or "" if it does not
// exist.
func readOptional(path string) (string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrSysfs, err)
	}
	return strings.TrimSpace(string(b)), nil
}

func parseInt(path string, b []byte) (int, error) {
	s := strings.TrimSpace(string(b))
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%w: %s: want a decimal integer, got %q", ErrSysfs, path, s)
	}
	return n, nil
}

func checkDevNumber(path, s string) error {
	maj, min, ok := strings.Cut(s, ":")
	if ok {
		_, err1 := strconv.ParseUint(maj, 10, 32)
		_, err2 := strconv.ParseUint(min, 10, 32)
		if err1 == nil && err2 == nil {
			return nil
		}
	}
	return fmt.Errorf("%w: %s: want \"major:minor\", got %q", ErrSysfs, path, s)
}

// readGUID parses the kernel's "%04x:%04x:%04x:%04x" GUID format. The
// groups are the GUID's bytes in network order, so the result is the GUID
// read as one big-endian number.
func readGUID(path string) (uint64, error) {
	s, err := readTrimmed(path)
	if err != nil {
		return 0, err
	}
	parts := strings.Split(s, ":")
	bad := fmt.Errorf("%w: %s: want a GUID like 0011:2233:4455:6677, got %q", ErrSysfs, path, s)
	if len(parts) != 4 {
		return 0, bad
	}
	var g uint64
	for _, p := range parts {
		if len(p) != 4 {
			return 0, bad
		}
		v, err := strconv.ParseUint(p, 16, 16)
		if err != nil {
			return 0, bad
		}
		g = g<<16 | v
	}
	return g, nil
}

// readNodeType parses "N: text" (core/sysfs.c node_type_show). Numbers the
// kernel may add later decode to NodeUnknown, as libibverbs'
// decode_knode_type does; text that does not start with a number is an
// error.
func readNodeType(path string) (NodeType, error) {
	s, err := readTrimmed(path)
	if err != nil {
		return 0, err
	}
	num, _, ok := strings.Cut(s, ":")
	n, err := strconv.Atoi(num)
	if !ok || err != nil {
		return 0, fmt.Errorf("%w: %s: want \"N: type\" like \"1: CA\", got %q", ErrSysfs, path, s)
	}
	t := NodeType(n)
	if t < NodeCA || t > NodeUnspecified {
		return NodeUnknown, nil
	}
	return t, nil
}

// readPorts lists the numeric entries of dir (ib device ports/), sorted.
func readPorts(dir string) ([]int, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSysfs, err)
	}
	ports := make([]int, 0, len(entries))
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%w: %s: unexpected entry %q, want port numbers", ErrSysfs, dir, e.Name())
		}
		ports = append(ports, n)
	}
	slices.Sort(ports)
	return ports, nil
}

// providerNames maps enum rdma_driver_id to the userspace provider that
// serves it (rdma-core's provider names, which ibv_devices users know:
// "mlx5", "rxe", ...; cxgb3 and nes are historical rdma-core providers,
// usnic's lives in libfabric). With netlink driver ids this covers devices
// whose kernel driver the sysfs table does not know (irdma, bnxt_re, hns,
// qedr, ...).
var providerNames = map[uint32]string{
	abi.RDMA_DRIVER_MLX5:       "mlx5",
	abi.RDMA_DRIVER_MLX4:       "mlx4",
	abi.RDMA_DRIVER_CXGB3:      "cxgb3",
	abi.RDMA_DRIVER_CXGB4:      "cxgb4",
	abi.RDMA_DRIVER_MTHCA:      "mthca",
	abi.RDMA_DRIVER_BNXT_RE:    "bnxt_re",
	abi.RDMA_DRIVER_OCRDMA:     "ocrdma",
	abi.RDMA_DRIVER_NES:        "nes",
	abi.RDMA_DRIVER_IRDMA:      "irdma", // also RDMA_DRIVER_I40IW
	abi.RDMA_DRIVER_VMW_PVRDMA: "vmw_pvrdma",
	abi.RDMA_DRIVER_QEDR:       "qedr",
	abi.RDMA_DRIVER_HNS:        "hns",
	abi.RDMA_DRIVER_USNIC:      "usnic",
	abi.RDMA_DRIVER_RXE:        "rxe",
	abi.RDMA_DRIVER_HFI1:       "hfi1verbs",
	abi.RDMA_DRIVER_QIB:        "ipathverbs",
	abi.RDMA_DRIVER_EFA:        "efa",
	abi.RDMA_DRIVER_SIW:        "siw",
	abi.RDMA_DRIVER_ERDMA:      "erdma",
}

// Provider returns the userspace provider for the device ("rxe", "mlx5",
// ...), derived from DriverID, or "" when the driver is unknown. Driver
// names the kernel driver instead (e.g. "mlx5_core" for an mlx5 NIC).
func (d Device) Provider() string { return providerNames[d.DriverID] }
