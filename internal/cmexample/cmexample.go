// Package cmexample is what the ports of librdmacm's connection examples
// (cmd/rdmaudaddy for udaddy, cmd/rdmacmatose for cmatose; cmd/rdmamckey
// for mckey uses its output, polling and posting) share, as the
// C examples share their structure: the options both take, the
// addresses (get_rdma_addr), the server's listener and the client's
// resolution, the connect phase's common events, the busy-polling of a
// CQ, and main's end ("test complete", "return status N"), each printing
// what the C example prints under its name.
package cmexample

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/pureverbs/pureverbs/internal/cmsync"
	"github.com/pureverbs/pureverbs/internal/getopt"
	"github.com/pureverbs/pureverbs/rdmacm"
	"github.com/pureverbs/pureverbs/uverbs"
)

// CMFailed is what a failed librdmacm call returns (it sets errno).
const CMFailed = -1

// ENOMEM is what connect_handler returns for a request beyond -c.
const ENOMEM = 12

// familyIB is AF_IB, which -f gid asks for and GetAddrInfo refuses.
const familyIB = 27

// resolveTimeout is the examples' for address and route resolution.
const resolveTimeout = 2000 * time.Millisecond

// Options are the command line both examples take.
type Options struct {
	Dst, Src    cmsync.Host // -s, -b
	Port        string
	Connections int // -c
	Count, Size int // -C, -S
	TOS         uint8
	SetTOS      bool // -t
	PS          rdmacm.PortSpace
	Flags       rdmacm.AIFlags // -f, and AIPassive on the server
	Family      int
}

// Common takes one of the options both examples have (-s, -b, -c, -C,
// -S, -t, -f), as their getopt loops do; false for any other.
func (o *Options) Common(op getopt.Opt, stderr io.Writer) bool {
	switch op.Val {
	case 's':
		o.Dst = cmsync.SetHost(op.Arg)
	case 'b':
		o.Src = cmsync.SetHost(op.Arg)
	case 'c':
		o.Connections = int(getopt.Atoi(op.Arg))
	case 'C':
		o.Count = int(getopt.Atoi(op.Arg))
	case 'S':
		o.Size = int(getopt.Atoi(op.Arg))
	case 't':
		o.SetTOS, o.TOS = true, uint8(getopt.Strtoul(op.Arg))
	case 'f':
		switch a := strings.ToLower(op.Arg); {
		case strings.HasPrefix(a, "ip"):
			o.Flags = rdmacm.AINumericHost
		case strings.HasPrefix(a, "gid"):
			o.Flags, o.Family = rdmacm.AINumericHost|rdmacm.AIFamily, familyIB
		case !strings.HasPrefix(a, "name"):
			fmt.Fprintf(stderr, "Warning: unknown address format\n")
		}
	default:
		return false
	}
	return true
}

// Hints are getaddrinfo's hints from the options.
func (o *Options) Hints() *rdmacm.AddrInfo {
	return &rdmacm.AddrInfo{Flags: o.Flags, Family: o.Family, PortSpace: o.PS}
}

// Env is one run of an example: its name (the prefix of its lines),
// options, output, event channel and the connect phase's count.
type Env struct {
	Name           string
	O              Options
	Stdout, Stderr io.Writer
	Ch             *rdmacm.EventChannel
	AI             *rdmacm.AddrInfo
	ConnectsLeft   int
}

// Perror prints "name: what: strerror(errno)".
func (e *Env) Perror(what string, err error) { cmsync.Perror(e.Stderr, e.Name+": "+what, err) }

// Printf prints a line of the example's standard output.
func (e *Env) Printf(format string, args ...any) { fmt.Fprintf(e.Stdout, format, args...) }

