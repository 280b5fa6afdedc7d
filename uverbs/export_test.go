package uverbs

import (
	"github.com/pureverbs/pureverbs/internal/core"
	"github.com/pureverbs/pureverbs/internal/sys"
)

// Test-only access for the external (uverbs_test) VM tests.

// FdsForTest returns the command and async event descriptors.
func (c *Context) FdsForTest() (cmd, async int) { return c.cmd.Int(), c.asyncRaw }

// LookupForTest is the registry lookup the async reader uses.
func (c *Context) LookupForTest(uh uint64) (Affiliated, bool) {
	o, _, ok := c.reg.Lookup(uh)
	return o, ok
}

// AsyncCountsForTest returns an object's delivered and acknowledged async
// event counts.
func AsyncCountsForTest(o Affiliated) (delivered, acked uint32) {
	switch o := o.(type) {
	case *CQ:
		return o.counts.Counts(core.AsyncEvents)
	case *QP:
		return o.counts.Counts(core.AsyncEvents)
	case *SRQ:
		return o.counts.Counts(core.AsyncEvents)
	}
	return 0, 0
}

// SetHookForTest installs f at the create paths' named points (nil removes
// it). Not for concurrent use with creates in other tests.
func SetHookForTest(f func(point string)) { testHook = f }

// AHNumForTest returns the provider's number of the AH (rxe ah_num).
func (ah *AH) AHNumForTest() uint32 { return ah.num }

// SRQRingForTest reports whether the SRQ's receive ring is mapped and
// its size in bytes.
func (srq *SRQ) SRQRingForTest() (mapped bool, size int) {
	d, ok := srq.drv.(*rxeSRQ)
	if !ok || d.q.m == nil {
		return false, 0
	}
	return d.q.m.Mapped(), d.q.m.Len()
}

// SliceAddrForTest returns the address of b's first byte.
func SliceAddrForTest(b []byte) uint64 { return sys.SliceAddr(b) }
