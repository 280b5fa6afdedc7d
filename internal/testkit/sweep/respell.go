package sweep

import (
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/pureverbs/pureverbs/internal/bw"
	"github.com/pureverbs/pureverbs/internal/getopt"
)

// A line's words are drawn in their plainest spelling ("-s", "64";
// "--size", "64"; the operand last). glibc's getopt_long, which the C
// tools call and internal/getopt follows, reads many others as the same
// options: a short option's argument attached ("-s64"), short options
// clustered ("-ec", "-es64"), a long name for a letter ("--size=64"),
// a long name abbreviated to a prefix no other entry shares ("--si 64"),
// operands anywhere (GNU mode permutes them), "--" before an operand.
// Respell draws one of those spellings, so that a sweep compares the
// tools' parsing of them too (make sweep SWEEPRESPELL=1).
//
// For the ping-pong tools and ibv_devinfo, whose complaints print the
// usage that the Go tools print too, a line in eight also gets a
// spelling getopt_long refuses: an ambiguous prefix, an argument given
// to a flag ("--events=1"), a long option missing its argument at the
// end. perftest prints its whole usage on those, which the Go tools do
// not (docs/testing.md), and the rdma_cm examples use plain getopt(3),
// without long options: theirs keep to the valid spellings.

// longTable is a tool's getopt_long table as its C source has it.
type longTable struct {
	short string
	longs []getopt.Long
	// refusals: the tool's getopt complaints are compared (its usage is
	// the Go tool's too).
	refusals bool
}

// table parses "name:L" entries (name= for an option with an argument).
func table(short string, entries string) longTable {
	t := longTable{short: short}
	for _, e := range strings.Fields(entries) {
		name, val, _ := strings.Cut(e, ":")
		t.longs = append(t.longs, getopt.Long{Name: strings.TrimSuffix(name, "="), HasArg: strings.HasSuffix(name, "="), Val: val[0]})
	}
	return t
}

// The tables of rdma-core 44 (libibverbs/examples) and, for perftest,
// the Go tools' own, which was compared name by name with the table of
// Debian's perftest 4.5-0.17 build (its conditional entries included;
// 2026-12-06). The rdma_cm examples have none.
var longTables = func() map[string]longTable {
	short, longs := bw.GetoptTable()
	t := map[string]longTable{
		"ibv_rc_pingpong": table("p:d:i:s:m:r:n:l:eg:oOPtcjN", "port=:p ib-dev=:d ib-port=:i size=:s mtu=:m rx-depth=:r "+
			"iters=:n sl=:l events:e gid-idx=:g odp:o iodp:O prefetch:P ts:t chk:c dm:j new_send:N"),
		"ibv_uc_pingpong": table("p:d:i:s:m:r:n:l:eg:c", "port=:p ib-dev=:d ib-port=:i size=:s mtu=:m rx-depth=:r "+
			"iters=:n sl=:l events:e gid-idx=:g chk:c"),
		"ibv_ud_pingpong": table("p:d:i:s:r:n:l:eg:c", "port=:p ib-dev=:d ib-port=:i size=:s rx-depth=:r "+
			"iters=:n sl=:l events:e gid-idx=:g chk:c"),
		"ibv_srq_pingpong": table("p:d:i:s:m:q:r:n:l:eog:c", "port=:p ib-dev=:d ib-port=:i size=:s mtu=:m num-qp=:q "+
			"rx-depth=:r iters=:n sl=:l events:e odp:o gid-idx=:g chk:c"),
		"ibv_devinfo": table("d:i:lv", "ib-dev=:d ib-port=:i list:l verbose:v"),
	}
	for k, v := range t {
		v.refusals = true
		t[k] = v
	}
	for _, p := range perfTools {
		t[p[0]] = longTable{short: short, longs: longs}
	}
	for _, c := range cmTools {
		if _, ok := t[c.c]; !ok {
			t[c.c] = longTable{short: c.opts}
		}
	}
	t["rdma_server"] = longTable{short: "s:p:"}
	t["rdma_client"] = longTable{short: "s:p:"}
	return t
}()

