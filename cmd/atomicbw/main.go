// Command atomicbw is the Go port of perftest's ib_atomic_bw: the rate of
// 8-byte RDMA atomics (fetch and add, or compare and swap) over
// reliable-connected (RC) QPs, between a server and a client that find
// each other over TCP.
//
//	atomicbw [options]          start a server and wait for a connection
//	atomicbw [options] <host>   connect to the server at <host>
//
// The client posts the atomics on the server's buffer; the server only
// answers them (its QPs and memory accept remote atomics) and waits for
// the client to finish. -A chooses the operation: FETCH_AND_ADD (the
// default; each request adds 1) or CMP_AND_SWAP (each compares with 0
// and swaps in 0), as perftest does. The message size is 8 bytes and
// cannot be changed, so there is no -a.
//
// It takes perftest's options as perftest spells them (-A, -d, -i, -x,
// -n, -t, -p, -m, -Q, -N, -q, -l, -o, -b, -D, -e, --run_infinitely, ...;
// docs/performance.md lists what it refuses), speaks perftest 6.06's TCP
// exchange message for message, and prints its tables, so either side
// can be ib_atomic_bw:
//
//	#bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]
//	8          1000             0.43               0.41              0.053470
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
	os.Exit(bw.Main(bw.Atomic, os.Args[0], os.Args[1:], os.Stdout, os.Stderr))
}
