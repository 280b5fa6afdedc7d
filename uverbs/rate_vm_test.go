package uverbs_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/uverbs"
)

// TestVMRateAgainstC runs libibverbs' four rate conversions in the guest
// (pv_rate: every enum value 0-30, every multiple -1-500, and each rate's
// Mbit/s and its neighbours) and the Go ones over the same inputs; every
// line must be the same.
func TestVMRateAgainstC(t *testing.T) {
	testkit.RequireVM(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	want, err := testkit.RunPeer(ctx, t, "pv_rate")
	if err != nil {
		t.Fatalf("pv_rate: %v\n%s", err, want)
	}
	var b strings.Builder
	for r := range 31 {
		fmt.Fprintf(&b, "rate %d mult %d mbps %d\n", r, uverbs.Rate(r).Mult(), uverbs.Rate(r).Mbps())
	}
	for m := -1; m <= 500; m++ {
		fmt.Fprintf(&b, "mult %d rate %d\n", m, uverbs.MultToRate(m))
	}
	fmt.Fprintf(&b, "mbps -1 rate %d\nmbps 0 rate %d\n", uverbs.MbpsToRate(-1), uverbs.MbpsToRate(0))
	for r := range 31 {
		v := uverbs.Rate(r).Mbps()
		if v <= 0 {
			continue
		}
		for d := -1; d <= 1; d++ {
			fmt.Fprintf(&b, "mbps %d rate %d\n", v+d, uverbs.MbpsToRate(v+d))
		}
	}
	if got := b.String(); got != strings.ReplaceAll(want, "\r", "") {
		t.Errorf("Go and libibverbs differ:\nlibibverbs:\n%s\nGo:\n%s", want, got)
	}
}
