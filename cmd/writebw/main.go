// Command writebw is the Go port of perftest's ib_write_bw: the bandwidth of
// RDMA WRITE messages over reliable-connected (RC) or unreliable-connected
// (UC) QPs, between a server and a client that find each other over
// TCP.
//
//	writebw [options]          start a server and wait for a connection
//	writebw [options] <host>   connect to the server at <host>
//
// It takes perftest's options as perftest spells them (-d, -i, -x, -s, -n,
// -t, -a, -p, -m, -Q, -N, -q, -l, -b, -D, -c, --run_infinitely, ...; the
// whole list is in docs/performance.md) and refuses the rest by name,
// speaks perftest 6.06's TCP exchange message for message, and prints its
// tables, so either side can be ib_write_bw:
//
//	#bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]
//	65536      5000             32.05              17.02             0.000272
//
// The hot loop (post, poll) allocates nothing, and runs on one P unless
// GOMAXPROCS is set (bw.OneProc). See internal/bw.
package main

import (
	"os"

	"github.com/pureverbs/pureverbs/internal/bw"
)

func main() {
	bw.OneProc()
	os.Exit(bw.Main(bw.Write, os.Args[0], os.Args[1:], os.Stdout, os.Stderr))
}
