package testkit

import "testing"

var sink []byte

// fakeTB records failures instead of failing the real test.
type fakeTB struct {
	testing.TB
	failed bool
}

func (f *fakeTB) Helper()               {}
func (f *fakeTB) Errorf(string, ...any) { f.failed = true }
func (f *fakeTB) Fatalf(string, ...any) { f.failed = true }
func (f *fakeTB) Logf(string, ...any)   {}

// TestNoAllocsCatchesEveryOtherCall is the case testing.AllocsPerRun
// misses: 64 B on every second call averages 0.5 allocations, which it
// rounds down to 0.
func TestNoAllocsCatchesEveryOtherCall(t *testing.T) {
	i := 0
	f := func() {
		i++
		if i%2 == 0 {
			sink = make([]byte, 64)
		}
	}
	if a := testing.AllocsPerRun(1000, f); a != 0 {
		t.Logf("AllocsPerRun now reports %.1f", a)
	}
	ft := &fakeTB{TB: t}
	NoAllocs(ft, 1000, f)
	if !ft.failed {
		t.Fatal("NoAllocs passed a function that allocates on every second call")
	}
	ok := &fakeTB{TB: t}
	NoAllocs(ok, 1000, func() { i++ })
	if ok.failed {
		t.Fatal("NoAllocs failed a function that allocates nothing")
	}
}
