// Package sweep is a differential test of the command-line tools: random
// command lines, each run by the Go tool and by the rdma-core or perftest
// tool it ports, in the same guest, and their outputs compared as
// pptest.CompareWithC compares them (make sweep; not part of make test).
//
// The lines are drawn from each tool's own option table with hostile
// values (empty, negative, past 2^31 and 2^32, leading blanks, trailing
// garbage, hex and octal, overflowing). A client line ends with a server
// operand where nothing listens; a server line has none and is stopped
// after a while, its output up to then compared. Cases and seeds are
// reproducible: the same seed gives the same lines.
package sweep

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
)

// Case is one command line to run with both tools.
type Case struct {
	C, Go string   // the programs
	Args  []string // the whole command line but the program, plainly spelled
	// Words, when set, is how the line is run: Args respelled
	// (RespellCases). ByDesign reads Args.
	Words []string
}

// Line is the command line as run: Words if set, else Args.
func (c Case) Line() []string {
	if c.Words != nil {
		return c.Words
	}
	return c.Args
}

func (c Case) String() string {
	args := c.Line()
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = fmt.Sprintf("%q", a)
	}
	return c.Go + " " + strings.Join(q, " ")
}

// Family is a group of tools whose lines are drawn alike.
type Family string

// The families.
const (
	PingPong Family = "pingpong" // ibv_{rc,uc,ud,srq}_pingpong
	Perftest Family = "perftest" // ib_{write,read,send,atomic}_{bw,lat}
	CM       Family = "cm"       // ucmatose, udaddy, rping, mckey, rdma_client/rdma_server (and ibv_devinfo for clients)
)

// Families lists them in the order Cases draws them.
var Families = []Family{PingPong, Perftest, CM}

// Hostile values for numeric options: what strtol, strtoul, atoi and the
// perftest CHECK_VALUE macro read in their own ways.
var nums = []string{"0", "1", "2", "3", "-1", "7", "16", "64", "255", "256", "4096", "65536", "100000",
	"2147483647", "2147483648", "4294967296", "-2147483649", "x", "", "0x10", "010", "1K", "3M",
	" 5", "5abc", "-0", "+3", "1e3", "99999999999999999999"}

var mtus = []string{"256", "512", "1024", "2048", "4096", "9000", "0", "x", "-1"}

// Server is where a client line points: nothing listens on it.
const Server = "127.0.0.1"

// A pingpong tool and its getopt string (rdma-core's, libibverbs/examples).
type ppTool struct{ c, g, opts string }

var ppTools = []ppTool{
	{"ibv_rc_pingpong", "rcpingpong", "p:d:i:s:m:r:n:l:eg:oOPtcjN"},
	{"ibv_uc_pingpong", "ucpingpong", "p:d:i:s:m:r:n:l:eg:c"},
	{"ibv_ud_pingpong", "udpingpong", "p:d:i:s:r:n:l:eg:c"},
	{"ibv_srq_pingpong", "srqpingpong", "p:d:i:s:m:q:r:n:l:eog:c"},
}

// perftest's options with a value, and the values to draw for each.
var perfValued = map[string][]string{
	"-p": nums, "-i": nums, "-m": mtus, "-s": nums, "-n": nums, "-t": nums, "-u": nums, "-S": nums, "-x": nums,
	"-c": {"RC", "UC", "UD", "XRC", "DC", "SRD", "x", "rc", "ud"}, "-q": nums, "-I": nums, "-o": nums, "-r": nums,
	"-Q": nums, "-A": {"CMP_AND_SWAP", "FETCH_AND_ADD", "x", ""}, "-l": nums, "-D": nums, "-f": nums, "-T": nums,
	"-L": nums, "-X": nums, "-w": nums, "-y": nums, "--pkey_index": nums, "--inline_recv": nums,
	"--burst_size": nums, "--typical_pkt_size": nums, "--rate_limit": nums,
	"--rate_limit_type": {"SW", "HW", "PP", "x", ""}, "--rate_units": {"M", "g", "p", "x", ""},
	"--output": {"bandwidth", "message_rate", "latency", "x", ""}, "--latency_gap": nums, "--flow_label": nums,
	"--retry_count": nums, "--mmap": {"/nonexistent", "/dev/zero", "/tmp/sweep-mmap", ""}, "--mmap-offset": nums,
	"--dlid": nums, "--tclass": nums, "--wait_destroy": nums, "--recv_post_list": nums,
	"--force-link": {"IB", "Ethernet", "x"}, "--out_json_file": {"/tmp/sweep-out.json"},
	// Raw Ethernet's, which perftest checks and then ignores on RC, UC
	// and UD.
	"-B": macs, "-E": macs, "--local_mac": macs, "--remote_mac": macs, "-J": rawIPs, "-j": rawIPs,
	"--local_ip": rawIPs, "--remote_ip": rawIPs, "-K": nums, "-k": nums, "--local_port": nums,
	"--remote_port": nums, "--ethertype": {"0x0800", "0x800", "0x0000", "010000", "x", ""}, "--flows": nums,
	"--flows_burst": nums, "--vlan_pcp": nums, "-M": {"ff02::1", "x", ""},
}

