// Command rdmaserver is librdmacm's rdma_server example in Go: it
// listens on -s's address (0.0.0.0) and -p's port (7471), accepts one
// connection, receives a 16-byte message and sends one back, then
// disconnects. It is wire compatible with rdmacm-utils' rdma_client and
// prints what rdma_server prints ("rdma_server: start", a perror(3) line
// for a failed call, "rdma_server: end N"), exiting with the same status.
//
// Like the C example it uses librdmacm's synchronous calls
// (rdma_getaddrinfo, rdma_create_ep, rdma_get_request, a blocking
// rdma_accept, rdma_get_recv_comp...), here internal/cmsync on top of
// package rdmacm. It is named rdmaserver so that the test VM, which
// installs every cmd/ tool in /usr/bin, keeps the C rdma_server beside it.
package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/pureverbs/pureverbs/internal/cmsync"
	"github.com/pureverbs/pureverbs/rdmacm"
	"github.com/pureverbs/pureverbs/uverbs"
)

func main() {
	os.Exit(Main(context.Background(), os.Args[0], os.Args[1:], os.Stdout, os.Stderr))
}

// Main runs the tool as prog with args and returns the exit status:
// run's result as the C main returns it (0, -1 for a failed call, a
// negative getaddrinfo code), 1 for a bad command line.
func Main(ctx context.Context, prog string, args []string, stdout, stderr io.Writer) int {
	return cmsync.SimpleMain(ctx, prog, "rdma_server", "0.0.0.0", args, stdout, stderr, run)
}

// run is the C example's run: it returns 0, -1 or getaddrinfo's code.
func run(ctx context.Context, server, port string, stdout, stderr io.Writer) int {
	if cmsync.NoDevice() {
		return cmsync.NoDeviceAddr(stdout)
	}
	ai, ret := cmsync.SimpleAddr(ctx, stdout, server, port, &rdmacm.AddrInfo{Flags: rdmacm.AIPassive, PortSpace: rdmacm.PortSpaceTCP})
	if ai == nil {
		return ret
	}
	attr := uverbs.QPInitAttr{SigAll: true,
		Cap: uverbs.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 16}}
	listen, err := rdmacm.CreateEP(ctx, ai, nil, &attr)
	if err != nil {
		cmsync.Perror(stderr, "rdma_create_ep", err)
		return -1
	}
	defer listen.Destroy()
	if err := listen.Listen(0); err != nil {
		cmsync.Perror(stderr, "rdma_listen", err)
		return -1
	}
	id, err := listen.GetRequest(ctx)
	if err != nil {
		cmsync.Perror(stderr, "rdma_get_request", err)
		return -1
	}
	defer id.Destroy()

	var sendFlags uverbs.SendFlags
	if id.QP().Cap().MaxInlineData >= 16 {
		sendFlags = uverbs.SendInline
	} else {
		fmt.Fprintf(stdout, "rdma_server: device doesn't support IBV_SEND_INLINE, using sge sends\n")
	}
	recvMsg, sendMsg := make([]byte, 16), make([]byte, 16)
	mr, err := id.RegMsgs(recvMsg)
	if err != nil {
		cmsync.Perror(stderr, "rdma_reg_msgs for recv_msg", err)
		return -1
	}
	defer mr.Dereg()
	var sendMR *uverbs.MR
	if sendFlags&uverbs.SendInline == 0 {
		if sendMR, err = id.RegMsgs(sendMsg); err != nil {
			cmsync.Perror(stderr, "rdma_reg_msgs for send_msg", err)
			return -1
		}
		defer sendMR.Dereg()
	}
	if err := id.PostRecv(0, recvMsg, mr); err != nil {
		cmsync.Perror(stderr, "rdma_post_recv", err)
		return -1
	}
	if err := id.Accept(ctx, nil); err != nil {
		cmsync.Perror(stderr, "rdma_accept", err)
		return -1
	}
	defer id.Disconnect(ctx)
	var wc uverbs.WC
	if _, err := id.GetRecvComp(ctx, &wc); err != nil {
		cmsync.Perror(stderr, "rdma_get_recv_comp", err)
		return -1
	}
	if err := id.PostSend(0, sendMsg, sendMR, sendFlags); err != nil {
		cmsync.Perror(stderr, "rdma_post_send", err)
		return -1
	}
	if _, err := id.GetSendComp(ctx, &wc); err != nil {
		cmsync.Perror(stderr, "rdma_get_send_comp", err)
		return -1
	}
	return 0
}
