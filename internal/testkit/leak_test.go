package testkit

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// recTB is a testing.TB whose cleanups and errors are recorded instead of
// acted on, to run LeakCheck against itself.
type recTB struct {
	*testing.T
	cleanups []func()
	errs     []string
}

func (r *recTB) Helper()                   {}
func (r *recTB) Cleanup(f func())          { r.cleanups = append(r.cleanups, f) }
func (r *recTB) Errorf(f string, a ...any) { r.errs = append(r.errs, fmt.Sprintf(f, a...)) }

func (r *recTB) end() string {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
	return strings.Join(r.errs, "\n")
}

func TestLeakCheck(t *testing.T) {
	defer func(d time.Duration) { settleFor = d }(settleFor)
	settleFor = 300 * time.Millisecond

	t.Run("clean", func(t *testing.T) {
		r := &recTB{T: t}
		LeakCheck(r)
		done := make(chan struct{})
		go func() { <-done }()
		f, err := os.Open("/dev/null")
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		// A goroutine that returns only a moment after the test: within
		// the settle time, so no leak.
		go func() { time.Sleep(50 * time.Millisecond); close(done) }()
		if e := r.end(); e != "" {
			t.Fatalf("clean test reported: %s", e)
		}
	})

	t.Run("leaks", func(t *testing.T) {
		var objs []string
		defer func(t []func() []string) { traced = t }(traced)
		traced = []func() []string{func() []string { return objs }}
		r := &recTB{T: t}
		LeakCheck(r)
		objs = append(objs, "fd 9 (thing) opened at: here")
		stop := make(chan struct{})
		defer close(stop)
		go leakyGoroutine(stop)
		f, err := os.Open("/dev/null")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		e := r.end()
		for _, want := range []string{"goroutine started during the test still runs", "testkit.leakyGoroutine",
			fmt.Sprintf("fd %d open (/dev/null), was not open", f.Fd()), "traced: fd 9 (thing) opened at: here"} {
			if !strings.Contains(e, want) {
				t.Errorf("report lacks %q:\n%s", want, e)
			}
		}
	})
}

func leakyGoroutine(stop chan struct{}) { <-stop }

// TestLeakCheckDroppedFile: an *os.File the test dropped without closing
// is reported even when the program allocates enough during the settle
// for collections to run (its finalizer would close it in the first).
func TestLeakCheckDroppedFile(t *testing.T) {
	defer func(d time.Duration) { settleFor = d }(settleFor)
	settleFor = 300 * time.Millisecond
	// Each snapshot allocates 8 MiB, twice the smallest heap goal, as
	// a busy program would while the settle waits.
	var sink []byte
	defer func(t []func() []string) { traced = t }(traced)
	traced = []func() []string{func() []string { sink = make([]byte, 8<<20); return nil }}
	r := &recTB{T: t}
	LeakCheck(r)
	fd := dropFile(t)
	defer syscall.Close(fd) // what the finalizer would have done
	e := r.end()
	_ = sink
	if want := fmt.Sprintf("fd %d open (/dev/null), was not open", fd); !strings.Contains(e, want) {
		t.Errorf("report lacks %q:\n%s", want, e)
	}
	if strings.Count(e, "\n") > 2 {
		t.Errorf("report names more than the file:\n%s", e)
	}
}

// dropFile opens /dev/null and drops the *os.File without closing it,
// returning its fd number. SetFinalizer(nil) is not called: the file's
// cleanup would close it at the next collection.
func dropFile(t *testing.T) int {
	f, err := os.Open("/dev/null")
	if err != nil {
		t.Fatal(err)
	}
	return int(f.Fd())
}

func TestParseGoroutines(t *testing.T) {
	g := goroutines()
	found := false
	for id, s := range g {
		if id <= 0 || !strings.HasPrefix(s, fmt.Sprintf("goroutine %d [", id)) {
			t.Errorf("goroutine %d: %q", id, s)
		}
		if strings.Contains(s, "TestParseGoroutines") {
			found = true
		}
	}
	if !found {
		t.Errorf("this goroutine is not among %d", len(g))
	}
}

