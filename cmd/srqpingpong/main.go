// Command srqpingpong is the Go port of rdma-core's ibv_srq_pingpong
// (v44): a ping-pong of SEND messages over -q RC QPs (default 16) whose
// receives all come from one shared receive queue (SRQ).
//
//	srqpingpong [options]          start a server and wait for a connection
//	srqpingpong [options] <host>   connect to the server at <host>
//
// It takes the C tool's options (-p, -d, -i, -s, -m, -q, -r, -n, -l, -e, -g,
// -o, -c), exchanges the same "LID:QPN:PSN:GID" messages over TCP (always
// 256 of them each way, the unused ones zero, as the C tool does) and
// prints the same address lines (one per QP) and summary lines, so either
// side can be the C tool; both sides must use the same -q. As in the C
// tool, -n counts the exchanges of all QPs together. The CQ is
// busy-polled, or with -e the tool sleeps on its completion channel.
package main

import (
	"os"

	"github.com/pureverbs/pureverbs/internal/pingpong"
)

func main() {
	os.Exit(pingpong.Main(pingpong.SRQ, os.Args[0], os.Args[1:], os.Stdout, os.Stderr))
}
