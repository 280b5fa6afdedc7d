package testkit

import "testing"

// TestCMListenRace: the reject with reason 8 as each client prints it is
// the listen race; other failures are not.
func TestCMListenRace(t *testing.T) {
	for out, want := range map[string]bool{
		"cmatose: starting client\ncmatose: connecting\ncmatose: event: RDMA_CM_EVENT_REJECTED, error: 8\n": true,
		"cma event RDMA_CM_EVENT_REJECTED, error 8\nwait for CONNECTED state 10\n":                          true,
		" Event: RDMA_CM_EVENT_REJECTED; error: 8.\n":                                                       true,
		"udaddy: event: RDMA_CM_EVENT_UNREACHABLE, error: -22\n":                                            true,
		"udaddy: event: RDMA_CM_EVENT_UNREACHABLE, error: -110\n":                                           false,
		"rdma_client: start\nrdma_connect: Connection refused\nrdma_client: end -1\n":                       true,
		"cmatose: event: RDMA_CM_EVENT_REJECTED, error: 28\n":                                               false,
		"cmatose: event: RDMA_CM_EVENT_REJECTED, error: 80\n":                                               false,
		"cmatose: failure getting addr: Network is unreachable\n":                                           false,
		"": false,
	} {
		if got := CMListenRace(out); got != want {
			t.Errorf("CMListenRace(%q) = %v, want %v", out, got, want)
		}
	}
}
