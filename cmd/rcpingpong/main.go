// Command rcpingpong is the Go port of rdma-core's ibv_rc_pingpong (v44):
// a ping-pong of SEND messages over one reliable-connected (RC) QP between
// a server and a client, which find each other over TCP.
//
//	rcpingpong [options]          start a server and wait for a connection
//	rcpingpong [options] <host>   connect to the server at <host>
//
// It takes the C tool's options (-p port, -d device, -i IB port, -s size,
// -m MTU, -r receive depth, -n iterations, -l SL, -e, -g GID index, -c,
// and -o, -O, -P, -t, -j, -N), exchanges the same
// "LID:QPN:PSN:GID" messages, and prints the same address and summary
// lines, so either side can be the C tool:
//
//	  local address:  LID 0x0000, QPN 0x000011, PSN 0x6b8f4c, GID ::ffff:10.99.0.1
//	  remote address: LID 0x0000, QPN 0x000012, PSN 0x2d1a37, GID ::ffff:10.99.0.1
//	8192000 bytes in 0.12 seconds = 530.84 Mbit/sec
//	1000 iters in 0.12 seconds = 123.46 usec/iter
//
// The CQ is busy-polled, or with -e the tool sleeps on its completion
// channel before each poll (ibv_get_cq_event, ibv_req_notify_cq). -O, -t
// and -j (implicit ODP, completion timestamps, device memory)
// fail after the same device checks as the C tool makes, so that a device
// without the feature, such as rxe, answers as the C tool does; -N posts
// through PostSend (the wire traffic is the same); -P warns and
// continues, as the C tool does when the prefetch fails.
package main

import (
	"os"

	"github.com/pureverbs/pureverbs/internal/pingpong"
)

func main() {
	os.Exit(pingpong.Main(pingpong.RC, os.Args[0], os.Args[1:], os.Stdout, os.Stderr))
}
