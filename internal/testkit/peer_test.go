package testkit

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
)

// failedTB is a test that has failed: it keeps its cleanups and logs for
// the test to run and read.
type failedTB struct {
	testing.TB
	cleanups []func()
	logs     []string
}

func (f *failedTB) Helper()           {}
func (f *failedTB) Name() string      { return "TestFake" }
func (f *failedTB) Failed() bool      { return true }
func (f *failedTB) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }
func (f *failedTB) Log(a ...any)      { f.logs = append(f.logs, fmt.Sprint(a...)) }
func (f *failedTB) Logf(format string, a ...any) {
	f.logs = append(f.logs, fmt.Sprintf(format, a...))
}

// end runs the cleanups as testing does, last registered first.
func (f *failedTB) end() {
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
}

// TestPeerSummary: a failed test's last log line names each peer it
// started, whether it exited by itself (when, with what status) or was
// still running and stopped at the end; each peer's output comes before
// it.
func TestPeerSummary(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := &failedTB{TB: t}
	srv := startLocal(ctx, f, nil, "sh", []string{"-c", "echo serving; exec sleep 100"})
	if err := srv.WaitForOutput(ctx, "serving"); err != nil {
		t.Fatal(err)
	}
	cli := startLocal(ctx, f, nil, "sh", []string{"-c", "echo boom; exit 3"})
	if err := cli.Wait(); err == nil {
		t.Fatal("the client exited 0")
	}
	f.end()
	if len(f.logs) != 3 {
		t.Fatalf("%d log entries, want 3 (two outputs, the summary): %q", len(f.logs), f.logs)
	}
	if !strings.Contains(f.logs[0], "boom") || !strings.Contains(f.logs[1], "serving") {
		t.Errorf("outputs, client's then server's: %q", f.logs[:2])
	}
	want := regexp.MustCompile(`^peers of TestFake \(times from the first one's start\):
  sh -c echo serving; exec sleep 100: started \+0\.00s, still running at the end of the test, then stopped \(signal: interrupt at \+\d+\.\d\ds\)
  sh -c echo boom; exit 3: started \+\d+\.\d\ds, exited by itself at \+\d+\.\d\ds: exit status 3$`)
	if !want.MatchString(f.logs[2]) {
		t.Errorf("summary:\n%s", f.logs[2])
	}
	if _, ok := summaries.Load(f); ok {
		t.Error("the test's summary was kept after its end")
	}
}
