package testkit

import "testing"

// TestCMListening: WaitCMListen's reading of `rdma -j resource show
// cm_id` (as iproute2 6.1 prints it in the VM): a listener on the port,
// not one on another port or an ID in another state.
func TestCMListening(t *testing.T) {
	js := []byte(`[{"ifindex":0,"ifname":"rxe0","cm-idn":0,"state":"LISTEN","ps":"TCP","pid":204,"comm":"writebw","src-addr":"0.0.0.0:22001"},` +
		`{"ifindex":0,"ifname":"rxe0","cm-idn":1,"state":"CONNECT","ps":"TCP","pid":204,"comm":"writebw","src-addr":"10.0.2.15:22002","dst-addr":"10.0.2.15:40000"}]`)
	for _, c := range []struct {
		port int
		want bool
	}{{22001, true}, {22002, false}, {2200, false}, {1, false}} {
		if got, err := cmListening(js, c.port); err != nil || got != c.want {
			t.Errorf("port %d: %v (%v), want %v", c.port, got, err, c.want)
		}
	}
	if _, err := cmListening([]byte("not json"), 1); err == nil {
		t.Error("bad JSON read")
	}
}
