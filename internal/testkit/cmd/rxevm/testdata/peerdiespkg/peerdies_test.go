// Package peerdiespkg panics host B's kernel (sysrq c, through the agent)
// in the two-host topology, so the runner's test can check that a failure
// on the peer host fails the run with both consoles' tails, within bounded
// time. Under testdata: never part of ./... .
package peerdiespkg

import (
	"context"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/testkit"
)

func TestTwoHostPeerDies(t *testing.T) {
	b := testkit.PeerHost(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := b.Run(ctx, t, "sh", "-c", "echo peer about to crash; echo c > /proc/sysrq-trigger; sleep 600")
	t.Fatalf("host B still answers after sysrq c: %v\n%s", err, out)
}
