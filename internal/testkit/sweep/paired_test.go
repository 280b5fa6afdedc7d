package sweep

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestPairedCasesReproducible: a seed gives the same connected lines
// every time, another seed others; the client's line is the server's
// (less the mismatched option, in some lines) with the server to reach,
// and both name the line's port, but udaddy's, which is fixed.
func TestPairedCasesReproducible(t *testing.T) {
	for _, f := range Families {
		a, b := PairedCases(f, 7, 60, 21000), PairedCases(f, 7, 60, 21000)
		if diff := cmp.Diff(a, b); diff != "" {
			t.Errorf("%s: seed 7 twice differs:\n%s", f, diff)
		}
		if cmp.Equal(a, PairedCases(f, 8, 60, 21000)) {
			t.Errorf("%s: seeds 7 and 8 give the same lines", f)
		}
		if len(a) != 60 {
			t.Fatalf("%s: %d lines, want 60", f, len(a))
		}
		mismatched := 0
		groups := map[string]int{}
		for i, c := range a {
			if c.C == "" || c.Go == "" || c.C == c.Go {
				t.Errorf("%s: line %d names %q and %q", f, i, c.C, c.Go)
			}
			if c.C == "udaddy" {
				if c.Port != udaddyPort || slices.Contains(c.Server, "-p") {
					t.Errorf("%s: udaddy's line %d: port %d, server %q", f, i, c.Port, c.Server)
				}
				continue
			}
			if c.C == "mckey" { // a receiver and a sender of the line's group, no port
				group := c.Server[1]
				if c.Port != 0 || c.CM || c.Ready == "" || c.Server[0] != "-m" || !slices.Equal(c.Client[:4], c.Server[:4]) ||
					!strings.HasPrefix(group, "239.2.") || slices.Contains(c.Server, "-s") || !slices.Contains(c.Client, "-s") {
					t.Errorf("%s: mckey's line %d: %v", f, i, c)
				}
				groups[group]++
				continue
			}
			if c.Ready != "" {
				t.Errorf("%s: line %d waits for %q: %v", f, i, c.Ready, c)
			}
			port := strconv.Itoa(21000 + i)
			if c.Port != 21000+i || !slices.Contains(c.Server, port) || !slices.Contains(c.Client, port) {
				t.Errorf("%s: line %d: port %d, server %q, client %q; want port %s in both", f, i, c.Port, c.Server, c.Client, port)
			}
			if f != CM {
				if last := c.Client[len(c.Client)-1]; last != "127.0.0.1" && last != "10.99.0.1" {
					t.Errorf("%s: line %d's client ends with %q, not the server", f, i, last)
				}
				common := c.Client[:len(c.Client)-1]
				if !slices.Equal(c.Server[:len(common)], common) {
					t.Errorf("%s: line %d: server %q does not start with the client's options %q", f, i, c.Server, common)
				}
				if len(c.Server) > len(common) {
					mismatched++
				}
			}
			if c.CM != (f == CM || slices.Contains(c.Server, "-R")) {
				t.Errorf("%s: line %d: CM %v for server %q", f, i, c.CM, c.Server)
			}
			if f == Perftest && slices.Contains(c.Client, "-D") && slices.Contains(c.Client[:7], "-n") {
				t.Errorf("%s: line %d gives the default -n beside -D: %q", f, i, c.Client)
			}
		}
		for g, n := range groups {
			if n > 1 {
				t.Errorf("%s: %d mckey lines share group %s", f, n, g)
			}
		}
		if (f == CM) != (len(groups) > 0) {
			t.Errorf("%s: %d mckey lines", f, len(groups))
		}
		if f != CM && (mismatched == 0 || mismatched > 30) {
			t.Errorf("%s: %d of 60 lines mismatch the server; want about one in five", f, mismatched)
		}
	}
}

