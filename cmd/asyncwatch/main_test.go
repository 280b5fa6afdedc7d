package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/pureverbs/pureverbs/async"
	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/uverbs"

	"github.com/pureverbs/pureverbs/internal/testkit/leakmain"
)

// TestMain traces every fd and mapping the tests create and fails the run
// when any is left open; in the VM each test is also checked on its own
// (testkit.LeakCheck: goroutines, fds, mappings, kernel objects), after
// ibv_asyncwatch has exited and run() has returned.
func TestMain(m *testing.M) {
	os.Exit(leakmain.Run(m))
}

func TestFormatEvent(t *testing.T) {
	for _, tc := range []struct {
		ev   async.Event
		want string
	}{
		// Lines as rdma-core v44's ibv_asyncwatch printed them in the rxe VM.
		{async.Event{Type: async.PortErr, Port: 1, Raw: 1}, "  event_type IBV_EVENT_PORT_ERR (10), port 1\n"},
		{async.Event{Type: async.PortActive, Port: 1, Raw: 1}, "  event_type IBV_EVENT_PORT_ACTIVE (9), port 1\n"},
		{async.Event{Type: async.GIDChange, Port: 1, Raw: 1}, "  event_type IBV_EVENT_GID_CHANGE (18), port 1\n"},
		// Port events v44 names.
		{async.Event{Type: async.LIDChange, Port: 2, Raw: 2}, "  event_type IBV_EVENT_LID_CHANGE (11), port 2\n"},
		{async.Event{Type: async.PKeyChange, Port: 1, Raw: 1}, "  event_type IBV_EVENT_PKEY_CHANGE (12), port 1\n"},
		{async.Event{Type: async.SMChange, Port: 1, Raw: 1}, "  event_type IBV_EVENT_SM_CHANGE (13), port 1\n"},
		{async.Event{Type: async.ClientReregister, Port: 1, Raw: 1}, "  event_type IBV_EVENT_CLIENT_REREGISTER (17), port 1\n"},
		// Device event: libibverbs puts the kernel's element in port_num.
		{async.Event{Type: async.DeviceFatal, Raw: 0}, "  event_type IBV_EVENT_DEVICE_FATAL (8), port 0\n"},
		// v44 predates IBV_EVENT_DEVICE_SPEED_CHANGE and calls it unexpected.
		{async.Event{Type: async.DeviceSpeedChange, Raw: 0}, "  event_type unexpected (20), port 0\n"},
		// Affiliated events: port_num is the low 32 bits of the object
		// pointer in C, of the user handle (the kernel's element) here.
		{async.Event{Type: async.CQErr, Raw: 0x7f12_8000_0010}, "  event_type unexpected (0), port -2147483632\n"},
		{async.Event{Type: async.SRQLimitReached, Raw: 3}, "  event_type unexpected (15), port 3\n"},
		{async.Event{Type: async.EventType(99), Raw: 5}, "  event_type unexpected (99), port 5\n"},
	} {
		if got := formatEvent(tc.ev); got != tc.want {
			t.Errorf("formatEvent(%v) = %q, want %q", tc.ev, got, tc.want)
		}
	}
}

// fakeSource hands out a fixed list of events, then an error (or blocks
// until ctx ends when err is nil), and records acknowledgements.
type fakeSource struct {
	events []async.Event
	err    error
	acked  []async.Event
	w      *bytes.Buffer // output at each Ack, to check print-then-ack
	lines  []int         // lines written when each event was acked
}

func (f *fakeSource) Get(ctx context.Context) (async.Event, error) {
	if len(f.events) > 0 {
		ev := f.events[0]
		f.events = f.events[1:]
		return ev, nil
	}
	if f.err != nil {
		return async.Event{}, f.err
	}
	<-ctx.Done()
	return async.Event{}, ctx.Err()
}

func (f *fakeSource) Ack(ev async.Event) error {
	f.acked = append(f.acked, ev)
	f.lines = append(f.lines, strings.Count(f.w.String(), "\n"))
	return nil
}

func TestWatchPrintsThenAcksEachEvent(t *testing.T) {
	var out bytes.Buffer
	evs := []async.Event{
		{Type: async.PortErr, Port: 1, Raw: 1},
		{Type: async.PortActive, Port: 1, Raw: 1},
		{Type: async.GIDChange, Port: 1, Raw: 1},
	}
	src := &fakeSource{events: append([]async.Event(nil), evs...), w: &out}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- watch(ctx, src, &out) }()
	// watch blocks in Get once the list is empty; cancelling is SIGINT.
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("watch after cancel = %v, want nil (clean exit)", err)
	}
	want := "  event_type IBV_EVENT_PORT_ERR (10), port 1\n" +
		"  event_type IBV_EVENT_PORT_ACTIVE (9), port 1\n" +
		"  event_type IBV_EVENT_GID_CHANGE (18), port 1\n"
	if out.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", out.String(), want)
	}
	if len(src.acked) != len(evs) {
		t.Fatalf("acked %d events, want %d", len(src.acked), len(evs))
	}
	for i, n := range src.lines {
		if n != i+1 {
			t.Errorf("event %d acked with %d lines written, want %d (print, then ack)", i, n, i+1)
		}
	}
}

