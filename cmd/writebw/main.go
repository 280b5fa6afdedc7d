// Command writebw is the Go port of perftest's ib_write_bw: the bandwidth of
// RDMA WRITE messages over one reliable-connected (RC) QP between a server
// and a client, which find each other over TCP.
//
//	writebw [options]          start a server and wait for a connection
//	writebw [options] <host>   connect to the server at <host>
//
// It takes perftest's options that make sense for one RC QP (-d device,
// -i port, -x GID index, -s size, -n iterations, -t TX depth,
// -a all sizes from 2 to 2^23, -p TCP port, -m MTU, -Q CQ moderation, -N
// no peak, -u QP timeout, -S SL, -I inline size, --report_gbits; -F, -c RC,
// -q 1 and --use_old_post_send are accepted and change nothing), speaks
// perftest 6.06's TCP exchange message for message, and prints its
// tables, so either side can be ib_write_bw:
//
//	#bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]
//	65536      5000             32.05              17.02             0.000272
//
// The hot loop (post, poll) allocates nothing. See internal/bw.
package main

import (
	"os"

	"github.com/pureverbs/pureverbs/internal/bw"
)

func main() {
	os.Exit(bw.Main(bw.Write, os.Args[0], os.Args[1:], os.Stdout, os.Stderr))
}
