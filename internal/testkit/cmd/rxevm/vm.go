package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// marker starts every line the guest's init and run script print for the
// host. main adds a random tag per run so that test output quoting markers
// (this package's own tests do) cannot be mistaken for them.
var marker = "@@PUREVERBS "

// panicRe matches the kernel's panic line (printk timestamp included, so a
// test merely printing the words does not match).
var panicRe = regexp.MustCompile(`^\[\s*[0-9]+\.[0-9]+\] Kernel panic - not syncing`)

const tailLines = 60

// ansiRe matches the terminal control sequences SeaBIOS and the kernel emit.
var ansiRe = regexp.MustCompile(`\x1b(\[[0-9;?]*[A-Za-z]|c)`)

type kernelResult struct {
	kernel   string // release, e.g. 6.1.0-57-amd64
	short    string // as given to -kernel: 6.1, 6.12
	host     string // -hosts 2: "A" or "B"; "" for the single guest
	prepErr  error
	setupOK  bool
	setupErr string
	done     bool
	panicked bool
	oops     oops // the first oops on the console, named with KERNEL PANIC
	timedOut bool
	qemuErr  error
	stopped  string // -hosts 2: why the runner stopped this guest (the other one died)
	// -hosts 2, host A: POWEROFF B requests go to powerOff (buffered:
	// one is accepted per run), powerOffBy names the test that asked.
	powerOff   chan string
	powerOffBy string
	// -hosts 2, host B: the runner powered it off at host A's request
	// (which test's): it is not expected to finish.
	poweredOff string
	protoErrs  []string      // console markers that could not be parsed or came out of order
	bins       []*binResult  // every program the guest was to run, in order
	boot       time.Duration // qemu start to SETUP-OK
}

// newKernelResult expects a report from every test binary of p (and the
// demo or shell command).
func newKernelResult(short string, p *payload, o *options) *kernelResult {
	r := &kernelResult{short: short}
	for _, t := range p.tests {
		r.bins = append(r.bins, &binResult{label: t.label, goTest: true})
	}
	if o.demo {
		r.bins = append(r.bins, &binResult{label: "demo"})
	}
	if o.shellCmd != "" {
		r.bins = append(r.bins, &binResult{label: "shell-cmd"})
	}
	return r
}

func (r *kernelResult) ok() bool {
	if r.prepErr != nil || !r.setupOK || (!r.done && r.poweredOff == "") || r.panicked || r.timedOut || r.qemuErr != nil ||
		r.setupErr != "" || r.stopped != "" || len(r.protoErrs) > 0 || len(r.bins) == 0 {
		return false
	}
	for _, b := range r.bins {
		if r.cutOff(b) {
			continue
		}
		if len(b.problems()) > 0 {
			return false
		}
	}
	return true
}

// cutOff reports whether b is a program that the requested power-off of
// the guest ended: it began and was still running, nothing else wrong.
func (r *kernelResult) cutOff(b *binResult) bool {
	return r.poweredOff != "" && !r.done && b.began && !b.ended && len(b.proto) == 0
}

// guestDied reports a failure of the guest itself (as opposed to a failing
// test): setup failure, panic, timeout, or no end marker.
func (r *kernelResult) guestDied() bool {
	return r.prepErr == nil && (r.setupErr != "" || r.panicked || r.timedOut || !r.setupOK || (!r.done && r.poweredOff == "") || r.stopped != "")
}

