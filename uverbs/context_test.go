package uverbs

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/internal/testkit"
)

// fakeContext returns a Context whose command fd is /dev/null: every ioctl
// fails with ENOTTY and every write() succeeds, which exercises the whole
// build-and-issue path without a device.
func fakeContext(t testing.TB) *Context {
	fd, err := sys.Open("/dev/null", sys.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	c := &Context{dev: Device{Name: "fake0"}, cmd: fd, driverID: 14}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestAllocsQueryPort proves that building and issuing a command through
// the Context allocates nothing: QUERY_PORT is built as an ioctl, rejected
// with ENOTTY by /dev/null, then rebuilt and sent through write().
func TestAllocsQueryPort(t *testing.T) {
	c := fakeContext(t)
	var pa PortAttr
	if err := c.QueryPortInto(1, &pa); err != nil {
		t.Fatalf("QueryPortInto: %v", err)
	}
	testkit.NoAllocs(t, 2000, func() {
		if err := c.QueryPortInto(1, &pa); err != nil {
			t.Fatal(err)
		}
	})
}

func BenchmarkQueryPortFake(b *testing.B) {
	c := fakeContext(b)
	var pa PortAttr
	b.ReportAllocs()
	for b.Loop() {
		c.QueryPortInto(1, &pa)
	}
}

func TestContextErrors(t *testing.T) {
	c := fakeContext(t)
	if err := c.QueryPortInto(0, new(PortAttr)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("port 0: %v", err)
	}
	if _, err := c.QueryGID(1, -1); !errors.Is(err, ErrInvalid) {
		t.Fatalf("gid -1: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	_, err := c.QueryPort(1)
	var op *OpError
	if !errors.Is(err, ErrClosed) || !errors.As(err, &op) || op.Method != "query_port" {
		t.Fatalf("QueryPort after Close: %v", err)
	}
	if _, err := c.CreateCQ(1, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("CreateCQ after Close: %v", err)
	}
}

func TestOpErrorMapping(t *testing.T) {
	c := fakeContext(t)
	err := c.opErr("cq", "create", sys.EOPNOTSUPP)
	if !errors.Is(err, ErrNotSupported) || !errors.Is(err, sys.EOPNOTSUPP) {
		t.Fatalf("EOPNOTSUPP mapping: %v", err)
	}
	err = c.opErr("qp", "modify", sys.EINVAL)
	if !errors.Is(err, sys.EINVAL) || errors.Is(err, ErrNotSupported) || err.Error() != "uverbs: qp modify: invalid argument" {
		t.Fatalf("EINVAL mapping: %v", err)
	}
}

func TestEventTypeElement(t *testing.T) {
	cases := map[EventType]ElementKind{
		EventCQErr: ElementCQ, EventSQDrained: ElementQP, EventQPLastWQEReached: ElementQP,
		EventSRQLimitReached: ElementSRQ, EventWQFatal: ElementWQ, EventGIDChange: ElementPort,
		EventPortErr: ElementPort, EventDeviceFatal: ElementDevice, EventType(77): ElementDevice,
	}
	for typ, want := range cases {
		if got := typ.Element(); got != want {
			t.Errorf("%v.Element() = %v, want %v", typ, got, want)
		}
	}
}

func TestNilReceivers(t *testing.T) {
	var c *Context
	if err := c.Close(); !errors.Is(err, ErrInvalid) {
		t.Errorf("nil Close = %v", err)
	}
	if !c.Closed() {
		t.Error("nil Context not Closed")
	}
	if _, err := c.QueryDevice(); !errors.Is(err, ErrInvalid) {
		t.Errorf("nil QueryDevice = %v", err)
	}
	if _, err := c.QueryPort(1); !errors.Is(err, ErrInvalid) {
		t.Errorf("nil QueryPort = %v", err)
	}
	if _, err := c.QueryGID(1, 0); !errors.Is(err, ErrInvalid) {
		t.Errorf("nil QueryGID = %v", err)
	}
	if _, err := c.QueryGIDTable(); !errors.Is(err, ErrInvalid) {
		t.Errorf("nil QueryGIDTable = %v", err)
	}
	live := fakeContext(t)
	if err := live.QueryPortInto(1, nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("QueryPortInto(nil) = %v", err)
	}
}

// TestOpenNotVerbs: a DevPath that is not a uverbs device fails to open
// with ErrInvalid (and ENOTTY), whatever the file: /dev/null answers the
// ioctl with ENOTTY and swallows the write() fallback without a reply, a
// regular file would take the fallback's command as data. Nothing is
// written, no Context comes back, and no descriptor is left open or
// closed (fd 0 in particular, which a zero reply would have named as the
// async fd).
func TestOpenNotVerbs(t *testing.T) {
	testkit.LeakCheck(t)
	reg := filepath.Join(t.TempDir(), "notverbs")
	if err := os.WriteFile(reg, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err0 := os.Readlink("/proc/self/fd/0")
	for _, path := range []string{"/dev/null", "/dev/zero", reg} {
		c, err := Open(Device{Name: "fake0", DevPath: path})
		if err == nil {
			c.Close()
			t.Fatalf("Open(%s) succeeded", path)
		}
		if !errors.Is(err, ErrInvalid) || !errors.Is(err, sys.ENOTTY) {
			t.Errorf("Open(%s) = %v, want ErrInvalid and ENOTTY", path, err)
		}
		if _, err := os.Readlink("/proc/self/fd/0"); (err == nil) != (err0 == nil) {
			t.Errorf("Open(%s) changed fd 0: %v before, %v after", path, err0, err)
		}
	}
	if st, err := os.Stat(reg); err != nil || st.Size() != 0 {
		t.Fatalf("the regular file was written: %v, %v", st, err)
	}
}
