package testkit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// LeakSettle is how long a leak check waits for what a test released to
// be gone (goroutines to return, the kernel to free objects of a closed
// file) before it reports a leak.
const LeakSettle = 10 * time.Second

// LeakCheck records what the process and the kernel hold now and, when
// the test ends (after every cleanup registered later, so after the
// test's own), fails the test if anything more is held then:
//
//   - goroutines: each goroutine started since and still running is
//     reported with its stack (the runtime's own and os/signal's are not
//     counted);
//   - file descriptors: /proc/self/fd, each new one named by its target
//     (an *os.File dropped without Close counts: no garbage collection
//     runs until the fds agree, so its finalizer cannot close it);
//   - mappings: the lines of /proc/self/maps that map a /dev/infiniband
//     node (the rings of CQs, QPs and SRQs);
//   - what the functions given to CheckLeaksPerTest list: internal/sys's
//     traced fds, mappings and buffers, each with the stack that created
//     it (testkit cannot import internal/sys, whose tests import testkit);
//   - in the VM, the kernel's RDMA resource counts of every device
//     (`rdma resource show`: pd, cq, qp, mr, srq, ctx, ...).
//
// Releases that finish asynchronously (a goroutine that returns after the
// close that woke it, the kernel freeing a context once its last file
// reference is gone) get LeakSettle to finish. LeakCheck may be called
// more than once in a test; each call checks against its own start.
// It must not be used in tests that run in parallel with others
// (t.Parallel): their objects would count as this test's.
func LeakCheck(tb testing.TB) {
	tb.Helper()
	warmUp()
	base := takeSnapshot(InVM())
	tb.Cleanup(func() {
		if d := settle(base); d != "" {
			tb.Errorf("leak check: held after the test (waited %v):\n%s", settleFor, d)
		}
	})
}

// settleFor is LeakSettle; tests of LeakCheck shorten it.
var settleFor = LeakSettle

// perTest is set by CheckLeaksPerTest, traced its arguments.
var (
	traced    []func() []string
	perTest   atomic.Bool
	perTestMu sync.Mutex
	checked   = map[testing.TB]bool{}
)

// CheckLeaksPerTest makes every test of the package that calls RequireVM
// or RequireTwoHosts (every VM test does, directly or through this
// package's helpers: StartPeer, ThisHost, PeerHost, ...) run under
// LeakCheck, from the first of those calls on; call it from TestMain
// before m.Run. Benchmarks are not checked (their b.N rounds share
// cleanups). Host runs are unaffected: RequireVM skips there first.
//
// Every LeakCheck (these and others) also compares what each of list
// returns, one string per object held (sys.OpenFDs, sys.OpenMappings,
// sys.OpenBuffers with sys.EnableLeakTracing on).
func CheckLeaksPerTest(list ...func() []string) {
	traced = list
	perTest.Store(true)
}

// leakCheckOnce starts LeakCheck for tb the first time RequireVM or
// RequireTwoHosts is called for it, when CheckLeaksPerTest is on.
func leakCheckOnce(tb testing.TB) {
	if !perTest.Load() {
		return
	}
	if _, ok := tb.(*testing.T); !ok {
		return
	}
	perTestMu.Lock()
	seen := checked[tb]
	checked[tb] = true
	perTestMu.Unlock()
	if seen {
		return
	}
	tb.Helper()
	// Registered first, so it runs last: the forget below runs after
	// the check.
	tb.Cleanup(func() {
		perTestMu.Lock()
		delete(checked, tb)
		perTestMu.Unlock()
	})
	LeakCheck(tb)
}

// warmUp makes the runtime create what it creates once and keeps: the
// network poller's epoll fd and wake-up fd are opened on the first file
// registered with it, which would otherwise count as the first test's
// leak.
var warmUp = sync.OnceFunc(func() {
	r, w, err := os.Pipe()
	if err == nil {
		r.SetReadDeadline(time.Now()) // registers with the poller
		r.Close()
		w.Close()
	}
})

// snapshot is what LeakCheck compares.
type snapshot struct {
	goroutines map[int]string // id -> stack
	fds        map[int]string // fd -> readlink target
	fdErr      error          // why fds could not be listed
	devMaps    []string       // /proc/self/maps lines mapping /dev/infiniband
	traced     map[string]int // what the traced functions list
	resources  map[string]map[string]int
	resErr     error
}

func takeSnapshot(kernel bool) snapshot {
	s := snapshot{goroutines: goroutines(), devMaps: devMappings(), traced: map[string]int{}}
	s.fds, s.fdErr = openFDs()
	for _, f := range traced {
		for _, r := range f() {
			s.traced[r]++
		}
	}
	if kernel {
		s.resources, s.resErr = allResources()
	}
	return s
}