func (r *kernelResult) String() string {
	var parts []string
	if r.kernel != "" {
		parts = append(parts, r.kernel)
	}
	switch {
	case r.prepErr != nil:
		parts = append(parts, "prepare failed: "+r.prepErr.Error())
	case r.setupErr != "":
		parts = append(parts, "guest setup failed: "+r.setupErr)
	}
	if r.panicked {
		if d := r.oops.String(); d != "" {
			parts = append(parts, "KERNEL PANIC ("+d+")")
		} else {
			parts = append(parts, "KERNEL PANIC")
		}
	}
	if r.timedOut {
		parts = append(parts, "TIMEOUT")
	}
	if r.qemuErr != nil {
		parts = append(parts, "qemu: "+r.qemuErr.Error())
	}
	if r.stopped != "" {
		parts = append(parts, "stopped by the runner: "+r.stopped)
	}
	if r.poweredOff != "" {
		parts = append(parts, "powered off by the runner at the request of "+r.poweredOff)
	}
	if r.setupOK {
		parts = append(parts, fmt.Sprintf("boot+setup %.1fs", r.boot.Seconds()))
	}
	if r.prepErr != nil {
		return strings.Join(parts, "; ")
	}
	var failed []string
	tests, skips, cut := 0, 0, 0
	for _, b := range r.bins {
		if r.cutOff(b) {
			parts = append(parts, b.label+" cut off by the power-off")
			cut++
		} else if p := b.problems(); len(p) > 0 {
			failed = append(failed, b.label+" ("+strings.Join(p, "; ")+")")
		}
		tests += len(b.ran)
		skips += len(b.skips)
	}
	if len(failed) > 0 {
		parts = append(parts, "failed: "+strings.Join(failed, ", "))
	} else if len(r.bins) > cut {
		parts = append(parts, fmt.Sprintf("%d ok", len(r.bins)-cut))
	}
	if tests > 0 || skips > 0 {
		parts = append(parts, fmt.Sprintf("%d tests ran, %d skipped", tests, skips))
	}
	if len(r.protoErrs) > 0 {
		parts = append(parts, "console: "+strings.Join(r.protoErrs, "; "))
	}
	if r.setupOK && !r.done && !r.panicked && !r.timedOut && r.stopped == "" && r.poweredOff == "" {
		parts = append(parts, "guest stopped before the end marker")
	}
	return strings.Join(parts, "; ")
}

func runKernel(ctx context.Context, o *options, k kernelSpec, p *payload, work string, w io.Writer) *kernelResult {
	res := bootKernel(ctx, o, k, p, work, w)
	if res.bootPanic() && ctx.Err() == nil {
		fmt.Fprintf(w, "rxevm: kernel %s panicked while booting, before its setup finished and before any program ran (the emulated machine, not a test): booting it once more\n", k.short)
		res = bootKernel(ctx, o, k, p, work, w)
	}
	return res
}

// bootPanic reports a guest kernel that panicked while booting: before
// the guest's setup finished and before any program of ours ran. That is
// the emulator, not the code under test (seen once in several hundred
// TCG boots of 6.12: an int3 oops in sched_clock_cpu while the kernel
// patched its own text at 2.6 s), so runKernel boots once more; a second
// panic fails the run as any panic does.
func (r *kernelResult) bootPanic() bool {
	if !r.panicked || r.setupOK || r.prepErr != nil {
		return false
	}
	for _, b := range r.bins {
		if b.began {
			return false
		}
	}
	return true
}

// bootKernel boots one guest with kernel k and runs the payload in it.
func bootKernel(ctx context.Context, o *options, k kernelSpec, p *payload, work string, w io.Writer) *kernelResult {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	res := newKernelResult(k.short, p, o)
	fmt.Fprintf(w, "rxevm: === kernel %s ===\n", k.short)
	a, err := prepareKernel(ctx, o, k)
	if err != nil {
		res.prepErr = err
		return res
	}
	res.kernel = a.release
	initrd := filepath.Join(work, "initrd-"+k.short)
	if err := makeInitrd(ctx, a.base, p.overlay, initrd); err != nil {
		res.prepErr = err
		return res
	}
	args := qemuArgs(o, a, initrd, "")
	if o.verbose {
		fmt.Fprintln(w, "rxevm: qemu-system-x86_64", strings.Join(args, " "))
	}
	cmd := exec.CommandContext(ctx, "qemu-system-x86_64", args...)
	cmd.Stdin = nil
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.StdoutPipe()
	if err != nil {
		res.prepErr = err
		return res
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		res.prepErr = err
		return res
	}
	fmt.Fprintf(w, "rxevm: booting %s (TCG, usually 5-15 s to set up)\n", a.release)
	tail := follow(out, w, o.verbose, res, start)
	werr := cmd.Wait()
	if ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		res.timedOut = true
	}
	if werr != nil && !res.timedOut && ctx.Err() == nil {
		res.qemuErr = werr
	}
	if !res.ok() {
		if res.timedOut {
			fmt.Fprintf(w, "rxevm: kernel %s: timed out after %s\n", k.short, o.timeout)
		}
		if res.qemuErr != nil {
			fmt.Fprintf(w, "rxevm: qemu: %v\n", res.qemuErr)
		}
	}
	res.printSkips(w)
	if !res.ok() && res.guestDied() {
		fmt.Fprintf(w, "rxevm: ---- guest console tail (last %d lines, kernel %s) ----\n", len(tail), a.release)
		for _, l := range tail {
			fmt.Fprintln(w, "| "+l)
		}
		fmt.Fprintln(w, "rxevm: ---- end of guest console tail ----")
	}
	return res
}

