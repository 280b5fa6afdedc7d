// Command asyncwatch prints the asynchronous events of an RDMA device as
// they arrive: the Go counterpart of rdma-core's ibv_asyncwatch, built on
// the async package.
//
//	asyncwatch [-d DEV] [-h]
//
// Its output is line for line what ibv_asyncwatch of rdma-core v44 prints:
// a header naming the device and the async event descriptor, then one line
// per event, for instance
//
//	rxe0: async event FD 4
//	  event_type IBV_EVENT_PORT_ERR (10), port 1
//	  event_type IBV_EVENT_PORT_ACTIVE (9), port 1
//
// (the descriptor number is this process's own, so it may differ from the C
// tool's). Without -d it watches the first device, as ibv_asyncwatch does.
// Each event is acknowledged after its line is written; SIGINT or SIGTERM
// closes the device and then kills the program with that signal, as it
// kills ibv_asyncwatch, which installs no handler (a shell shows 130 or
// 143).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/pureverbs/pureverbs/async"
	"github.com/pureverbs/pureverbs/internal/getopt"
	"github.com/pureverbs/pureverbs/internal/memlock"
	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/uverbs"
)

func main() {
	prog = os.Args[0]
	sigs := make(chan os.Signal, 1)
	for _, sig := range []os.Signal{os.Interrupt, sigterm} {
		if !signal.Ignored(sig) { // started ignoring it (nohup, &): C keeps ignoring it
			signal.Notify(sigs, sig)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var got os.Signal
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case got = <-sigs:
			cancel()
		case <-ctx.Done():
		}
	}()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	cancel()
	<-done
	if got != nil {
		// ibv_asyncwatch installs no handler and dies of the signal (a
		// shell shows 130 or 143): so does this, once the context is
		// closed and the events read are acknowledged.
		signal.Reset(got)
		if s, ok := got.(syscall.Signal); ok {
			syscall.Kill(os.Getpid(), s)
			// The runtime's handler, no longer notifying, dies of it
			// (its default for SIGINT and SIGTERM) on whichever thread
			// takes it; this waits for that, and is the shell's status
			// if it somehow does not come.
			time.Sleep(5 * time.Second)
			os.Exit(128 + int(s))
		}
	}
	os.Exit(code)
}

// sigterm stops the watcher like SIGINT does.
var sigterm os.Signal = syscall.SIGTERM

const usageText = `Usage:
  %s            start an asyncwatch process

Options:
  -d, --ib-dev=<dev>     use IB device <dev> (default first device found)
  -h, --help             print a help text and exit
`

// prog names the program in messages and the usage, as argv[0] does.
var prog = "asyncwatch"

var longOpts = []getopt.Long{{Name: "ib-dev", HasArg: true, Val: 'd'}, {Name: "help", Val: 'h'}}

// run is the whole program: it parses args (without the program name),
// watches the device until ctx ends and returns the exit status. Event lines
// go to stdout, one write per line; diagnostics go to stderr. The options
// are ibv_asyncwatch's getopt_long loop: -h prints the usage (on stdout)
// and ends with 0 when it is met, a bad option with getopt's complaint,
// the usage and 1; operands are ignored.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var (
		devName string
		devSet  bool // -d was given, even as "" (looked for by that name, as C does)
	)
	opts, _, perr := getopt.Parse(args, "d:h", longOpts)
	for _, p := range opts {
		switch p.Val {
		case 'd':
			devName, devSet = p.Arg, true
		case 'h':
			fmt.Fprintf(stdout, usageText, prog)
			return 0
		}
	}
	if perr != nil {
		fmt.Fprintf(stderr, "%s: %v\n", prog, perr)
		fmt.Fprintf(stdout, usageText, prog)
		return 1
	}

	// ibv_get_device_list (asyncwatch.c:125), after the options: libibverbs'
	// RLIMIT_MEMLOCK warning, devices or not.
	memlock.Warn(stderr)
	dev, err := pickDevice(devName, devSet)
	if errors.Is(err, syscall.ENOSYS) {
		// No RDMA support in the kernel: ibv_get_device_list fails.
		fmt.Fprintf(stderr, "Failed to get IB devices list: %s\n", sys.Strerror(syscall.ENOSYS))
		return 1
	}
	if err != nil {
		fmt.Fprintf(stderr, "IB device %s not found\n", devName)
		fmt.Fprintf(stderr, "  (%v)\n", err) // the library's detail, as the ping-pong tools give it
		return 1
	}
	c, err := uverbs.Open(dev)
	if err != nil {
		fmt.Fprintf(stderr, "Couldn't get context for %s\n", dev.Name)
		fmt.Fprintf(stderr, "  (%v)\n", err)
		return 1
	}
	defer c.Close()
	r, err := async.NewReader(c)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", prog, err)
		return 1
	}
	if _, err := fmt.Fprintf(stdout, "%s: async event FD %d\n", dev.Name, r.Fd()); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", prog, err)
		return 1
	}
	if err := watch(ctx, r, stdout); err != nil {
		// ibv_asyncwatch returns 1 without a word when
		// ibv_get_async_event fails; the library's detail line only.
		fmt.Fprintf(stderr, "  (%v)\n", err)
		return 1
	}
	return 0
}

// pickDevice returns the device called name when one was given (set),
// even "", or else the first device (in name order, as libibverbs lists
// them).
func pickDevice(name string, set bool) (uverbs.Device, error) {
	if set {
		return uverbs.DeviceByName(name)
	}
	devs, err := uverbs.Devices()
	if err != nil {
		return uverbs.Device{}, err
	}
	return devs[0], nil // Devices never returns an empty list without an error
}

// eventSource is what watch needs of an *async.Reader.
type eventSource interface {
	Get(ctx context.Context) (async.Event, error)
	Ack(ev async.Event) error
}

// watch prints each event src returns, then acknowledges it, until ctx
// ends (nil) or getting, printing or acknowledging fails (that error).
func watch(ctx context.Context, src eventSource, w io.Writer) error {
	for {
		ev, err := src.Get(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		_, werr := io.WriteString(w, formatEvent(ev))
		if err := src.Ack(ev); err != nil {
			return err
		}
		if werr != nil {
			return werr
		}
	}
}

// formatEvent returns ibv_asyncwatch's line for ev, newline included:
//
//	printf("  event_type %s (%d), port %d\n", event_name_str(type), type, element.port_num)
//
// element.port_num is an int in a union: the port for port events, the
// kernel's element for the others (libibverbs' default case), and the low
// 32 bits of the object pointer for affiliated events, which on the wire is
// the user handle. Raw is that kernel element, so its low 32 bits, read as
// a C int, are what the C tool prints in every case.
func formatEvent(ev async.Event) string {
	return fmt.Sprintf("  event_type %s (%d), port %d\n", eventName(ev.Type), int32(ev.Type), int32(uint32(ev.Raw)))
}

// eventName is v44's event_name_str: port and device events by name,
// everything else (affiliated events, IBV_EVENT_DEVICE_SPEED_CHANGE, which
// v44 does not know yet, unknown values) as "unexpected".
func eventName(t async.EventType) string {
	switch t {
	case async.DeviceFatal, async.PortActive, async.PortErr, async.LIDChange,
		async.PKeyChange, async.SMChange, async.ClientReregister, async.GIDChange:
		return t.String()
	}
	return "unexpected"
}
