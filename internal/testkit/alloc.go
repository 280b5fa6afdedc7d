package testkit

import (
	"runtime"
	"runtime/debug"
	"testing"
)

// RaceSkipMarker is in the reason of every skip under the race detector
// (NoAllocs, SkipUnderRace); rxevm -race allows those skips, and only
// those.
const RaceSkipMarker = "meaningless under -race"

// RaceSkipMessage is the reason NoAllocs skips under the race detector.
const RaceSkipMessage = "allocation counts are " + RaceSkipMarker + " (sync.Pool drops items); make unit runs this without -race"

// SkipUnderRace skips the test when it is built with the race detector,
// which makes what it measures (what, e.g. "system call counts") mean
// nothing; the run without -race (make vmtest) checks it.
func SkipUnderRace(tb testing.TB, what string) {
	tb.Helper()
	if raceEnabled {
		tb.Skip(what + " are " + RaceSkipMarker + "; make vmtest measures them without it")
	}
}

// NoAllocs fails the test unless runs calls of f, after warm-up calls,
// allocate nothing at all: zero heap objects and zero bytes over the whole
// run. testing.AllocsPerRun rounds its average down, so a function that
// allocates 64 B on every second call passes "0 allocs/op"; this does not.
// Like AllocsPerRun it measures with GOMAXPROCS(1); the garbage collector
// is off during the measurement, so that a collection emptying sync.Pools
// (which refill once, not per call) cannot be mistaken for f allocating.
//
// The race detector makes sync.Pool drop items on purpose, so under -race
// the measurement would be noise: NoAllocs then skips (make unit runs the
// allocation tests a second time without -race).
func NoAllocs(tb testing.TB, runs int, f func()) {
	tb.Helper()
	if raceEnabled {
		tb.Skip(RaceSkipMessage)
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	for i := 0; i < 3; i++ {
		f() // warm-up: pools, lazily grown buffers
	}
	runtime.GC()
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	for i := 0; i < 3; i++ {
		f() // refill pools the collection emptied
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := 0; i < runs; i++ {
		f()
	}
	runtime.ReadMemStats(&after)
	if n, b := after.Mallocs-before.Mallocs, after.TotalAlloc-before.TotalAlloc; n != 0 || b != 0 {
		tb.Errorf("%d calls allocated %d objects, %d bytes (want none)", runs, n, b)
	}
}

// FirstCallAllocs returns how many heap objects one call of f allocates,
// with no warm-up: for what a value's first use must not allocate either
// (NoAllocs warms up, which would hide a lazily built structure). Like
// NoAllocs it skips under the race detector, and measures with
// GOMAXPROCS(1) and the collector off.
func FirstCallAllocs(tb testing.TB, f func()) uint64 {
	tb.Helper()
	if raceEnabled {
		tb.Skip(RaceSkipMessage)
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	runtime.GC()
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.Mallocs - before.Mallocs
}
