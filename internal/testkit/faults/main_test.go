package faults_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/internal/testkit/rcstream"
	"github.com/pureverbs/pureverbs/uverbs"

	"github.com/pureverbs/pureverbs/internal/testkit/leakmain"
)

// The test binary doubles as the processes the tests start: with one of
// these as its first argument it runs that role instead of the tests.
const (
	peerArg  = "fault-peer"  // peerMain: the far end of a stream
	childArg = "fault-child" // childMain: one operation as another user
)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case peerArg:
			os.Exit(peerMain(os.Args[2:]))
		case childArg:
			os.Exit(childMain(os.Args[2:]))
		}
	}
	os.Exit(leakmain.Run(m))
}

// peerMain is the far end of a stream on rxe0: fault-peer DESTQPN WINDOW.
// It connects an RC QP to DESTQPN, prints "qpn N", and streams (WINDOW
// sends in flight, from its first receive on; 0 only receives) until its
// QP fails or it is killed.
func peerMain(args []string) int {
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: fault-peer DESTQPN WINDOW")
		return 2
	}
	dest, err1 := strconv.ParseUint(args[0], 0, 32)
	window, err2 := strconv.Atoi(args[1])
	if err1 != nil || err2 != nil {
		fmt.Fprintln(os.Stderr, "fault-peer:", err1, err2)
		return 2
	}
	c, err := uverbs.OpenByName(testkit.RxeDev)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer c.Close()
	pd, err := c.AllocPD()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	e, err := rcstream.New("peer", c, pd, 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := connectRC(c, e.QP, uint32(dest), 1, rcstream.QuickTimers); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("qpn %d\n", e.QP.QPN())
	err = e.Stream(context.Background(), -1, window, true)
	fmt.Printf("stream ended: %v; %s\n", err, e.State())
	return 1
}
