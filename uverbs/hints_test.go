package uverbs

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/pureverbs/pureverbs/internal/sys"
)

func TestHints(t *testing.T) {
	const node = "/dev/infiniband/uverbs0"
	for _, c := range []struct {
		errno sys.Errno
		want  []string // in the message; nil: unchanged
	}{
		{sys.EACCES, []string{"open " + node + ": permission denied (this user may not open " + node, "read/write access", "--device " + node}},
		{sys.EPERM, []string{"operation not permitted (this user may not open"}},
		{sys.EMFILE, []string{"too many open files (", "RLIMIT_NOFILE", "ulimit -n"}},
		{sys.ENFILE, []string{"fs.file-max"}},
		{sys.ENOENT, nil},
	} {
		perr := &os.PathError{Op: "open", Path: node, Err: c.errno}
		err := error(&OpError{Object: "device", Method: "open", Err: openErr(node, perr)})
		if !errors.Is(err, c.errno) {
			t.Errorf("%v: errors.Is(%v) is false", c.errno, err)
		}
		msg := err.Error()
		if c.want == nil && msg != "uverbs: device open: open "+node+": "+c.errno.Error() {
			t.Errorf("%v: changed to %q", c.errno, msg)
		}
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%v: %q lacks %q", c.errno, msg, w)
			}
		}
	}

	// withHint keeps the OpError (errors.As) and the errno (errors.Is),
	// and puts the hint after the errno's text.
	err := withHint(&OpError{Object: "mr", Method: "reg", Err: sys.ENOMEM}, "raise it")
	var oe *OpError
	if !errors.As(err, &oe) || oe.Object != "mr" || !errors.Is(err, sys.ENOMEM) ||
		err.Error() != "uverbs: mr reg: cannot allocate memory (raise it)" {
		t.Errorf("withHint: %v", err)
	}
	// memlockErr leaves other errors alone.
	if e := memlockErr(sys.EINVAL, 1); e != sys.EINVAL {
		t.Errorf("memlockErr(EINVAL) = %v", e)
	}
	if limit, ok := sys.MemlockLimit(); ok {
		msg := memlockErr(&OpError{Object: "mr", Method: "reg", Err: sys.ENOMEM}, 1<<20).Error()
		for _, w := range []string{"registering 1048576 bytes", "RLIMIT_MEMLOCK", "ulimit -l", "CAP_IPC_LOCK"} {
			if !strings.Contains(msg, w) {
				t.Errorf("memlockErr (limit %d): %q lacks %q", limit, msg, w)
			}
		}
	}
}

// TestOpErrorText: an OpError names the package once, whatever the error
// it wraps says of itself; errors.Is still sees the sentinel or errno.
func TestOpErrorText(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
		is   error
	}{
		{&OpError{Object: "cq", Method: "destroy", Err: ErrClosed}, "uverbs: cq destroy: use of closed object", ErrClosed},
		{&OpError{Object: "cq", Method: "wait", Err: fmt.Errorf("%w: nil context.Context", ErrInvalid)}, "uverbs: cq wait: invalid argument: nil context.Context", ErrInvalid},
		{&OpError{Object: "qp", Method: "modify", Err: sys.EINVAL}, "uverbs: qp modify: invalid argument", sys.EINVAL},
		{&OpError{Object: "device", Method: "open", Err: errors.New("open /dev/x: no such file")}, "uverbs: device open: open /dev/x: no such file", nil},
	} {
		if got := c.err.Error(); got != c.want {
			t.Errorf("Error() = %q, want %q", got, c.want)
		}
		if c.is != nil && !errors.Is(c.err, c.is) {
			t.Errorf("%q does not match %v", c.err, c.is)
		}
	}
}
