package rdmacm_test

import (
	"errors"
	"testing"

	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/rdmacm"
	"github.com/pureverbs/pureverbs/uverbs"
)

// TestVMDevices: EventChannel.Devices (rdma_get_devices) returns the
// shared Context of every device in uverbs.Devices' order, the same ones
// again and on another channel, and the one an ID bound to that device
// uses, so that a PD made before the bind serves the listener's
// connections. A channel's Close leaves the Contexts another channel holds
// working; the last Close closes them (the per-test leak check counts the
// kernel's contexts); a closed channel's Devices is ErrClosed.
func TestVMDevices(t *testing.T) {
	testkit.RequireVM(t)
	list, err := uverbs.Devices()
	if err != nil {
		t.Fatal(err)
	}
	a, err := rdmacm.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctxs, err := a.Devices()
	if err != nil {
		t.Fatalf("Devices: %v", err)
	}
	if len(ctxs) != len(list) {
		t.Fatalf("%d Contexts for %d devices", len(ctxs), len(list))
	}
	var rxe0 *uverbs.Context
	for i, c := range ctxs {
		if c.Device().Name != list[i].Name {
			t.Fatalf("Context %d is %s, want %s (uverbs.Devices' order)", i, c.Device().Name, list[i].Name)
		}
		if c.Device().Name == testkit.RxeDev {
			rxe0 = c
		}
	}
	if rxe0 == nil {
		t.Fatalf("no Context of %s", testkit.RxeDev)
	}
	again, err := a.Devices()
	if err != nil || len(again) != len(ctxs) || again[0] != ctxs[0] {
		t.Fatalf("Devices again: %v, %v (first %p, was %p)", len(again), err, again[0], ctxs[0])
	}
	pd, err := rxe0.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	b := openChannel(t)
	other, err := b.Devices()
	if err != nil || len(other) != len(ctxs) {
		t.Fatalf("Devices on a second channel: %d, %v", len(other), err)
	}
	for i := range other {
		if other[i] != ctxs[i] {
			t.Fatalf("channel b's Context %d (%s) is not channel a's", i, other[i].Device().Name)
		}
	}
	listen := listener(t, b, rdmacm.PortSpaceTCP, 0)
	if listen.Context() != rxe0 {
		t.Fatalf("the listener's Context %p is not Devices' %p for %s", listen.Context(), rxe0, testkit.RxeDev)
	}
	if err := listen.Destroy(); err != nil {
		t.Fatal(err)
	}
	// a's Close: b still holds every Context, the PD still works.
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Devices(); !errors.Is(err, rdmacm.ErrClosed) {
		t.Fatalf("Devices of a closed channel: %v, want ErrClosed", err)
	}
	if _, err := rxe0.QueryDevice(); err != nil {
		t.Fatalf("the shared Context after one of its channels closed: %v", err)
	}
	if err := pd.Dealloc(); err != nil {
		t.Fatal(err)
	}
}