// word is one option or operand of a line in its plain spelling.
type word struct {
	letter   byte   // a short option's letter, or the long option's (0: long-only)
	name     string // the long option's name ("" for a short option given as such)
	arg      string
	hasArg   bool
	operand  bool
	original []string
}

// split reads a plain line into options and operands with the tool's
// table (a word it cannot read, which a plain line has not, is kept as
// an operand, unchanged).
func split(t longTable, args []string) []word {
	var ws []word
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			for _, o := range args[i+1:] {
				ws = append(ws, word{operand: true, original: []string{o}})
			}
			return ws
		case strings.HasPrefix(a, "--") && t.longs != nil:
			name, arg, eq := strings.Cut(a[2:], "=")
			k := slices.IndexFunc(t.longs, func(l getopt.Long) bool { return l.Name == name })
			if k < 0 {
				ws = append(ws, word{operand: true, original: []string{a}})
				continue
			}
			w := word{letter: t.longs[k].Val, name: name, hasArg: t.longs[k].HasArg, original: []string{a}}
			if w.hasArg && !eq {
				if i+1 >= len(args) {
					ws = append(ws, word{operand: true, original: []string{a}})
					continue
				}
				i++
				arg = args[i]
				w.original = append(w.original, arg)
			}
			w.arg = arg
			ws = append(ws, w)
		case len(a) == 2 && a[0] == '-' && a[1] != ':' && strings.IndexByte(t.short, a[1]) >= 0:
			k := strings.IndexByte(t.short, a[1])
			w := word{letter: a[1], hasArg: k+1 < len(t.short) && t.short[k+1] == ':', original: []string{a}}
			if w.hasArg {
				if i+1 >= len(args) {
					ws = append(ws, word{operand: true, original: []string{a}})
					continue
				}
				i++
				w.arg = args[i]
				w.original = append(w.original, w.arg)
			}
			ws = append(ws, w)
		default:
			ws = append(ws, word{operand: true, original: []string{a}})
		}
	}
	return ws
}

// prefixes returns the prefixes of name that getopt_long reads as name,
// shortest first, and the longest prefix it reads otherwise: ambiguous,
// or another option's exact name ("" if none). internal/getopt decides, with glibc's rules; a prefix it
// misjudges shows as a difference from C in the sweep.
func prefixes(longs []getopt.Long, name string) (ok []string, ambiguous string) {
	k := slices.IndexFunc(longs, func(l getopt.Long) bool { return l.Name == name })
	arg := ""
	if longs[k].HasArg {
		arg = "=x"
	}
	for n := 1; n <= len(name); n++ {
		p := name[:n]
		opts, _, err := getopt.Parse([]string{"--" + p + arg}, "", longs)
		switch {
		case err == nil && len(opts) == 1 && opts[0].Name == name:
			ok = append(ok, p)
		case err == nil, strings.Contains(err.Error(), "ambiguous"):
			ambiguous = p // another option's exact name, or several
		}
	}
	return ok, ambiguous
}

