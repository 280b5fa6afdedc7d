package main

import (
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pureverbs/pureverbs/internal/testkit"
)

// The runner fails closed: a binary passes only if it reported a BEGIN and
// a well-formed END marker with exit status 0, ran at least one test, gave
// every test it started a result line and skipped no test that is not on
// the allowlist (allowlist.go). Anything it cannot parse is a failure.

// skipped is a test that skipped inside the VM.
type skipped struct {
	test    string // full name, subtests included (TestA/sub)
	reason  string // what the test logged last before skipping ("" if nothing)
	allowed string // why it may skip (its allowlist entry); "" if it may not
	judged  bool
}

// binResult is what the console said about one program the guest ran: a
// test binary, or the -demo / -shell-cmd script.
type binResult struct {
	label  string
	goTest bool // a go test binary, whose -test.v output is checked
	began  bool
	ended  bool
	rc     int
	status string   // the END marker line, when it could not be parsed
	proto  []string // markers that named this binary out of order

	// From the -test.v output (goTest only).
	noTests  bool            // "testing: warning: no tests to run"
	ran      map[string]bool // top-level tests, examples, benchmarks that ran and did not skip
	results  map[string]string
	started  []string // === RUN order
	skips    []skipped
	failures []string
	cur      string              // test whose output follows (=== RUN/NAME/CONT)
	lastLog  map[string]string   // the last log entry per test
	tailLogs map[string][]string // the last few log entries per test, for failures
	peerLogs map[string][]string // the same for testkit's peer reports (peerLogFile)
	logTest  string              // the test the last log entry belongs to
	logPeer  bool                // the last log entry is a peer report
}

// unfinished names the test most recently begun that has no result line:
// where a binary that did not end was.
func (b *binResult) unfinished() string {
	for i := len(b.started) - 1; i >= 0; i-- {
		if _, ok := b.results[b.started[i]]; !ok {
			return b.started[i]
		}
	}
	return ""
}

// problems lists why b failed; none means it passed.
func (b *binResult) problems() []string {
	var p []string
	switch {
	case !b.began:
		return []string{"never started (no BEGIN marker)"}
	case b.status != "":
		p = append(p, fmt.Sprintf("unparsable status line %q: exit status unknown", b.status))
	case !b.ended:
		if u := b.unfinished(); u != "" {
			p = append(p, "no end marker: guest died during "+u)
		} else {
			p = append(p, "no end marker: guest died")
		}
	case b.rc != 0:
		p = append(p, fmt.Sprintf("exit %d", b.rc))
	}
	p = append(p, b.proto...)
	if !b.goTest || !b.ended || b.status != "" {
		return p
	}
	switch {
	case b.noTests:
		p = append(p, "ran no tests (testing: warning: no tests to run)")
	case len(b.ran) == 0 && len(b.skips) > 0:
		p = append(p, fmt.Sprintf("ran no tests (all %d skipped)", len(b.skips)))
	case len(b.ran) == 0:
		p = append(p, "ran no tests")
	}
	if b.rc == 0 {
		var missing []string
		for _, t := range b.started {
			if _, ok := b.results[t]; !ok && !slices.Contains(missing, t) {
				missing = append(missing, t)
			}
		}
		if len(missing) > 0 {
			p = append(p, "no result line for "+strings.Join(missing, ", ")+" (output garbled?)")
		}
		if len(b.failures) > 0 {
			p = append(p, "--- FAIL: "+strings.Join(b.failures, ", ")+" but exit 0")
		}
	}
	var bad []string
	for _, s := range b.skips {
		if s.allowed == "" {
			bad = append(bad, s.test)
		}
	}
	if len(bad) > 0 {
		p = append(p, "skipped in the VM: "+strings.Join(bad, ", "))
	}
	return p
}

var (
	// Unanchored: a test's output without a final newline runs into the
	// next line ("partial--- PASS: TestX (0.00s)").
	resultRe = regexp.MustCompile(`--- (PASS|FAIL|SKIP): (\S+)`)
	headerRe = regexp.MustCompile(`=== (RUN|CONT|NAME|PAUSE) +(\S+)`)
	// t.Log output under -test.v: four spaces, file:line, the message;
	// continuation lines are indented by eight.
	logRe       = regexp.MustCompile(`^ {4}(\S+\.go):[0-9]+: (.*)$`)
	benchNameRe = regexp.MustCompile(`^Benchmark\S*$`)
	benchLineRe = regexp.MustCompile(`^(Benchmark\S*?)(-[0-9]+)?\s+[0-9]+\s+[0-9.]+ `)
)

const noTestsWarning = "testing: warning: no tests to run"

