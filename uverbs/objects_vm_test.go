package uverbs_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/uverbs"
)

func openRxe(t *testing.T) *uverbs.Context {
	t.Helper()
	testkit.RequireVM(t)
	c, err := uverbs.OpenByName(testkit.RxeDev)
	if err != nil {
		t.Fatalf("OpenByName(%s): %v", testkit.RxeDev, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// waitResources polls the kernel's resource counts until want holds for
// pd, cq and qp (the kernel may finish releasing a file a moment after the
// last reference is dropped).
func waitResources(t *testing.T, want map[string]int) {
	t.Helper()
	var got map[string]int
	for i := 0; i < 50; i++ {
		got = testkit.Resources(t, testkit.RxeDev)
		if got["pd"] == want["pd"] && got["cq"] == want["cq"] && got["qp"] == want["qp"] && got["ctx"] == want["ctx"] {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Errorf("resources: got pd=%d cq=%d qp=%d ctx=%d, want pd=%d cq=%d qp=%d ctx=%d",
		got["pd"], got["cq"], got["qp"], got["ctx"], want["pd"], want["cq"], want["qp"], want["ctx"])
}

func bg(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestVMPDCQ(t *testing.T) {
	c := openRxe(t)
	base := testkit.Resources(t, testkit.RxeDev)

	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	var cqs []*uverbs.CQ
	for _, tc := range []struct{ req, want int }{{1, 1}, {2, 3}, {4, 7}, {64, 127}} {
		cq, err := c.CreateCQ(tc.req, nil)
		if err != nil {
			t.Fatalf("CreateCQ(%d): %v", tc.req, err)
		}
		if cq.CQE() != tc.want {
			t.Errorf("CreateCQ(%d).CQE() = %d, want %d", tc.req, cq.CQE(), tc.want)
		}
		if cq.UserHandle() == 0 || cq.Kind() != uverbs.ElementCQ {
			t.Errorf("cq user handle %d kind %v", cq.UserHandle(), cq.Kind())
		}
		if o, ok := c.Lookup(cq.UserHandle()); !ok || o != uverbs.Affiliated(cq) {
			t.Errorf("Lookup(%d) = %v, %v", cq.UserHandle(), o, ok)
		}
		cqs = append(cqs, cq)
	}
	during := testkit.Resources(t, testkit.RxeDev)
	if during["pd"] != base["pd"]+1 || during["cq"] != base["cq"]+len(cqs) {
		t.Errorf("during: pd %d cq %d, base pd %d cq %d", during["pd"], during["cq"], base["pd"], base["cq"])
	}
	if _, err := c.CreateCQ(0, nil); !errors.Is(err, uverbs.ErrInvalid) {
		t.Errorf("CreateCQ(0) = %v, want ErrInvalid", err)
	}
	if _, err := c.CreateCQ(1, &uverbs.CQOptions{CompVector: 1 << 20}); !errors.Is(err, uverbs.ErrInvalid) {
		t.Errorf("CreateCQ with comp vector 1<<20 = %v, want ErrInvalid", err)
	}
	if _, err := c.CreateCQ(1<<30, nil); !errors.Is(err, sys.EINVAL) {
		t.Errorf("CreateCQ(1<<30) = %v, want EINVAL from the kernel", err)
	}
	for _, cq := range cqs {
		if err := cq.Destroy(bg(t)); err != nil {
			t.Fatal(err)
		}
		if _, ok := c.Lookup(cq.UserHandle()); ok {
			t.Error("CQ still registered after Destroy")
		}
		if err := cq.Destroy(bg(t)); !errors.Is(err, uverbs.ErrClosed) {
			t.Errorf("second Destroy = %v, want ErrClosed", err)
		}
	}
	if err := pd.Dealloc(); err != nil {
		t.Fatal(err)
	}
	if err := pd.Dealloc(); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("second Dealloc = %v, want ErrClosed", err)
	}
	waitResources(t, base)
}
