// Command rxectl is the guest-side helper of the rdma_rxe test VM. It adds,
// deletes and lists RDMA links through RDMA netlink (internal/sys NLConn) and
// waits for ports to become ACTIVE.
//
//	rxectl add NAME NETDEV        # rdma link add NAME type rxe netdev NETDEV
//	rxectl del NAME               # rdma link delete NAME
//	rxectl list                   # index, name, node GUID, port count
//	rxectl wait [-timeout 20s] NAME...   # until every port of NAME is ACTIVE
//	rxectl pty CMD [ARGS...]      # run CMD on a pseudo-terminal (line-buffered C stdio)
//
// In the two-host topology (rxevm -hosts 2, see testkit.Host):
//
//	rxectl agent ADDR             # host B: serve programs to tests on host A until agent-stop
//	rxectl agent-wait [-timeout 60s] ADDR   # until the agent at ADDR answers
//	rxectl agent-stop ADDR        # make the agent at ADDR return (exit 0)
//	rxectl remote [-e K=V]... ADDR CMD [ARGS...]   # run CMD through the agent; its output and exit status
//	rxectl listening [-timeout 30s] PORT    # until a local TCP socket listens on PORT
//
// Run it inside a network namespace (ip netns exec) to create the link there.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/internal/testkit"
)

func usage() {
	fmt.Fprintln(os.Stderr, "usage: rxectl add NAME NETDEV | del NAME | list | wait [-timeout D] NAME... | pty CMD [ARGS...]\n"+
		"       rxectl agent ADDR | agent-wait [-timeout D] ADDR | agent-stop ADDR | remote [-e K=V]... ADDR CMD [ARGS...] | listening [-timeout D] PORT")
	os.Exit(2)
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch args := os.Args[2:]; os.Args[1] {
	case "add":
		if len(args) != 2 {
			usage()
		}
		err = withConn(func(ctx context.Context, c *sys.NLConn) error { return c.AddLink(ctx, args[0], "rxe", args[1]) })
	case "del":
		if len(args) != 1 {
			usage()
		}
		err = withConn(func(ctx context.Context, c *sys.NLConn) error { return c.DelLink(ctx, args[0]) })
	case "list":
		err = withConn(func(ctx context.Context, c *sys.NLConn) error {
			devs, err := c.Devices(ctx)
			for _, d := range devs {
				fmt.Printf("%d %s %016x ports=%d\n", d.Index, d.Name, d.NodeGUID, d.Ports)
			}
			return err
		})
	case "wait":
		fs := flag.NewFlagSet("wait", flag.ExitOnError)
		timeout := fs.Duration("timeout", 20*time.Second, "give up after this long")
		fs.Parse(args)
		ctx, cancel := context.WithTimeout(context.Background(), *timeout)
		defer cancel()
		for _, dev := range fs.Args() {
			if err = waitActive(ctx, dev); err != nil {
				break
			}
		}
	case "pty":
		if len(args) == 0 {
			usage()
		}
		err = runOnPTY(args[0], args[1:]...)
	case "agent":
		if len(args) != 1 {
			usage()
		}
		err = serveAgent(args[0])
	case "agent-wait":
		fs := flag.NewFlagSet("agent-wait", flag.ExitOnError)
		timeout := fs.Duration("timeout", time.Minute, "give up after this long")
		fs.Parse(args)
		if fs.NArg() != 1 {
			usage()
		}
		ctx, cancel := context.WithTimeout(context.Background(), *timeout)
		defer cancel()
		err = testkit.WaitAgent(ctx, fs.Arg(0))
	case "agent-stop":
		if len(args) != 1 {
			usage()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err = testkit.StopAgent(ctx, args[0])
	case "remote":
		var env envFlags
		fs := flag.NewFlagSet("remote", flag.ExitOnError)
		fs.Var(&env, "e", "K=V added to the environment (repeatable)")
		fs.Parse(args)
		if fs.NArg() < 2 {
			usage()
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		err = testkit.RunRemote(ctx, fs.Arg(0), fs.Args()[1:], env, os.Stdout)
		var re *testkit.RemoteExitError
		if errors.As(err, &re) && re.Code > 0 {
			os.Exit(re.Code)
		}
	case "listening":
		fs := flag.NewFlagSet("listening", flag.ExitOnError)
		timeout := fs.Duration("timeout", 30*time.Second, "give up after this long")
		cm := fs.Bool("cm", false, "wait for an rdma_cm listener, not a TCP socket")
		fs.Parse(args)
		port, perr := strconv.Atoi(fs.Arg(0))
		if fs.NArg() != 1 || perr != nil {
			usage()
		}
		ctx, cancel := context.WithTimeout(context.Background(), *timeout)
		defer cancel()
		if *cm {
			err = testkit.WaitCMListen(ctx, port)
		} else {
			err = testkit.WaitTCPListen(ctx, port)
		}
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "rxectl:", err)
		os.Exit(1)
	}
}

// serveAgent runs the two-host agent on addr until a client stops it,
// logging each program to stdout (the guest console).
func serveAgent(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	fmt.Printf("agent: listening on %s\n", addr)
	a := &testkit.Agent{Log: os.Stdout}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	err = a.Serve(ctx, l)
	fmt.Println("agent: stopped")
	return err
}

type envFlags []string

func (e *envFlags) String() string     { return strings.Join(*e, " ") }
func (e *envFlags) Set(v string) error { *e = append(*e, v); return nil }

// withConn runs f on a fresh NETLINK_RDMA socket, bounded by a minute:
// NEWLINK may load rdma_rxe first.
func withConn(f func(context.Context, *sys.NLConn) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := sys.DialNL()
	if err != nil {
		return err
	}
	defer c.Close()
	return f(ctx, c)
}

// waitActive polls sysfs port state: the kernel offers no notification we
// could wait on without opening the device, so bounded polling it is.
func waitActive(ctx context.Context, dev string) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ports, _ := filepath.Glob(filepath.Join("/sys/class/infiniband", dev, "ports", "*", "state"))
		active := len(ports) > 0
		var last string
		for _, p := range ports {
			b, err := os.ReadFile(p)
			last = strings.TrimSpace(string(b))
			if err != nil || !strings.Contains(last, "ACTIVE") {
				active = false
			}
		}
		if active {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: ports not ACTIVE (last state %q): %w", dev, last, ctx.Err())
		case <-tick.C:
		}
	}
}

// runOnPTY runs a command with its stdout and stderr on a pseudo-terminal
// and copies what it prints to our stdout as it comes, so that C tools
// (whose stdio would block-buffer a pipe or file) show each line at once.
// SIGINT and SIGTERM are forwarded to the command.
func runOnPTY(name string, args ...string) error {
	pty, err := testkit.OpenPTY(os.Stdout)
	if err != nil {
		return err
	}
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = pty.Slave, pty.Slave
	if err := cmd.Start(); err != nil {
		pty.Finish()
		return err
	}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		for s := range sigs {
			cmd.Process.Signal(s)
		}
	}()
	werr := cmd.Wait()
	pty.Finish()
	signal.Stop(sigs)
	if ee, ok := werr.(*exec.ExitError); ok && ee.ProcessState.Exited() {
		return werr
	}
	return nil // killed by the forwarded signal: the expected way to stop
}
