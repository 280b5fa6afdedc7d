// Package cmsync is what the ports of librdmacm's examples share beyond
// the library (their synchronous calls are rdmacm.Endpoint's): perror(3)
// and gai_strerror(3) lines as glibc prints them, the errno a failed call
// sets, the examples' get_rdma_addr and create_first_event_channel, and
// the whole main of rdma_server and rdma_client.
package cmsync

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/pureverbs/pureverbs/internal/getopt"
	"github.com/pureverbs/pureverbs/internal/memlock"
	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/rdmacm"
	"github.com/pureverbs/pureverbs/uverbs"
)

// Perror prints "what: strerror(errno)" as perror(3) does, with glibc's
// text; an error without an errno is printed whole.
func Perror(w io.Writer, what string, err error) {
	if n, ok := Errno(err); ok {
		fmt.Fprintf(w, "%s: %s\n", what, Strerror(n))
		return
	}
	fmt.Fprintf(w, "%s: %v\n", what, err)
}

// Errno finds the errno an error wraps; an ErrInvalid refused before
// any system call is EINVAL, as librdmacm and libibverbs set errno for
// the arguments they refuse.
func Errno(err error) (sys.Errno, bool) {
	var n sys.Errno
	if errors.As(err, &n) && n != 0 {
		return n, true
	}
	if errors.Is(err, rdmacm.ErrInvalid) {
		return sys.EINVAL, true
	}
	return 0, false
}

// Strerror is glibc's text for n (sys.Strerror).
func Strerror(n sys.Errno) string { return sys.Strerror(n) }

// Host is a host option of the C examples: a char * that stays NULL until
// the option is given, and may then be "". getaddrinfo(3) refuses ""
// (EAI_NONAME), where rdmacm.GetAddrInfo reads "" as a NULL node.
type Host struct {
	Name string
	Set  bool // the option was given (C's pointer is not NULL)
}

// SetHost is the Host an option's argument gives.
func SetHost(name string) Host { return Host{Name: name, Set: true} }

// GetAddrInfo is rdma_getaddrinfo(3) of h with a service the caller was
// given (C's pointer is not NULL; "" is port 0, as getaddrinfo reads it):
// rdmacm.GetAddrInfo, and EAI_NONAME for a Host given as "", as
// getaddrinfo(3) answers, once the service and hints have passed:
// getaddrinfo looks the service up before the node, so a service it does
// not know is EAI_SERVICE there too (cmatose -b "" -p x).
func (h Host) GetAddrInfo(ctx context.Context, service string, hints *rdmacm.AddrInfo) (*rdmacm.AddrInfo, error) {
	if service == "" {
		// rdmacm.GetAddrInfo reads "" as no service at all, and a NULL
		// node with none as no lookup.
		service = "0"
	}
	if h.Set && h.Name == "" {
		var ge *rdmacm.GAIError
		if _, err := rdmacm.GetAddrInfo(ctx, "", service, hints); errors.As(err, &ge) {
			return nil, &rdmacm.GAIError{Code: ge.Code, Service: service}
		}
		return nil, &rdmacm.GAIError{Code: rdmacm.EAINoName, Service: service}
	}
	return rdmacm.GetAddrInfo(ctx, h.Name, service, hints)
}

// GetRDMAAddr is the librdmacm examples' get_rdma_addr (common.c): with
// AIPassive in hints, src's address at port; otherwise dst at port, from
// src's address when src was given (looked up with no service).
func GetRDMAAddr(ctx context.Context, src, dst Host, port string, hints *rdmacm.AddrInfo) (*rdmacm.AddrInfo, error) {
	if hints.Flags&rdmacm.AIPassive != 0 {
		return src.GetAddrInfo(ctx, port, hints)
	}
	h := *hints
	if src.Set {
		if src.Name == "" { // getaddrinfo("", NULL)
			return nil, &rdmacm.GAIError{Code: rdmacm.EAINoName}
		}
		sh := h
		sh.Flags |= rdmacm.AIPassive
		s, err := rdmacm.GetAddrInfo(ctx, src.Name, "", &sh)
		if err != nil {
			return nil, err
		}
		h.Src = s.Src
	}
	return dst.GetAddrInfo(ctx, port, &h)
}

// GAIStatus prints "what error: gai_strerror(code)" to w, as the examples
// do for a failed rdma_getaddrinfo, and returns the code (-1 for an
// error that is not a *rdmacm.GAIError).
func GAIStatus(w io.Writer, what string, err error) int {
	var ge *rdmacm.GAIError
	if errors.As(err, &ge) {
		fmt.Fprintf(w, "%s error: %s\n", what, ge.Reason())
		return ge.Code
	}
	fmt.Fprintf(w, "%s error: %v\n", what, err)
	return -1
}

