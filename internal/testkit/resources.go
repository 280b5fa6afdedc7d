package testkit

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
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

// WaitCMListen waits until an rdma_cm ID of this host listens on port (as
// `rdma -j resource show cm_id` lists it: state LISTEN, src-port port), or
// ctx is done. Like WaitTCPListen, it looks without connecting, which
// would use up a server's one accept.
func WaitCMListen(ctx context.Context, port int) error {
	var last []byte
	for {
		out, err := exec.CommandContext(ctx, "rdma", "-j", "resource", "show", "cm_id").Output()
		if err == nil {
			last = out
			if ok, err := cmListening(out, port); err == nil && ok {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no rdma_cm ID listens on port %d: %w (rdma resource show cm_id: %s)", port, ctx.Err(), last)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// cmListening reads `rdma -j resource show cm_id` (iproute2 6.1):
// [{"ifindex":0,"ifname":"rxe0","cm-idn":0,"state":"LISTEN","ps":"TCP","src-addr":"0.0.0.0:22001",...},...]
func cmListening(js []byte, port int) (bool, error) {
	var rows []map[string]any
	if err := json.Unmarshal(js, &rows); err != nil {
		return false, err
	}
	suffix := ":" + strconv.Itoa(port)
	for _, r := range rows {
		if a, ok := r["src-addr"].(string); ok && strings.HasSuffix(a, suffix) && r["state"] == "LISTEN" {
			return true, nil
		}
	}
	return false, nil
}
