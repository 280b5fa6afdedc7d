// Command devinfo prints the RDMA devices and their attributes, like
// rdma-core's ibv_devinfo (libibverbs/examples/devinfo.c), using only the
// pureverbs library.
//
//	devinfo [-d DEV] [-i PORT] [-l] [-v]
//
//	-d, --ib-dev=DEV    only device DEV (default: all devices, although the usage says the first, as ibv_devinfo's does)
//	-i, --ib-port=PORT  only port PORT (default: all ports)
//	-l, --list          print only the device names
//	-v, --verbose       also print the extended device attributes and the GID table
//
// The output has the same layout, field names and values as the
// ibv_devinfo of rdma-core v44 (Debian 12), so the two can be compared
// line by line, and so do its errors and exit statuses: getopt_long's
// complaints, the usage on stdout, 255 for an unknown device, 4 for a
// port the device lacks (TestVMSameAsC).
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"syscall"

	"github.com/pureverbs/pureverbs/internal/getopt"
	"github.com/pureverbs/pureverbs/internal/memlock"
	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/uverbs"
)

func main() {
	os.Exit(run(os.Args[0], os.Args[1:], os.Stdout, os.Stderr))
}

// options are the parsed command-line flags.
type options struct {
	dev     string
	devSet  bool // -d was given, even as "" (ibv_devinfo then looks for that name)
	port    int  // 0: all ports
	verbose bool
}

// usage is ibv_devinfo's usage text, printed on stdout as it prints it.
func usage(w io.Writer, prog string) {
	fmt.Fprintf(w, `Usage: %s             print the ca attributes

Options:
  -d, --ib-dev=<dev>     use IB device <dev> (default first device found)
  -i, --ib-port=<port>   use port <port> of IB device (default all ports)
  -l, --list             print only the IB devices names
  -v, --verbose          print all the attributes of the IB device(s)
`, prog)
}

var longOpts = []getopt.Long{
	{Name: "ib-dev", HasArg: true, Val: 'd'},
	{Name: "ib-port", HasArg: true, Val: 'i'},
	{Name: "list", HasArg: false, Val: 'l'},
	{Name: "verbose", HasArg: false, Val: 'v'},
}

// parseArgs is ibv_devinfo's getopt_long loop: it takes the options in
// order and acts on each as the C tool does, so it may end the program
// itself (done, with the exit status): -l prints the device list, a port
// that is not positive prints the usage (status 1), and an unknown option
// or a missing argument prints getopt's complaint and the usage (status
// 255). Operands are ignored, as ibv_devinfo ignores them. The port is
// read as strtol(arg, NULL, 0) and passed on as a uint8_t, so 256 asks for
// all ports, as it does in C.
func parseArgs(prog string, args []string, stdout, stderr io.Writer) (o *options, status int, done bool) {
	o = &options{}
	opts, _, perr := getopt.Parse(args, "d:i:lv", longOpts)
	for _, p := range opts {
		switch p.Val {
		case 'd':
			o.dev, o.devSet = p.Arg, true
		case 'i':
			n := int32(getopt.Strtol(p.Arg))
			if n <= 0 {
				usage(stdout, prog)
				return nil, 1, true
			}
			o.port = int(uint8(n))
		case 'v':
			o.verbose = true
		case 'l':
			return nil, list(stdout, stderr), true
		}
	}
	if perr != nil {
		fmt.Fprintf(stderr, "%s: %v\n", prog, perr)
		usage(stdout, prog)
		return nil, 255, true
	}
	return o, 0, false
}

// list is -l: the number of devices and their names.
func list(stdout, stderr io.Writer) int {
	devs, ok := devices(stderr)
	if !ok {
		return 255
	}
	names := make([]string, len(devs))
	for i, d := range devs {
		names[i] = d.Name
	}
	writeList(stdout, names)
	return 0
}

// devices is ibv_get_device_list for both paths (-l's in the option loop,
// devinfo.c:725, or main's, devinfo.c:751; a run reaches one of them, once):
// libibverbs' RLIMIT_MEMLOCK warning first, as its first call prints it,
// devices or not, then the list, or false (after perror's line) when it
// cannot be read.
func devices(stderr io.Writer) ([]uverbs.Device, bool) {
	memlock.Warn(stderr)
	devs, err := uverbs.Devices()
	if errors.Is(err, syscall.ENOSYS) {
		// No RDMA support in the kernel: ibv_get_device_list fails.
		fmt.Fprintf(stderr, "Failed to get IB devices list: %s\n", sys.Strerror(syscall.ENOSYS))
		return nil, false
	}
	if errors.Is(err, uverbs.ErrNoDevice) {
		// libibverbs lists no device: -l prints "0 HCAs found:", the
		// report "No IB devices found".
		return nil, true
	}
	if err != nil {
		fmt.Fprintf(stderr, "Failed to get IB devices list: %v\n", err)
		return nil, false
	}
	return devs, true
}

