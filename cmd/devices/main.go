// Command devices lists the RDMA devices and their node GUIDs, like
// rdma-core's ibv_devices (libibverbs/examples/device_list.c), using only
// the pureverbs library.
//
//	devices
//
// The output is ibv_devices' byte for byte (rdma-core v44, Debian 12):
// a header, then one line per device in libibverbs' order with the node
// GUID as 16 hex digits. Like ibv_devices it ignores its arguments, and
// when the device list cannot be read it prints perror's line and exits
// 1 (TestVMSameAsIbvDevices).
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/pureverbs/pureverbs/internal/memlock"
	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/uverbs"
)

func main() {
	os.Exit(run(uverbs.Devices, os.Stdout, os.Stderr))
}

// run is the whole command over the device lister list (uverbs.Devices,
// or a fake in tests); it returns the exit status. libibverbs'
// RLIMIT_MEMLOCK warning comes first: ibv_devices' first statement is
// ibv_get_device_list (device_list.c:46), which prints it.
func run(list func() ([]uverbs.Device, error), stdout, stderr io.Writer) int {
	memlock.Warn(stderr)
	devs, err := list()
	if errors.Is(err, sys.ENOSYS) {
		// No RDMA support in the kernel: ibv_get_device_list fails.
		fmt.Fprintf(stderr, "Failed to get IB devices list: %s\n", sys.Strerror(sys.ENOSYS))
		return 1
	}
	if errors.Is(err, uverbs.ErrNoDevice) {
		// libibverbs lists no device (and ibv_devices prints the header
		// alone) where the library says there is none.
		devs, err = nil, nil
	}
	if err != nil {
		fmt.Fprintf(stderr, "Failed to get IB devices list: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "    %-16s\t   node GUID\n", "device")
	fmt.Fprintf(stdout, "    %-16s\t----------------\n", "------")
	for _, d := range devs {
		fmt.Fprintf(stdout, "    %-16s\t%016x\n", d.Name, d.NodeGUID)
	}
	return 0
}