// Run is the examples' main after the options: the event channel
// (create_first_event_channel), the client's IDs (alloc_nodes), the
// client or the server (o.Dst says which, the server passive), then
// "test complete", destroy (their nodes), the channel's close and
// "return status N". It returns the exit status (1 when the channel or
// an ID cannot be made, as the C examples exit(1)).
func (e *Env) Run(ctx context.Context, ids func() error, client, server func(context.Context) int, destroy func()) int {
	// -S 0 zeroes -C only where create_message does, per node (ZeroCount):
	// the CQ of a node is sized, and the MTU checked, with -C as given,
	// and a server of no nodes (-c 0) keeps it.
	e.ConnectsLeft = e.O.Connections
	var err error
	if e.Ch, err = cmsync.CreateFirstEventChannel(e.Stderr); err != nil {
		return 1
	}
	if err := ids(); err != nil {
		destroy()
		e.Ch.Close()
		return 1
	}
	var ret int
	if e.O.Dst.Set {
		ret = client(ctx)
	} else {
		e.O.Flags |= rdmacm.AIPassive
		ret = server(ctx)
	}
	e.Printf("test complete\n")
	destroy()
	e.Ch.Close()
	e.Printf("return status %d\n", ret)
	return ret & 0xff
}

// ZeroCount is the start of the examples' create_message: no messages
// when they are empty (message_count is a global: every later node, and
// the transfers, see the zero).
func (e *Env) ZeroCount() {
	if e.O.Size == 0 {
		e.O.Count = 0
	}
}

// MaxNodes bounds -c: the C examples malloc their nodes, which fails for
// a negative count (the size_t product wraps) or an absurd one, where make
// would end the Go program with a fatal out-of-memory error instead.
const MaxNodes = 1 << 20

// NodesFit is alloc_nodes' malloc: false, with the C examples' line, for
// a count it could not allocate (the caller ends the run with status 1).
func (e *Env) NodesFit(n int) bool {
	if n < 0 || n > MaxNodes {
		e.Printf("%s: unable to allocate memory for test nodes\n", e.Name)
		return false
	}
	return true
}

// ErrNodes is the error of a node count NodesFit refused.
var ErrNodes = errors.New("unable to allocate memory for test nodes")

// NewIDs creates the client's n IDs in the options' port space.
func (e *Env) NewIDs(n int) ([]*rdmacm.ID, error) {
	if !e.O.Dst.Set {
		return make([]*rdmacm.ID, n), nil
	}
	ids := make([]*rdmacm.ID, n)
	for i := range ids {
		id, err := e.Ch.CreateID(e.O.PS)
		if err != nil {
			return ids, err
		}
		ids[i] = id
	}
	return ids, nil
}

// Listen is run_server's start: "starting server", the listener bound to
// -b's address (or every address) and listening. It returns the
// listener, or nil and the run's status.
func (e *Env) Listen(ctx context.Context) (*rdmacm.ID, int) {
	e.Printf("%s: starting server\n", e.Name)
	listen, err := e.Ch.CreateID(e.O.PS)
	if err != nil {
		e.Perror("listen request failed", err)
		return nil, CMFailed
	}
	if e.AI, err = cmsync.GetRDMAAddr(ctx, e.O.Src, e.O.Dst, e.O.Port, e.O.Hints()); err != nil {
		listen.Destroy()
		return nil, cmsync.GAIStatus(e.Stdout, e.Name+": getrdmaaddr", err)
	}
	if err := listen.BindAddr(e.AI.Src); err != nil {
		e.Perror("bind address failed", err)
		listen.Destroy()
		return nil, CMFailed
	}
	if err := listen.Listen(0); err != nil {
		e.Perror("failure trying to listen", err)
		listen.Destroy()
		return nil, CMFailed
	}
	return listen, 0
}

// Connect is run_client's start: "starting client", the addresses,
// "connecting" and each ID's address resolution. It returns the run's
// status (0 to go on).
func (e *Env) Connect(ctx context.Context, ids []*rdmacm.ID) int {
	e.Printf("%s: starting client\n", e.Name)
	var err error
	if e.AI, err = cmsync.GetRDMAAddr(ctx, e.O.Src, e.O.Dst, e.O.Port, e.O.Hints()); err != nil {
		return cmsync.GAIStatus(e.Stdout, e.Name+": getaddrinfo", err)
	}
	e.Printf("%s: connecting\n", e.Name)
	for _, id := range ids {
		if err := id.ResolveAddr(e.AI.Src, e.AI.Dst, resolveTimeout); err != nil {
			e.Perror("failure getting addr", err)
			e.ConnectsLeft--
			return CMFailed
		}
	}
	return 0
}