func TestWatchGetError(t *testing.T) {
	var out bytes.Buffer
	src := &fakeSource{events: []async.Event{{Type: async.PortErr, Port: 1, Raw: 1}},
		err: errors.Join(errors.New("async: get event"), uverbs.ErrClosed), w: &out}
	err := watch(context.Background(), src, &out)
	if !errors.Is(err, uverbs.ErrClosed) {
		t.Fatalf("watch = %v, want the Get error", err)
	}
	if len(src.acked) != 1 || out.String() != "  event_type IBV_EVENT_PORT_ERR (10), port 1\n" {
		t.Errorf("acked %d, output %q", len(src.acked), out.String())
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, os.ErrClosed }

func TestWatchWriteErrorStillAcks(t *testing.T) {
	src := &fakeSource{events: []async.Event{{Type: async.PortErr, Port: 1, Raw: 1}}, w: new(bytes.Buffer)}
	if err := watch(context.Background(), src, failWriter{}); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("watch = %v, want the write error", err)
	}
	if len(src.acked) != 1 {
		t.Errorf("acked %d events, want 1: an event is acknowledged even when printing it fails", len(src.acked))
	}
}

func TestRunFlags(t *testing.T) {
	usage := "Usage:\n  asyncwatch            start an asyncwatch process\n\nOptions:\n" +
		"  -d, --ib-dev=<dev>     use IB device <dev> (default first device found)\n" +
		"  -h, --help             print a help text and exit\n"
	for _, tc := range []struct {
		args       []string
		code       int
		stdout     string
		stderrHave string
	}{
		{[]string{"-h"}, 0, usage, ""},
		{[]string{"--help"}, 0, usage, ""},
		{[]string{"--he"}, 0, usage, ""},
		{[]string{"-x"}, 1, usage, "asyncwatch: invalid option -- 'x'\n"},
		{[]string{"-d"}, 1, usage, "asyncwatch: option requires an argument -- 'd'\n"},
		{[]string{"--help=1"}, 1, usage, "asyncwatch: option '--help' doesn't allow an argument\n"},
		{[]string{"-ib-dev=rxe0"}, 1, usage, "asyncwatch: invalid option -- 'i'\n"},
		// In order, as getopt_long hands them over.
		{[]string{"-h", "-x"}, 0, usage, ""},
		{[]string{"-x", "-h"}, 1, usage, "asyncwatch: invalid option -- 'x'\n"},
		// Operands are ignored, as in ibv_asyncwatch; the device option
		// in all its spellings reaches the device lookup.
		{[]string{"extra", "-d", "nosuchdev0"}, 1, "", "IB device nosuchdev0 not found\n"},
		{[]string{"-d", "nosuchdev0"}, 1, "", "IB device nosuchdev0 not found\n"},
		{[]string{"-dnosuchdev0"}, 1, "", "IB device nosuchdev0 not found\n"},
		{[]string{"--ib", "nosuchdev0"}, 1, "", "IB device nosuchdev0 not found\n"},
		{[]string{"--ib-dev", "nosuchdev0"}, 1, "", "IB device nosuchdev0 not found\n"},
		{[]string{"--ib-dev=nosuchdev0"}, 1, "", "IB device nosuchdev0 not found\n"},
		{[]string{"-d", ""}, 1, "", "IB device  not found\n"},
	} {
		if _, err := uverbs.Devices(); errors.Is(err, sys.ENOSYS) && strings.HasPrefix(tc.stderrHave, "IB device") {
			// No RDMA in this kernel: the list fails before the lookup.
			tc.stderrHave = "Failed to get IB devices list: Function not implemented\n"
		}
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), tc.args, &stdout, &stderr)
		if code != tc.code || stdout.String() != tc.stdout || !strings.HasPrefix(stderr.String(), tc.stderrHave) {
			t.Errorf("run(%q) = %d\nstdout %q\nstderr %q\nwant %d, stdout %q, stderr containing %q",
				tc.args, code, stdout.String(), stderr.String(), tc.code, tc.stdout, tc.stderrHave)
		}
	}
}

func TestRunNoDeviceOnHost(t *testing.T) {
	if _, err := uverbs.Devices(); err == nil {
		t.Skip("this machine has RDMA devices")
	}
	_, lerr := uverbs.Devices()
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), nil, &stdout, &stderr); code != 1 {
		t.Fatalf("run() = %d, want 1", code)
	}
	// ibv_asyncwatch says "IB device  not found" when there is no device,
	// and perror's line when the kernel has no RDMA support at all (no
	// RDMA netlink, no uverbs class: ibv_get_device_list fails, ENOSYS).
	want := "IB device  not found\n"
	if errors.Is(lerr, sys.ENOSYS) {
		want = "Failed to get IB devices list: Function not implemented\n"
	}
	if !strings.HasPrefix(stderr.String(), want) || stdout.Len() != 0 {
		t.Errorf("stdout %q, stderr %q, want %q", stdout.String(), stderr.String(), want)
	}
}

func TestSigterm(t *testing.T) {
	if got := sigterm.String(); got != "terminated" {
		t.Fatalf("sigterm = %q, want SIGTERM (\"terminated\")", got)
	}
}
