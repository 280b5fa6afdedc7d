package main

import (
	"testing"

	"github.com/pureverbs/pureverbs/internal/testkit"
)

// TestRaceSkips: with -race, NoAllocs's skip is allowed in any test, and
// only with -race; RequireVM's skip never is.
func TestRaceSkips(t *testing.T) {
	defer func(v bool) { raceSkips = v }(raceSkips)
	for _, race := range []bool{false, true} {
		o, err := parseArgs(append(map[bool][]string{true: {"-race"}}[race], "./x"))
		if err != nil || o.race != race || raceSkips != race {
			t.Fatalf("parseArgs race=%v: %+v, %v, raceSkips %v", race, o, err, raceSkips)
		}
		got := allowSkip(vmSkipAllowlist, "6.1", mod+"async", "TestDecode", "async_test.go:89: "+testkit.RaceSkipMessage)
		if (got != "") != race {
			t.Errorf("race=%v: allowSkip of the NoAllocs skip = %q", race, got)
		}
		if got := allowSkip(vmSkipAllowlist, "6.1", mod+"async", "TestDecode", testkit.SkipMessage+" "+testkit.RaceSkipMessage); got != "" {
			t.Errorf("race=%v: RequireVM's skip allowed: %q", race, got)
		}
	}
}
