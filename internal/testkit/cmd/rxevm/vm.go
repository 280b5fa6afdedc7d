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

type binResult struct {
	label string
	rc    int
	ended bool
}

type kernelResult struct {
	kernel   string
	prepErr  error
	setupOK  bool
	setupErr string
	done     bool
	panicked bool
	timedOut bool
	qemuErr  error
	bins     []binResult
	boot     time.Duration // qemu start to SETUP-OK
}

func (r *kernelResult) ok() bool {
	if r.prepErr != nil || !r.setupOK || !r.done || r.panicked || r.timedOut {
		return false
	}
	for _, b := range r.bins {
		if !b.ended || b.rc != 0 {
			return false
		}
	}
	return true
}

// guestDied reports a failure of the guest itself (as opposed to a failing
// test): setup failure, panic, timeout, or no end marker.
func (r *kernelResult) guestDied() bool {
	return r.prepErr == nil && (r.setupErr != "" || r.panicked || r.timedOut || !r.setupOK || !r.done)
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
		parts = append(parts, "KERNEL PANIC")
	}
	if r.timedOut {
		parts = append(parts, "TIMEOUT")
	}
	if r.setupOK {
		parts = append(parts, fmt.Sprintf("boot+setup %.1fs", r.boot.Seconds()))
	}
	var failed []string
	for _, b := range r.bins {
		switch {
		case !b.ended:
			failed = append(failed, b.label+" (no end marker: guest died)")
		case b.rc != 0:
			failed = append(failed, fmt.Sprintf("%s (exit %d)", b.label, b.rc))
		}
	}
	if len(failed) > 0 {
		parts = append(parts, "failed: "+strings.Join(failed, ", "))
	} else if len(r.bins) > 0 {
		parts = append(parts, fmt.Sprintf("%d ok", len(r.bins)))
	}
	if r.prepErr == nil && r.setupOK && !r.done && !r.panicked && !r.timedOut {
		parts = append(parts, "guest stopped before the end marker")
	}
	return strings.Join(parts, "; ")
}

func runKernel(ctx context.Context, o *options, k kernelSpec, p *payload, work string) *kernelResult {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	res := &kernelResult{}
	fmt.Printf("rxevm: === kernel %s ===\n", k.short)
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
	args := []string{
		"-accel", "tcg,thread=multi", "-cpu", "max", "-smp", "2", "-m", strconv.Itoa(o.memMB),
		"-nographic", "-monitor", "none", "-serial", "stdio", "-no-reboot", "-nic", "none",
		"-kernel", a.vmlinuz, "-initrd", initrd,
		"-append", "console=ttyS0 panic=-1 oops=panic quiet",
	}
	if o.verbose {
		fmt.Println("rxevm: qemu-system-x86_64", strings.Join(args, " "))
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
	fmt.Printf("rxevm: booting %s (TCG, usually 5-15 s to set up)\n", a.release)
	tail := follow(out, os.Stdout, o.verbose, res, start)
	werr := cmd.Wait()
	if ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		res.timedOut = true
	}
	if werr != nil && !res.timedOut && ctx.Err() == nil {
		res.qemuErr = werr
	}
	if !res.ok() {
		if res.timedOut {
			fmt.Printf("rxevm: kernel %s: timed out after %s\n", k.short, o.timeout)
		}
		if res.qemuErr != nil {
			fmt.Printf("rxevm: qemu: %v\n", res.qemuErr)
		}
	}
	if !res.ok() && res.guestDied() {
		fmt.Printf("rxevm: ---- guest console tail (last %d lines, kernel %s) ----\n", len(tail), a.release)
		for _, l := range tail {
			fmt.Println("| " + l)
		}
		fmt.Println("rxevm: ---- end of guest console tail ----")
	}
	return res
}

// follow reads the console until EOF, echoing it and updating res from the
// markers. It returns the last tailLines lines.
func follow(r io.Reader, w io.Writer, verbose bool, res *kernelResult, start time.Time) []string {
	var tail []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	echo := verbose
	for sc.Scan() {
		line := ansiRe.ReplaceAllString(strings.TrimRight(sc.Text(), "\r"), "")
		tail = append(tail, line)
		if len(tail) > tailLines {
			tail = tail[1:]
		}
		if panicRe.MatchString(line) {
			res.panicked = true
			echo = true
		}
		i := strings.Index(line, marker)
		if i < 0 {
			if echo {
				fmt.Fprintln(w, line)
			}
			continue
		}
		if i > 0 && echo {
			fmt.Fprintln(w, line[:i])
		}
		f := strings.Fields(line[i+len(marker):])
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "SETUP-OK":
			res.setupOK = true
			res.boot = time.Since(start)
			echo = true
			fmt.Fprintf(w, "rxevm: guest ready after %.1fs (rxe0 on d0, rxelo on lo)\n", res.boot.Seconds())
		case "SETUP-FAIL":
			res.setupErr = strings.Join(f[1:], " ")
		case "BEGIN":
			if len(f) > 1 {
				res.bins = append(res.bins, binResult{label: f[1]})
				fmt.Fprintf(w, "rxevm: --- %s\n", f[1])
			}
		case "END":
			if len(f) > 2 && len(res.bins) > 0 {
				b := &res.bins[len(res.bins)-1]
				b.ended = true
				b.rc, _ = strconv.Atoi(strings.TrimPrefix(f[2], "rc="))
				st := "ok"
				if b.rc != 0 {
					st = fmt.Sprintf("FAIL (exit %d)", b.rc)
				}
				fmt.Fprintf(w, "rxevm: --- %s: %s\n", b.label, st)
			}
		case "DONE":
			res.done = true
		default:
			if verbose {
				fmt.Fprintln(w, line)
			}
		}
	}
	return tail
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