// bootArgs is the kernel command line of every guest.
const bootArgs = "console=ttyS0 panic=-1 oops=panic quiet tsc=reliable clocksource=tsc"

// qemuArgs is the QEMU command line of a guest booting a's kernel with
// initrd; extraBoot is added to the kernel command line, extra (NIC
// options) to QEMU's.
func qemuArgs(o *options, a *kernelAssets, initrd, extraBoot string, extra ...string) []string {
	boot := bootArgs
	for _, x := range []string{o.bootArgs, extraBoot} {
		if x != "" {
			boot += " " + x
		}
	}
	args := []string{
		"-accel", "tcg,thread=multi", "-cpu", o.cpuModel(), "-smp", strconv.Itoa(o.smp), "-m", strconv.Itoa(o.memMB),
		"-nographic", "-monitor", "none", "-serial", "stdio", "-no-reboot", "-nic", "none",
		"-kernel", a.vmlinuz, "-initrd", initrd,
		"-append", boot,
	}
	return append(args, extra...)
}

// defaultCPU is the guests' CPU: every feature TCG emulates but ERMS
// (enhanced REP MOVSB) and FSRM (fast short REP MOVSB). With ERMS 6.1
// copies memory with REP MOVSB (its memcpy and copy to and from user
// space), which TCG executes one byte per round of its loop, against
// eight with the REP MOVSQ it uses otherwise: the same tests ran 15 %
// longer on 6.1 (the whole 6.1 suite took 17 % less in CI75, the halved
// tables a part of it). 6.12 copies with REP MOVSB only when FSRM is
// there, and measured the same either way on QEMU 7.2 (Debian 12), whose
// TCG does not offer FSRM (it warns and drops fsrm=on).
//
// QEMU 10 (Debian 13) does offer it, and max turns it on. FSRM without
// ERMS hangs 6.1 early in boot (after "LSM: Security Framework
// initializing", the same with -cpu qemu64,+fsrm; qemu64,+fsrm,+erms
// boots): its __memmove drops the short-copy check when FSRM is there
// but takes the REP MOVSB path only with ERMS, so a copy of under 32
// bytes runs away (Linux fixed it in 6.4, "x86/lib/memmove: Decouple
// ERMS from FSRM"). fsrm=off keeps both kernels' copies as they are on
// QEMU 7.2, which accepts it silently. docs/testing.md.
const defaultCPU = "max,erms=off,fsrm=off"

// cpuModel is -cpu's argument: defaultCPU unless an experiment asks
// otherwise.
func (o *options) cpuModel() string {
	if o.cpu == "" {
		return defaultCPU
	}
	return o.cpu
}

// follow reads the console until EOF, echoing it and updating res from the
// markers and the test output. It returns the last tailLines lines.
func follow(r io.Reader, w io.Writer, verbose bool, res *kernelResult, start time.Time) []string {
	c := newConsole(res, w, verbose, start)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		c.line(sc.Text())
	}
	if err := sc.Err(); err != nil {
		c.protoErr("reading the console: " + err.Error())
	}
	return c.tail
}

// makeInitrd concatenates the cached base archive and the per-run overlay.
func makeInitrd(ctx context.Context, base, overlayDir, dst string) error {
	ov := dst + ".overlay.cpio.gz"
	if err := makeCpio(ctx, overlayDir, ov); err != nil {
		return err
	}
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	for _, f := range []string{base, ov} {
		in, err := os.Open(f)
		if err != nil {
			out.Close()
			return err
		}
		_, err = io.Copy(out, in)
		in.Close()
		if err != nil {
			out.Close()
			return err
		}
	}
	return out.Close()
}
