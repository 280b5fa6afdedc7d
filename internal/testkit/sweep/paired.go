package sweep

import (
	"cmp"
	"fmt"
	"maps"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Paired is a connected line: a server and a client of one tool, run in
// each of the four pairings (C-C, Go-Go, Go server with C client, C
// server with Go client), every pairing's two outputs compared with
// C-C's (make sweep SWEEPPAIRED=1).
type Paired struct {
	C, Go          string   // the server's programs, and the client's unless CliC and CliGo say
	CliC, CliGo    string   // the client's programs where they are others (rdma_client)
	Server, Client []string // the whole command lines but the program, plainly spelled
	// ServerWords and ClientWords, when set, are how the lines are run:
	// Server and Client respelled (RespellPaired).
	ServerWords, ClientWords []string
	Port                     int  // where the server listens
	CM                       bool // the server listens through the rdma_cm, not on a TCP socket
	// Ready, when set, is the server's line that says the client may
	// start, waited for instead of a listener (mckey's receiver, which
	// joins a group and listens on no port).
	Ready string
}

func (p Paired) String() string {
	return fmt.Sprintf("server %s, client %s", Case{C: p.C, Go: p.Go, Args: p.Server, Words: p.ServerWords},
		Case{C: p.ClientC(), Go: p.ClientGo(), Args: p.Client, Words: p.ClientWords})
}

// RunLimit is how long one pairing of the line may take before both
// sides are killed: 30 s, and 90 s for a perftest line with -a. Every
// size from 2 B to 8 MiB takes 22-34 s under TCG on 6.12 (ib_send_lat
// -n 20 -a: C-C 33 s, Go-Go 22 s, mixed 31-34 s, 2026-12-07), so a
// 30 s limit cut some pairings and not others at the largest size
// (seed 110).
func (p Paired) RunLimit() time.Duration {
	// (rping's and ucmatose's -a are an address and a timeout.)
	if strings.HasPrefix(p.C, "ib_") && (slices.Contains(p.Server, "-a") || slices.Contains(p.Client, "-a")) {
		return 90 * time.Second
	}
	return 30 * time.Second
}

// ServerLine is the server's command line as run.
func (p Paired) ServerLine() []string { return Case{Args: p.Server, Words: p.ServerWords}.Line() }

// ClientLine is the client's command line as run.
func (p Paired) ClientLine() []string { return Case{Args: p.Client, Words: p.ClientWords}.Line() }

// ClientC is the client's C program.
func (p Paired) ClientC() string { return cmp.Or(p.CliC, p.C) }

// ClientGo is the client's Go program.
func (p Paired) ClientGo() string { return cmp.Or(p.CliGo, p.Go) }

// Values a connected line draws from: mostly ones that make a run that
// works, so that the comparison reaches the data path and the reports,
// with a few that fail late (a size past the MTU, a depth the device
// refuses) or early.
var (
	pSizes  = []string{"1", "2", "8", "64", "1000", "1024", "4096", "8192", "65536"}
	pMTUs   = []string{"256", "512", "1024", "2048", "4096"}
	pDepths = []string{"1", "2", "16", "128", "500"}
	pIters  = []string{"1", "2", "10", "100"}
)

// The ping-pong tools' options in a connected line, with their values
// (nil: a flag).
var ppPaired = map[byte][]string{
	's': pSizes, 'm': pMTUs, 'r': pDepths, 'n': pIters, 'l': {"0", "1", "7"}, 'q': {"1", "2", "8"},
	'e': nil, 'o': nil, 'O': nil, 'P': nil, 't': nil, 'c': nil, 'j': nil, 'N': nil,
}

// perftest's options in a connected line. Left out: -z (its server
// listens through the rdma_cm, as -R's does, but -R covers that),
// --run_infinitely (it never ends), the output files, and the options of
// the hardware the guest has not (dual port, DC, XRC, GPU).
var perfPaired = map[string][]string{
	"-s": pSizes, "-n": {"5", "100"}, "-t": {"1", "16", "128"}, "-r": {"16", "256"}, "-q": {"1", "2", "3"},
	"-Q": {"1", "8"}, "-l": {"1", "4"}, "-m": pMTUs, "-c": {"RC", "UC", "UD"}, "-o": {"1", "8"},
	"-A": {"CMP_AND_SWAP", "FETCH_AND_ADD"}, "-D": {"1"}, "-I": {"0", "32"}, "-u": {"14"}, "-S": {"0"},
	"-T": {"0", "32"}, "--recv_post_list": {"1", "4"}, "--latency_gap": {"0", "10"},
	"-a": nil, "-F": nil, "-e": nil, "-R": nil, "-b": nil, "-N": nil, "-C": nil, "-H": nil, "-U": nil,
	"--report_gbits": nil, "--use-srq": nil, "--report-both": nil, "--reversed": nil, "--cpu_util": nil,
	"--mr_per_qp": nil, "--perform_warm_up": nil, "--use_old_post_send": nil,
}

// The rdma_cm examples' options in a connected line (both sides get the
// same ones, which they must agree on: the counts and sizes).
var cmPaired = map[string]map[byte][]string{
	"ucmatose": {'c': {"1", "2", "4"}, 'C': {"0", "1", "10"}, 'S': {"1", "100", "1000", "4096"}, 't': {"0", "32"}, 'a': {"14", "20"}},
	"udaddy":   {'c': {"1", "2"}, 'C': {"0", "1", "10"}, 'S': {"1", "100", "1000"}, 't': {"0", "32"}},
	"rping":    {'C': {"1", "3", "10"}, 'S': {"1", "23", "100", "4096", "65535", "65536"}, 'v': nil, 'V': nil, 'q': nil},
}

// The GID indexes and devices of a connected ping-pong line (both sides
// alike): rxe0's link-local GID 0 and its IPv4 GID 1, rxelo's IPv4 1 and
// its ::1, 2. (rxelo's link-local 0 is left out: ping-pong fails on it,
// docs/rxe.md, and the client lines draw it.)
var ppPairedGIDs = [][2]string{{"rxe0", "1"}, {"rxe0", "1"}, {"rxe0", "0"}, {"rxelo", "1"}, {"rxelo", "2"}}

// mckey's options in a connected line: the same on both sides, but for
// the mismatched one (mckeyMismatch) the receiver may get, and the
// sender's send-only join (-o), which the sender alone draws.
var (
	mckeyPaired = map[byte][]string{
		'c': {"1", "2", "3"}, 'C': {"0", "1", "10", "50"}, 'S': {"1", "100", "1000", "2000"}, 'p': {"0x111"},
	}
	mckeyMismatch = map[byte][]string{
		'c': {"1", "2"}, 'C': {"0", "1", "5", "20"}, 'S': {"1", "64"}, 'o': nil, 'l': nil,
	}
)

// cmMismatch lists, per rdma_cm example, the options a connected line may
// give the server alone: not the connection count, nor ucmatose's and
// udaddy's message count and size, on which a mismatch leaves both
// sides waiting for each other, in C as in Go, until they are killed.
var cmMismatch = map[string]string{"ucmatose": "ta", "udaddy": "t", "rping": "CSvVq"}

// udaddyPort is udaddy's fixed port (its -p is the port space).
const udaddyPort = 7174

// PairedCases draws n connected lines of family f from seed. Line i's
// server listens on port+i (udaddy's on its fixed port). In about one
// line in five the server gets one option more than the client, a
// mismatch the tools must both notice or both ride out.
func PairedCases(f Family, seed uint64, n int, port int) []Paired {
	r := rand.New(rand.NewPCG(seed, uint64(len(f))+100))
	pick := func(vs []string) string { return vs[r.IntN(len(vs))] }
	var cases []Paired
	for len(cases) < n {
		p := Paired{Port: port + len(cases)}
		ps := fmt.Sprint(p.Port)
		var common, extra []string
		switch f {
		case PingPong:
			t := ppTools[r.IntN(len(ppTools))]
			p.C, p.Go = t.c, t.g
			opts, _ := getopts(t.opts)
			draw := func() []string {
				for {
					o := opts[r.IntN(len(opts))]
					vs, ok := ppPaired[o]
					switch {
					case !ok:
					case vs == nil:
						return []string{"-" + string(o)}
					default:
						return []string{"-" + string(o), pick(vs)}
					}
				}
			}
			g := ppPairedGIDs[r.IntN(len(ppPairedGIDs))]
			common = []string{"-d", g[0], "-g", g[1], "-p", ps, "-n", "20"}
			for range r.IntN(4) {
				common = append(common, draw()...)
			}
			if r.IntN(5) == 0 {
				extra = draw()
			}
			p.Server = slices.Concat(common, extra)
			p.Client = append(slices.Clone(common), "127.0.0.1")
		case Perftest:
			t := perfTools[r.IntN(len(perfTools))]
			p.C, p.Go = t[0], t[1]
			keys := slices.Sorted(maps.Keys(perfPaired))
			draw := func() []string {
				o := keys[r.IntN(len(keys))]
				if vs := perfPaired[o]; vs != nil {
					return []string{o, pick(vs)}
				}
				return []string{o}
			}
			var drawn []string
			for range r.IntN(4) {
				drawn = append(drawn, draw()...)
			}
			common = []string{"-d", "rxe0", "-x", "1", "-p", ps}
			if !slices.Contains(drawn, "-n") && !slices.Contains(drawn, "-D") {
				common = append(common, "-n", "20") // perftest refuses -n beside -D
			}
			common = append(common, drawn...)
			if r.IntN(5) == 0 {
				extra = draw()
			}
			p.CM = slices.Contains(common, "-R") || slices.Contains(extra, "-R")
			p.Server = slices.Concat(common, extra)
			p.Client = append(slices.Clone(common), "10.99.0.1") // the rdma_cm (-R) resolves it to rxe0
		case CM:
			p.CM = true
			tools := [][2]string{{"ucmatose", "rdmacmatose"}, {"udaddy", "rdmaudaddy"}, {"rping", "rdmaping"}, {"rdma_server", "rdmaserver"},
				{"mckey", "rdmamckey"}}
			t := tools[r.IntN(len(tools))]
			p.C, p.Go = t[0], t[1]
			vals := cmPaired[t[0]]
			keys := slices.Sorted(maps.Keys(vals))
			draw := func(from []byte) []string {
				o := from[r.IntN(len(from))]
				if vs := vals[o]; vs != nil {
					return []string{"-" + string(o), pick(vs)}
				}
				return []string{"-" + string(o)}
			}
			var srv, cli []string
			switch t[0] {
			case "ucmatose":
				srv, cli = []string{"-p", ps}, []string{"-s", "10.99.0.1", "-p", ps}
			case "udaddy":
				p.Port = udaddyPort
				srv, cli = nil, []string{"-s", "10.99.0.1"}
			case "rping":
				srv, cli = []string{"-s", "-a", "10.99.0.1", "-p", ps, "-C", "2"}, []string{"-c", "-a", "10.99.0.1", "-p", ps, "-C", "2"}
			case "rdma_server":
				// The server's address: rxe0's, the default any address
				// spelled or not, or lo's (rxelo), which the client
				// reaches at 127.0.0.1; in one line in five the client
				// goes where the server does not listen.
				p.CliC, p.CliGo = "rdma_client", "rdmaclient"
				addr := [][2]string{{"10.99.0.1", "10.99.0.1"}, {"0.0.0.0", "10.99.0.1"}, {"", "10.99.0.1"}, {"127.0.0.1", "127.0.0.1"}}[r.IntN(4)]
				if addr[0] != "" {
					p.Server = []string{"-s", addr[0]}
				}
				p.Server = append(p.Server, "-p", ps)
				p.Client = []string{"-s", addr[1], "-p", ps}
				switch r.IntN(10) {
				case 0: // the next line's port, where nothing listens yet
					p.Client = []string{"-s", addr[1], "-p", fmt.Sprint(p.Port + 1)}
				case 1: // the other address (which a server on the any address serves too)
					p.Client[1] = map[string]string{"10.99.0.1": "127.0.0.1", "127.0.0.1": "10.99.0.1"}[addr[1]]
				}
				cases = append(cases, p)
				continue
			case "mckey":
				// A receiver (the server) and a sender (the client) of
				// one group, the line's own; the sender starts once the
				// receiver has begun to join (it waits 3 s after its
				// own join before it sends, as the receiver does before
				// it polls).
				p.CM, p.Port = false, 0
				p.Ready = "mckey: joining"
				group := fmt.Sprintf("239.2.%d.%d", len(cases)/200%200, len(cases)%200+1)
				base := []string{"-m", group, "-b", "10.99.0.1"}
				for range r.IntN(4) {
					o := byte("cCSp"[r.IntN(4)])
					common = append(common, "-"+string(o), pick(mckeyPaired[o]))
				}
				if r.IntN(5) == 0 {
					o := byte("cCSol"[r.IntN(5)])
					extra = []string{"-" + string(o)}
					if vs := mckeyMismatch[o]; vs != nil {
						extra = append(extra, pick(vs))
					}
				}
				p.Server = slices.Concat(base, common, extra)
				p.Client = slices.Concat(base, []string{"-s"}, common)
				if r.IntN(4) == 0 {
					p.Client = append(p.Client, "-o")
				}
				cases = append(cases, p)
				continue
			}
			if len(keys) > 0 {
				for range r.IntN(4) {
					common = append(common, draw(keys)...)
				}
				if r.IntN(5) == 0 {
					extra = draw([]byte(cmMismatch[t[0]]))
				}
			}
			p.Server = slices.Concat(srv, common, extra)
			p.Client = slices.Concat(cli, common)
		default:
			panic("sweep: unknown family " + string(f))
		}
		cases = append(cases, p)
	}
	return cases
}

// The parts of a connected run's output that differ from run to run:
// addresses, keys, PSNs and QP numbers (hexadecimal), times and rates
// (decimals), and a result row's counts (a fixed-duration run counts its
// own iterations).
var (
	hexRE   = regexp.MustCompile(`0x[0-9a-fA-F]+`)
	floatRE = regexp.MustCompile(`-?\b\d+\.\d+\b|\binf\b|-?\bnan\b`)
	rowRE   = regexp.MustCompile(`^\s*\d+\s+\d+`)
	// A latency sample of -U or -H: "i, value", the value printed with
	// %g (an integer from 100000 usec on, exponents from 1e6).
	sampleRE = regexp.MustCompile(`^(\d+), \S+$`)
	// The ping-pong tools' "parse WC failed %d" counts the completions
	// of the poll that met the failed one (up to 2): whether the flush of
	// the QP's other work requests had begun by then is a race, and C-C
	// runs of one line print 1 and 2 alike (6.12, rc_pingpong with the
	// server's MTU below the client's).
	parseWCRE = regexp.MustCompile(`parse WC failed \d+`)
	intRE     = regexp.MustCompile(`\b\d+\b`)
	spaceRE   = regexp.MustCompile(`[ \t]+`)
)

// noise lists lines a connected run may or may not print: perftest's
// remarks on the CPU's clock, rping's race.
var noise = []string{"Conflicting CPU frequency values", "CPU Frequency is not max",
	// rping's client prints its DISCONNECTED event only when its CM
	// thread reads it before the client destroys its ID (a race in C;
	// cmd/rdmaping's tests leave it out too).
	"client DISCONNECT EVENT..."}

// Mask rewrites a connected run's output so that two runs of equal
// behaviour read alike: hexadecimal numbers become 0x#, decimals #.#, a
// latency sample's value (-U, -H) #, the count of "parse WC failed" N,
// every number of a result row but its first (the message size) N, and
// runs of blanks in such lines one space (but for the indent); lines of
// noise go.
func Mask(out string) string {
	var keep []string
	for _, l := range strings.Split(strings.ReplaceAll(out, "\r\n", "\n"), "\n") {
		if slices.ContainsFunc(noise, func(n string) bool { return strings.Contains(l, n) }) {
			continue
		}
		if sampleRE.MatchString(l) {
			keep = append(keep, sampleRE.ReplaceAllString(l, "$1, #"))
			continue
		}
		l = parseWCRE.ReplaceAllString(l, "parse WC failed N")
		l = hexRE.ReplaceAllString(l, "0x#")
		masked := floatRE.MatchString(l)
		l = floatRE.ReplaceAllString(l, "#.#")
		if rowRE.MatchString(l) {
			first := true
			l = intRE.ReplaceAllStringFunc(l, func(s string) string {
				if first {
					first = false
					return s
				}
				return "N"
			})
			masked = true
		}
		if masked { // the indent stays: pptest.Normalize drops a Go tool's "  (detail)" lines by it
			body := strings.TrimLeft(l, " \t")
			l = l[:len(l)-len(body)] + spaceRE.ReplaceAllString(body, " ")
		}
		keep = append(keep, l)
	}
	return strings.Join(keep, "\n")
}

// outcome is one pairing's run of a connected line, normalized.
type outcome struct{ server, client string }

func (o outcome) String() string { return "server:\n" + o.server + "\nclient:\n" + o.client }

// compared returns what of pairing i's outcome o is compared, and with
// what. The pairings are those of pairedLine: C-C (0), Go-Go (1), Go
// server with C client (2), C server with Go client (3); outs are their
// first runs (pairing 0's o: C-C run again). Pairing i is held to C-C,
// but mckey's on 6.12 (late set). There C's sender posts unsignalled
// sends and destroys its QP at once, and 6.12's rxe sends from a work
// queue, so whether its messages leave before the QP is gone is a race:
// by hand (2026-12-07) 1 of 6 C receivers and 2 of 6 Go ones got them,
// and seed 207's C-C runs went either way. The Go sender waits for its
// last send (cmd/rdmamckey). So on 6.12 a C sender's receiver is
// compared up to the transfer (withoutArrival), and a Go sender's is held
// to the C receiver of a Go sender: Go-Go to pairing 3, whose own sender
// (the Go one) is held to C-C's sender.
func compared(c Paired, i int, o outcome, outs [4]outcome, late bool) (got, want outcome) {
	if c.C != "mckey" || !late {
		return o, outs[0]
	}
	switch i {
	case 1:
		return o, outs[3]
	case 3:
		return outcome{client: o.client}, outcome{client: outs[0].client}
	}
	return outcome{withoutArrival(o.server), o.client}, outcome{withoutArrival(outs[0].server), outs[0].client}
}

// arrivalLines are the lines of a normalized mckey receiver's output
// that say whether the messages came: its end once they all did, or its
// kill (the run stops a server serverGrace after its client's end).
var arrivalLines = []string{"data transfers complete", "test complete", "return status 0", "(exit 0)", "(peer TOOL: signal: killed)"}

// withoutArrival is a normalized receiver's output without arrivalLines.
func withoutArrival(out string) string {
	var keep []string
	for _, l := range strings.Split(out, "\n") {
		if !slices.Contains(arrivalLines, l) {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}
