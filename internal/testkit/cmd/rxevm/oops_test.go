package main

import (
	"io"
	"strings"
	"testing"
	"time"
)

// TestOopsDigest: a guest that panics after an oops is summarised with the
// oops's head, task, faulting function and first reliable frames ("?"
// guesses left out), and the test that was running on the guest.
func TestOopsDigest(t *testing.T) {
	gpf := []string{
		"[   52.4601] Oops: general protection fault, probably for non-canonical address 0xdead4ead00000001: 0000 [#1] PREEMPT SMP NOPTI",
		"[   52.4602] CPU: 1 UID: 0 PID: 0 Comm: swapper/1 Not tainted 6.12.107+deb12-amd64 #1  Debian 6.12.107-1",
		"[   52.4603] Hardware name: QEMU Standard PC (i440FX + PIIX, 1996), BIOS 1.16.2-debian-1.16.2-1 04/01/2014",
		"[   52.4604] RIP: 0010:__kmalloc_node_track_caller_noprof+0xd5/0x440",
		"[   52.4605] Code: 48 c7 45 c0 00 00 00 00 <49> 8b 04 24",
		"[   52.4606] RSP: 0018:ff5d475e80767c40 EFLAGS: 00010206",
		"[   52.4607] Call Trace:",
		"[   52.4608]  <IRQ>",
		"[   52.4609]  ? die_addr+0x3c/0x60",
		"[   52.4610]  ? exc_general_protection+0x1a1/0x400",
		"[   52.4611]  kmalloc_reserve+0x6c/0x110",
		"[   52.4612]  __alloc_skb+0xa6/0x190",
		"[   52.4613]  e1000_alloc_rx_buffers+0x1bb/0x270 [e1000]",
		"[   52.4614]  e1000_clean_rx_irq+0x2e0/0x3d0 [e1000]",
		"[   52.4615]  </IRQ>",
		"[   52.4616]  <TASK>",
		"[   52.4617]  default_idle_call+0x30/0x100",
		"[   52.4618]  </TASK>",
		"[   52.4619] Modules linked in: rdma_rxe(E) e1000(E)",
		"[   52.4620] ---[ end trace 0000000000000000 ]---",
		"[   52.4621] RIP: 0010:somewhere_else+0x1/0x2",
		"[   52.4622] BUG: a second report is not the first",
		"[   52.4638] Kernel panic - not syncing: Fatal exception in interrupt",
	}
	var o oops
	for _, l := range gpf {
		o.line(l)
	}
	want := "Oops: general protection fault, probably for non-canonical address 0xdead4ead00000001: 0000 [#1] …; task swapper/1; " +
		"at __kmalloc_node_track_caller_noprof+0xd5; trace kmalloc_reserve+0x6c < __alloc_skb+0xa6 < e1000_alloc_rx_buffers+0x1bb [e1000] < " +
		"e1000_clean_rx_irq+0x2e0 [e1000] < default_idle_call+0x30"
	if got := o.String(); got != want {
		t.Errorf("digest\n got %q\nwant %q", got, want)
	}

	var none oops
	for _, l := range []string{"[    1.0] Run /init as init process", "general protection fault (no timestamp: a program's words)", "[    2.0] ok"} {
		none.line(l)
	}
	if got := none.String(); got != "" {
		t.Errorf("no oops: digest %q", got)
	}

	// On the console: the summary carries the digest, and the binary that
	// did not end names the test it was in.
	r := newKernelResult("6.12", &payload{tests: []testBinary{{label: "pkg/a"}}}, &options{})
	l := lines(boot, []string{m + "BEGIN pkg/a;", "=== RUN   TestFirst", "--- PASS: TestFirst (0.01s)", "=== RUN   TestPingPong",
		"=== RUN   TestPingPong/rc", "--- PASS: TestPingPong/rc (0.50s)", "=== RUN   TestPingPong/ud"}, gpf)
	follow(strings.NewReader(strings.Join(l, "\r\n")), io.Discard, false, r, time.Now())
	s := r.String()
	for _, w := range []string{"KERNEL PANIC (Oops: general protection fault", "task swapper/1", "trace kmalloc_reserve+0x6c <",
		"no end marker: guest died during TestPingPong/ud"} {
		if !strings.Contains(s, w) {
			t.Errorf("summary lacks %q: %s", w, s)
		}
	}
}