// TestMask: what changes between runs goes, what the tools must agree on
// stays.
func TestMask(t *testing.T) {
	for _, tc := range []struct{ a, b string }{
		{"  local address:  LID 0x0000, QPN 0x000011, PSN 0x5b4b5c, GID ::ffff:10.99.0.1",
			"  local address:  LID 0x0000, QPN 0x0000a2, PSN 0x000001, GID ::ffff:10.99.0.1"},
		{"8192000 bytes in 0.01 seconds = 5461.33 Mbit/sec", "8192000 bytes in 12.50 seconds = 5.24 Mbit/sec"},
		{" 65536      1000           4503.14            4489.57\t\t   0.071831", " 65536      998           11.10            9.57\t\t   10.000001"},
		{" 2       1000          3.20           10.45        4.00     \t4.10        0.50   \t\t5.00    \t\t10.45",
			" 2       1000          13.20           110.45        4.00     \t4.10        0.50   \t\t5.00    \t\t110.45"},
		{"1, 120205\n2, 1.5e+06", "1, 12.5\n2, 77"}, // -U's samples
		{"parse WC failed 1", "parse WC failed 2"},
		{"Conflicting CPU frequency values detected: 2194.842000 != 2195.028000. CPU Frequency is not max.\nx", "x"},
		{" local address: LID 0000 QPN 0x0011 PSN 0x4a2c3e RKey 0x001234 VAddr 0x007f12345000",
			" local address: LID 0000 QPN 0x0a11 PSN 0x000000 RKey 0x0fff34 VAddr 0x000012345000"},
	} {
		if a, b := Mask(tc.a), Mask(tc.b); a != b {
			t.Errorf("Mask(%q) = %q,\nMask(%q) = %q; want them equal", tc.a, a, tc.b, b)
		}
	}
	for _, tc := range []struct{ a, b string }{
		{"8192000 bytes in 0.01 seconds", "819200 bytes in 0.01 seconds"},           // the byte count
		{" 65536      1000           4503.14", " 4096      1000           4503.14"}, // a row's size
		{"return status 0", "return status 1"},
		{"ping data: rdma-ping-0: ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqr", "ping data: rdma-ping-0: ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopq"},
		{"Failed status transport retry counter exceeded (12) for wr_id 2", "Failed status local length error (1) for wr_id 2"},
		{"                    RDMA_Write BW Test", "                    RDMA_Read BW Test"},
	} {
		if Mask(tc.a) == Mask(tc.b) {
			t.Errorf("Mask reads %q and %q alike (%q)", tc.a, tc.b, Mask(tc.a))
		}
	}
	// A Go tool's detail line keeps its indent, which pptest.Normalize
	// drops it by.
	if got := Mask("  (dial tcp 127.0.0.1:21002: connect: connection refused)"); got != "  (dial tcp #.#.#.#:21002: connect: connection refused)" {
		t.Errorf("Mask changed a detail line's indent: %q", got)
	}
	if got := Mask("a\r\nb"); strings.Contains(got, "\r") {
		t.Errorf("Mask kept a carriage return: %q", got)
	}
}

// TestMaskPointers: rping's -d addresses are masked, other tools' hex
// numbers are not.
func TestMaskPointers(t *testing.T) {
	rping := Case{C: "rping", Go: "rdmaping"}
	if a, b := maskPointers(rping, "created cm_id 0x55d4c0a0b2c0"), maskPointers(rping, "created cm_id 0xc000123450"); a != b {
		t.Errorf("rping's pointers differ after the mask: %q, %q", a, b)
	}
	ud := Case{C: "ibv_ud_pingpong", Go: "udpingpong"}
	if got := maskPointers(ud, "Couldn't find QPN 0x000011"); got != "Couldn't find QPN 0x000011" {
		t.Errorf("maskPointers changed a ping-pong line: %q", got)
	}
}

// TestRunLimit: a perftest line with -a (every size to 8 MiB) gets the
// long limit; rping's and ucmatose's -a (an address, a timeout) do not.
func TestRunLimit(t *testing.T) {
	for _, c := range []struct {
		p    Paired
		want time.Duration
	}{
		{Paired{C: "ib_send_lat", Server: []string{"-a"}, Client: []string{"-a", "10.99.0.1"}}, 90 * time.Second},
		{Paired{C: "ib_write_bw", Server: []string{"-a"}, Client: []string{"10.99.0.1"}}, 90 * time.Second},
		{Paired{C: "ib_write_bw", Server: []string{"-s", "64"}, Client: []string{"-s", "64", "10.99.0.1"}}, 30 * time.Second},
		{Paired{C: "rping", Server: []string{"-s", "-a", "10.99.0.1"}, Client: []string{"-c", "-a", "10.99.0.1"}}, 30 * time.Second},
	} {
		if got := c.p.RunLimit(); got != c.want {
			t.Errorf("%v: %v, want %v", c.p, got, c.want)
		}
	}
}

