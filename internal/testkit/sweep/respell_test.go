package sweep

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pureverbs/pureverbs/internal/getopt"
)

// parsed is what getopt_long makes of a line: each option by its letter
// (or long-only name) and argument, and the operands.
func parsed(t longTable, args []string) ([]string, []string, error) {
	opts, operands, err := getopt.Parse(args, t.short, t.longs)
	var out []string
	for _, o := range opts {
		k := string(o.Val)
		if o.Val == 0 {
			k = "--" + o.Name
		}
		out = append(out, k+"="+o.Arg)
	}
	return out, operands, err
}

// TestRespellSameOptions: every valid respelling of every family's lines
// (client, server and connected, several seeds) parses to the same
// options, arguments and operands as the plain line; the spellings vary
// (attached, clustered, long, abbreviated, permuted, "--"); a refused
// spelling is refused by getopt, and only the ping-pong tools and
// ibv_devinfo get one.
func TestRespellSameOptions(t *testing.T) {
	seen := map[string]int{}
	refused := 0
	check := func(tool string, plain, words []string, refusals bool) {
		tab := longTables[tool]
		if tab.short == "" {
			t.Fatalf("%s: no getopt table", tool)
		}
		wantO, wantA, err := parsed(tab, plain)
		if err != nil {
			t.Fatalf("%s %q: the plain line does not parse: %v", tool, plain, err)
		}
		gotO, gotA, err := parsed(tab, words)
		if err != nil {
			if !refusals || !strings.HasPrefix(tool, "ibv_") {
				t.Errorf("%s %q respelled %q: %v", tool, plain, words, err)
			}
			refused++
			return
		}
		if !slices.Equal(gotO, wantO) || !slices.Equal(gotA, wantA) {
			t.Errorf("%s %q respelled %q: options %q operands %q, want %q %q", tool, plain, words, gotO, gotA, wantO, wantA)
		}
		for _, w := range words {
			switch {
			case w == "--":
				seen["--"]++
			case strings.HasPrefix(w, "--") && strings.Contains(w, "="):
				seen["--long=arg"]++
			case strings.HasPrefix(w, "--"):
				seen["--long"]++
			case len(w) > 2 && w[0] == '-' && strings.IndexByte(tab.short, w[1]) >= 0:
				seen["-xARG or cluster"]++
			}
		}
		if !slices.Equal(plain, words) && len(wantA) > 0 && !slices.Equal(words[len(words)-len(wantA):], wantA) {
			seen["operand moved"]++
		}
	}
	for _, seed := range []uint64{1, 2, 3} {
		for _, f := range Families {
			for _, server := range []bool{false, true} {
				for _, c := range RespellCases(Cases(f, seed, 200, server, 21000), seed) {
					check(c.C, c.Args, c.Words, true)
				}
			}
			for _, p := range RespellPaired(PairedCases(f, seed, 100, 21000), seed) {
				check(p.C, p.Server, p.ServerWords, false)
				check(p.ClientC(), p.Client, p.ClientWords, false)
			}
		}
	}
	for _, k := range []string{"--", "--long=arg", "--long", "-xARG or cluster", "operand moved"} {
		if seen[k] == 0 {
			t.Errorf("no respelling has %s: %v", k, seen)
		}
	}
	if refused == 0 {
		t.Error("no refused spelling was drawn")
	}
	t.Logf("spellings: %v; refused: %d", seen, refused)
}

// TestRespellReproducible: the same seed respells alike, another seed
// otherwise.
func TestRespellReproducible(t *testing.T) {
	cases := Cases(Perftest, 5, 50, false, 21000)
	a, b := RespellCases(cases, 5), RespellCases(cases, 5)
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("seed 5 twice:\n%s", diff)
	}
	if cmp.Equal(a, RespellCases(cases, 6)) {
		t.Error("seeds 5 and 6 respell alike")
	}
}

// TestPrefixes: getopt_long's reading of abbreviations, on perftest's
// table: a prefix other names share is ambiguous, unless they are
// entries glibc cannot tell apart; an exact name wins.
func TestPrefixes(t *testing.T) {
	tab := longTables["ib_write_bw"]
	for _, c := range []struct {
		name, shortest, ambiguous string
	}{
		{"size", "siz", "si"},                  // sig_before
		{"sl", "sl", "s"},                      // exact
		{"qp", "qp", "q"},                      // exact; qp-timeout
		{"qp-timeout", "qp-", "qp"},            // qp is exact
		{"raw_ipv6", "raw_i", "raw_"},          // raw_mcast
		{"source_ip", "source_ip", "source_i"}, // named twice, the second long-only
		{"inline_size", "inline_s", "inline_"}, // inline_recv
	} {
		ok, amb := prefixes(tab.longs, c.name)
		if len(ok) == 0 || ok[0] != c.shortest || amb != c.ambiguous {
			t.Errorf("%s: prefixes %q, ambiguous %q; want %q first, %q", c.name, ok, amb, c.shortest, c.ambiguous)
		}
	}
	if got := Respell("ibv_devinfo", []string{"-v"}, rand.New(rand.NewPCG(1, 1)), false); len(got) != 1 {
		t.Errorf("ibv_devinfo -v respelled as %q", got)
	}
}
