package devx

// Tests in the rdma_rxe VM (go run ./internal/testkit/cmd/rxevm ./devx --
// -run VM). There is no mlx5 device there: these prove that every DEVX
// call on a device that is not mlx5 is refused with a clear
// ErrNotSupported before anything reaches the kernel, on both kernels,
// and that the devx plumbing into a real uverbs.Context works.

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/core"
	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/uverbs"
)

func rxeDevice(t *testing.T) uverbs.Device {
	t.Helper()
	dev, err := uverbs.DeviceByName(testkit.RxeDev)
	if err != nil {
		t.Fatal(err)
	}
	return dev
}

// notSupported checks err is the refusal every DEVX call on rxe gives.
func notSupported(t *testing.T, what string, dev uverbs.Device, err error) {
	t.Helper()
	var oe *uverbs.OpError
	switch {
	case !errors.Is(err, uverbs.ErrNotSupported):
		t.Errorf("%s: %v, want ErrNotSupported", what, err)
	case !errors.As(err, &oe):
		t.Errorf("%s: %T is not a *uverbs.OpError", what, err)
	case !strings.Contains(err.Error(), dev.Name) || !strings.Contains(err.Error(), dev.Driver):
		t.Errorf("%s: %q does not name the device %s and its driver %s", what, err, dev.Name, dev.Driver)
	}
}

func TestVMOpenDEVXOnRxe(t *testing.T) {
	testkit.RequireVM(t)
	dev := rxeDevice(t)
	before := sys.OpenFDs()
	c, err := Open(dev)
	if c != nil {
		c.Close()
		t.Fatal("devx.Open of rxe returned a context")
	}
	notSupported(t, "Open", dev, err)
	if !strings.Contains(err.Error(), "mlx5") {
		t.Errorf("Open: %q does not say DEVX needs mlx5", err)
	}
	_, err = OpenByName(testkit.RxeDev)
	notSupported(t, "OpenByName", dev, err)
	refused := err
	if after := sys.OpenFDs(); len(after) != len(before) {
		t.Errorf("refused opens left fds: %v", after)
	}
	// OpenPreferred (ibv_open_device's way) opens rxe plainly.
	c, err = OpenPreferred(dev)
	if err != nil {
		t.Fatalf("OpenPreferred(rxe0): %v", err)
	}
	notSupported(t, "Available after OpenPreferred", dev, Available(c))
	if pd, err := c.AllocPD(); err != nil {
		t.Errorf("AllocPD on the preferred-DEVX rxe context: %v", err)
	} else {
		pd.Dealloc()
	}
	c.Close()
	t.Logf("kernel %s: %v", testkit.KernelRelease(), refused)
}

// TestVMDevxCallsOnRxe: on an rxe context every DEVX call fails with
// ErrNotSupported naming rxe0 and its driver, and none reaches the kernel.
func TestVMDevxCallsOnRxe(t *testing.T) {
	testkit.RequireVM(t)
	dev := rxeDevice(t)
	c, err := uverbs.Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	r, w, err := sys.NewRecordReaderPipe("fake channel")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ch := newEventChannel(c, r, false)
	defer ch.Close()
	cc := &CmdComp{ctx: c, r: nil}
	obj := &Obj{ctx: c, handle: 1}
	umem := &Umem{ctx: c, handle: 2}
	in, out := make([]byte, 64), make([]byte, 64)

	sent := execs.Load()
	calls := []struct {
		name string
		err  error
	}{
		{"Available", Available(c)},
		{"GeneralCmd", GeneralCmd(c, in, out)},
		{"CreateObj", func() error { _, err := CreateObj(c, in, out); return err }()},
		{"Obj.Query", obj.Query(in, out)},
		{"Obj.Modify", obj.Modify(in, out)},
		{"Obj.Destroy", obj.Destroy()},
		{"RegUmem", func() error { _, err := RegUmem(c, make([]byte, 4096), uverbs.AccessLocalWrite, nil); return err }()},
		{"Umem.Dereg", umem.Dereg()},
		{"QueryEQN", func() error { _, err := QueryEQN(c, 0); return err }()},
		{"QueryUAR", func() error { _, err := QueryUAR(c, 0); return err }()},
		{"NewCmdComp", func() error { _, err := NewCmdComp(c); return err }()},
		{"NewEventChannel", func() error { _, err := NewEventChannel(c, 0); return err }()},
		{"NewEventChannel(OmitData)", func() error { _, err := NewEventChannel(c, OmitData); return err }()},
		{"Subscribe", Subscribe(ch, nil, []uint16{1}, 7)},
		{"Subscribe(obj)", Subscribe(ch, obj, []uint16{0, 1}, 7)},
		{"SubscribeFd", SubscribeFd(ch, 0, nil, 1)},
		// rxe cannot have a command completion fd: the device check
		// comes before the argument checks.
		{"Obj.QueryAsync", obj.QueryAsync(in, 64, 1, cc)},
		{"Subscribe with no events", Subscribe(ch, nil, nil, 7)},
		{"CreateObj with a short command", func() error { _, err := CreateObj(c, in[:4], out); return err }()},
	}
	for _, call := range calls {
		notSupported(t, call.name, dev, call.err)
	}
	if n := execs.Load() - sent; n != 0 {
		t.Errorf("%d DEVX commands were sent to the kernel", n)
	}
	// The context still works for verbs.
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatalf("AllocPD after the refused DEVX calls: %v", err)
	}
	pd.Dealloc()
	t.Logf("kernel %s: %d DEVX calls refused on %s (%s), none sent; e.g. %v",
		testkit.KernelRelease(), len(calls), dev.Name, dev.Driver, calls[1].err)
}

// TestVMContextCloseClosesChannels: the close hook devx registers on a
// real context wakes a blocked GetEvent with ErrClosed when the context
// closes (rxe has no DEVX channels: the channel reads a socket).
func TestVMContextCloseClosesChannels(t *testing.T) {
	testkit.RequireVM(t)
	c, err := uverbs.Open(rxeDevice(t))
	if err != nil {
		t.Fatal(err)
	}
	r, w, err := sys.NewRecordReaderPipe("fake channel")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ch := newEventChannel(c, r, true)
	sh, ok := core.Of(c)
	if !ok {
		t.Fatal("core.Of")
	}
	remove, err := sh.OnClose(func() { ch.close() })
	if err != nil {
		t.Fatal(err)
	}
	ch.remove = remove
	errc := make(chan error)
	go func() { _, err := ch.GetEvent(context.Background()); errc <- err }()
	testkit.MustBlock(t, "TestVMContextCloseClosesChannels.") // the wait has begun, not about to
	c.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, uverbs.ErrClosed) {
			t.Errorf("GetEvent after Context.Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Context.Close did not wake GetEvent")
	}
	if _, err := sh.OnClose(func() {}); !errors.Is(err, uverbs.ErrClosed) {
		t.Errorf("OnClose after Close: %v", err)
	}
	if err := ch.Close(); err != nil {
		t.Errorf("Close after the context's: %v", err)
	}
}
