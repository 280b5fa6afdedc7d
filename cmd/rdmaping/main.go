// Command rdmaping is the Go port of librdmacm's example rping (rdma-core
// v44, rdmacm-utils): a ping over an RC connection set up through the
// RDMA connection manager, wire compatible with the C tool in both roles.
//
//	rdmaping -s [-vVd] [-S size] [-C count] [-a addr] [-p port] [-P]
//	rdmaping -c [-vVd] [-S size] [-C count] [-I addr] -a addr [-p port]
//
// Each ping: the client SENDs the address, rkey and size of its start
// buffer (struct rping_rdma_info, big-endian); the server RDMA READs it
// and SENDs "go ahead"; the client advertises its sink buffer the same
// way; the server RDMA WRITEs the data there and says go ahead again.
// The client does -C pings (forever without -C) and disconnects; the
// server serves one client (every client, each on a goroutine, with -P)
// until it disconnects. -v prints the data ("ping data: rdma-ping-0:
// ABC..." on the client, "server ping data: ..." on the server), -V
// makes the client compare what came back with what it sent, -d prints
// debug lines. The messages, their streams and the exit statuses are the
// C tool's, also on a bad command line (usage on stdout, status 22) and
// when no server listens (the CM's reject, status 255). With -q the tool
// creates its QP with the verbs and moves it itself with the connection
// manager's attributes (rdma_init_qp_attr, rdma_establish).
//
// As in the C tool, one goroutine reads the connection manager's events
// and one per connection sleeps on the completion channel (GetCQEvent,
// parked on the runtime poller), re-arms the CQ and polls it; they tell
// the goroutine running the protocol through a counting semaphore and
// the connection's state.
//
// The command is named rdmaping, not rping, so that the test VM, which
// installs every cmd/ tool in /usr/bin, keeps rdmacm-utils' rping beside
// it for the comparisons of vm_test.go.
package main

import (
	"context"
	"os"
)

func main() {
	os.Exit(Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}
