package sweep

import "testing"

// TestByDesignEdges: a long option's joined value is read after its '=',
// udpingpong's -s wraps from 2^32-40 on, and rping's race lines may come
// in any order, blank lines aside.
func TestByDesignEdges(t *testing.T) {
	for _, c := range []struct {
		name              string
		c                 Case
		goOut, cOut, cEnd string
		want              bool
	}{
		{"post list joined 5", Case{Go: "writebw", Args: []string{"--post_list=5"}}, "Send Post List size should be positive", "", "", false},
		{"post list joined 0", Case{Go: "writebw", Args: []string{"--post_list=0"}}, "Send Post List size should be positive", "", "", true},
		{"udpingpong -s 2^32-40", Case{Go: "udpingpong", Args: []string{"-s", "4294967256"}}, "Couldn't allocate work buf.", "", "", true},
		{"udpingpong -s 2^32-41", Case{Go: "udpingpong", Args: []string{"-s", "4294967255"}}, "Couldn't allocate work buf.", "", "", false},
		{"rping's race, other order", Case{Go: "rdmaping"}, "cma event RDMA_CM_EVENT_REJECTED, error 8\nrdma_connect: Connection refused\nconnect error -1\n\n",
			"rdma_connect: Connection refused\ncma event RDMA_CM_EVENT_REJECTED, error 8\n", "exit status 255", true},
	} {
		if got := ByDesign(c.c, c.goOut, c.cOut, c.cEnd) != ""; got != c.want {
			t.Errorf("%s: by design %v, want %v", c.name, got, c.want)
		}
	}
}

// TestMaskInfNaN: perftest's inf and nan (a rate over no time) mask as
// the decimals they stand for.
func TestMaskInfNaN(t *testing.T) {
	if a, b := Mask(" 65536      1000           inf                  nan\n"), Mask(" 65536      1000           123.45               0.12\n"); a != b {
		t.Errorf("Mask: %q and %q differ", a, b)
	}
	if a, b := Mask("average: inf"), Mask("average: 1.5"); a != b {
		t.Errorf("Mask: %q and %q differ", a, b)
	}
}