// TestPairedCover: connected lines draw mckey receivers and senders,
// rdma_server on each of its addresses and clients that miss it, and
// ping-pong on every GID of ppPairedGIDs.
func TestPairedCover(t *testing.T) {
	seen := map[string]bool{}
	for _, f := range []Family{PingPong, CM} {
		for _, c := range PairedCases(f, 7, 300, 21000) {
			switch c.C {
			case "mckey":
				seen["mckey"] = true
				for _, a := range c.Server[4:] {
					seen["mckey "+a] = true
				}
			case "rdma_server":
				seen[fmt.Sprintf("rdma_server %q", c.Server[:len(c.Server)-2])] = true
				if !slices.Contains(c.Client, strconv.Itoa(c.Port)) {
					seen["rdma_client elsewhere"] = true
				}
			default:
				if g := slices.Index(c.Server, "-g"); f == PingPong {
					seen[c.Server[g-1]+" -g "+c.Server[g+1]] = true
				}
			}
		}
	}
	for _, want := range []string{"mckey", "mckey -c", "mckey -C", "mckey -S", "mckey -p", "mckey -o", "mckey -l",
		`rdma_server []`, `rdma_server ["-s" "10.99.0.1"]`, `rdma_server ["-s" "0.0.0.0"]`, `rdma_server ["-s" "127.0.0.1"]`,
		"rdma_client elsewhere", "rxe0 -g 0", "rxe0 -g 1", "rxelo -g 1", "rxelo -g 2"} {
		if !seen[want] {
			t.Errorf("600 connected lines of seed 7 never draw %q", want)
		}
	}
}

// TestCompared: every pairing is held to C-C, but mckey's on 6.12, where
// a Go sender's receiver is held to the C receiver of a Go sender.
func TestCompared(t *testing.T) {
	outs := [4]outcome{{"cc-s", "cc-c"}, {"gg-s", "gg-c"}, {"gc-s", "gc-c"}, {"cg-s", "cg-c"}}
	for _, tc := range []struct {
		tool      string
		late      bool
		i         int
		got, want outcome
	}{
		{"ucmatose", true, 1, outs[1], outs[0]},
		{"mckey", false, 1, outs[1], outs[0]},
		{"mckey", false, 3, outs[3], outs[0]},
		{"mckey", true, 1, outs[1], outs[3]},
		{"mckey", true, 2, outcome{withoutArrival("gc-s"), "gc-c"}, outcome{withoutArrival("cc-s"), "cc-c"}},
		{"mckey", true, 0, outcome{withoutArrival("cc-s"), "cc-c"}, outcome{withoutArrival("cc-s"), "cc-c"}},
		{"mckey", true, 3, outcome{client: "cg-c"}, outcome{client: "cc-c"}},
	} {
		got, want := compared(Paired{C: tc.tool}, tc.i, outs[tc.i], outs, tc.late)
		if got != tc.got || want != tc.want {
			t.Errorf("%s late=%v pairing %d: compares %v with %v, want %v with %v", tc.tool, tc.late, tc.i, got, want, tc.got, tc.want)
		}
	}
}

// TestWithoutArrival: on 6.12 a C sender's receiver that got the
// messages and one that was killed waiting for them read alike; one that
// failed otherwise does not.
func TestWithoutArrival(t *testing.T) {
	head := "TOOL: joined dgid: ::ffff:#.#.#.# mlid 0x# sl 0\nTOOL: joining\nTOOL: starting server\n"
	got := head + "data transfers complete\nreceiving data transfers\nreturn status 0\ntest complete\n(exit 0)"
	lost := head + "receiving data transfers\n(peer TOOL: signal: killed)"
	failed := head + "TOOL: unable to create QP: Operation not supported\nreturn status -1\ntest complete\n(exit 255)"
	c := Paired{C: "mckey"}
	outs := [4]outcome{{got, "s"}, {got, "s"}, {lost, "s"}, {got, "s"}}
	if a, b := compared(c, 2, outcome{lost, "s"}, outs, true); a != b {
		t.Errorf("6.12: a lost transfer differs from an arrived one: %v, %v", a, b)
	}
	if a, b := compared(c, 2, outcome{lost, "s"}, outs, false); a == b {
		t.Errorf("6.1: a lost transfer reads as an arrived one")
	}
	if a, b := compared(c, 2, outcome{failed, "s"}, outs, true); a == b {
		t.Errorf("6.12: a failed receiver reads as an arrived one: %v", a)
	}
	if a, b := compared(c, 2, outcome{lost, "other sender"}, outs, true); a == b {
		t.Errorf("6.12: the sender's difference is not compared")
	}
}
