// Command devinfo prints the RDMA devices and their attributes, like
// rdma-core's ibv_devinfo (libibverbs/examples/devinfo.c), using only the
// pureverbs library.
//
//	devinfo [-d DEV] [-i PORT] [-l] [-v]
//
//	-d, --ib-dev=DEV    only device DEV (default: all devices)
//	-i, --ib-port=PORT  only port PORT (default: all ports)
//	-l, --list          print only the device names
//	-v, --verbose       also print the extended device attributes and the GID table
//
// The output has the same layout, field names and values as the
// ibv_devinfo of rdma-core v44 (Debian 12), so the two can be compared
// line by line.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/pureverbs/pureverbs/uverbs"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// options are the parsed command-line flags.
type options struct {
	dev     string
	port    int // 0: all ports
	list    bool
	verbose bool
}

const usageText = `Usage: devinfo             print the ca attributes

Options:
  -d, --ib-dev=<dev>     use IB device <dev> (default all devices)
  -i, --ib-port=<port>   use port <port> of IB device (default all ports)
  -l, --list             print only the IB devices names
  -v, --verbose          print all the attributes of the IB device(s)
`

// errUsage is returned by parseArgs for bad arguments it has already
// reported on stderr.
var errUsage = errors.New("usage error")

// parseArgs parses the command line; on a bad one it prints the problem and
// the usage to stderr and returns an error.
func parseArgs(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	var port string
	fs := flag.NewFlagSet("devinfo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usageText) }
	for _, n := range []string{"d", "ib-dev"} {
		fs.StringVar(&o.dev, n, "", "use IB device `dev`")
	}
	for _, n := range []string{"i", "ib-port"} {
		fs.StringVar(&port, n, "", "use `port` of the IB device")
	}
	for _, n := range []string{"l", "list"} {
		fs.BoolVar(&o.list, n, false, "print only the IB device names")
	}
	for _, n := range []string{"v", "verbose"} {
		fs.BoolVar(&o.verbose, n, false, "print all the attributes of the IB device(s)")
	}
	if err := fs.Parse(args); err != nil {
		return nil, err // the flag package has printed the problem and the usage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "devinfo: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return nil, errUsage
	}
	if port != "" {
		// ibv_devinfo parses the port with strtol(..., 0): decimal, 0x hex or 0 octal.
		n, err := strconv.ParseInt(port, 0, 32)
		if err != nil || n <= 0 || n > 255 {
			fmt.Fprintf(stderr, "devinfo: invalid port %q: want a number from 1 to 255\n", port)
			fs.Usage()
			return nil, errUsage
		}
		o.port = int(n)
	}
	return o, nil
}

// run is the whole command: it parses args, writes the report to stdout and
// diagnostics to stderr, and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	o, err := parseArgs(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return 1 // already reported with the usage
	}

	devs, err := uverbs.Devices()
	if err != nil {
		fmt.Fprintf(stderr, "devinfo: %v\n", err)
		return 1
	}

	if o.list {
		names := make([]string, len(devs))
		for i, d := range devs {
			names[i] = d.Name
		}
		writeList(stdout, names)
		return 0
	}

	if o.dev != "" {
		i := slices.IndexFunc(devs, func(d uverbs.Device) bool { return d.Name == o.dev })
		if i < 0 {
			names := make([]string, len(devs))
			for i, d := range devs {
				names[i] = d.Name
			}
			fmt.Fprintf(stderr, "devinfo: IB device '%s' wasn't found (devices: %s)\n", o.dev, strings.Join(names, ", "))
			return 1
		}
		devs = devs[i : i+1]
	}

	status := 0
	for _, d := range devs {
		info, err := gather(d, o.port, o.verbose)
		if err != nil {
			fmt.Fprintf(stderr, "devinfo: %s: %v\n", d.Name, err)
			status = 1
			continue
		}
		writeDevice(stdout, info, o.verbose)
	}
	return status
}

// gather opens d and collects everything writeDevice prints: the device
// attributes, and for each selected port (all when port is 0) the port
// attributes and, when verbose, the port's GIDs.
func gather(d uverbs.Device, port int, verbose bool) (*deviceInfo, error) {
	ctx, err := uverbs.Open(d)
	if err != nil {
		return nil, fmt.Errorf("failed to open device: %w", err)
	}
	defer ctx.Close()

	attr, err := ctx.QueryDevice()
	if err != nil {
		return nil, fmt.Errorf("failed to query device props: %w", err)
	}
	if port > attr.PhysPortCnt {
		return nil, fmt.Errorf("invalid port %d requested: the device has %d port(s)", port, attr.PhysPortCnt)
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
			return nil, fmt.Errorf("failed to query port %d props: %w", p, err)
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
		return nil, fmt.Errorf("failed to query the GID table: %w", err)
	}
	gids = nil
	for p := 1; p <= nports; p++ {
		if port != 0 && p != port {
			continue
		}
		pa, err := ctx.QueryPort(p)
		if err != nil {
			return nil, fmt.Errorf("failed to query port %d props: %w", p, err)
		}
		for i := 0; i < pa.GIDTblLen; i++ {
			if g, err := ctx.QueryGID(p, i); err == nil {
				gids = append(gids, g)
			}
		}
	}
	return gids, nil
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
