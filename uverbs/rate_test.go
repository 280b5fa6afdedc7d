package uverbs_test

import (
	"testing"

	"github.com/pureverbs/pureverbs/uverbs"
)

// TestRateRoundTrip: every rate with a value converts back to itself, the
// spot values of ibv_rate_to_mult(3) and ibv_rate_to_mbps(3) hold, and
// what has no value is -1 or RateMax. TestVMRateAgainstC compares every
// line with libibverbs.
func TestRateRoundTrip(t *testing.T) {
	for r := uverbs.Rate(0); r < 40; r++ {
		if b := r.Mbps(); b > 0 && uverbs.MbpsToRate(b) != r {
			t.Errorf("MbpsToRate(%d.Mbps() = %d) = %d", r, b, uverbs.MbpsToRate(b))
		}
		if m := r.Mult(); m > 0 && uverbs.MultToRate(m) != r {
			t.Errorf("MultToRate(%d.Mult() = %d) = %d", r, m, uverbs.MultToRate(m))
		}
	}
	for _, c := range []struct {
		r          uverbs.Rate
		mult, mbps int
	}{
		{uverbs.RateMax, -1, -1}, {1, -1, -1}, {uverbs.Rate2_5Gbps, 1, 2500}, {uverbs.Rate10Gbps, 4, 10000},
		{uverbs.Rate25Gbps, -1, 25781}, {uverbs.Rate100Gbps, -1, 103125}, {uverbs.Rate50Gbps, 20, 53125},
		{uverbs.Rate1200Gbps, 480, 1275000}, {25, -1, -1}, {255, -1, -1},
	} {
		if c.r.Mult() != c.mult || c.r.Mbps() != c.mbps {
			t.Errorf("rate %d: Mult %d Mbps %d, want %d %d", c.r, c.r.Mult(), c.r.Mbps(), c.mult, c.mbps)
		}
	}
	for _, v := range []int{-1, 0, 3, 2501, 1 << 30} {
		if uverbs.MbpsToRate(v) != uverbs.RateMax {
			t.Errorf("MbpsToRate(%d) = %d, want RateMax", v, uverbs.MbpsToRate(v))
		}
		if v != 1<<30 && v != 2501 && uverbs.MultToRate(v) != uverbs.RateMax {
			t.Errorf("MultToRate(%d) = %d, want RateMax", v, uverbs.MultToRate(v))
		}
	}
}