// A failing test's last keptLogs log entries are repeated in the run's
// summary: CI keeps only the tail of a long log, and the summary is what
// it keeps. A long entry keeps its first keptHeadBytes and its last
// keptTailBytes: an entry that quotes a program's output has the
// verdict (a result line, an error) at its end, after the banner. The
// reports testkit's peers log as a failed test ends (peerLogFile: each program's output, then which
// ended first) are kept apart, keptPeerLogs of them after the test's own:
// a test with many peers would otherwise push its own error (what
// differed, what was expected) out of the summary.
const (
	keptLogs      = 3
	keptPeerLogs  = 1
	keptHeadBytes = 160
	keptTailBytes = 640
	peerLogFile   = "peer.go"
	cutMark       = " [...] "
)

// clip cuts a long log entry to its head and tail. It may be applied
// again as the entry grows: the head stays the entry's first bytes.
func clip(s string) string {
	if len(s) <= keptHeadBytes+len(cutMark)+keptTailBytes {
		return s
	}
	return s[:keptHeadBytes] + cutMark + s[len(s)-keptTailBytes:]
}

// failureLines names each failing test of r, innermost only (a parent
// fails with its subtest), with the last entries it logged.
func (r *kernelResult) failureLines() []string {
	var lines []string
	for _, b := range r.bins {
		for _, f := range b.failures {
			if slices.ContainsFunc(b.failures, func(g string) bool { return strings.HasPrefix(g, f+"/") }) {
				continue
			}
			lines = append(lines, fmt.Sprintf("FAIL %s %s", b.label, f))
			for _, l := range append(slices.Clone(b.tailLogs[f]), b.peerLogs[f]...) {
				lines = append(lines, "    "+clip(l))
			}
		}
	}
	return lines
}

// testLine takes one line of a go test binary's -test.v output.
func (b *binResult) testLine(line string) {
	if b.results == nil {
		b.results = map[string]string{}
		b.ran = map[string]bool{}
		b.lastLog = map[string]string{}
		b.tailLogs = map[string][]string{}
		b.peerLogs = map[string][]string{}
	}
	if strings.Contains(line, noTestsWarning) {
		b.noTests = true
	}
	if m := benchLineRe.FindStringSubmatch(line); m != nil {
		b.ran[m[1]] = true
		return
	}
	if benchNameRe.MatchString(line) {
		b.cur = line
		return
	}
	if m := logRe.FindStringSubmatch(line); m != nil {
		b.lastLog[b.cur] = m[2]
		b.logTest = b.cur
		tails, keep := b.tailLogs, keptLogs
		b.logPeer = m[1] == peerLogFile
		if b.logPeer {
			tails, keep = b.peerLogs, keptPeerLogs
		}
		logs := append(tails[b.cur], clip(m[2]))
		if len(logs) > keep {
			logs = logs[len(logs)-keep:]
		}
		tails[b.cur] = logs
		return
	}
	if strings.HasPrefix(line, "        ") && b.logTest == b.cur && b.lastLog[b.cur] != "" {
		b.lastLog[b.cur] += " " + strings.TrimSpace(line)
		tails := b.tailLogs
		if b.logPeer {
			tails = b.peerLogs
		}
		if logs := tails[b.cur]; len(logs) > 0 {
			logs[len(logs)-1] = clip(logs[len(logs)-1] + " " + strings.TrimSpace(line))
		}
		return
	}
	b.logTest = ""
	if m := headerRe.FindStringSubmatch(line); m != nil {
		b.cur = m[2]
		if m[1] == "RUN" {
			b.started = append(b.started, m[2])
		}
		return
	}
	m := resultRe.FindStringSubmatch(line)
	if m == nil {
		return
	}
	name := m[2]
	b.results[name] = m[1]
	switch m[1] {
	case "SKIP":
		if !slices.ContainsFunc(b.skips, func(s skipped) bool { return s.test == name }) {
			b.skips = append(b.skips, skipped{test: name, reason: b.lastLog[name]})
		}
	case "FAIL":
		b.failures = append(b.failures, name)
		if !strings.Contains(name, "/") {
			b.ran[name] = true
		}
	case "PASS":
		if !strings.Contains(name, "/") {
			b.ran[name] = true
		}
	}
}

// markerLine is one parsed marker (the text after the per-run tag).
type markerLine struct {
	kind  string // BOOT SETUP-OK SETUP-FAIL BEGIN END DONE POWEROFF
	label string // BEGIN, END; POWEROFF: the host ("B")
	rc    int    // END
	text  string // SETUP-FAIL, BOOT
}

var (
	// BEGIN and END end with ';', so that kernel messages the console
	// appends to the line cannot change the label or the exit status.
	beginRe = regexp.MustCompile(`^BEGIN ([^\s;]+);`)
	endRe   = regexp.MustCompile(`^END ([^\s;]+) rc=(0|[1-9][0-9]{0,2});`)
)

