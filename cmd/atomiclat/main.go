// Command atomiclat is the Go port of perftest's ib_atomic_lat (perftest
// 6.06): the latency of 8-byte RDMA atomics (fetch and add, or compare
// and swap; -A) over a reliable-connected (RC) QP, between a server and
// a client that find each other over TCP.
//
//	atomiclat [options]          start a server and wait for a connection
//	atomiclat [options] <host>   connect to the server at <host>
//
// Only the client works: it posts an atomic on the server's memory,
// waits for its completion (polling the CQ, or with -e sleeping on its
// completion channel) and posts the next. It stamps each post and
// reports, as perftest does, the time between consecutive posts (one
// whole atomic, not halved): minimum, maximum, median ("typical"),
// average, standard deviation and the 99% and 99.9% percentiles, after
// dropping the two largest samples. The server waits until the client
// has finished, prints no table and exits at once, as ib_atomic_lat's
// does (no --wait_destroy pause).
//
// It takes perftest's options as perftest spells them (-A, -n, -d, -i,
// -x, -p, -m, -o, -e, -X, -t, -u, -S, -F, -C, -U, -H, --output=latency,
// -D, ...; docs/performance.md lists what it refuses), speaks perftest's
// TCP exchange message for message and prints its table, so either side
// can be ib_atomic_lat.
//
// The measured loop allocates nothing and runs on one P unless GOMAXPROCS
// is set (bw.OneProc). See internal/bw.
package main

import (
	"os"

	"github.com/pureverbs/pureverbs/internal/bw"
)

func main() {
	bw.OneProc()
	os.Exit(bw.MainTest(bw.LAT, bw.Atomic, os.Args[0], os.Args[1:], os.Stdout, os.Stderr))
}