// ErrnoValue is the errno a failed verbs call returns (ibv_post_send,
// ibv_query_port: positive), 1 when err carries none.
func ErrnoValue(err error) int {
	if n, ok := Errno(err); ok {
		return int(n)
	}
	return 1
}

// CreateFirstEventChannel is the librdmacm examples'
// create_first_event_channel (common.c): rdmacm.Open, and on failure
// their line on w: "No RDMA devices were detected" for ENODEV, else
// perror's "failed to create RDMA CM event channel". Its
// rdma_create_event_channel is the examples' first librdmacm call
// (cmatose.c:722, udaddy.c:678, mckey.c:654), and starts with ucma_init
// (cma.c:571), whose ibv_get_device_list (cma.c:322) prints libibverbs'
// RLIMIT_MEMLOCK warning: on w first, devices or not.
func CreateFirstEventChannel(w io.Writer) (*rdmacm.EventChannel, error) {
	memlock.Warn(w)
	if NoDevice() {
		// librdmacm's ucma_init, first in rdma_create_event_channel: no
		// device, ENODEV (whether rdma_ucm is loaded or not).
		fmt.Fprintf(w, "No RDMA devices were detected\n")
		return nil, fmt.Errorf("%w: no RDMA device", sys.ENODEV)
	}
	ch, err := rdmacm.Open()
	if err != nil {
		if errors.Is(err, sys.ENODEV) {
			fmt.Fprintf(w, "No RDMA devices were detected\n")
		} else {
			Perror(w, "failed to create RDMA CM event channel", err)
		}
	}
	return ch, err
}

// NoDevice reports whether the machine has no RDMA device, where
// librdmacm's ucma_init fails every call that starts with it
// (rdma_create_event_channel, rdma_getaddrinfo) with ENODEV.
func NoDevice() bool {
	devs, err := uverbs.Devices()
	return err != nil || len(devs) == 0
}

// NoDeviceAddr is rdma_server's and rdma_client's rdma_getaddrinfo on a
// machine without devices: ucma_init's failure is its -1, which their
// line prints through gai_strerror (EAI_BADFLAGS's text); run returns it.
func NoDeviceAddr(w io.Writer) int {
	ge := rdmacm.GAIError{Code: rdmacm.EAIBadFlags}
	fmt.Fprintf(w, "rdma_getaddrinfo: %s\n", ge.Reason())
	return -1
}

// SimpleMain is the main of librdmacm's rdma_server and rdma_client: -s
// (default server) and -p (7471), getopt's complaint and the usage for a
// bad command line (status 1), else "name: start", run, "name: end N",
// and N as the shell sees it. run's first call in C is rdma_getaddrinfo
// (rdma_server.c:59, rdma_client.c:57), which starts with ucma_init
// (addrinfo.c:247) and so with its ibv_get_device_list (cma.c:322):
// libibverbs' RLIMIT_MEMLOCK warning is printed on stderr before run,
// devices or not.
func SimpleMain(ctx context.Context, prog, name, server string, args []string, stdout, stderr io.Writer,
	run func(ctx context.Context, server, port string, stdout, stderr io.Writer) int) int {
	port := "7471"
	opts, _, perr := getopt.Parse(args, "s:p:", nil)
	for _, op := range opts {
		switch op.Val {
		case 's':
			server = op.Arg
		case 'p':
			port = op.Arg
		}
	}
	if perr != nil {
		fmt.Fprintf(stderr, "%s: %v\n", prog, perr)
		fmt.Fprintf(stdout, "usage: %s\n\t[-s server_address]\n\t[-p port_number]\n", prog)
		return 1
	}
	fmt.Fprintf(stdout, "%s: start\n", name)
	memlock.Warn(stderr)
	ret := run(ctx, server, port, stdout, stderr)
	fmt.Fprintf(stdout, "%s: end %d\n", name, ret)
	return ret & 0xff
}

// SimpleAddr is rdma_server's and rdma_client's rdma_getaddrinfo: the
// address, or nil, their "rdma_getaddrinfo: reason" line on w and the
// status run returns (getaddrinfo's code, -1 for another error).
func SimpleAddr(ctx context.Context, w io.Writer, server, port string, hints *rdmacm.AddrInfo) (*rdmacm.AddrInfo, int) {
	// server is -s's argument or the example's default, never NULL.
	ai, err := SetHost(server).GetAddrInfo(ctx, port, hints)
	if err == nil {
		return ai, 0
	}
	var ge *rdmacm.GAIError
	if errors.As(err, &ge) {
		fmt.Fprintf(w, "rdma_getaddrinfo: %s\n", ge.Reason())
		return nil, ge.Code
	}
	fmt.Fprintf(w, "rdma_getaddrinfo: %v\n", err)
	return nil, -1
}
