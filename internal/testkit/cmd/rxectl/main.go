// Command rxectl is the guest-side helper of the rdma_rxe test VM. It adds,
// deletes and lists RDMA links through RDMA netlink (package rdmanl) and
// waits for ports to become ACTIVE.
//
//	rxectl add NAME NETDEV        # rdma link add NAME type rxe netdev NETDEV
//	rxectl del NAME               # rdma link delete NAME
//	rxectl list                   # index, name, node GUID, port count
//	rxectl wait [-timeout 20s] NAME...   # until every port of NAME is ACTIVE
//
// Run it inside a network namespace (ip netns exec) to create the link there.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pureverbs/pureverbs/internal/testkit/rdmanl"
)

func usage() {
	fmt.Fprintln(os.Stderr, "usage: rxectl add NAME NETDEV | del NAME | list | wait [-timeout D] NAME...")
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
		err = withConn(func(c *rdmanl.Conn) error { return c.AddLink(args[0], "rxe", args[1]) })
	case "del":
		if len(args) != 1 {
			usage()
		}
		err = withConn(func(c *rdmanl.Conn) error { return c.DelLink(args[0]) })
	case "list":
		err = withConn(func(c *rdmanl.Conn) error {
			devs, err := c.Devices()
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
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "rxectl:", err)
		os.Exit(1)
	}
}

func withConn(f func(*rdmanl.Conn) error) error {
	c, err := rdmanl.Dial()
	if err != nil {
		return err
	}
	defer c.Close()
	return f(c)
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