// AddrResolved is addr_handler: -t's TOS set (an error is printed, not
// fatal), then options, if not nil, sets the example's own, then route
// resolution.
func (e *Env) AddrResolved(id *rdmacm.ID, options func(*rdmacm.ID)) int {
	if e.O.SetTOS {
		if err := id.SetTOS(e.O.TOS); err != nil {
			e.Perror("set TOS option failed", err)
		}
	}
	if options != nil {
		options(id)
	}
	if err := id.ResolveRoute(resolveTimeout); err != nil {
		e.Perror("resolve route failed", err)
		e.ConnectsLeft--
		return CMFailed
	}
	return 0
}

// ConnectEvents is udaddy's and mckey's connect_events: the channel's
// events through handle until every connection is made or failed or
// handle returns a status. A failed read ends it with -1, printing
// nothing, as the C loop does.
func (e *Env) ConnectEvents(ctx context.Context, handle func(*rdmacm.Event) int) int {
	ret := 0
	for e.ConnectsLeft > 0 && ret == 0 {
		ev, err := e.Ch.GetEvent(ctx)
		if err != nil {
			return CMFailed
		}
		ret = handle(&ev)
	}
	return ret
}

// EventError is cma_handler's case for a failed connection: its line,
// one connection fewer to wait for, and the event's status.
func (e *Env) EventError(ev *rdmacm.Event) int {
	e.Printf("%s: event: %s, error: %d\n", e.Name, ev.Type, ev.Status)
	e.ConnectsLeft--
	return int(ev.Status)
}

// IsError reports whether ev is one of the events EventError handles.
func IsError(ev *rdmacm.Event) bool {
	switch ev.Type {
	case rdmacm.EventAddrError, rdmacm.EventRouteError, rdmacm.EventConnectError, rdmacm.EventUnreachable, rdmacm.EventRejected:
		return true
	}
	return false
}

// Poll busy-polls cq for count completions (poll_cqs' inner loop);
// first, if not nil, sees the first completion of every batch polled, and
// a non-zero return from it ends the poll with that status. ctx bounds
// the wait (the C examples spin for ever).
func (e *Env) Poll(ctx context.Context, cq *uverbs.CQ, count int, first func(*uverbs.WC) int) int {
	var wc [8]uverbs.WC
	for done := 0; done < count; {
		if err := ctx.Err(); err != nil {
			e.Printf("%s: failed polling CQ: %v\n", e.Name, err)
			return -1
		}
		got, err := cq.Poll(wc[:])
		if err != nil {
			e.Printf("%s: failed polling CQ: %d\n", e.Name, -cmsync.ErrnoValue(err))
			return -cmsync.ErrnoValue(err)
		}
		if got > 0 && first != nil {
			if ret := first(&wc[0]); ret != 0 {
				return ret
			}
		}
		done += got
	}
	return 0
}

// PostRecvs posts count receives of all of mr (post_recvs).
func (e *Env) PostRecvs(qp *uverbs.QP, mr *uverbs.MR, count int) int {
	for range count {
		if err := qp.PostRecv([]uverbs.RecvWR{{SGL: []uverbs.SGE{mr.SGE(0, mr.Len())}}}); err != nil {
			e.Printf("failed to post receives: %d\n", cmsync.ErrnoValue(err))
			return cmsync.ErrnoValue(err)
		}
	}
	return 0
}

// PostSends posts wr count times (post_sends).
func (e *Env) PostSends(qp *uverbs.QP, wr []uverbs.SendWR, count int) int {
	for range count {
		if err := qp.PostSend(wr); err != nil {
			e.Printf("failed to post sends: %d\n", cmsync.ErrnoValue(err))
			return cmsync.ErrnoValue(err)
		}
	}
	return 0
}

// Usage prints getopt's complaint and the examples' usage lines common
// to both, then extra (each a line after a tab), and returns 1.
func Usage(prog string, perr error, stdout, stderr io.Writer, portSpaces string, extra ...string) int {
	fmt.Fprintf(stderr, "%s: %v\n", prog, perr)
	fmt.Fprintf(stdout, "usage: %s\n\t[-s server_address]\n\t[-b bind_address]\n\t[-f address_format]\n"+
		"\t    name, ip, ipv6, or gid\n\t[-P port_space]\n\t    %s\n\t[-c connections]\n"+
		"\t[-C message_count]\n\t[-S message_size]\n\t[-t type_of_service]\n", prog, portSpaces)
	for _, l := range extra {
		fmt.Fprintf(stdout, "\t%s\n", l)
	}
	return 1
}
