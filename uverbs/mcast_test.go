package uverbs

import (
	"errors"
	"strings"
	"testing"

	"github.com/pureverbs/pureverbs/internal/sys"
)

// TestMcastSetBusy: the set keeps one entry per group and LID as the
// kernel does,
// and only a kernel EBUSY while groups are attached gains the hint.
func TestMcastSetBusy(t *testing.T) {
	var m mcastSet
	busy := &OpError{Object: "qp", Method: "destroy", Err: sys.EBUSY}
	if err := m.busyErr(busy); err != busy {
		t.Errorf("no groups: %v, want the kernel's error unchanged", err)
	}
	g1, g2 := mcastKey{GID{0: 0xff, 15: 1}, 0}, mcastKey{GID{0: 0xff, 15: 2}, 0}
	m.update(g1, true)
	m.update(g1, true)
	m.update(g2, true)
	m.update(g2, false)
	m.update(g2, false)
	// Another LID on g1 is another attachment, as in the kernel's list.
	g1b := mcastKey{g1.gid, 7}
	m.update(g1b, true)
	m.update(g1b, false)
	err := m.busyErr(busy)
	var oe *OpError
	if !errors.Is(err, sys.EBUSY) || !errors.As(err, &oe) || oe.Method != "destroy" ||
		!strings.Contains(err.Error(), "attached to 1 multicast group(s)") {
		t.Errorf("one group: %v", err)
	}
	other := &OpError{Object: "qp", Method: "destroy", Err: sys.EINVAL}
	if err := m.busyErr(other); err != other {
		t.Errorf("EINVAL: %v, want it unchanged", err)
	}
	m.update(g1, false)
	if err := m.busyErr(busy); err != busy {
		t.Errorf("all detached: %v, want the kernel's error unchanged", err)
	}
}