// MAC and IP addresses for the raw Ethernet options: good ones, and each
// way parse_mac_from_str and inet_pton refuse one.
var (
	macs = []string{"00:11:22:33:44:55", "00:11:22:33:44", "00:11:22:33:44:zz", "100:11:22:33:44:5",
		"0:1:2:3:4:5:6:7:8", "x", ""}
	rawIPs = []string{"1.2.3.4", "1.2.3.256", "01.2.3.4", "::1", "fe80::1%d0", "x", ""}
)

// perftest's flags (no value).
var perfFlags = []string{"-a", "-F", "-e", "-z", "-R", "-b", "-N", "-C", "-H", "-U", "-O", "-V", "--run_infinitely",
	"--report_gbits", "--use-srq", "--report-both", "--reversed", "--odp", "--use_hugepages", "--perform_warm_up",
	"--ipv6", "--dont_xchg_versions", "--cpu_util", "--out_json", "--mr_per_qp", "--disable_pcie_relaxed",
	"--use_old_post_send", "--report-per-port", "-P", "-Z", "-v", "--tcp", "--vlan_en", "--promiscuous",
	"--raw_mcast", "--raw_ipv6", "--use_rss"}

var perfTools = [][2]string{
	{"ib_write_bw", "writebw"}, {"ib_read_bw", "readbw"}, {"ib_send_bw", "sendbw"}, {"ib_atomic_bw", "atomicbw"},
	{"ib_write_lat", "writelat"}, {"ib_read_lat", "readlat"}, {"ib_send_lat", "sendlat"}, {"ib_atomic_lat", "atomiclat"},
}

// The GID indexes and devices a ping-pong line is drawn with: rxe0's
// table has 0 (fe80::, link-local) and 1 (::ffff:10.99.0.1), rxelo's 0,
// 1 (::ffff:127.0.0.1) and 2 (::1) (docs/testing.md, "Devices at test
// start"); past the end an entry reads as zero (its type file: EINVAL),
// and the rest are what strtol makes of a bad index. -g 1 on rxe0, the
// line's base before 2026-12-07, stays the most frequent.
var (
	ppGIDs = []string{"1", "1", "1", "0", "0", "2", "3", "-1", "256", "x", ""}
	ppDevs = []string{"rxe0", "rxe0", "rxe0", "rxelo"}
)

// The rdma_cm examples (librdmacm/examples) and ibv_devinfo. rdma_client
// stands for rdma_server in server lines.
var cmTools = []ppTool{
	{"ucmatose", "rdmacmatose", "s:b:f:P:c:C:S:t:p:a:m"},
	{"udaddy", "rdmaudaddy", "s:b:c:C:S:t:p:P:f:"},
	{"ibv_devinfo", "devinfo", "d:i:lv"},
	{"rping", "rdmaping", "a:I:Pp:C:S:t:scvVdq"},
	{"mckey", "rdmamckey", "m:M:sb:c:C:S:p:ol"},
	{"rdma_client", "rdmaclient", "s:p:"},
}

// mckey's values where they are not the other examples': -m and -M name
// the group (good ones, a unicast address, IPv6 and AF_IB groups, what
// getaddrinfo and inet_pton refuse), -p is the port space (strtol with
// base 0: UDP 0x111, the default; IPoIB 0x2; TCP 0x106), and -c the
// number of IDs, without the tens of thousands the others draw (each
// joins the group: slow, and nothing the smaller counts do not show).
var mckeyValues = map[byte][]string{
	'm': {"239.1.2.3", "239.1.2.3", "224.0.0.1", "ff0e::1:5", "10.99.0.1", "0.0.0.0", "", "x", "*", "nosuchhost.invalid"},
	'M': {"ff0e::1:3", "x", "", "239.1.2.3"}, 'b': hosts,
	'p': {"0x111", "0x111", "273", "0x2", "0x106", "0", "-1", "x", "", "0x10111"},
	'c': {"0", "1", "2", "3", "-1", "x", "", "16", "2147483647", "4294967296", "-2147483649", " 5", "5abc", "0x10"},
}

var hosts = []string{"10.99.0.1", "127.0.0.1", "", "*", "nosuchhost.invalid", "1.2.3.256", "::1", "fe80::1%d0",
	"0x7f000001", "10.1"}

var cmValues = map[byte][]string{
	's': hosts, 'b': hosts, 'f': {"ip", "name", "gid", "x", ""}, 'P': {"ib", "ipoib", "tcp", "udp", "x", ""},
	'p': {"7471", "0", "-1", "x", "", "70000", "17999"}, 'd': {"rxe0", "rxelo", "", "x"}, 'a': hosts, 'I': hosts,
}

