package uverbs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/pureverbs/pureverbs/internal/sys"
)

// RDMA netlink in device discovery: driver ids and device order.
//
// Devices and DeviceByName ask RDMA netlink what libibverbs' netlink
// discovery asks (rdma-core v44 libibverbs/ibdev_nl.c find_sysfs_devs_nl):
// one RDMA_NLDEV_CMD_GET dump, then RDMA_NLDEV_CMD_GET_CHARDEV
// (CHARDEV_TYPE "uverbs") for each device of the dump. From the answers
// they take two things:
//
//   - the driver id (RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID) of every device whose
//     netlink ibdev name and uverbs char device name match the sysfs entry;
//   - the device order: the order of the dump (see orderByDump).
//
// Device order in libibverbs (rdma-core v44). ibverbs_get_device_list
// (libibverbs/init.c) first tries find_sysfs_devs_nl and only if that fails
// (no RDMA netlink, no NLDEV GET: kernels before 4.16) find_sysfs_devs, which
// walks /sys/class/infiniband_verbs with readdir. Both add each device with
// ccan's list_add, which puts it at the head of the list, so the list is
// reversed; try_all_drivers then moves each device that has a provider,
// walking that reversed list, onto the head of the global device list, which
// reverses it back. ibv_get_device_list (libibverbs/device.c) returns the
// global list from its head. For a process's first call (ibv_devinfo's only
// one) the result is therefore:
//
//   - netlink: the order of the RDMA_NLDEV_CMD_GET dump. The kernel dumps
//     its device xarray in index order (ib_enum_all_devs), and device
//     indexes are allocated cyclically at registration, so this is creation
//     order, not name order;
//   - sysfs fallback: readdir order of /sys/class/infiniband_verbs (kernfs
//     lists entries by a hash of the name, so neither name nor creation
//     order).
//
// A device that GET_CHARDEV does not answer for keeps its place in the dump
// order (libibverbs then looks its uverbs device up in sysfs,
// find_uverbs_sysfs). Devices listed in sysfs but absent from the dump
// (removed or renamed between the two reads) follow the dump's devices in
// sysfs order.
//
// Later calls in one libibverbs process keep the devices it already knows
// where they are (same uverbs name and same netlink index, or without
// netlink same ibdev directory mtime: same_sysfs_dev) and put new ones at
// the head of the list. Devices keeps no such state: every call returns the
// order a fresh process sees, which is what ibv_devinfo and every other
// short-lived tool print.
//
// When netlink is unusable (no NETLINK_RDMA, EPERM/EOPNOTSUPP, a failed
// dump, a timeout) Devices keeps the sysfs readdir order and the sysfs
// driver ids, silently: discovery never fails because of netlink.

// netlinkTimeout bounds the netlink part of Devices and DeviceByName.
const netlinkTimeout = 5 * time.Second

// nlDevice is one device of the RDMA netlink dump, with its uverbs char
// device when GET_CHARDEV answered.
type nlDevice struct {
	sys.NLDevice
	Chardev    sys.NLChardev
	HasChardev bool
}

// netlinkDevices returns the RDMA netlink device dump in the kernel's
// order, each device with its uverbs char device where GET_CHARDEV answers
// (Linux 5.0+). It fails only when the socket or the dump fails.
func netlinkDevices() ([]nlDevice, error) {
	ctx, cancel := context.WithTimeout(context.Background(), netlinkTimeout)
	defer cancel()
	c, err := sys.DialNL()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	dump, err := c.Devices(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]nlDevice, len(dump))
	for i, d := range dump {
		out[i].NLDevice = d
		if ctx.Err() != nil {
			continue // keep the order; the remaining devices get no driver id
		}
		if cd, err := c.Chardev(ctx, d.Index, "uverbs"); err == nil {
			out[i].Chardev, out[i].HasChardev = cd, true
		}
	}
	return out, nil
}

// devicesNetlink reads sysfs in directory order (sysfsDevices), then, if
// nl answers, applies the netlink driver ids and orders the devices by the
// dump (orderByDump). An nl error leaves the sysfs order and driver ids.
func devicesNetlink(sysRoot, devRoot string, nl func() ([]nlDevice, error)) ([]Device, error) {
	devs, err := sysfsDevicesMode(sysRoot, devRoot, false, true)
	if err != nil {
		if errors.Is(err, ErrNoDevice) && noRDMA(sysRoot, nl) {
			// libibverbs' ibv_get_device_list fails here (NULL, errno
			// ENOSYS: find_sysfs_devs cannot open the class directory
			// after netlink failed), where a kernel with the RDMA core
			// but no device gives an empty list.
			return nil, fmt.Errorf("%w (%w): no RDMA netlink and no %s: this kernel has no RDMA support loaded (modprobe ib_uverbs; see docs/rxe.md)",
				ErrNoDevice, sys.ENOSYS, filepath.Join(sysRoot, "class", "infiniband_verbs"))
		}
		return nil, err
	}
	if dump, err := nl(); err == nil {
		applyNetlink(devs, dump)
		orderByDump(devs, dump)
	}
	return devs, nil
}

// noRDMA reports whether the kernel has no RDMA support at all, as
// libibverbs finds it: RDMA netlink unusable and no
// sysRoot/class/infiniband_verbs directory.
func noRDMA(sysRoot string, nl func() ([]nlDevice, error)) bool {
	if _, err := os.Stat(filepath.Join(sysRoot, "class", "infiniband_verbs")); !errors.Is(err, fs.ErrNotExist) {
		return false
	}
	_, err := nl()
	return err != nil
}

// applyNetlink sets Index from the first dump entry with the device's
// ibdev name (libibverbs takes ibdev_idx from the dump), and DriverID from
// netlink's UVERBS_DRIVER_ID for each device that netlink knows under the
// same ibdev name and uverbs char device name (a device renamed or
// replaced between the two reads keeps its sysfs value).
func applyNetlink(devs []Device, dump []nlDevice) {
	for i := range devs {
		for _, n := range dump {
			if n.Name == devs[i].Name {
				devs[i].Index = int(n.Index)
				break
			}
		}
		for _, n := range dump {
			if n.Name == devs[i].Name && n.HasChardev && n.Chardev.HasDriverID && n.Chardev.Name == devs[i].UverbsName {
				devs[i].DriverID = n.Chardev.DriverID
				break
			}
		}
	}
}

// orderByDump sorts devs, in place, into the order of the netlink dump:
// a device comes at the position of the first dump entry with its ibdev
// name; devices the dump does not name follow, in their previous order.
func orderByDump(devs []Device, dump []nlDevice) {
	pos := make(map[string]int, len(dump))
	for i, n := range dump {
		if _, dup := pos[n.Name]; !dup {
			pos[n.Name] = i
		}
	}
	rank := func(d Device) int {
		if p, ok := pos[d.Name]; ok {
			return p
		}
		return len(dump)
	}
	slices.SortStableFunc(devs, func(a, b Device) int { return rank(a) - rank(b) })
}