// parseMarker parses s, the text after the marker tag. It accepts only the
// forms the guest prints; text after a complete BEGIN or END (after its
// ';') is ignored.
func parseMarker(s string) (markerLine, error) {
	kw, rest, _ := strings.Cut(s, " ")
	switch {
	case kw == "BEGIN":
		if m := beginRe.FindStringSubmatch(s); m != nil {
			return markerLine{kind: "BEGIN", label: m[1]}, nil
		}
	case kw == "END":
		if m := endRe.FindStringSubmatch(s); m != nil {
			rc, _ := strconv.Atoi(m[2])
			if rc <= 255 {
				return markerLine{kind: "END", label: m[1], rc: rc}, nil
			}
		}
	case kw == "SETUP-FAIL":
		return markerLine{kind: kw, text: rest}, nil
	case kw == "BOOT":
		return markerLine{kind: kw, text: rest}, nil
	case strings.HasPrefix(s, "SETUP-OK"):
		return markerLine{kind: "SETUP-OK"}, nil
	case strings.HasPrefix(s, "DONE"):
		return markerLine{kind: "DONE"}, nil
	case kw == "POWEROFF":
		// testkit.Host.PowerOff: only host B, and the ';' ends it.
		if strings.HasPrefix(s, "POWEROFF B;") {
			return markerLine{kind: kw, label: "B"}, nil
		}
	}
	return markerLine{}, fmt.Errorf("unparsable marker line %q", s)
}

// console follows the guest's serial console: it echoes it, tracks the
// markers and each test binary's output, and fills in a kernelResult.
type console struct {
	marker string
	res    *kernelResult
	w      io.Writer
	echo   bool
	start  time.Time
	cur    *binResult
	tail   []string
	allow  []allowedSkip
}

func newConsole(res *kernelResult, w io.Writer, verbose bool, start time.Time) *console {
	return &console{marker: marker, res: res, w: w, echo: verbose, start: start, allow: vmSkipAllowlist}
}

func (c *console) bin(label string) *binResult {
	for _, b := range c.res.bins {
		if b.label == label {
			return b
		}
	}
	return nil
}

// line takes one console line.
func (c *console) line(raw string) {
	line := ansiRe.ReplaceAllString(strings.TrimRight(raw, "\r"), "")
	c.tail = append(c.tail, line)
	if len(c.tail) > tailLines {
		c.tail = c.tail[1:]
	}
	c.res.oops.line(line)
	if panicRe.MatchString(line) {
		c.res.panicked = true
		c.echo = true
	}
	i := strings.Index(line, c.marker)
	if i < 0 {
		c.output(line)
		return
	}
	if i > 0 {
		c.output(line[:i])
	}
	m, err := parseMarker(line[i+len(c.marker):])
	if err != nil {
		c.protoErr(err.Error())
		// An END we cannot read still ends the binary that was running:
		// its status is unknown, which fails it.
		if c.cur != nil && strings.HasPrefix(line[i+len(c.marker):], "END") {
			c.cur.status = line[i+len(c.marker):]
			c.cur.ended = true
			fmt.Fprintf(c.w, "rxevm: --- %s: FAIL (unparsable status line)\n", c.cur.label)
			c.cur = nil
		}
		return
	}
	switch m.kind {
	case "SETUP-OK":
		c.res.setupOK = true
		c.res.boot = time.Since(c.start)
		c.echo = true
		if c.res.host == "" {
			fmt.Fprintf(c.w, "rxevm: guest ready after %.1fs (rxe0 on d0, rxelo on lo)\n", c.res.boot.Seconds())
		} else {
			fmt.Fprintf(c.w, "rxevm: host %s ready after %.1fs (rxe0 on d0, rxelo on lo, %s on %s)\n", c.res.host, c.res.boot.Seconds(), testkit.WireDev, testkit.WireNetdev)
		}
	case "SETUP-FAIL":
		c.res.setupErr = m.text
		if c.res.setupErr == "" {
			c.res.setupErr = "(no reason given)"
		}
	case "BEGIN":
		b := c.bin(m.label)
		switch {
		case b == nil:
			c.protoErr(fmt.Sprintf("BEGIN for %s, which is not one of this run's binaries", m.label))
			return
		case b.began:
			b.proto = append(b.proto, "started twice")
		}
		if c.cur != nil && c.cur != b {
			c.cur.proto = append(c.cur.proto, "no END marker before "+b.label+" began")
		}
		b.began = true
		c.cur = b
		fmt.Fprintf(c.w, "rxevm: --- %s\n", b.label)
	case "END":
		b := c.cur
		if b == nil || b.label != m.label {
			c.protoErr(fmt.Sprintf("END for %s, which is not the binary running", m.label))
			if o := c.bin(m.label); o != nil {
				o.proto = append(o.proto, "END marker out of order")
			}
			return
		}
		b.ended = true
		b.rc = m.rc
		c.cur = nil
		st := "ok"
		if p := b.problems(); len(p) > 0 {
			st = "FAIL (" + strings.Join(p, "; ") + ")"
		}
		fmt.Fprintf(c.w, "rxevm: --- %s: %s\n", b.label, st)
	case "DONE":
		c.res.done = true
	case "POWEROFF":
		switch {
		case c.res.powerOff == nil:
			c.protoErr("POWEROFF B from a guest that cannot ask for it (only host A of a two-host run can)")
		case c.cur == nil || !c.cur.goTest:
			c.protoErr("POWEROFF B outside a test binary")
		case c.res.powerOffBy != "":
			c.protoErr("POWEROFF B asked again (by " + c.cur.label + " " + c.cur.cur + "; " + c.res.powerOffBy + " asked first)")
		default:
			c.res.powerOffBy = c.cur.label + " " + c.cur.cur
			fmt.Fprintf(c.w, "rxevm: %s asks to power off host B\n", c.res.powerOffBy)
			c.res.powerOff <- c.res.powerOffBy
		}
	}
}

