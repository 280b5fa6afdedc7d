package sweep

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestCasesReproducible: a seed gives the same lines every time, another
// seed other lines; client lines end with the operand (the rdma_cm
// examples name their server with -s), server lines have none and leave
// ibv_devinfo out; case i starts with port+i.
func TestCasesReproducible(t *testing.T) {
	for _, f := range Families {
		for _, server := range []bool{false, true} {
			a, b := Cases(f, 7, 50, server, 21000), Cases(f, 7, 50, server, 21000)
			if diff := cmp.Diff(a, b); diff != "" {
				t.Errorf("%s server=%v: seed 7 twice differs:\n%s", f, server, diff)
			}
			if cmp.Equal(a, Cases(f, 8, 50, server, 21000)) {
				t.Errorf("%s server=%v: seeds 7 and 8 give the same lines", f, server)
			}
			if len(a) != 50 {
				t.Fatalf("%s: %d lines, want 50", f, len(a))
			}
			for i, c := range a {
				if c.C == "" || c.Go == "" || c.C == c.Go {
					t.Errorf("%s: line %d names %q and %q", f, i, c.C, c.Go)
				}
				last := c.Args[len(c.Args)-1]
				switch {
				case c.C == "ibv_devinfo":
					if server {
						t.Errorf("%s: a server line runs ibv_devinfo: %v", f, c)
					}
					continue
				case c.C == "mckey": // a sender (-s first) or a receiver (no -s); no port: -p is the port space
					if slices.Contains(c.Args, "-s") == server || server == (c.Args[0] == "-s") {
						t.Errorf("%s server=%v: line %d: %v", f, server, i, c)
					}
					continue
				case c.C == "rdma_client" && server, c.C == "rdma_server" && !server:
					t.Errorf("%s server=%v: line %d runs %s", f, server, i, c.C)
				case c.C == "rping": // -s serves, -c is the client, and neither is drawn again
					if role := c.Args[0]; role != map[bool]string{true: "-s", false: "-c"}[server] ||
						slices.Contains(c.Args[1:], "-s") || slices.Contains(c.Args[1:], "-c") {
						t.Errorf("%s server=%v: line %d: %v", f, server, i, c)
					}
				case f == CM:
					if slices.Contains(c.Args[:2], "-s") == server {
						t.Errorf("%s server=%v: line %d: %v", f, server, i, c)
					}
				case server && last == Server, !server && last != Server:
					t.Errorf("%s server=%v: line %d ends with %q", f, server, i, last)
				}
				if p := slices.Index(c.Args, "-p"); p < 0 || c.Args[p+1] != strconv.Itoa(21000+i) {
					t.Errorf("%s: line %d does not start with port %d: %v", f, i, 21000+i, c)
				}
			}
		}
	}
}

// TestCasesCover: the tools and values the sweep was blind to until
// 2026-12-07 are drawn: mckey senders and receivers, rdma_client and
// rdma_server with their options, and ping-pong lines on GID indexes
// other than 1 (0, the link-local one; 2, rxelo's ::1; past the table;
// malformed) and on rxelo.
func TestCasesCover(t *testing.T) {
	seen := map[string]bool{}
	for _, server := range []bool{false, true} {
		for _, c := range Cases(CM, 7, 300, server, 21000) {
			seen[fmt.Sprintf("%s %v", c.C, server)] = true
			if c.C != "mckey" && c.C != "rdma_client" && c.C != "rdma_server" {
				continue
			}
			// The base words, at most: mckey's -s, -m and -b, the
			// clients' -s and -p, rdma_server's -p.
			base := map[string]int{"mckey false": 5, "mckey true": 4, "rdma_client false": 4, "rdma_server true": 2}[fmt.Sprintf("%s %v", c.C, server)]
			opts := map[string]string{"mckey": "m:M:sb:c:C:S:p:ol", "rdma_client": "s:p:", "rdma_server": "s:p:"}[c.C]
			for i := 0; i < len(c.Args); i++ {
				a := c.Args[i]
				k := strings.IndexByte(opts, a[len(a)-1])
				if len(a) != 2 || a[0] != '-' || k < 0 {
					t.Fatalf("%s: word %d (%q) is not an option", c, i, a)
				}
				seen[fmt.Sprintf("%s %v %s %v", c.C, server, a, i >= base)] = true // an option, and whether drawn
				if k+1 < len(opts) && opts[k+1] == ':' {
					i++
				}
			}
		}
		for _, c := range Cases(PingPong, 7, 300, server, 21000) {
			g := slices.Index(c.Args, "-g")
			seen[fmt.Sprint(c.Args[g-1], " -g ", c.Args[g+1])] = true
		}
	}
	for _, want := range []string{"mckey false", "mckey true", "rdma_client false", "rdma_server true",
		"mckey false -b true", "mckey false -c true", "mckey false -C true", "mckey false -S true", "mckey false -p true",
		"mckey false -M true", "mckey false -o true", "mckey false -l true", "mckey false -m true", "mckey true -C true",
		"rdma_client false -s true", "rdma_client false -p true", "rdma_server true -s true", "rdma_server true -p true",
		"rxe0 -g 0", "rxe0 -g 1", "rxe0 -g 2", "rxe0 -g -1", "rxe0 -g x", "rxe0 -g ", "rxelo -g 0", "rxelo -g 1", "rxelo -g 2", "rxelo -g 3"} {
		if !seen[want] {
			t.Errorf("600 lines of seed 7 never draw %q", want)
		}
	}
}

