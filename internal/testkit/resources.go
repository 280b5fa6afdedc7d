package testkit

import (
	"context"
	"encoding/json"
	"os/exec"
	"testing"
	"time"
)

// Resources returns the kernel's restrack counts for dev by type ("pd",
// "cq", "qp", "mr", "ctx", "srq", "cm_id"), as `rdma resource show` prints
// them. The kernel itself holds some (rxe: one pd, cq and qp for the GSI QP),
// so compare counts before and after, not against zero.
func Resources(tb testing.TB, dev string) map[string]int {
	tb.Helper()
	RequireVM(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "rdma", "-j", "resource", "show").Output()
	if err != nil {
		tb.Fatalf("rdma -j resource show: %v", err)
	}
	counts, err := parseResources(out, dev)
	if err != nil {
		tb.Fatalf("rdma -j resource show: %v\n%s", err, out)
	}
	return counts
}

type errNoDev string

func (e errNoDev) Error() string { return "no device " + string(e) + " in the output" }

// parseResources reads `rdma -j resource show`:
// [{"ifindex":0,"ifname":"rxe0","pd":1,"cq":1,...},...]
func parseResources(js []byte, dev string) (map[string]int, error) {
	var rows []map[string]any
	if err := json.Unmarshal(js, &rows); err != nil {
		return nil, err
	}
	for _, r := range rows {
		if r["ifname"] != dev {
			continue
		}
		m := map[string]int{}
		for k, v := range r {
			if f, ok := v.(float64); ok && k != "ifindex" {
				m[k] = int(f)
			}
		}
		return m, nil
	}
	return nil, errNoDev(dev)
}
