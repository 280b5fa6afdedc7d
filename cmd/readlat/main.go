// Command readlat is the Go port of perftest's ib_read_lat (perftest
// 6.06): the latency of RDMA READ over a reliable-connected (RC) QP,
// between a server and a client that find each other over TCP.
//
//	readlat [options]          start a server and wait for a connection
//	readlat [options] <host>   connect to the server at <host>
//
// Only the client works: it reads a message of the server's memory,
// waits for the read to complete (polling the CQ, or with -e sleeping on
// its completion channel) and reads again. It stamps each post and
// reports, as perftest does, the time between consecutive posts (one
// whole read, not halved): minimum, maximum, median ("typical"),
// average, standard deviation and the 99% and 99.9% percentiles, after
// dropping the two largest samples. The server waits until the client
// has finished and prints no table.
//
// It takes perftest's options as perftest spells them (-s, -n, -a, -d, -i,
// -x, -p, -m, -o, -e, -X, -t, -u, -S, -F, -C, -U, -H, --output=latency,
// -D, ...; docs/performance.md lists what it refuses), speaks perftest's TCP
// exchange message for message and prints its table, so either side can
// be ib_read_lat:
//
//	#bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]
//	2       1000          26.15          262.76       26.52              29.98          16.99           134.56                  262.76
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
	os.Exit(bw.MainTest(bw.LAT, bw.Read, os.Args[0], os.Args[1:], os.Stdout, os.Stderr))
}