func (c *console) protoErr(s string) {
	c.res.protoErrs = append(c.res.protoErrs, s)
	fmt.Fprintf(c.w, "rxevm: console: %s\n", s)
}

func (c *console) output(line string) {
	if c.echo {
		fmt.Fprintln(c.w, line)
	}
	if c.cur != nil && c.cur.goTest {
		c.cur.testLine(line)
		for i := range c.cur.skips {
			if s := &c.cur.skips[i]; !s.judged {
				s.judged = true
				s.allowed = allowSkip(c.allow, c.res.short, c.cur.label, s.test, s.reason)
			}
		}
	}
}

// splitSkip is a test that skipped on one kernel as a test of another
// (testkit.OneKernel).
type splitSkip struct {
	pkg, test string
	on        testkit.Kernel
}

// split returns the kernel an allowed skip of testkit.OneKernel names,
// and whether s is one.
func (s skipped) split() (testkit.Kernel, bool) {
	k, ok := testkit.SplitKernel(s.reason)
	return k, ok && s.allowed != ""
}

// splitSkips lists r's allowed skips of testkit.OneKernel.
func (r *kernelResult) splitSkips() []splitSkip {
	var l []splitSkip
	for _, b := range r.bins {
		for _, s := range b.skips {
			if k, ok := s.split(); ok {
				l = append(l, splitSkip{pkg: b.label, test: s.test, on: k})
			}
		}
	}
	return l
}

// passed reports whether test of pkg passed in r.
func (r *kernelResult) passed(pkg, test string) bool {
	for _, b := range r.bins {
		if b.label == pkg && b.results[test] == "PASS" {
			return true
		}
	}
	return false
}

// printSkips lists every test that skipped in the VM, allowed or not.
func (r *kernelResult) printSkips(w io.Writer) {
	var n, bad int
	for _, b := range r.bins {
		for _, s := range b.skips {
			n++
			if s.allowed == "" {
				bad++
			}
		}
	}
	if n == 0 {
		return
	}
	fmt.Fprintf(w, "rxevm: kernel %s: %d tests skipped in the VM, %d not on the allowlist:\n", r.short, n, bad)
	// testkit.OneKernel's skips, allowed and checked on the other kernel
	// (checkSplits), in a line per kernel they run on.
	split := map[testkit.Kernel][]string{}
	for _, sp := range r.splitSkips() {
		split[sp.on] = append(split[sp.on], strings.TrimPrefix(sp.pkg, mod)+"."+sp.test)
	}
	for _, k := range slices.Sorted(maps.Keys(split)) {
		fmt.Fprintf(w, "rxevm:   SKIP %d tests split to %s (testkit.OneKernel; allowed, and checked there): %s\n",
			len(split[k]), k, strings.Join(split[k], " "))
	}
	for _, b := range r.bins {
		for _, s := range b.skips {
			if _, ok := s.split(); ok {
				continue
			}
			reason := s.reason
			if reason == "" {
				reason = "(no reason given)"
			}
			verdict := "allowed: " + s.allowed
			switch {
			case s.allowed != "":
			case strings.Contains(s.reason, testkit.SkipMessage):
				verdict = "NOT ALLOWED: RequireVM skipped inside the VM (the guest did not set PUREVERBS_VM=1)"
			default:
				verdict = "NOT ALLOWED: not on the allowlist (internal/testkit/cmd/rxevm/allowlist.go)"
			}
			fmt.Fprintf(w, "rxevm:   SKIP %s %s: %s\n", b.label, s.test, reason)
			fmt.Fprintf(w, "rxevm:        %s\n", verdict)
		}
	}
}
