package bw

import (
	"os"
	"runtime"
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
	// The monotonic clock just before and just after each stamp: a
	// thread descheduled between two readings (a loaded host) widens
	// the bounds instead of failing the test.
	var before, after [5]int64
	for i := range s {
		if i == 2 {
			continue // never taken
		}
		start := nanotime()
		for nanotime()-start < int64(2*time.Millisecond) {
		}
		before[i] = nanotime()
		s[i] = stamp()
		after[i] = nanotime()
	}
	toNanos(s)
	if s[2] != 0 {
		t.Fatalf("an untaken stamp became %d", s[2])
	}
	for _, p := range [][2]int{{0, 1}, {1, 3}, {3, 4}, {0, 4}} {
		got := s[p[1]] - s[p[0]]
		lo, hi := before[p[1]]-after[p[0]], after[p[1]]-before[p[0]]
		if got <= 0 || got < lo*95/100 || got > hi*105/100 {
			t.Errorf("stamps %d..%d: %v apart, the monotonic clock says %v to %v", p[0], p[1], time.Duration(got), time.Duration(lo), time.Duration(hi))
		}
	}
}

// TestOneProc: one P, unless GOMAXPROCS is set in the environment.
func TestOneProc(t *testing.T) {
	prev := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
	runtime.GOMAXPROCS(2)
	t.Setenv("GOMAXPROCS", "2")
	OneProc()
	if n := runtime.GOMAXPROCS(0); n != 2 {
		t.Errorf("GOMAXPROCS=2 in the environment: %d Ps", n)
	}
	os.Unsetenv("GOMAXPROCS")
	OneProc()
	if n := runtime.GOMAXPROCS(0); n != 1 {
		t.Errorf("no GOMAXPROCS in the environment: %d Ps", n)
	}
}