// TestByDesign: each recorded difference is excused only where it
// applies; an ordinary difference is not.
func TestByDesign(t *testing.T) {
	ud := Case{C: "ibv_ud_pingpong", Go: "udpingpong", Args: []string{"-s", "99999999999999999999", Server}}
	for _, c := range []struct {
		name              string
		c                 Case
		goOut, cOut, cEnd string
		want              bool
	}{
		{"unsupported", Case{Go: "writebw"}, " -c XRC: this port runs RC, UC and UD only", "", "", true},
		{"inline", Case{Go: "writebw"}, "", "Device not recognized to implement inline feature. Disabling it", "", true},
		{"post list", Case{Go: "sendbw", Args: []string{"--recv_post_list", "-0"}}, "Receive Post List size must be positive", "", "", true},
		{"post list 2^32", Case{Go: "writebw", Args: []string{"-l", "4294967296"}}, "Send Post List size should be positive", "", "", true},
		{"post list joined", Case{Go: "writebw", Args: []string{"--post_list=x"}}, "Send Post List size should be positive", "", "", true},
		{"post list empty", Case{Go: "writebw", Args: []string{"--post_list="}}, "Send Post List size should be positive", "", "", true},
		{"post list two words", Case{Go: "sendbw", Args: []string{"--recv_post_list", "0"}}, "Receive Post List size must be positive", "", "", true},
		{"post list 5", Case{Go: "writebw", Args: []string{"-l", "5"}}, "Send Post List size should be positive", "", "", false},
		// SetAckTimeout passes any value on, as librdmacm: no excuse.
		{"ack timeout", Case{Go: "rdmacmatose", Args: []string{"-a", "64"}}, "cmatose: set ack timeout option failed: Invalid argument", "", "", false},
		{"ack timeout elsewhere", Case{Go: "writebw", Args: []string{"-a", "64"}}, "set ack timeout option failed", "", "", false},
		{"udpingpong -s", ud, "Couldn't allocate work buf.", "Couldn't connect to 127.0.0.1:18999", "", true},
		{"udpingpong -s 64", Case{Go: "udpingpong", Args: []string{"-s", "64"}}, "Couldn't allocate work buf.", "", "", false},
		{"udpingpong -s joined", Case{Go: "udpingpong", Args: []string{"-s4294967290"}}, "Couldn't allocate work buf.", "", "", true},
		{"srq segfault", Case{Go: "srqpingpong"}, "Couldn't create CQ", "", "signal: segmentation fault", true},
		{"srq other", Case{Go: "srqpingpong"}, "Couldn't create CQ", "", "exit status 1", false},
		// Since perftest's raw Ethernet options are accepted, -J with
		// --local_mac is a SIGSEGV in C (NULL to inet_pton), the mix's
		// refusal in Go.
		{"raw Ethernet NULL IP", Case{Go: "sendlat", Args: []string{"-J", "1.2.3.4", "--local_mac", "00:11:22:33:44:55"}},
			" Invalid Command line.\nMix of source with local|remote and dest with local|remote is not supported.", "", "signal: segmentation fault", true},
		{"raw Ethernet mix", Case{Go: "sendlat", Args: []string{"-B", "00:11:22:33:44:55", "--local_mac", "00:11:22:33:44:55"}},
			" Invalid Command line.\nMix of source with local|remote and dest with local|remote is not supported.", "", "exit status 1", false},
		{"raw Ethernet accepted", Case{Go: "writebw", Args: []string{"-Z"}}, "Couldn't connect", "", "exit status 1", false},
		// seed 201 on 6.1: -b ::1 binds to no device, and C's join
		// queries a port of a NULL context.
		{"mckey -M", Case{Go: "rdmamckey", Args: []string{"-s", "-m", "239.1.2.3", "-b", "::1", "-M", "239.1.2.3", "-c", "3"}},
			"mckey: joining\nmckey: resolve addr failure: Success\nreturn status 22", "mckey: joining\n", "signal: segmentation fault", true},
		{"mckey -M, no -b", Case{Go: "rdmamckey", Args: []string{"-M", "239.1.2.3"}},
			"mckey: joining\nmckey: resolve addr failure: Success\nreturn status 22", "mckey: joining\n", "signal: segmentation fault", false},
		{"mckey -M, C exits", Case{Go: "rdmamckey", Args: []string{"-b", "::1", "-M", "239.1.2.3"}},
			"mckey: joining\nmckey: resolve addr failure: Success\nreturn status 22", "mckey: joining\n", "exit status 1", false},
		{"ordinary", Case{Go: "writebw"}, "Couldn't connect", "Unable to init", "", false},
		{"rping's race", Case{Go: "rdmaping"}, "cma event RDMA_CM_EVENT_REJECTED, error 8\nwait for CONNECTED state 4\nconnect error -1\n",
			"cma event RDMA_CM_EVENT_REJECTED, error 8\n", "exit status 255", true},
		{"rping's race, resolution", Case{Go: "rdmaping"}, "cma event RDMA_CM_EVENT_ADDR_ERROR, error -19\r\nwaiting for addr/route resolution state 1\r\n",
			"cma event RDMA_CM_EVENT_ADDR_ERROR, error -19\r\n", "exit status 255", true},
		{"rping's teardown race", Case{Go: "rdmaping"}, "rdma_resolve_addr: Cannot assign requested address\n",
			"rdma_resolve_addr: Cannot assign requested address\nrdma_get_cm_event: Bad file descriptor\n", "exit status 255", true},
		// -d prints the objects' addresses, which differ between the
		// two (seed 101 on 6.1).
		{"rping's race, -d", Case{Go: "rdmaping"}, "connect error -1\ncq_thread started.\ncreated cm_id 0xc000012345\n",
			"connect error -1\ncreated cm_id 0x55d0deadbeef\n", "exit status 255", true},
		{"rping's teardown race, -d", Case{Go: "rdmaping"}, "connect error -1\ncreated cm_id 0xc000012345\n",
			"connect error -1\ncreated cm_id 0x55d0deadbeef\nrping_free_buffers called on cb 0x55d0deadbe00\ndestroy cm_id 0x55d0deadbeef\n", "exit status 255", true},
		{"rping -d, another line", Case{Go: "rdmaping"}, "connect error -1\ncq_thread started.\ncreated cm_id 0xc000012345\n",
			"connect error -1\ncreated qp 0x55d0deadbeef\n", "exit status 255", false},
		{"rping, another line", Case{Go: "rdmaping"}, "cma event RDMA_CM_EVENT_REJECTED, error 8\nconnect error -1\n",
			"cma event RDMA_CM_EVENT_UNREACHABLE, error -110\n", "exit status 255", false},
		{"rping, another status", Case{Go: "rdmaping"}, "cma event RDMA_CM_EVENT_REJECTED, error 8\nconnect error -1\n",
			"cma event RDMA_CM_EVENT_REJECTED, error 8\n", "exit status 1", false},
	} {
		if got := ByDesign(c.c, c.goOut, c.cOut, c.cEnd) != ""; got != c.want {
			t.Errorf("%s: by design %v, want %v", c.name, got, c.want)
		}
	}
}
