package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"strings"

	"github.com/pureverbs/pureverbs/internal/getopt"
)

// rping's command line: getopt(3) with opterr = 0 (no complaint of its
// own), each option acted on as getopt hands it over.
const shortOpts = "a:I:Pp:C:S:t:scvVdq"

// Exit statuses of the C tool: main returns an errno, -1 (255) or a
// getaddrinfo error (negative, EAI_*).
const (
	exitEINVAL     = 22  // usage, bad size or count
	exitENODEV     = 19  // no RDMA device
	exitENOTSUP    = 95  // -q (not in the C tool: it supports it)
	exitFailed     = 255 // -1: a failed rdma_cm call or a failed ping
	defaultPort    = 7174
	defaultSize    = 64
	rpingBufSize   = 64 * 1024 // RPING_BUFSIZE
	rpingMinSize   = 23        // RPING_MIN_BUFSIZE: sizeof("INT_MAX") + sizeof("rdma-ping-%d: ")
	maxAcceptedLen = rpingBufSize - 1
)

// getaddrinfo's error codes (netdb.h) and gai_strerror's texts.
const (
	eaiNoName = -2
	eaiAgain  = -3
	eaiFail   = -4
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
	selfQP     bool       // -q: refused
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
			n := atoi(op.Arg)
			o.port = uint16(n)
			debugf("port %d\n", n)
		case 's':
			o.server = 1
			debugf("server\n")
		case 'c':
			o.server = 0
			debugf("client\n")
		case 'S':
			o.size = atoi(op.Arg)
			// The C check compares with a size_t: a negative size passes
			// the first test, and the second, and fails at the malloc.
			if uint64(int64(o.size)) < rpingMinSize || o.size > maxAcceptedLen {
				fmt.Fprintf(stderr, "Invalid size %d (valid range is %d to %d)\n", o.size, rpingMinSize, rpingBufSize)
				ret = exitEINVAL
			} else {
				debugf("size %d\n", o.size)
			}
		case 'C':
			o.count = atoi(op.Arg)
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

// atoi is C's atoi: (int)strtol(s, NULL, 10): leading white space, a
// sign, decimal digits, the rest ignored; out of long's range it clamps,
// and the conversion to int keeps the low 32 bits.
func atoi(s string) int32 {
	s = strings.TrimLeft(s, " \t\n\v\f\r")
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	var v uint64
	over := false
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			break
		}
		if v > (math.MaxUint64-9)/10 {
			over = true
			continue
		}
		v = v*10 + uint64(c-'0')
	}
	var n int64
	switch {
	case !neg && (over || v > math.MaxInt64):
		n = math.MaxInt64
	case neg && (over || v > 1<<63):
		n = math.MinInt64
	case neg:
		n = -int64(v)
	default:
		n = int64(v)
	}
	return int32(n)
}

// getAddr is rping's get_addr: getaddrinfo(name, NULL, NULL) and the
// first answer's address. On failure it prints the C tool's line on
// stdout and returns getaddrinfo's (negative) error code.
func getAddr(ctx context.Context, name string, stdout io.Writer) (netip.Addr, int) {
	a, code := resolveHost(ctx, name)
	if code != 0 {
		fmt.Fprintf(stdout, "getaddrinfo failed (%s) - invalid hostname or IP address\n", gaiStrerror(code))
	}
	return a, code
}

// resolveHost reads name as glibc's getaddrinfo does with no hints: an
// IPv4 address in any form inet_aton takes ("10.1" is 10.0.0.1, "0x0a" is
// 10.0.0.0), an IPv6 address (with a %zone), or a host name (/etc/hosts,
// DNS). The code is 0 or an EAI_* value.
func resolveHost(ctx context.Context, name string) (netip.Addr, int) {
	if a, ok := inetAtonExact(name); ok {
		return a, 0
	}
	if strings.Contains(name, ":") {
		if a, err := netip.ParseAddr(name); err == nil && a.Is6() {
			return a, 0
		}
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", name)
	if err == nil && len(addrs) > 0 {
		return addrs[0].Unmap(), 0
	}
	if numericName(name) {
		// glibc asks DNS for a name of digits and dots that inet_aton
		// refused ("1.2.3.256"); Go's resolver refuses it unasked. No
		// such name exists in DNS, so what glibc reports is whether DNS
		// answered: the same name under .invalid asks it that.
		_, err = net.DefaultResolver.LookupNetIP(ctx, "ip", name+".invalid")
	}
	var de *net.DNSError
	switch {
	case err == nil, errors.As(err, &de) && de.IsNotFound:
		return netip.Addr{}, eaiNoName
	case errors.As(err, &de) && (de.IsTemporary || de.IsTimeout):
		return netip.Addr{}, eaiAgain
	}
	return netip.Addr{}, eaiFail
}

// numericName reports whether name is only digits and dots (and not
// empty): a name Go's resolver refuses as no domain name.
func numericName(name string) bool {
	return name != "" && strings.Trim(name, "0123456789.") == ""
}

func gaiStrerror(code int) string {
	switch code {
	case eaiNoName:
		return "Name or service not known"
	case eaiAgain:
		return "Temporary failure in name resolution"
	case eaiFail:
		return "Non-recoverable failure in name resolution"
	}
	return "Unknown error"
}

// inetAtonExact is glibc's __inet_aton_exact: one to four parts separated
// by dots, each a C number (0x hex, 0 octal, else decimal) that starts
// with a digit; the last part fills the remaining bytes; nothing may
// follow.
func inetAtonExact(s string) (netip.Addr, bool) {
	var parts []uint64
	for {
		if s == "" || s[0] < '0' || s[0] > '9' {
			return netip.Addr{}, false
		}
		v, rest, ok := strtoulC(s)
		if !ok {
			return netip.Addr{}, false
		}
		parts = append(parts, v)
		s = rest
		if s == "" {
			break
		}
		if s[0] != '.' || len(parts) == 4 || v > 0xff {
			return netip.Addr{}, false
		}
		s = s[1:]
	}
	last := parts[len(parts)-1]
	if last > math.MaxUint32>>(8*(len(parts)-1)) {
		return netip.Addr{}, false
	}
	var w uint32
	for i, p := range parts[:len(parts)-1] {
		w |= uint32(p) << (24 - 8*i)
	}
	w |= uint32(last)
	return netip.AddrFrom4([4]byte{byte(w >> 24), byte(w >> 16), byte(w >> 8), byte(w)}), true
}

// strtoulC reads a number as strtoul(s, &end, 0) does from a leading
// digit: "0x" and a hex digit start hex, "0" octal, else decimal. ok is
// false past 32 bits (inet_aton's limit).
func strtoulC(s string) (v uint64, rest string, ok bool) {
	base := uint64(10)
	i := 0
	switch {
	case len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') && hexDigit(s[2]) >= 0:
		base, i = 16, 2
	case s[0] == '0':
		base = 8
	}
	for ; i < len(s); i++ {
		d := hexDigit(s[i])
		if d < 0 || uint64(d) >= base {
			break
		}
		v = v*base + uint64(d)
		if v > math.MaxUint32 {
			return 0, "", false
		}
	}
	return v, s[i:], true
}

func hexDigit(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}
