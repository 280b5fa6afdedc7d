// Command udpingpong is the Go port of rdma-core's ibv_ud_pingpong (v44):
// a ping-pong of datagrams over one unreliable-datagram (UD) QP, addressed
// through an address handle (AH), with Q_Key 0x11111111.
//
//	udpingpong [options]          start a server and wait for a connection
//	udpingpong [options] <host>   connect to the server at <host>
//
// It takes the C tool's options (-p, -d, -i, -s, -r, -n, -l, -e, -g, -c; no
// -m: a message must fit the port's active MTU, default size 1024),
// exchanges the same "LID:QPN:PSN:GID" messages over TCP and prints the
// same address and summary lines, so either side can be the C tool. Each
// receive buffer leaves 40 bytes in front for the GRH, as in the C tool.
// The CQ is busy-polled, or with -e the tool sleeps on its completion
// channel.
package main

import (
	"os"

	"github.com/pureverbs/pureverbs/internal/pingpong"
)

func main() {
	os.Exit(pingpong.Main(pingpong.UD, os.Args[0], os.Args[1:], os.Stdout, os.Stderr))
}