// Respell returns args (a plain line of tool, the C program's name) in
// a spelling drawn from r that getopt_long reads as the same options, or
// (refusals set, one time in eight) in one it refuses.
func Respell(tool string, args []string, r *rand.Rand, refusals bool) []string {
	t, ok := longTables[tool]
	if !ok {
		return slices.Clone(args)
	}
	ws := split(t, args)
	var groups [][]string // option words as they will stand, in order
	var operands [][]string
	cluster := -1 // the group that is a cluster of flags, open for one more letter
	longName := func(letter byte) string {
		for _, l := range t.longs {
			if l.Val == letter && letter != 0 {
				return l.Name
			}
		}
		return ""
	}
	for _, w := range ws {
		if w.operand {
			operands = append(operands, w.original)
			continue
		}
		name := w.name
		if name == "" {
			name = longName(w.letter)
		}
		// A long option whose value is no short option (perftest's
		// --ethertype and --use_rss return 'Y' and 'G', which its short
		// string lacks) stays long.
		short := w.letter != 0 && w.letter != ':' && strings.IndexByte(t.short, w.letter) >= 0
		asLong := name != "" && (!short || r.IntN(3) == 0)
		if !asLong {
			// A short option: alone, attached, or joining the open cluster.
			join := cluster >= 0 && r.IntN(2) == 0
			var g []string
			switch {
			case !w.hasArg && join:
				groups[cluster][0] += string(w.letter)
				continue
			case !w.hasArg:
				g = []string{"-" + string(w.letter)}
			case w.arg != "" && r.IntN(2) == 0:
				g = []string{"-" + string(w.letter) + w.arg}
			default:
				g = []string{"-" + string(w.letter), w.arg}
			}
			if join {
				groups[cluster] = append([]string{groups[cluster][0] + g[0][1:]}, g[1:]...)
				cluster = -1
				continue
			}
			groups = append(groups, g)
			cluster = -1
			if !w.hasArg {
				cluster = len(groups) - 1
			}
			continue
		}
		cluster = -1
		spelled := name
		if ps, _ := prefixes(t.longs, name); len(ps) > 0 && r.IntN(2) == 0 {
			spelled = ps[r.IntN(len(ps))]
		}
		switch {
		case !w.hasArg:
			groups = append(groups, []string{"--" + spelled})
		case r.IntN(2) == 0:
			groups = append(groups, []string{"--" + spelled + "=" + w.arg})
		default:
			groups = append(groups, []string{"--" + spelled, w.arg})
		}
	}
	// A long option missing its argument goes last, after the operands:
	// before one it would take the operand as its argument (the sweep of
	// seed 112 drew "--port" then the host: a server line, with the
	// port it read from the host on both tools, which then collided).
	var last []string
	if refusals && t.refusals && r.IntN(8) == 0 {
		g, atEnd := refusal(t, r)
		if atEnd {
			last = g
		} else {
			groups = append(groups, g)
		}
	}
	// Operands anywhere between the options, or after "--" at the end
	// (not before a last refusal: it would be an operand there).
	end := r.IntN(4) == 0 && last == nil
	for _, o := range operands {
		if end {
			continue
		}
		at := r.IntN(len(groups) + 1)
		groups = slices.Insert(groups, at, o)
	}
	out := slices.Concat(groups...)
	if end && len(operands) > 0 {
		out = append(out, "--")
		out = append(out, slices.Concat(operands...)...)
	}
	return append(out, last...)
}

// refusal is a long option spelled as getopt_long refuses it; atEnd
// says it must be the line's last word (a long option missing its
// argument).
func refusal(t longTable, r *rand.Rand) (words []string, atEnd bool) {
	for {
		l := t.longs[r.IntN(len(t.longs))]
		_, amb := prefixes(t.longs, l.Name)
		switch r.IntN(3) {
		case 0:
			if amb != "" {
				return []string{"--" + amb}, false
			}
		case 1:
			if !l.HasArg {
				return []string{"--" + l.Name + "=1"}, false
			}
		default:
			if l.HasArg {
				return []string{"--" + l.Name}, true
			}
		}
	}
}

// respellSeed keeps a respelling's draws apart from the lines' own.
const respellSeed = 0x7e5be11

// RespellCases respells each case's line (Words), drawn from seed: the
// same seed gives the same spellings.
func RespellCases(cases []Case, seed uint64) []Case {
	r := rand.New(rand.NewPCG(seed, respellSeed))
	out := slices.Clone(cases)
	for i := range out {
		out[i].Words = Respell(out[i].C, out[i].Args, r, true)
	}
	return out
}

// RespellPaired respells both lines of each connected line, with
// valid spellings only (a refused one would leave nothing connected to
// compare).
func RespellPaired(cases []Paired, seed uint64) []Paired {
	r := rand.New(rand.NewPCG(seed, respellSeed+1))
	out := slices.Clone(cases)
	for i := range out {
		out[i].ServerWords = Respell(out[i].C, out[i].Server, r, false)
		out[i].ClientWords = Respell(out[i].ClientC(), out[i].Client, r, false)
	}
	return out
}
