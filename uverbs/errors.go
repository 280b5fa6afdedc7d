package uverbs

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Every error returned by this package either is one of
// these, wraps one of these, or wraps a unix.Errno (so errors.Is works with
// both our sentinels and errno values such as unix.EINVAL).
var (
	// ErrClosed is returned by operations on a Context, object or event
	// reader that has been closed or destroyed.
	ErrClosed = errors.New("uverbs: use of closed object")
	// ErrNotSupported is returned when the kernel, the device or its
	// provider does not implement an operation.
	ErrNotSupported = errors.New("uverbs: not supported")
	// ErrInvalid is returned for invalid arguments detected before any
	// system call is made (nil or foreign objects, out-of-range values).
	ErrInvalid = errors.New("uverbs: invalid argument")
	// ErrNoDevice is returned when no RDMA device is present or the named
	// device does not exist.
	ErrNoDevice = errors.New("uverbs: no RDMA device")
	// ErrABIVersion is returned when the kernel speaks a uverbs ABI
	// version this library does not implement.
	ErrABIVersion = errors.New("uverbs: unsupported uverbs ABI version")
	// ErrSysfs is returned when sysfs holds missing or malformed data.
	ErrSysfs = errors.New("uverbs: malformed sysfs entry")
)

// OpError records a failed kernel operation: which object, which method,
// and the underlying error (usually a unix.Errno).
type OpError struct {
	Object string // e.g. "device", "cq", "qp"
	Method string // e.g. "get_context", "create", "query_port"
	Err    error
}

// Error returns "uverbs: <object> <method>: <error>", the error's own
// "uverbs: " left out ("uverbs: cq destroy: use of closed object").
func (e *OpError) Error() string {
	return "uverbs: " + e.Object + " " + e.Method + ": " + strings.TrimPrefix(fmt.Sprint(e.Err), "uverbs: ")
}

// Unwrap returns Err, so that errors.Is matches the errno.
func (e *OpError) Unwrap() error { return e.Err }
