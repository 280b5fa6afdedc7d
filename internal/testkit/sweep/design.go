package sweep

import (
	"slices"
	"strings"

	"github.com/pureverbs/pureverbs/internal/getopt"
)

// ByDesign returns why the Go tool may differ from the C tool on c, given
// both outputs (goOut, cOut) and how the C tool ended (cErr: nil for exit
// 0), or "" when the two must agree. Each reason is a difference
// docs/testing.md ("Reviews against the man pages and hostile input")
// records as left on purpose.
func ByDesign(c Case, goOut, cOut, cErr string) string {
	switch {
	case strings.Contains(goOut, "not supported by this port"), strings.Contains(goOut, "this port runs RC, UC and UD only"):
		return "a feature the port refuses (docs/performance.md, Unsupported)"
	case strings.Contains(goOut, "AF_IB"):
		return "AF_IB (-f gid) is refused"
	case strings.Contains(cOut, "Device not recognized to implement inline feature"):
		return "-I on rxe: perftest sends nothing inline on a device it does not know, the Go tools honour -I"
	case strings.Contains(goOut, "Post List size") && (optValue(c.Args, "-l", belowOne) ||
		optValue(c.Args, "--post_list", belowOne) || optValue(c.Args, "--recv_post_list", belowOne)):
		return "a post list below 1 in a bandwidth test: perftest hangs, the Go tools say why"
	case c.Go == "udpingpong" && strings.Contains(goOut, "Couldn't allocate work buf.") && optValue(c.Args, "-s", func(v string) bool {
		return getopt.Strtoul(v) >= 1<<32-40
	}):
		return "udpingpong -s past 4 GiB: C's size + 40 wraps to a 39-byte malloc"
	case c.Go == "srqpingpong" && strings.Contains(cErr, "segmentation fault"):
		return "srqpingpong -r 2^31 and more: C dies of SIGSEGV"
	case strings.Contains(cErr, "segmentation fault") && strings.Contains(goOut, "Mix of source with local|remote"):
		return "raw Ethernet -J or -j with a --local_*/--remote_* option but not its --local_ip/--remote_ip: C passes NULL to inet_pton and dies of SIGSEGV, the Go tools refuse the mix as C would next"
	case c.Go == "rdmamckey" && strings.Contains(cErr, "segmentation fault") && strings.Contains(goOut, "resolve addr failure") &&
		optValue(c.Args, "-M", anyValue) && optValue(c.Args, "-b", anyValue):
		return "mckey -M with a -b address of no RDMA device: C dies of SIGSEGV (ibv_query_port on a NULL context), the Go tool reports the failure"
	case c.Go == "rdmaping" && strings.Contains(cErr, "exit status 255") &&
		sameLinesWithout(hexRE.ReplaceAllString(goOut, "0x#"), hexRE.ReplaceAllString(cOut, "0x#"), rpingRaceLines...):
		return "rping's threads race one another at the end (the cm thread's exit, the main thread's failed wait and teardown, the channel's destruction): the Go tool prints one of the outcomes C has run alone"
	}
	return ""
}

// anyValue is any option's value.
func anyValue(string) bool { return true }

// belowOne reports whether perftest's CHECK_VALUE reads v as a number
// below 1 (strtol, cast to int).
func belowOne(v string) bool { return int32(getopt.Strtol(v)) < 1 }

// optValue reports whether some value of option opt in args satisfies
// cond: "-s v" or "-sv" for a short option, "--opt v" or "--opt=v" for a
// long one.
func optValue(args []string, opt string, cond func(string) bool) bool {
	joined, empty := opt, false // the prefix of a value in the same word
	if strings.HasPrefix(opt, "--") {
		joined, empty = opt+"=", true
	}
	for i, a := range args {
		switch {
		case a == opt && i+1 < len(args):
			if cond(args[i+1]) {
				return true
			}
		case strings.HasPrefix(a, joined) && (empty || len(a) > len(joined)):
			if cond(a[len(joined):]) {
				return true
			}
		}
	}
	return false
}

// maskPointers rewrites the addresses rping's -d prints ("created cm_id
// %p") as 0x#, in c's output out: they differ from run to run.
func maskPointers(c Case, out string) string {
	if c.C != "rping" {
		return out
	}
	return hexRE.ReplaceAllString(out, "0x#")
}

// rpingRaceLines are what rping's threads print or not as they race one
// another at the end: the main thread's failed wait for the address, the
// route or the connection while the cm thread exits (cmd/rdmaping:
// dieAfterMain), -d's line of the CQ thread's start, -d's lines of the
// main thread's teardown once the CQ thread has ended on the flushed
// receive of a rejected connection (C alone, rping -c -a 10.99.0.1 -d
// with no server: 4 runs of 10 print one of them), and the cm thread's
// read of the event channel the main thread has just destroyed (C alone,
// rping -c -I 10.1 -q: 1 run of 5 prints it).
var rpingRaceLines = []string{"wait for CONNECTED state ", "waiting for addr/route resolution state ", "connect error ",
	"cq_thread started.", "rping_free_buffers called on cb ", "destroy cm_id ", "rdma_get_cm_event: Bad file descriptor"}

// sameLinesWithout reports whether a and b hold the same lines, in any
// order, once the lines starting with any of drop are left out.
func sameLinesWithout(a, b string, drop ...string) bool {
	keep := func(out string) []string {
		var ls []string
		for _, l := range strings.Split(strings.ReplaceAll(out, "\r\n", "\n"), "\n") {
			l = strings.TrimSpace(l)
			if l == "" || slices.ContainsFunc(drop, func(d string) bool { return strings.HasPrefix(l, d) }) {
				continue
			}
			ls = append(ls, l)
		}
		slices.Sort(ls)
		return ls
	}
	return slices.Equal(keep(a), keep(b))
}