// settle compares until nothing is left over or LeakSettle has passed, and
// returns what is left over ("" when nothing).
//
// No collection runs on its own while it compares: an *os.File the test
// dropped without closing would be closed by its finalizer in the next
// collection and go unreported. Once the fds agree it collects on purpose
// before each wait, since a destroyed ring's mapping is returned after a
// collection by design (internal/sys.Mapping.Retire).
func settle(base snapshot) string {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	deadline := time.Now().Add(settleFor)
	for delay := time.Millisecond; ; delay = min(2*delay, 200*time.Millisecond) {
		// The cheap process-side checks first; the kernel's counts
		// (an exec of rdma) once those agree.
		now := takeSnapshot(false)
		fds := base.fdDiff(now)
		d := fds + base.processDiff(now)
		if d == "" && base.resources != nil {
			now.resources, now.resErr = allResources()
			d = base.kernelDiff(now)
		}
		if d == "" || time.Now().After(deadline) {
			return d
		}
		if fds == "" {
			runtime.GC()
		}
		time.Sleep(delay)
	}
}

// fdDiff lists the fds open now that were not before (or were another
// file).
//
// A listing that failed is reported as such, never compared: an empty
// listing at the start would make every fd the process holds a leak.
func (base snapshot) fdDiff(now snapshot) string {
	if base.fdErr != nil {
		return fmt.Sprintf("fds: could not list them at the start: %v\n", base.fdErr)
	}
	if now.fdErr != nil {
		return fmt.Sprintf("fds: could not list them at the end: %v\n", now.fdErr)
	}
	var b strings.Builder
	for _, fd := range slices.Sorted(maps.Keys(now.fds)) {
		if old, ok := base.fds[fd]; !ok || old != now.fds[fd] {
			fmt.Fprintf(&b, "fd %d open (%s), was %s\n", fd, now.fds[fd], orNone(old))
		}
	}
	return b.String()
}

// processDiff lists what else the process holds now and did not before:
// goroutines, mappings of /dev/infiniband, traced objects.
func (base snapshot) processDiff(now snapshot) string {
	var b strings.Builder
	var ids []int
	for id := range now.goroutines {
		if _, ok := base.goroutines[id]; !ok && !ignoredGoroutine(now.goroutines[id]) {
			ids = append(ids, id)
		}
	}
	sort.Ints(ids)
	for _, id := range ids {
		fmt.Fprintf(&b, "goroutine started during the test still runs:\n%s\n", indent(now.goroutines[id]))
	}
	// Compared as sets of lines (address range, offset, node), not as
	// counts: a test that releases a mapping it found and leaks another
	// must not pass.
	was := map[string]int{}
	for _, l := range base.devMaps {
		was[l]++
	}
	var extra []string
	for _, l := range now.devMaps {
		if was[l] > 0 {
			was[l]--
			continue
		}
		extra = append(extra, l)
	}
	if len(extra) > 0 {
		fmt.Fprintf(&b, "%d mappings of /dev/infiniband before, %d now; new:\n%s\n", len(base.devMaps), len(now.devMaps),
			indent(strings.Join(extra, "\n")))
	}
	for _, r := range slices.Sorted(maps.Keys(now.traced)) {
		if now.traced[r] > base.traced[r] {
			fmt.Fprintf(&b, "traced: %s\n", r)
		}
	}
	return b.String()
}

func (base snapshot) kernelDiff(now snapshot) string {
	if now.resErr != nil {
		return fmt.Sprintf("kernel resources: %v\n", now.resErr)
	}
	var b strings.Builder
	for _, dev := range slices.Sorted(maps.Keys(now.resources)) {
		was, ok := base.resources[dev]
		if !ok {
			continue // a device the test created; its removal is the test's business
		}
		for _, k := range slices.Sorted(maps.Keys(now.resources[dev])) {
			if n := now.resources[dev][k]; n > was[k] {
				fmt.Fprintf(&b, "%s: %d %s objects in the kernel, %d before\n", dev, n, k, was[k])
			}
		}
	}
	return b.String()
}

func orNone(s string) string {
	if s == "" {
		return "not open"
	}
	return s
}

func indent(s string) string {
	return "\t" + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n\t")
}

// goroutines returns every goroutine's stack by id.
func goroutines() map[int]string {
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	out := map[int]string{}
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		// "goroutine 7 [chan receive]:"
		rest, ok := bytes.CutPrefix(g, []byte("goroutine "))
		if !ok {
			continue
		}
		idText, _, ok := bytes.Cut(rest, []byte(" "))
		if !ok {
			continue
		}
		if id, err := strconv.Atoi(string(idText)); err == nil {
			out[id] = string(g)
		}
	}
	return out
}

// ignoredGoroutine reports goroutines that start once per process and
// stay: not a test's leak (internal/sys's returner of dead ring ranges
// starts with the first ring mapped).
func ignoredGoroutine(stack string) bool {
	for _, s := range []string{"os/signal.loop", "os/signal.signal_recv", "runtime.ensureSigM", "testing.(*M).startAlarm", "testing.runFuzzing",
		"pureverbs/internal/sys.returner"} {
		if strings.Contains(stack, s) {
			return true
		}
	}
	return false
}

