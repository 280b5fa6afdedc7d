package faults_test

import (
	"github.com/pureverbs/pureverbs/internal/testkit/rcstream"
	"github.com/pureverbs/pureverbs/uverbs"
)

// The fault tests' traffic is an RC stream (internal/testkit/rcstream)
// between two QPs of this host, or this host and a peer process.

// connectRC drives qp RESET→RTS towards the QP numbered dest behind the
// GID at gidIndex of port 1 (rxe0's GID 1 is ::ffff:10.99.0.1 on d0).
func connectRC(c *uverbs.Context, qp *uverbs.QP, dest uint32, gidIndex int, tm rcstream.Timers) error {
	g, err := c.QueryGID(1, gidIndex)
	if err != nil {
		return err
	}
	return rcstream.Connect(qp, dest, g.GID, uint8(gidIndex), 1, tm)
}
