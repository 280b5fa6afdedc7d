package main

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/pureverbs/pureverbs/internal/memlock"
	"github.com/pureverbs/pureverbs/internal/memlock/memlocktest"
	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/uverbs"
)

const lowMemlock = memlocktest.Low

// TestMemlockWarning: with libibverbs' RLIMIT_MEMLOCK warning due
// (memlock.Force), ibv_devices prints it first, whatever the list gives:
// devices, none, or a failure (its perror line after the warning).
func TestMemlockWarning(t *testing.T) {
	defer memlock.Force(lowMemlock)()
	header := "    device          \t   node GUID\n    ------          \t----------------\n"
	for _, c := range []struct {
		list   func() ([]uverbs.Device, error)
		status int
		stdout string
		stderr string
	}{
		{func() ([]uverbs.Device, error) { return []uverbs.Device{{Name: "rxe0", NodeGUID: 0x1}}, nil }, 0,
			header + "    rxe0            \t0000000000000001\n", lowMemlock},
		{func() ([]uverbs.Device, error) { return nil, uverbs.ErrNoDevice }, 0, header, lowMemlock},
		{func() ([]uverbs.Device, error) {
			return nil, fmt.Errorf("%w (%w)", uverbs.ErrNoDevice, sys.ENOSYS)
		}, 1, "", lowMemlock + "Failed to get IB devices list: Function not implemented\n"},
		{func() ([]uverbs.Device, error) { return nil, errors.New("no uverbs here") }, 1, "",
			lowMemlock + "Failed to get IB devices list: no uverbs here\n"},
	} {
		var out, errb bytes.Buffer
		if st := run(c.list, &out, &errb); st != c.status || out.String() != c.stdout || errb.String() != c.stderr {
			t.Errorf("status %d, stdout %q, stderr %q; want %d, %q, %q", st, out.String(), errb.String(), c.status, c.stdout, c.stderr)
		}
	}
}
