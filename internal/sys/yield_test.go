package sys

import (
	"os"
	"os/exec"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestYieldLetsPollerRun: a goroutine parked on the runtime poller runs
// within a bound while another spins with Yield on the only P, after an
// idle wait that sent sysmon to its long sleep (see Yield). With
// runtime.Gosched as the yield (PUREVERBS_YIELD_GOSCHED=1, which allows
// 90 s) it waits until sysmon wakes by itself, up to a minute.
func TestYieldLetsPollerRun(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	yield, bound := Yield, 2*time.Second
	if os.Getenv("PUREVERBS_YIELD_GOSCHED") != "" {
		yield, bound = runtime.Gosched, 90*time.Second
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))

	wake, wakeW := pipe(t) // an outside process ends the idle wait through it
	data, dataW := pipe(t) // the poller goroutine's input
	var got atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		var b [1]byte
		if _, err := data.Read(b[:]); err == nil {
			got.Store(true)
		}
	}()
	// Idle: every goroutine waits on the poller, no timer is due for
	// longer than sysmon's long sleep but the test binary's alarm, so
	// sysmon sleeps. A child process writes the pipe 300 ms later.
	cmd := exec.Command("sh", "-c", "sleep 0.3; printf x")
	cmd.Stdout = wakeW
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	// Woken by the poller, the read is raw, as RecordReader's are: a
	// read through the runtime's system-call path would wake sysmon.
	if err := rawRead(wake); err != nil {
		t.Fatal(err)
	}
	// Spin as a polling loop does: the input for the parked goroutine
	// goes in with a raw write (as a doorbell does), then only yields.
	raw, err := dataW.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var werr error
	raw.Control(func(fd uintptr) {
		_, werr = rwQuick(unix.SYS_WRITE, int(fd), []byte{'y'}) // the doorbell's raw write
	})
	if werr != nil {
		t.Fatal(werr)
	}
	start := time.Now()
	next := start
	for !got.Load() && time.Since(start) < bound {
		if now := time.Now(); now.After(next) {
			yield()
			next = now.Add(2 * time.Millisecond)
		}
	}
	took := time.Since(start)
	if !got.Load() {
		t.Fatalf("the goroutine parked on the poller did not run within %v of spinning", bound)
	}
	<-done
	t.Logf("the parked goroutine ran %v after the spin began", took.Round(time.Millisecond))
}

// rawRead waits on the poller for f (non-blocking) and reads one byte
// from it with a raw system call.
func rawRead(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var rerr error
	var b [1]byte
	err = rc.Read(func(fd uintptr) bool {
		_, rerr = rwQuick(unix.SYS_READ, int(fd), b[:]) // RecordReader's raw read
		return rerr != unix.EAGAIN
	})
	if err != nil {
		return err
	}
	return rerr
}

func pipe(t *testing.T) (r, w *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}
