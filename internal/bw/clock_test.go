package bw

import (
	"testing"
	"time"
)

// TestTSCStamps: TSC stamps convert to the nanoseconds the monotonic clock
// measured over the same stretch (within 5 %), in order, and a stamp never
// taken (zero) stays zero. Forced on whatever the clocksource, since the
// conversion does not depend on it.
func TestTSCStamps(t *testing.T) {
	if !haveTSC {
		t.Skip("no TSC on this architecture")
	}
	defer func(u bool, t0 uint64, m0 int64) { useTSC, tsc0, mono0 = u, t0, m0 }(useTSC, tsc0, mono0)
	useTSC = true
	tsc0, mono0 = startReading()
	s := make([]int64, 5)
	var mono [5]int64
	for i := range s {
		if i == 2 {
			continue // never taken
		}
		start := nanotime()
		for nanotime()-start < int64(2*time.Millisecond) {
		}
		s[i], mono[i] = stamp(), nanotime()
	}
	toNanos(s)
	if s[2] != 0 {
		t.Fatalf("an untaken stamp became %d", s[2])
	}
	for _, p := range [][2]int{{0, 1}, {1, 3}, {3, 4}, {0, 4}} {
		got, want := s[p[1]]-s[p[0]], mono[p[1]]-mono[p[0]]
		if got <= 0 || got < want*95/100 || got > want*105/100 {
			t.Errorf("stamps %d..%d: %v apart, the monotonic clock says %v", p[0], p[1], time.Duration(got), time.Duration(want))
		}
	}
}
