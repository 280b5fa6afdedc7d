// Command ucpingpong is the Go port of rdma-core's ibv_uc_pingpong (v44):
// a ping-pong of SEND messages over one unreliable-connected (UC) QP.
//
//	ucpingpong [options]          start a server and wait for a connection
//	ucpingpong [options] <host>   connect to the server at <host>
//
// It takes the C tool's options (-p, -d, -i, -s, -m, -r, -n, -l, -e, -g,
// -c), exchanges the same "LID:QPN:PSN:GID" messages over TCP and prints
// the same address and summary lines, so either side can be the C tool.
// The CQ is busy-polled, or with -e the tool sleeps on its completion
// channel. See cmd/rcpingpong for the output.
package main

import (
	"os"

	"github.com/pureverbs/pureverbs/internal/pingpong"
)

func main() {
	os.Exit(pingpong.Main(pingpong.UC, os.Args[0], os.Args[1:], os.Stdout, os.Stderr))
}
