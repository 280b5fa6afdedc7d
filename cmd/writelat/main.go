// Command writelat is the Go port of perftest's ib_write_lat (perftest
// 6.06): the latency of RDMA WRITE messages over a reliable-connected
// (RC) or unreliable-connected (UC) QP, between a server and a client
// that find each other over TCP.
//
//	writelat [options]          start a server and wait for a connection
//	writelat [options] <host>   connect to the server at <host>
//
// The two sides take turns: each writes a message whose last byte is its
// count into the other's buffer and spins on its own buffer until the
// other's count arrives; the server writes first. Each side stamps its
// posts, and reports, as perftest does, half of the time between
// consecutive posts (one round trip): minimum, maximum, median
// ("typical"), average, standard deviation and the 99% and 99.9%
// percentiles, after dropping the two largest samples.
//
// It takes perftest's options as perftest spells them (-s, -n, -a, -d, -i,
// -x, -p, -m, -I, -c RC|UC, -t, -u, -S, -F, -C, -U, -H, --output=latency,
// -D, ...; docs/performance.md lists what it refuses), speaks perftest's TCP
// exchange message for message and prints its table, so either side can
// be ib_write_lat:
//
//	#bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]
//	2       1000          10.53          64.19        12.06              13.12          3.01            30.40                   64.19
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
	os.Exit(bw.MainTest(bw.LAT, bw.Write, os.Args[0], os.Args[1:], os.Stdout, os.Stderr))
}
