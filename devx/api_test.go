package devx

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/pureverbs/pureverbs/abi"
	"github.com/pureverbs/pureverbs/uverbs"
)

// TestBadArguments: nil and foreign arguments are refused with
// uverbs.ErrInvalid, never a panic, and nothing is sent.
func TestBadArguments(t *testing.T) {
	sent := execs.Load()
	var nilObj *Obj
	var nilUmem *Umem
	var nilCh *EventChannel
	var nilCC *CmdComp
	var nilEFD *EventFD
	buf := make([]byte, 64)
	for name, err := range map[string]error{
		"Available(nil)":        Available(nil),
		"GeneralCmd(nil)":       GeneralCmd(nil, buf, buf),
		"CreateObj(nil)":        second(CreateObj(nil, buf, buf)),
		"QueryEQN(nil)":         second(QueryEQN(nil, 0)),
		"QueryUAR(nil)":         second(QueryUAR(nil, 0)),
		"RegUmem(nil)":          second(RegUmem(nil, buf, 0, nil)),
		"NewCmdComp(nil)":       second(NewCmdComp(nil)),
		"NewEventChannel(nil)":  second(NewEventChannel(nil, 0)),
		"nil Obj Query":         nilObj.Query(buf, buf),
		"nil Obj Modify":        nilObj.Modify(buf, buf),
		"nil Obj Destroy":       nilObj.Destroy(),
		"nil Obj QueryAsync":    nilObj.QueryAsync(buf, 8, 0, nil),
		"nil Umem Dereg":        nilUmem.Dereg(),
		"Subscribe(nil)":        Subscribe(nilCh, nil, []uint16{1}, 0),
		"SubscribeFd(nil)":      SubscribeFd(nilCh, 3, nil, 1),
		"nil channel Close":     nilCh.Close(),
		"nil channel TryGet":    second(nilCh.TryGetEvent()),
		"nil CmdComp Get":       second(nilCC.Get(context.Background(), buf)),
		"nil CmdComp TryGet":    second(nilCC.TryGet(buf)),
		"nil CmdComp Close":     nilCC.Close(),
		"nil EventFD Wait":      second(nilEFD.Wait(context.Background())),
		"nil EventFD TryWait":   second(nilEFD.TryWait()),
		"nil EventFD Signal":    nilEFD.Signal(1),
		"nil EventFD Close":     nilEFD.Close(),
		"Open of a non-device":  second(Open(uverbs.Device{})),
		"OpenByName of no name": second(OpenByName("no-such-device-0")),
	} {
		if err == nil {
			t.Errorf("%s: no error", name)
			continue
		}
		if !errors.Is(err, uverbs.ErrInvalid) && !errors.Is(err, uverbs.ErrNotSupported) && !errors.Is(err, uverbs.ErrNoDevice) {
			t.Errorf("%s: %v, want ErrInvalid (or ErrNotSupported/ErrNoDevice for opens)", name, err)
		}
	}
	if nilCh.Fd() != -1 || nilCC.Fd() != -1 || nilEFD.Fd() != -1 || nilCh.OmitData() {
		t.Error("Fd of nil objects")
	}
	if n := execs.Load() - sent; n != 0 {
		t.Errorf("%d commands sent", n)
	}
}

func second[T any](_ T, err error) error { return err }

// TestOpenNotMlx5: devx.Open of a device that is not mlx5 fails before
// opening anything, naming the device and its driver.
func TestOpenNotMlx5(t *testing.T) {
	for _, dev := range []uverbs.Device{
		{Name: "rxe0", Driver: "rdma_rxe", DriverID: abi.RDMA_DRIVER_RXE, DevPath: "/nonexistent/uverbs0"},
		{Name: "siw0", Driver: "siw", DevPath: "/nonexistent/uverbs1"},
	} {
		c, err := Open(dev)
		if c != nil || !errors.Is(err, uverbs.ErrNotSupported) || !strings.Contains(err.Error(), dev.Name) ||
			!strings.Contains(err.Error(), dev.Driver) || strings.Contains(err.Error(), "nonexistent") {
			t.Errorf("Open(%s): %v %v", dev.Name, c, err)
		}
	}
	// An mlx5 device is opened (here: its node is missing).
	_, err := Open(uverbs.Device{Name: "mlx5_0", Driver: "mlx5_core", DriverID: abi.RDMA_DRIVER_MLX5, DevPath: "/nonexistent/uverbs2"})
	if !errors.Is(err, uverbs.ErrNoDevice) {
		t.Errorf("Open(mlx5 without a node): %v", err)
	}
}

// TestEventAccessors: Type, SubType and Data read only what was delivered.
func TestEventAccessors(t *testing.T) {
	ev, n, err := DecodeEvent(eventRec(1, true, 0x0a, 0x0b)[:8+3], false)
	if err != nil || n != 11 || ev.Type() != 0x0a || ev.SubType() != 0 || len(ev.Data()) != 3 {
		t.Errorf("3 bytes of data: %+v n=%d %v", ev, n, err)
	}
	ev, _, _ = DecodeEvent(eventRec(1, true, 0x0a, 0x0b), false)
	if ev.Type() != 0x0a || ev.SubType() != 0x0b {
		t.Errorf("full event type %d sub %d", ev.Type(), ev.SubType())
	}
}