func TestResourceDevices(t *testing.T) {
	js := []byte(`[{"ifindex":0,"ifname":"rxe0","pd":1,"cq":1},{"ifindex":1,"ifname":"rxelo","pd":2}]`)
	names, err := resourceDevices(js)
	if err != nil || strings.Join(names, ",") != "rxe0,rxelo" {
		t.Fatalf("resourceDevices = %v, %v", names, err)
	}
}

// TestRequireTwoHostsStartsLeakCheck: with CheckLeaksPerTest on, a test
// whose first helper is RequireTwoHosts (ThisHost, PeerHost: the two-host
// tests never call RequireVM before they start something) is checked as a
// RequireVM test is.
func TestRequireTwoHostsStartsLeakCheck(t *testing.T) {
	defer func(d time.Duration) { settleFor = d }(settleFor)
	settleFor = 300 * time.Millisecond
	was := perTest.Load()
	defer perTest.Store(was)
	perTest.Store(true)
	t.Run("twohost", func(t *testing.T) {
		t.Setenv("PUREVERBS_VM", "1")
		t.Setenv("PUREVERBS_HOST", "a")
		RequireTwoHosts(t)
		perTestMu.Lock()
		on := checked[t]
		perTestMu.Unlock()
		if !on {
			t.Error("RequireTwoHosts did not start the per-test leak check")
		}
	})
}

// TestFDDiffFailedListing: a listing of /proc/self/fd that failed is
// reported as the error it was, not compared (an empty start would make
// every fd of the process a leak, as a CI run once showed).
func TestFDDiffFailedListing(t *testing.T) {
	fds, err := openFDs()
	if err != nil || len(fds) == 0 {
		t.Fatalf("openFDs = %v, %v", fds, err)
	}
	failed := snapshot{fdErr: errors.New("boom")}
	ok := snapshot{fds: fds}
	for _, c := range []struct {
		name      string
		base, now snapshot
		want      string
	}{
		{"start", failed, ok, "could not list them at the start: boom"},
		{"end", ok, failed, "could not list them at the end: boom"},
		{"both fine", ok, ok, ""},
	} {
		got := c.base.fdDiff(c.now)
		if c.want == "" && got != "" || !strings.Contains(got, c.want) || strings.Contains(got, "was not open") {
			t.Errorf("%s: fdDiff = %q, want %q", c.name, got, c.want)
		}
	}
}

//go:noinline
func waitingInSelect(a, b <-chan struct{}) {
	select {
	case <-a:
	case <-b:
	}
}

// TestWaitingIn: a goroutine parked in a select counts for its frame and
// the "[select" state, not for another state or frame; once it returns it
// no longer counts.
func TestWaitingIn(t *testing.T) {
	const frame = "testkit.waitingInSelect"
	if n := WaitingIn(frame); n != 0 {
		t.Fatalf("WaitingIn before = %d", n)
	}
	a, b := make(chan struct{}), make(chan struct{})
	done := make(chan struct{})
	go func() { waitingInSelect(a, b); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for WaitingIn(frame, "[select") != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the select was never counted")
		}
		time.Sleep(time.Millisecond)
	}
	if n := WaitingIn(frame); n != 1 {
		t.Errorf("WaitingIn with any state = %d, want 1", n)
	}
	if n := WaitingIn(frame, "[chan receive", "[IO wait"); n != 0 {
		t.Errorf("WaitingIn in other states = %d, want 0", n)
	}
	if n := WaitingIn("testkit.noSuchFrame"); n != 0 {
		t.Errorf("WaitingIn of another frame = %d, want 0", n)
	}
	close(a)
	<-done
	if n := WaitingIn(frame); n != 0 {
		t.Errorf("WaitingIn after it returned = %d, want 0", n)
	}
}
