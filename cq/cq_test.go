package cq_test

import (
	"context"
	"errors"
	"testing"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/uverbs"
)

// TestNilCQ: a nil CQ or Channel gives a typed error (the seed's
// RPMA_E_INVAL) from every method and does nothing else.
func TestNilCQ(t *testing.T) {
	var q *cq.CQ
	wcs := make([]uverbs.WC, 1)
	if fd, err := q.Fd(); fd != -1 || !errors.Is(err, uverbs.ErrInvalid) {
		t.Errorf("Fd = %d, %v", fd, err)
	}
	if _, err := q.GetWC(wcs); !errors.Is(err, uverbs.ErrInvalid) {
		t.Errorf("GetWC = %v", err)
	}
	if err := q.Wait(context.Background()); !errors.Is(err, uverbs.ErrInvalid) {
		t.Errorf("Wait = %v", err)
	}
	if err := q.Close(context.Background()); !errors.Is(err, uverbs.ErrInvalid) {
		t.Errorf("Close = %v", err)
	}
	if q.Verbs() != nil {
		t.Error("Verbs of nil")
	}
	for _, err := range q.All(context.Background(), nil) {
		if !errors.Is(err, uverbs.ErrInvalid) {
			t.Errorf("All = %v", err)
		}
		break
	}
	var ch *cq.Channel
	if _, err := ch.Fd(); !errors.Is(err, uverbs.ErrInvalid) {
		t.Errorf("Channel.Fd = %v", err)
	}
	if _, err := ch.Wait(context.Background()); !errors.Is(err, uverbs.ErrInvalid) {
		t.Errorf("Channel.Wait = %v", err)
	}
	if err := ch.Close(); !errors.Is(err, uverbs.ErrInvalid) {
		t.Errorf("Channel.Close = %v", err)
	}
	var c *uverbs.Context
	if _, err := cq.New(c, 1, nil); !errors.Is(err, uverbs.ErrInvalid) {
		t.Errorf("New(nil context) = %v", err)
	}
}
