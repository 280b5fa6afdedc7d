// Package poweroffpkg has host B lose its power in the two-host topology,
// announced and not, so the runner's test can check that only an announced
// power-off (testkit.Host.PowerOff) is accepted: the same death of B
// without the announcement fails the run with both consoles' tails. Under
// testdata: never part of ./... .
package poweroffpkg

import (
	"context"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/testkit"
)

// TestTwoHostPowerOffAnnounced has the runner power host B off, then shows
// that B is gone: a program started on it never reports.
func TestTwoHostPowerOffAnnounced(t *testing.T) {
	b := testkit.PeerHost(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pctx, pcancel := context.WithCancel(ctx)
	defer pcancel()
	p := b.Start(pctx, t, "sh", "-c", "echo running on B; sleep 600")
	if err := p.WaitForOutput(ctx, "running on B"); err != nil {
		t.Fatal(err)
	}
	b.PowerOff(t)
	// The program's connection to B's agent is given up once its
	// context ends: the agent, powered off, never answers.
	pcancel()
	<-p.Done()
	t.Logf("the program on host B: %v", p.Wait())
}

// TestTwoHostPeerPowersOffUnannounced powers host B off from inside B
// (sysrq o through its agent) without telling the runner: the run must
// fail.
func TestTwoHostPeerPowersOffUnannounced(t *testing.T) {
	b := testkit.PeerHost(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := b.Run(ctx, t, "sh", "-c", "echo peer powering off; echo o > /proc/sysrq-trigger; sleep 600")
	t.Fatalf("host B still answers after sysrq o: %v\n%s", err, out)
}
