// Package uverbs is the RDMA verbs interface of libibverbs in pure Go:
// it finds the uverbs devices, opens a device Context, queries it,
// creates and destroys its objects (PD, MR, MW, CQ, QP, SRQ, AH,
// completion channels) through the kernel's RDMA_VERBS_IOCTL and write()
// commands on /dev/infiniband/uverbsN, and posts and polls work requests
// on rdma_rxe's mapped rings.
//
// # Device discovery
//
// Devices are found in sysfs as libibverbs finds them when netlink is
// unavailable (rdma-core libibverbs/init.c find_sysfs_devs,
// setup_sysfs_dev, check_abi_version), reading only regular sysfs files:
//
//	/sys/class/infiniband_verbs/abi_version           core uverbs ABI (must be 6)
//	/sys/class/infiniband_verbs/uverbsN/ibdev         ibdev name, e.g. "rxe0"
//	/sys/class/infiniband_verbs/uverbsN/abi_version   driver ABI (rxe 2, mlx5 1)
//	/sys/class/infiniband_verbs/uverbsN/dev           "major:minor" (optional)
//	/sys/class/infiniband/<ibdev>/{node_guid,sys_image_guid,node_type,
//	                                fw_ver,node_desc,ports/N,device/driver,parent}
//
// Error policy: a malformed tree is reported, not skipped. If any uverbsN
// entry is broken, DevicesAt fails with an error wrapping ErrSysfs that
// names the file and the bad value, so the problem is visible instead of a
// device silently missing from the list. (libibverbs skips such devices.)
//
// Driver ids. Every RDMA_VERBS_IOCTL header must carry the device's
// enum rdma_driver_id or the kernel answers EINVAL. sysfs does not show it,
// so DevicesAt derives it from the kernel driver's name, through a small
// table of known drivers. Devices and DeviceByName, the entry points for
// the running system, then ask RDMA netlink, as libibverbs'
// find_sysfs_devs_nl does: one RDMA_NLDEV_CMD_GET dump and one
// RDMA_NLDEV_CMD_GET_CHARDEV (CHARDEV_TYPE "uverbs") per device, whose
// reply carries RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID, the kernel's own value.
// It overrides the table for every device whose netlink ibdev name and
// uverbs char device name match the sysfs entry. When netlink is unusable
// (no NETLINK_RDMA, kernels before 5.0 without GET_CHARDEV or
// UVERBS_DRIVER_ID, EPERM/EOPNOTSUPP, a timeout) the sysfs value stays,
// silently: discovery never fails because of netlink.
//
// Device order. Devices lists the devices in the order libibverbs'
// ibv_get_device_list gives them (so devinfo -l prints what ibv_devinfo -l
// prints): the order of the RDMA netlink device dump, which is creation
// order, or, when netlink is unusable, the readdir order of
// /sys/class/infiniband_verbs (both as rdma-core v44's
// ibverbs_get_device_list produces them for a new process). DevicesAt,
// which reads a sysfs tree given by its root (often a fake one in tests),
// sorts by Name instead: readdir order depends on the file system holding
// the tree, and DevicesAt's result must not.
package uverbs
