package uverbs_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/uverbs"
)

// TestVMPKeyAgainstC runs libibverbs' ibv_query_pkey and
// ibv_get_pkey_index (pv_pkey) and QueryPKey and PKeyIndex on both VM
// devices, over entries inside and past the table, a port the device
// lacks and P_Keys the table does and does not hold; every result line
// must be the same, the errors included (errno ENOENT in both).
func TestVMPKeyAgainstC(t *testing.T) {
	testkit.RequireVM(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, dev := range []string{testkit.RxeDev, testkit.LoopDev} {
		want, err := testkit.RunPeer(ctx, t, "pv_pkey", dev)
		if err != nil {
			t.Fatalf("pv_pkey %s: %v\n%s", dev, err, want)
		}
		c, err := uverbs.OpenByName(dev)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		errno := func(err error) int {
			var e sys.Errno
			if !errors.As(err, &e) {
				t.Errorf("%v: no errno", err)
			}
			return int(e)
		}
		for port := 1; port <= 2; port++ {
			for i := range 3 {
				p, err := c.QueryPKey(port, i)
				if err != nil {
					fmt.Fprintf(&b, "query %d %d err %d\n", port, i, errno(err))
				} else {
					fmt.Fprintf(&b, "query %d %d ok 0x%04x\n", port, i, p)
				}
			}
			for _, k := range []uint16{0xffff, 0x7fff, 0x1234} {
				i, err := c.PKeyIndex(port, k)
				if err != nil {
					if !errors.Is(err, sys.ENOENT) {
						t.Errorf("PKeyIndex(%d, %#x): %v, want ENOENT", port, k, err)
					}
					fmt.Fprintf(&b, "index %d 0x%04x err %d\n", port, k, errno(err))
				} else {
					fmt.Fprintf(&b, "index %d 0x%04x ok %d\n", port, k, i)
				}
			}
		}
		got := b.String()
		t.Logf("%s:\n%s", dev, got)
		want = strings.ReplaceAll(want, "\r", "")
		if got != want {
			t.Errorf("%s: Go and libibverbs differ:\nlibibverbs:\n%s\nGo:\n%s", dev, want, got)
		}
		if !strings.Contains(got, "query 1 0 ok 0xffff\n") {
			t.Errorf("%s: P_Key 0 of port 1 is not 0xffff:\n%s", dev, got)
		}
		if _, err := c.QueryPKey(1, -1); !errors.Is(err, uverbs.ErrInvalid) {
			t.Errorf("QueryPKey(1, -1): %v, want ErrInvalid", err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := c.QueryPKey(1, 0); !errors.Is(err, uverbs.ErrClosed) {
			t.Errorf("QueryPKey after Close: %v, want ErrClosed", err)
		}
	}
}
