package uverbs

import (
	"errors"
	"fmt"

	"github.com/pureverbs/pureverbs/internal/sys"
)

// hinted is an error with what the user can change about it appended:
// "permission denied (run as root, or ...)". It unwraps to the error, so
// errors.Is with the errno still works.
type hinted struct {
	err  error
	hint string
}

func (h *hinted) Error() string { return h.err.Error() + " (" + h.hint + ")" }
func (h *hinted) Unwrap() error { return h.err }

// withHint appends hint to err; to the innermost OpError's Err when there
// is one, so the message reads "uverbs: mr reg: <errno> (<hint>)".
func withHint(err error, hint string) error {
	var oe *OpError
	if errors.As(err, &oe) {
		return &OpError{Object: oe.Object, Method: oe.Method, Err: &hinted{oe.Err, hint}}
	}
	return &hinted{err, hint}
}

// openErr explains a failed open(2) of the device node path.
func openErr(path string, err error) error {
	switch {
	case errors.Is(err, sys.EACCES), errors.Is(err, sys.EPERM):
		return &hinted{err, fmt.Sprintf("this user may not open %s: run as root, or give the user read/write access "+
			"to the node (its group, or a udev rule such as KERNEL==\"uverbs*\", MODE=\"0666\"); "+
			"in a container, pass it with --device %s", path, path)}
	case errors.Is(err, sys.EMFILE):
		hint := "the process has as many files open as RLIMIT_NOFILE allows"
		if n, ok := sys.NofileLimit(); ok {
			hint = fmt.Sprintf("the process has RLIMIT_NOFILE (%d) files open", n)
		}
		return &hinted{err, hint + ": close contexts and channels no longer used, or raise the limit (ulimit -n)"}
	case errors.Is(err, sys.ENFILE):
		return &hinted{err, "the system's file table is full: close files, or raise fs.file-max"}
	}
	return err
}

// memlockErr explains ENOMEM from registering size bytes: pinning them
// would exceed RLIMIT_MEMLOCK (the kernel's ib_umem_get check, skipped
// with CAP_IPC_LOCK). Other errors, and a process without a limit, are
// returned as they are.
func memlockErr(err error, size int) error {
	if !errors.Is(err, sys.ENOMEM) {
		return err
	}
	limit, ok := sys.MemlockLimit()
	if !ok {
		return err
	}
	return withHint(err, fmt.Sprintf("registering %d bytes pins them, and pinned memory counts against RLIMIT_MEMLOCK, "+
		"%d bytes for this process: raise it (ulimit -l, docker run --ulimit memlock=-1, systemd LimitMEMLOCK=) "+
		"or give the process CAP_IPC_LOCK", size, limit))
}

// limitErr explains EINVAL or ENOSPC from creating an object of kind
// ("pd", "ah", "cq", "qp", "srq", "mr", "mw"), which is what a device at
// its limit for that kind answers (rxe: EINVAL): it names the limit from
// QueryDevice. When over (if not nil) finds the request itself past one
// of the device's limits for one object (a CQ's cqe above max_cqe), the
// hint names that limit instead. Other errors are returned as they are.
func (c *Context) limitErr(err error, kind string, over func(a *DeviceAttr) string) error {
	if !errors.Is(err, sys.EINVAL) && !errors.Is(err, sys.ENOSPC) {
		return err
	}
	a, qerr := c.QueryDevice()
	if qerr != nil {
		return err
	}
	if over != nil {
		if why := over(a); why != "" {
			return withHint(err, why)
		}
	}
	var limit int
	var noun, field string
	switch kind {
	case "pd":
		limit, noun, field = a.MaxPD, "protection domains", "max_pd, DeviceAttr.MaxPD"
	case "ah":
		limit, noun, field = a.MaxAH, "address handles", "max_ah, DeviceAttr.MaxAH"
	case "cq":
		limit, noun, field = a.MaxCQ, "completion queues", "max_cq, DeviceAttr.MaxCQ"
	case "qp":
		limit, noun, field = a.MaxQP, "queue pairs", "max_qp, DeviceAttr.MaxQP"
	case "srq":
		limit, noun, field = a.MaxSRQ, "shared receive queues", "max_srq, DeviceAttr.MaxSRQ"
	case "mr":
		limit, noun, field = a.MaxMR, "memory regions", "max_mr, DeviceAttr.MaxMR"
	case "mw":
		limit, noun, field = a.MaxMW, "memory windows", "max_mw, DeviceAttr.MaxMW"
	default:
		return err
	}
	return withHint(err, fmt.Sprintf("if the device's limit was reached: %s allows %d %s (%s), "+
		"counting every process's; destroy those no longer used", c.dev.Name, limit, noun, field))
}

// overLimit names the first of checks whose value is above its device
// limit ("cqe 70000 is above rxe0's max_cqe 32767 (DeviceAttr.MaxCQE)"),
// "" when none is.
func (c *Context) overLimit(checks ...limitCheck) string {
	for _, k := range checks {
		if k.v > k.limit {
			return fmt.Sprintf("%s %d is above %s's %s %d (%s)", k.what, k.v, c.dev.Name, k.field, k.limit, k.attr)
		}
	}
	return ""
}

// limitCheck is a requested value against a device limit of DeviceAttr.
type limitCheck struct {
	what        string // the request's name for it: "cqe", "max_send_wr"
	v, limit    int
	field, attr string // the limit's: "max_cqe", "DeviceAttr.MaxCQE"
}
