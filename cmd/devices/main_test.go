package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/internal/testkit/leakmain"
	"github.com/pureverbs/pureverbs/uverbs"
)

// TestMain traces every fd and mapping the tests create and fails the run
// when any is left open.
func TestMain(m *testing.M) {
	os.Exit(leakmain.Run(m))
}

func TestFormat(t *testing.T) {
	for _, tc := range []struct {
		name string
		devs []uverbs.Device
		want string
	}{
		{"none", nil, "    device          \t   node GUID\n    ------          \t----------------\n"},
		{"two", []uverbs.Device{{Name: "rxe0", NodeGUID: 0xfffe990001}, {Name: "mlx5_0", NodeGUID: 0x0011223344556677}},
			"    device          \t   node GUID\n    ------          \t----------------\n" +
				"    rxe0            \t000000fffe990001\n    mlx5_0          \t0011223344556677\n"},
		// Names longer than the column push the tab out, as %-16s does in C.
		{"long name", []uverbs.Device{{Name: "a_very_long_device_name", NodeGUID: 1}},
			"    device          \t   node GUID\n    ------          \t----------------\n" +
				"    a_very_long_device_name\t0000000000000001\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			rc := run(func() ([]uverbs.Device, error) {
				if tc.devs == nil {
					// What uverbs.Devices says when there is none.
					return nil, fmt.Errorf("%w: no RDMA devices found in /sys/class/infiniband_verbs", uverbs.ErrNoDevice)
				}
				return tc.devs, nil
			}, &out, &errb)
			if rc != 0 || out.String() != tc.want || errb.Len() != 0 {
				t.Errorf("exit %d, stdout %q, stderr %q; want 0, %q, nothing", rc, out.String(), errb.String(), tc.want)
			}
		})
	}
}

func TestListError(t *testing.T) {
	var out, errb bytes.Buffer
	rc := run(func() ([]uverbs.Device, error) { return nil, errors.New("no uverbs here") }, &out, &errb)
	if rc != 1 || out.Len() != 0 || errb.String() != "Failed to get IB devices list: no uverbs here\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", rc, out.String(), errb.String())
	}
}

// TestNoRDMA: a kernel without RDMA support at all (uverbs.Devices'
// error matches ENOSYS as well as ErrNoDevice): ibv_get_device_list
// fails there, and ibv_devices prints perror's line and exits 1 (Debian
// 12's, run on such a host), not the empty list.
func TestNoRDMA(t *testing.T) {
	var out, errb bytes.Buffer
	rc := run(func() ([]uverbs.Device, error) {
		return nil, fmt.Errorf("%w (%w): no RDMA netlink and no /sys/class/infiniband_verbs", uverbs.ErrNoDevice, sys.ENOSYS)
	}, &out, &errb)
	if rc != 1 || out.Len() != 0 || errb.String() != "Failed to get IB devices list: Function not implemented\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", rc, out.String(), errb.String())
	}
}
