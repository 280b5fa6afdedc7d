package testkit

import (
	"maps"
	"testing"
)

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

// TestParseSendPSNs: SendPSNs's reading of `rdma -j resource show qp`:
// the QPs in RTS of one process's threads on one device (not the
// kernel's GSI QP, which has no pid, nor another process's or device's,
// nor one not yet connected), and an error for a row without the fields.
func TestParseSendPSNs(t *testing.T) {
	js := []byte(`[{"ifindex":2,"ifname":"rxe0","port":1,"lqpn":1,"type":"GSI","state":"RTS","sq-psn":0,"comm":"[ib_core]"},` +
		`{"ifindex":2,"ifname":"rxe0","port":1,"lqpn":17,"rqpn":18,"type":"RC","state":"RTS","rq-psn":5,"sq-psn":16777215,"path-mig-state":"MIGRATED","pdn":3,"pid":204,"comm":"ib_read_bw"},` +
		`{"ifindex":2,"ifname":"rxe0","port":1,"lqpn":19,"rqpn":20,"type":"RC","state":"RTS","rq-psn":5,"sq-psn":77,"pid":207,"comm":"readbw"},` +
		`{"ifindex":2,"ifname":"rxe0","port":1,"lqpn":18,"rqpn":17,"type":"RC","state":"RTS","rq-psn":5,"sq-psn":9,"pid":205,"comm":"ib_read_bw"},` +
		`{"ifindex":2,"ifname":"rxe0","port":1,"lqpn":23,"type":"RC","state":"INIT","sq-psn":0,"pid":204,"comm":"ib_read_bw"},` +
		`{"ifindex":3,"ifname":"rxelo","port":1,"lqpn":21,"type":"RC","state":"RTS","sq-psn":3,"pid":204,"comm":"ib_read_bw"}]`)
	got, err := parseSendPSNs(js, "rxe0", map[int]bool{204: true, 207: true})
	if want := map[int]uint32{17: 0xffffff, 19: 77}; err != nil || !maps.Equal(got, want) {
		t.Errorf("threads 204 and 207 on rxe0: %v, %v; want %v", got, err, want)
	}
	if got, err := parseSendPSNs(js, "rxe0", map[int]bool{0: true}); err != nil || len(got) != 0 {
		t.Errorf("pid 0: %v, %v; want nothing", got, err)
	}
	if _, err := parseSendPSNs([]byte(`[{"ifname":"rxe0","lqpn":17,"state":"RTS","pid":204}]`), "rxe0", map[int]bool{204: true}); err == nil {
		t.Error("a row without sq-psn read")
	}
	if _, err := parseSendPSNs([]byte("not json"), "rxe0", map[int]bool{204: true}); err == nil {
		t.Error("bad JSON read")
	}
}
