package main

import (
	"regexp"
	"strings"
)

// oops digests the first kernel oops on a guest's console: what CI keeps
// of a failed run is the summary, and a panic's console tail scrolls
// its call trace out of sight, so the summary names the oops, the task,
// where it hit and the first frames of its trace.
type oops struct {
	head    string   // "general protection fault, ...", "BUG: ...", ...
	comm    string   // the task that was running (swapper/N: an interrupt on an idle CPU)
	rip     string   // the function it hit in
	frames  []string // the reliable frames of the first call trace, innermost first
	inTrace bool
	done    bool // the first trace has ended: later oopses are ignored
}

// A WARNING is not among the heads: it does not panic the guest, and a
// later oops is the one that did.
//
// oopsFrames is how many frames the digest keeps.
const oopsFrames = 8

var (
	kmsgRe     = regexp.MustCompile(`^\[\s*[0-9]+\.[0-9]+\] (.*)$`)
	oopsHeadRe = regexp.MustCompile(`^(BUG: |general protection fault|Oops: |kernel BUG at |invalid opcode: |stack segment: |divide error: |Unable to handle |watchdog: BUG: )`)
	oopsCommRe = regexp.MustCompile(`^CPU: [0-9]+ (?:UID: [0-9]+ )?PID: [0-9]+ Comm: (\S+)`)
	oopsRIPRe  = regexp.MustCompile(`^RIP: [0-9a-f]{4}:(\S+?)(?:/0x[0-9a-f]+)?$`)
	// A frame: " func+0x12/0x34 [module]"; "? func" frames are guesses
	// from stale stack words and are left out.
	oopsFrameRe = regexp.MustCompile(`^\s*([A-Za-z0-9_.$]+\+0x[0-9a-f]+)(?:/0x[0-9a-f]+)?(?: \[([A-Za-z0-9_]+)\])?\s*$`)
)

// line takes one console line (control sequences removed).
func (o *oops) line(line string) {
	if o.done {
		return
	}
	m := kmsgRe.FindStringSubmatch(line)
	if m == nil {
		return
	}
	s := m[1]
	if o.head == "" {
		if oopsHeadRe.MatchString(s) {
			o.head = clipWords(s, 100)
		}
		return
	}
	switch t := strings.TrimSpace(s); {
	case o.comm == "" && oopsCommRe.MatchString(s):
		o.comm = oopsCommRe.FindStringSubmatch(s)[1]
	case o.rip == "" && oopsRIPRe.MatchString(s):
		o.rip = oopsRIPRe.FindStringSubmatch(s)[1]
	case t == "Call Trace:":
		o.inTrace = true
	case !o.inTrace:
	case t == "<IRQ>" || t == "</IRQ>" || t == "<TASK>" || t == "<NMI>" || t == "</NMI>" || strings.HasPrefix(t, "? "):
	case oopsFrameRe.MatchString(s):
		if len(o.frames) < oopsFrames {
			f := oopsFrameRe.FindStringSubmatch(s)
			if f[2] != "" {
				f[1] += " [" + f[2] + "]"
			}
			o.frames = append(o.frames, f[1])
		}
	default: // </TASK>, "Modules linked in:", a user RIP: the trace is over
		o.inTrace, o.done = false, true
	}
}

// String is the digest: empty when no oops was seen.
func (o *oops) String() string {
	if o.head == "" {
		return ""
	}
	parts := []string{o.head}
	if o.comm != "" {
		parts = append(parts, "task "+o.comm)
	}
	if o.rip != "" {
		parts = append(parts, "at "+o.rip)
	}
	if len(o.frames) > 0 {
		parts = append(parts, "trace "+strings.Join(o.frames, " < "))
	}
	return strings.Join(parts, "; ")
}

// clipWords cuts s to about n bytes at a space.
func clipWords(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if i := strings.LastIndexByte(s[:n], ' '); i > n/2 {
		return s[:i] + " …"
	}
	return s[:n] + "…"
}