// openFDs returns the process's open descriptors with their targets.
// A listing that fails (a transient error reading /proc: it was seen once,
// in a CI run, as an empty listing that made every fd a "leak") is taken
// again a few times before the error is returned.
func openFDs() (map[int]string, error) {
	var err error
	for range 5 {
		var out map[int]string
		if out, err = listFDs(); err == nil {
			return out, nil
		}
	}
	return nil, err
}

func listFDs() (map[int]string, error) {
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("reading /proc/self/fd: %w", err)
	}
	self := int(d.Fd())
	out := map[int]string{}
	for _, n := range names {
		fd, err := strconv.Atoi(n)
		if err != nil || fd == self {
			continue
		}
		target, err := os.Readlink("/proc/self/fd/" + n)
		if errors.Is(err, fs.ErrNotExist) {
			continue // closed in between
		}
		if err != nil {
			return nil, err
		}
		out[fd] = target
	}
	// The runtime's poller holds its epoll and wake-up fds from warmUp
	// on: a listing with nothing in it is a failed one.
	if len(out) == 0 {
		return nil, fmt.Errorf("/proc/self/fd lists no descriptors (%d names)", len(names))
	}
	return out, nil
}

// devMappings returns the lines of /proc/self/maps that map an RDMA
// device node.
func devMappings() []string {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return nil
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "/dev/infiniband/") {
			out = append(out, l)
		}
	}
	return out
}

// allResources returns `rdma -j resource show` for every device.
func allResources() (map[string]map[string]int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	js, err := exec.CommandContext(ctx, "rdma", "-j", "resource", "show").Output()
	if err != nil {
		return nil, fmt.Errorf("rdma -j resource show: %w", err)
	}
	names, err := resourceDevices(js)
	if err != nil {
		return nil, fmt.Errorf("rdma -j resource show: %w", err)
	}
	out := map[string]map[string]int{}
	for _, n := range names {
		if out[n], err = parseResources(js, n); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// resourceDevices lists the devices in `rdma -j resource show` output.
func resourceDevices(js []byte) ([]string, error) {
	var rows []map[string]any
	if err := json.Unmarshal(js, &rows); err != nil {
		return nil, err
	}
	var out []string
	for _, r := range rows {
		if n, ok := r["ifname"].(string); ok {
			out = append(out, n)
		}
	}
	return out, nil
}

// WaitParked waits until a goroutine of this process is parked on the
// runtime poller ("IO wait") inside function frame (as runtime.Stack
// names it, e.g. "rdmacm.(*EventChannel).GetEvent"): for a test that must
// act only once a reader sleeps. It looks every millisecond until ctx
// ends.
func WaitParked(ctx context.Context, frame string) error {
	return waitState(ctx, frame, "parked on the poller", "[IO wait")
}

// WaitBlocked is WaitParked for a goroutine that waits in the library
// (internal/sys) any of its ways: parked on the runtime poller, blocked in
// a system call on its own thread (the opt-in WaitThread modes' ppoll), or
// in a select for a watcher's word (the async reader).
func WaitBlocked(ctx context.Context, frame string) error {
	return waitState(ctx, frame, "blocked in internal/sys", "[IO wait", "[syscall", "[select")
}

// MustBlock is WaitBlocked for tb, bounded at 10 s: it fails tb unless a
// goroutine whose stack has frame (the test's own: "TestX.") is blocked
// in internal/sys by then. A wake-up test calls it before it writes or
// closes, so that it wakes a wait that has begun, not one about to.
func MustBlock(tb testing.TB, frame string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := WaitBlocked(ctx, frame); err != nil {
		tb.Fatal(err)
	}
}

// WaitingIn counts the goroutines of this process whose stack has frame
// but no frame of internal/sys, and whose state (as runtime.Stack prints
// it: "[select", "[chan receive", "[sync.Mutex.Lock", ...) begins with one
// of states: for a test that must act only once a wait outside
// internal/sys has begun, which WaitBlocked does not see (a select on the
// library's own channels). With no states, any state but running and
// runnable counts.
func WaitingIn(frame string, states ...string) int {
	n := 0
	for _, g := range goroutines() {
		head, _, _ := strings.Cut(g, "\n")
		if !strings.Contains(g, frame) || strings.Contains(g, "pureverbs/internal/sys.") {
			continue
		}
		ok := len(states) == 0 && !strings.Contains(head, "[running") && !strings.Contains(head, "[runnable")
		for _, st := range states {
			ok = ok || strings.Contains(head, st)
		}
		if ok {
			n++
		}
	}
	return n
}

func waitState(ctx context.Context, frame, what string, states ...string) error {
	lib := len(states) > 1 // WaitBlocked's: the wait must be the library's
	for {
		for _, g := range goroutines() {
			head, _, _ := strings.Cut(g, "\n")
			for _, st := range states {
				if strings.Contains(head, st) && strings.Contains(g, frame) &&
					(!lib || strings.Contains(g, "pureverbs/internal/sys.")) {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no goroutine %s in %s: %w", what, frame, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}
