package bwtest

import "testing"

// TestLostRace: only a failed write, in the role's own words, counts as
// losing the race with a failed peer's close (or perftest's death by
// SIGPIPE); C-C's other failures (a short read) and other statuses do not.
func TestLostRace(t *testing.T) {
	for _, c := range []struct {
		name   string
		status string
		lines  []string
		client bool
		want   bool
	}{
		{"server reports", "exit status 1", []string{"Couldn't send reports", "Unable to write from socket/rdma_cm", exchangeFailedLine}, false, true},
		{"server address", "exit status 1", []string{"Couldn't send local address", "Unable to write from socket/rdma_cm", "Failed to close connection between server and client"}, false, true},
		{"client reports", "exit status 1", []string{"Couldn't send reports", "Unable to write to socket/rdma_cm", exchangeFailedLine}, true, true},
		{"client's step for a server", "exit status 1", []string{"Couldn't send reports", "Unable to write to socket/rdma_cm"}, false, false},
		{"server's step for a client", "exit status 1", []string{"Couldn't send reports", "Unable to write from socket/rdma_cm"}, true, false},
		{"short read", "exit status 1", []string{"ethernet_read_keys: Couldn't read remote address", "Unable to read to socket/rdma_cm", "Failed to close connection between server and client"}, false, false},
		{"killed by SIGPIPE", "signal: broken pipe", nil, false, true},
		{"killed otherwise", "signal: killed", nil, false, false},
		{"success", "exit status 0", nil, false, false},
		{"one line", "exit status 1", []string{"Couldn't send reports"}, false, false},
	} {
		if got := lostRace(c.status, c.lines, c.client); got != c.want {
			t.Errorf("%s: lostRace(%q, %q, client %v) = %v, want %v", c.name, c.status, c.lines, c.client, got, c.want)
		}
	}
}

const exchangeFailedLine = "Failed to exchange data between server and clients"
