package twohost

import (
	"github.com/pureverbs/pureverbs/internal/testkit/rcstream"
	"github.com/pureverbs/pureverbs/uverbs"
)

// The power-off test's traffic is an RC stream across the wire
// (internal/testkit/rcstream, which the fault tests use too), with the
// QPs connected to the other host's GID.

// newStreamEnd creates an end whose Reached closes at its milestone-th
// successful receive.
func newStreamEnd(name string, c *uverbs.Context, pd *uverbs.PD, depth, milestone int) (*rcstream.End, error) {
	e, err := rcstream.New(name, c, pd, depth)
	if err != nil {
		return nil, err
	}
	e.Milestone, e.Reached = milestone, make(chan struct{})
	return e, nil
}

// connectStream drives qp RESET→RTS towards the QP numbered dest on the
// host whose GID (index 1 of its WireDev) is dgid.
func connectStream(qp *uverbs.QP, dest uint32, dgid uverbs.GID, tm rcstream.Timers) error {
	return rcstream.Connect(qp, dest, dgid, 1, 64, tm)
}
