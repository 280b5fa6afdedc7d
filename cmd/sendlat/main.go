// Command sendlat is the Go port of perftest's ib_send_lat (perftest
// 6.06): the latency of SEND messages over a reliable-connected (RC) or
// unreliable-connected (UC) QP, between a server and a client that find
// each other over TCP.
//
//	sendlat [options]          start a server and wait for a connection
//	sendlat [options] <host>   connect to the server at <host>
//
// The two sides take turns: the client sends first; each waits for the
// other's message to complete a receive before sending its own. Each
// side stamps its posts and reports, as perftest does, half of the time
// between consecutive posts (one round trip): minimum, maximum, median,
// average, standard deviation and the 99% and 99.9% percentiles, after
// dropping the two largest samples.
//
// It takes perftest's options as perftest spells them (-s, -n, -a, -d,
// -i, -x, -p, -m, -I, -c RC|UC, -r, -t, -u, -S, -F, -C, -U, -H,
// --output=latency, ...; docs/performance.md lists what it refuses:
// -D, -e and UD among them), speaks perftest's TCP exchange message for
// message and prints its table, so either side can be ib_send_lat.
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
	os.Exit(bw.MainTest(bw.LAT, bw.Send, os.Args[0], os.Args[1:], os.Stdout, os.Stderr))
}
