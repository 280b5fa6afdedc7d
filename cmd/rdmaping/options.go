package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"

	"github.com/pureverbs/pureverbs/internal/getopt"
	"github.com/pureverbs/pureverbs/rdmacm"
)

// rping's command line: getopt(3) with opterr = 0 (no complaint of its
// own), each option acted on as getopt hands it over.
const shortOpts = "a:I:Pp:C:S:t:scvVdq"

// Exit statuses of the C tool: main returns an errno, -1 (255) or a
// getaddrinfo error (negative, EAI_*).
const (
	exitEINVAL     = 22  // usage, bad size or count
	exitENODEV     = 19  // no RDMA device
	exitFailed     = 255 // -1: a failed rdma_cm call or a failed ping
	defaultPort    = 7174
	defaultSize    = 64
	rpingBufSize   = 64 * 1024 // RPING_BUFSIZE
	rpingMinSize   = 23        // RPING_MIN_BUFSIZE: sizeof("INT_MAX") + sizeof("rdma-ping-%d: ")
	maxAcceptedLen = rpingBufSize - 1
)

// options is rping's control block as the command line sets it.
type options struct {
	server     int        // -s 1, -c 0; -1 when neither was given
	addr       netip.Addr // -a: where the server binds, where the client connects (default 0.0.0.0)
	src        netip.Addr // -I: the client's source address (invalid: none)
	port       uint16     // -p (htobe16(atoi(arg)): the low 16 bits)
	persistent bool       // -P
	size       int32      // -S, ping data size
	count      int32      // -C, 0: forever
	verbose    bool       // -v: print the ping data
	validate   bool       // -V: compare what came back with what was sent
	debug      bool       // -d
	selfQP     bool       // -q: a QP the tool creates and moves itself
}

func defaultOptions() options {
	return options{server: -1, addr: netip.IPv4Unspecified(), port: defaultPort, size: defaultSize}
}

// usage is the C tool's usage text, printed on stdout.
func usage(w io.Writer) {
	fmt.Fprint(w, `rping -s [-vVd] [-S size] [-C count] [-a addr] [-p port]
rping -c [-vVd] [-S size] [-C count] [-I addr] -a addr [-p port]
	-c		client side
	-I		Source address to bind to for client.
	-s		server side.  To bind to any address with IPv6 use -a ::0
	-v		display ping data to stdout
	-V		validate ping data
	-d		debug printfs
	-S size 	ping data size
	-C count	ping count times
	-a addr		address
	-p port		port
	-P		persistent server mode allowing multiple connections
	-q		use self-created, self-modified QP
`)
}

// parseArgs reads the command line as rping's main does: each option in
// turn, with its messages (getaddrinfo's and -d's on stdout, a bad size
// or count on stderr). A status other than 0 ends the program with it.
//
// It keeps the C tool's quirks: the status of the last -a, -I, -S or -C
// that set one wins (a good -a after a bad -S lets the run go on with
// that size), -C's and -S's numbers are atoi's, -t is in the option
// string but unhandled (usage), operands are ignored, and -d prints only
// for the options after it.
func parseArgs(ctx context.Context, args []string, stdout, stderr io.Writer) (options, int) {
	o := defaultOptions()
	opts, _, perr := getopt.Parse(args, shortOpts, nil)
	ret := 0
	debugf := func(format string, a ...any) {
		if o.debug {
			fmt.Fprintf(stdout, format, a...)
		}
	}
	for _, op := range opts {
		switch op.Val {
		case 'a':
			var a netip.Addr
			a, ret = getAddr(ctx, op.Arg, stdout)
			if ret == 0 {
				o.addr = a
			}
		case 'I':
			var a netip.Addr
			a, ret = getAddr(ctx, op.Arg, stdout)
			if ret == 0 {
				o.src = a
			}
		case 'P':
			o.persistent = true
		case 'p':
			n := getopt.Atoi(op.Arg)
			o.port = uint16(n)
			debugf("port %d\n", n)
		case 's':
			o.server = 1
			debugf("server\n")
		case 'c':
			o.server = 0
			debugf("client\n")
		case 'S':
			o.size = getopt.Atoi(op.Arg)
			// The C check compares with a size_t: a negative size passes
			// the first test, and the second, and fails at the malloc.
			if uint64(int64(o.size)) < rpingMinSize || o.size > maxAcceptedLen {
				fmt.Fprintf(stderr, "Invalid size %d (valid range is %d to %d)\n", o.size, rpingMinSize, rpingBufSize)
				ret = exitEINVAL
			} else {
				debugf("size %d\n", o.size)
			}
		case 'C':
			o.count = getopt.Atoi(op.Arg)
			if o.count < 0 {
				fmt.Fprintf(stderr, "Invalid count %d\n", o.count)
				ret = exitEINVAL
			} else {
				debugf("count %d\n", o.count)
			}
		case 'v':
			o.verbose = true
			debugf("verbose\n")
		case 'V':
			o.validate = true
			debugf("validate data\n")
		case 'd':
			o.debug = true
		case 'q':
			o.selfQP = true
		default: // 't': in the option string, not in the switch
			usage(stdout)
			return o, exitEINVAL
		}
	}
	if perr != nil { // an unknown option or a missing argument: getopt's '?'
		usage(stdout)
		return o, exitEINVAL
	}
	if ret != 0 {
		return o, ret & 0xff
	}
	if o.server == -1 {
		usage(stdout)
		return o, exitEINVAL
	}
	return o, 0
}

// getAddr is rping's get_addr: getaddrinfo(name, NULL, NULL) and the
// first answer's address (rdmacm.GetAddrInfo reads names as glibc does).
// On failure it prints the C tool's line on stdout and returns
// getaddrinfo's (negative) error code.
func getAddr(ctx context.Context, name string, stdout io.Writer) (netip.Addr, int) {
	// An empty name is glibc's failed lookup; for GetAddrInfo it is no
	// node at all. ("*", glibc's NULL node, fails in GetAddrInfo with no
	// service, as in getaddrinfo.)
	gerr := &rdmacm.GAIError{Code: rdmacm.EAINoName}
	if name != "" {
		ai, err := rdmacm.GetAddrInfo(ctx, name, "", nil)
		if err == nil {
			return ai.Dst.Addr(), 0
		}
		if !errors.As(err, &gerr) {
			gerr = &rdmacm.GAIError{Code: rdmacm.EAIFail}
		}
	}
	fmt.Fprintf(stdout, "getaddrinfo failed (%s) - invalid hostname or IP address\n", gerr.Reason())
	return netip.Addr{}, gerr.Code
}
