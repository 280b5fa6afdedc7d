package faults_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/async"
	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/devx"
	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/uverbs"
)

// TestVMCloseWhileBlocked blocks a goroutine in each kind of wait the
// library has, with nothing to wake it, closes the Context, and checks
// that the wait returns within seconds with an error that matches
// uverbs.ErrClosed and says so in words ("use of closed object"), and
// that nothing is left behind (the leak check). Every wait gets a
// context of its own that would end it only after a minute.
//
// DEVX waits (devx.EventChannel.GetEvent, devx.CmdComp) need an mlx5
// device: on rxe their constructors refuse with ErrNotSupported, checked
// here; that Context.Close wakes a blocked GetEvent is devx's own
// TestVMContextCloseClosesChannels (a channel on a pipe).
func TestVMCloseWhileBlocked(t *testing.T) {
	for _, tc := range []struct {
		name string
		// setup creates what the wait needs and returns the wait.
		setup func(t *testing.T, c *uverbs.Context) func(context.Context) error
	}{
		{"async.Get", func(t *testing.T, c *uverbs.Context) func(context.Context) error {
			r := must(async.NewReader(c))(t)
			return func(ctx context.Context) error { _, err := r.Get(ctx); return err }
		}},
		{"async.All", func(t *testing.T, c *uverbs.Context) func(context.Context) error {
			r := must(async.NewReader(c))(t)
			return func(ctx context.Context) error {
				for _, err := range r.All(ctx) {
					if err != nil {
						return err
					}
				}
				return errors.New("All ended without an error")
			}
		}},
		{"cq.Wait", cqWait(false)},
		{"cq.Wait/thread", cqWait(true)},
		{"cq.All", func(t *testing.T, c *uverbs.Context) func(context.Context) error {
			q := must(cq.New(c, 8, nil))(t)
			return func(ctx context.Context) error {
				for _, err := range q.All(ctx, nil) {
					if err != nil {
						return err
					}
				}
				return errors.New("All ended without an error")
			}
		}},
		{"cq.Channel.Wait", channelWait(uverbs.WaitPoller)},
		{"cq.Channel.Wait/thread", channelWait(uverbs.WaitThread)},
		{"CompChannel.GetCQEvent", getCQEvent(uverbs.WaitPoller)},
		{"CompChannel.GetCQEvent/thread", getCQEvent(uverbs.WaitThread)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := openRxe(t)
			wait := tc.setup(t, c)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- wait(ctx) }()
			// Close must find the wait blocked, not about to begin.
			bctx, bcancel := context.WithTimeout(ctx, 10*time.Second)
			err := testkit.WaitBlocked(bctx, "faults_test.TestVMCloseWhileBlocked.")
			bcancel()
			select {
			case err := <-done:
				t.Fatalf("returned with nothing to wait for: %v", err)
			default:
			}
			if err != nil {
				t.Fatal(err)
			}
			closed := time.Now()
			if err := c.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			select {
			case err := <-done:
				took := time.Since(closed)
				t.Logf("woken %v after Close: %v", took.Round(time.Microsecond), err)
				if !errors.Is(err, uverbs.ErrClosed) || !strings.Contains(err.Error(), "closed") {
					t.Fatalf("woken with %v, want an error matching uverbs.ErrClosed that says so", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("still blocked 10s after Close")
			}
			// And a new wait on the closed Context fails at once.
			if err := wait(ctx); !errors.Is(err, uverbs.ErrClosed) {
				t.Errorf("waiting after Close: %v", err)
			}
		})
	}

	t.Run("devx", func(t *testing.T) {
		c := openRxe(t)
		if _, err := devx.NewEventChannel(c, 0); !errors.Is(err, uverbs.ErrNotSupported) {
			t.Errorf("devx.NewEventChannel on rxe: %v, want ErrNotSupported", err)
		}
		if _, err := devx.NewCmdComp(c); !errors.Is(err, uverbs.ErrNotSupported) {
			t.Errorf("devx.NewCmdComp on rxe: %v, want ErrNotSupported", err)
		}
	})
}

// must turns (v, err) into a function that fails the test on err.
func must[T any](v T, err error) func(*testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func cqWait(thread bool) func(*testing.T, *uverbs.Context) func(context.Context) error {
	return func(t *testing.T, c *uverbs.Context) func(context.Context) error {
		q := must(cq.New(c, 8, &cq.Options{WaitThread: thread}))(t)
		return q.Wait
	}
}

func channelWait(m uverbs.WaitMode) func(*testing.T, *uverbs.Context) func(context.Context) error {
	return func(t *testing.T, c *uverbs.Context) func(context.Context) error {
		ch := must(cq.NewChannel(c))(t)
		if err := ch.SetWaitMode(m); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			must(cq.New(c, 8, &cq.Options{Channel: ch}))(t)
		}
		return func(ctx context.Context) error { _, err := ch.Wait(ctx); return err }
	}
}

func getCQEvent(m uverbs.WaitMode) func(*testing.T, *uverbs.Context) func(context.Context) error {
	return func(t *testing.T, c *uverbs.Context) func(context.Context) error {
		ch := must(c.CreateCompChannel())(t)
		if err := ch.SetWaitMode(m); err != nil {
			t.Fatal(err)
		}
		q := must(c.CreateCQ(8, &uverbs.CQOptions{Channel: ch}))(t)
		if err := q.ReqNotify(false); err != nil {
			t.Fatal(err)
		}
		return func(ctx context.Context) error { _, err := ch.GetCQEvent(ctx); return err }
	}
}