// getopts splits a getopt string into its options, each with whether
// it takes a value.
func getopts(s string) (opts []byte, valued map[byte]bool) {
	valued = map[byte]bool{}
	for i := 0; i < len(s); i++ {
		opts = append(opts, s[i])
		if i+1 < len(s) && s[i+1] == ':' {
			valued[s[i]] = true
			i++
		}
	}
	return opts, valued
}

// Cases draws n command lines of family f from seed: client lines (each
// ending with the operand Server, or a server to reach for the rdma_cm
// examples) or, with server set, server lines (no operand; ibv_devinfo
// is left out; rdma_client becomes rdma_server). Case i starts with
// port+i as its TCP or rdma_cm port (a drawn -p may replace it), so that
// cases can run at the same time; mckey's lines have none (its -p is
// the port space), and its client lines are senders (-s), its server
// lines receivers.
func Cases(f Family, seed uint64, n int, server bool, port int) []Case {
	r := rand.New(rand.NewPCG(seed, uint64(len(f))))
	pick := func(vs []string) string { return vs[r.IntN(len(vs))] }
	var cases []Case
	for len(cases) < n {
		p := fmt.Sprint(port + len(cases))
		var c Case
		switch f {
		case PingPong:
			t := ppTools[r.IntN(len(ppTools))]
			c = Case{C: t.c, Go: t.g, Args: []string{"-d", pick(ppDevs), "-g", pick(ppGIDs), "-p", p}}
			opts, valued := getopts(t.opts)
			for range 1 + r.IntN(4) {
				o := opts[r.IntN(len(opts))]
				switch {
				case o == 'p' || o == 'd':
				case !valued[o]:
					c.Args = append(c.Args, "-"+string(o))
				case o == 'm':
					c.Args = append(c.Args, "-m", pick(mtus))
				default:
					c.Args = append(c.Args, "-"+string(o), pick(nums))
				}
			}
		case Perftest:
			t := perfTools[r.IntN(len(perfTools))]
			c = Case{C: t[0], Go: t[1], Args: []string{"-d", "rxe0", "-x", "1", "-p", p}}
			if r.IntN(5) == 0 {
				c.Args = []string{"-d", "rxe0", "-p", p} // the default GID index
			}
			valued := slices.Sorted(maps.Keys(perfValued))
			for range 1 + r.IntN(4) {
				if r.IntN(10) < 3 {
					c.Args = append(c.Args, pick(perfFlags))
					continue
				}
				o := valued[r.IntN(len(valued))]
				v := pick(perfValued[o])
				if strings.HasPrefix(o, "--") && r.IntN(2) == 0 {
					c.Args = append(c.Args, o+"="+v)
				} else {
					c.Args = append(c.Args, o, v)
				}
			}
		case CM:
			t := cmTools[r.IntN(len(cmTools))]
			if server && t.c == "ibv_devinfo" {
				continue
			}
			c = Case{C: t.c, Go: t.g}
			values := cmValues
			switch {
			case t.c == "rping" && server: // -s is the role, -a the address
				c.Args = []string{"-s", "-p", p}
			case t.c == "rping":
				c.Args = []string{"-c", "-a", pick(hosts[:2]), "-p", p}
			case t.c == "mckey":
				// -s is the role (a sender ends by itself, a receiver
				// waits for its messages); no port: -p is the port
				// space, drawn below.
				values = mckeyValues
				c.Args = []string{"-m", pick(mckeyValues['m'][:2])}
				if r.IntN(2) == 0 {
					c.Args = append(c.Args, "-b", "10.99.0.1")
				}
				if !server {
					c.Args = append([]string{"-s"}, c.Args...)
				}
			case t.c == "rdma_client" && server:
				c = Case{C: "rdma_server", Go: "rdmaserver", Args: []string{"-p", p}}
			case t.c != "ibv_devinfo":
				c.Args = []string{"-p", p}
				if !server {
					c.Args = append([]string{"-s", pick(hosts[:2])}, c.Args...)
				}
			}
			opts, valued := getopts(t.opts)
			for range 1 + r.IntN(3) {
				o := opts[r.IntN(len(opts))]
				switch {
				case t.c == "rping" && (o == 's' || o == 'c'), t.c == "mckey" && o == 's':
					// The role: a client line turned server would listen
					// beside the other tool's, on the same port; a mckey
					// sender line turned receiver would wait until killed.
				case !valued[o]:
					c.Args = append(c.Args, "-"+string(o))
				case values[o] != nil:
					c.Args = append(c.Args, "-"+string(o), pick(values[o]))
				default:
					c.Args = append(c.Args, "-"+string(o), pick(nums))
				}
			}
		default:
			panic("sweep: unknown family " + string(f))
		}
		if !server && f != CM {
			c.Args = append(c.Args, Server)
		}
		cases = append(cases, c)
	}
	return cases
}
