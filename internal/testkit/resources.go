package testkit

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
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
	out := rdmaResourceShow(tb)
	counts, err := parseResources(out, dev)
	if err != nil {
		tb.Fatalf("rdma -j resource show: %v\n%s", err, out)
	}
	return counts
}

// rdmaResourceShow returns what `rdma -j resource show [what...]` prints,
// failing tb if it cannot run (in the VM only).
func rdmaResourceShow(tb testing.TB, what ...string) []byte {
	tb.Helper()
	RequireVM(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args := append([]string{"-j", "resource", "show"}, what...)
	out, err := exec.CommandContext(ctx, "rdma", args...).Output()
	if err != nil {
		tb.Fatalf("rdma %s: %v", strings.Join(args, " "), err)
	}
	return out
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

// SendPSNs returns the next send PSN of each QP in RTS that process pid
// holds on dev, by QP number, as `rdma resource show qp` prints them (the
// kernel asks the driver: rxe's is the requester's PSN, which every
// packet a request sends moves on by one). QPs in other states are left
// out: the move to RTS sets the PSN the connection chose, a jump that is
// not traffic. The kernel names a QP by the
// thread that created it, not its process (restrack keeps the task, and
// netlink prints its task_pid_vnr): a Go program's QP has the id of
// whichever of its threads ran the system call, so SendPSNs takes the QPs
// of every thread of pid.
func SendPSNs(tb testing.TB, dev string, pid int) map[int]uint32 {
	tb.Helper()
	RequireVM(tb)
	tids := map[int]bool{pid: true}
	if ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid)); err == nil {
		for _, e := range ents {
			if tid, err := strconv.Atoi(e.Name()); err == nil {
				tids[tid] = true
			}
		}
	}
	out := rdmaResourceShow(tb, "qp")
	psns, err := parseSendPSNs(out, dev, tids)
	if err != nil {
		tb.Fatalf("rdma -j resource show qp: %v\n%s", err, out)
	}
	return psns
}

// parseSendPSNs reads `rdma -j resource show qp`:
// [{"ifname":"rxe0","lqpn":17,"state":"RTS","sq-psn":1234,"pid":99,...},...],
// keeping the QPs in RTS on dev of the threads in tids.
func parseSendPSNs(js []byte, dev string, tids map[int]bool) (map[int]uint32, error) {
	var rows []struct {
		IfName string   `json:"ifname"`
		State  string   `json:"state"`
		LQPN   *int     `json:"lqpn"`
		SQPSN  *float64 `json:"sq-psn"`
		PID    int      `json:"pid"`
	}
	if err := json.Unmarshal(js, &rows); err != nil {
		return nil, err
	}
	psns := map[int]uint32{}
	for _, r := range rows {
		if r.IfName != dev || r.PID == 0 || !tids[r.PID] || r.State != "RTS" {
			continue
		}
		if r.LQPN == nil || r.SQPSN == nil {
			return nil, fmt.Errorf("a QP of thread %d on %s without lqpn or sq-psn", r.PID, dev)
		}
		psns[*r.LQPN] = uint32(*r.SQPSN)
	}
	return psns, nil
}