// run is the whole command (prog names it in messages, as argv[0] does):
// it parses args, writes the report to stdout and diagnostics to stderr,
// and returns ibv_devinfo's exit status: 255 when the device list cannot
// be read, is empty or lacks -d's device, otherwise the OR of each
// device's status (1: it does not open, 2: its attributes cannot be
// read, 4: it has no port -i, or the errno of a failed port query).
func run(prog string, args []string, stdout, stderr io.Writer) int {
	o, status, done := parseArgs(prog, args, stdout, stderr)
	if done {
		return status
	}

	devs, ok := devices(stderr)
	if !ok {
		return 255
	}
	if o.devSet {
		i := slices.IndexFunc(devs, func(d uverbs.Device) bool { return d.Name == o.dev })
		if i < 0 {
			fmt.Fprintf(stderr, "IB device '%s' wasn't found\n", o.dev)
			return 255
		}
		devs = devs[i : i+1]
	} else if len(devs) == 0 {
		fmt.Fprintf(stderr, "No IB devices found\n")
		return 255
	}

	for _, d := range devs {
		info, err := gather(d, o.port, o.verbose)
		if err != nil {
			var de *devError
			if !errors.As(err, &de) {
				de = &devError{status: 1, msg: "Failed to open device", err: err}
			}
			fmt.Fprintln(stderr, de.msg)
			if de.err != nil {
				fmt.Fprintf(stderr, "  (%s: %v)\n", d.Name, de.err)
			}
			status |= de.status
			continue
		}
		writeDevice(stdout, info, o.verbose)
	}
	return status
}

// devError is a device's failure: ibv_devinfo's line and status for it,
// and the library's error behind it (printed on a second line).
type devError struct {
	status int
	msg    string
	err    error
}

func (e *devError) Error() string {
	if e.err == nil {
		return e.msg
	}
	return e.msg + ": " + e.err.Error()
}

func (e *devError) Unwrap() error { return e.err }

// gather opens d and collects everything writeDevice prints: the device
// attributes, and for each selected port (all when port is 0) the port
// attributes and, when verbose, the port's GIDs.
func gather(d uverbs.Device, port int, verbose bool) (*deviceInfo, error) {
	ctx, err := uverbs.Open(d)
	if err != nil {
		return nil, &devError{status: 1, msg: "Failed to open device", err: err}
	}
	defer ctx.Close()

	attr, err := ctx.QueryDevice()
	if err != nil {
		return nil, &devError{status: 2, msg: "Failed to query device props", err: err}
	}
	if port > attr.PhysPortCnt {
		return nil, &devError{status: 4, msg: "Invalid port requested for device"}
	}
	info := &deviceInfo{
		Name:           d.Name,
		Transport:      transportOf(d.NodeType),
		Attr:           *attr,
		BoardID:        readBoardID(d.Name),
		NumCompVectors: ctx.NumCompVectors(),
	}

	var gids []uverbs.GIDEntry
	if verbose {
		if gids, err = queryGIDs(ctx, port, attr.PhysPortCnt); err != nil {
			return nil, err
		}
	}
	for p := 1; p <= attr.PhysPortCnt; p++ {
		if port != 0 && p != port {
			continue
		}
		pa, err := ctx.QueryPort(p)
		if err != nil {
			return nil, portError(p, err)
		}
		pi := portInfo{Num: p, Attr: pa}
		for _, g := range gids {
			if g.Port == p && g.Index < pa.GIDTblLen {
				pi.GIDs = append(pi.GIDs, g)
			}
		}
		slices.SortFunc(pi.GIDs, func(a, b uverbs.GIDEntry) int { return a.Index - b.Index })
		info.Ports = append(info.Ports, pi)
	}
	return info, nil
}

// queryGIDs returns the valid GID entries of the device (of only port when
// it is not 0). ibv_devinfo queries every index below gid_tbl_len and skips
// the empty ones (ENODATA); the kernel's GID table query returns exactly
// the valid entries in one call. Kernels before 5.9 lack that method; then
// each index is queried on its own, and a failing index counts as empty as
// libibverbs' ibv_query_gid treats ENODATA.
func queryGIDs(ctx *uverbs.Context, port, nports int) ([]uverbs.GIDEntry, error) {
	gids, err := ctx.QueryGIDTable()
	if err == nil {
		return gids, nil
	}
	if !errors.Is(err, uverbs.ErrNotSupported) {
		return nil, &devError{status: 1, msg: "Failed to query the GID table", err: err}
	}
	gids = nil
	for p := 1; p <= nports; p++ {
		if port != 0 && p != port {
			continue
		}
		pa, err := ctx.QueryPort(p)
		if err != nil {
			return nil, portError(p, err)
		}
		for i := 0; i < pa.GIDTblLen; i++ {
			if g, err := ctx.QueryGID(p, i); err == nil {
				gids = append(gids, g)
			}
		}
	}
	return gids, nil
}

// portError is a failed port query: ibv_devinfo's line, and its status,
// which is what ibv_query_port returned (the errno).
func portError(port int, err error) error {
	status := 1
	var errno syscall.Errno
	if errors.As(err, &errno) && errno != 0 {
		status = int(errno)
	}
	return &devError{status: status, msg: fmt.Sprintf("Failed to query port %d props", port), err: err}
}

// readBoardID returns /sys/class/infiniband/<name>/board_id without its
// trailing newline, or "" when the driver has none (rxe).
func readBoardID(name string) string {
	b, err := os.ReadFile("/sys/class/infiniband/" + name + "/board_id")
	if err != nil {
		return ""
	}
	return strings.TrimRight(string(b), "\n")
}
