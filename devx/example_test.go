package devx_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/pureverbs/pureverbs/devx"
	"github.com/pureverbs/pureverbs/uverbs"
)

// The examples compile against the API; they need a ConnectX device with
// DEVX support to run, so none has an Output line. The PRM layouts they
// fill are from the device's programming reference (mlx5_ifc.h).

// PRM opcodes and layouts used below.
const (
	opQueryHCACap   = 0x100 // MLX5_CMD_OP_QUERY_HCA_CAP
	opCreateCQ      = 0x400 // MLX5_CMD_OP_CREATE_CQ
	opQueryCQ       = 0x402 // MLX5_CMD_OP_QUERY_CQ
	opModifyCQ      = 0x403 // MLX5_CMD_OP_MODIFY_CQ
	eventCompletion = 0x00  // MLX5_EVENT_TYPE_COMP, a CQ's completion event
	eventCQError    = 0x04  // MLX5_EVENT_TYPE_CQ_ERROR
	eventPortChange = 0x09  // MLX5_EVENT_TYPE_PORT_CHANGE, unaffiliated
)

// prmHeader writes the opcode (bits 0..15 of dword 0) and op_mod (bits
// 16..31 of dword 1) of a PRM command, big-endian.
func prmHeader(in []byte, opcode, opMod uint16) {
	binary.BigEndian.PutUint16(in[0:], opcode)
	binary.BigEndian.PutUint16(in[6:], opMod)
}

// prmStatus returns the status and syndrome of a PRM response.
func prmStatus(out []byte) (status uint8, syndrome uint32) {
	return out[0], binary.BigEndian.Uint32(out[4:])
}

// createCQ creates a CQ object with DEVX (the CQ's buffer and doorbell
// record in umem; the CQ context fields are left to the reader of the PRM).
func createCQ(c *uverbs.Context, umem *devx.Umem, eqn uint32) (*devx.Obj, uint32) {
	in := make([]byte, 0x110+16) // create_cq_in with one PAS entry
	out := make([]byte, 16)      // create_cq_out
	prmHeader(in, opCreateCQ, 0)
	_ = umem.ID() // cqc.cq_umem_id, cqc.dbr_umem_id
	_ = eqn       // cqc.c_eqn_or_apu_element
	cq, err := devx.CreateObj(c, in, out)
	if err != nil {
		log.Fatal(err)
	}
	return cq, binary.BigEndian.Uint32(out[8:]) & 0xFFFFFF // cqn
}

func ExampleOpen() {
	c, err := devx.OpenByName("mlx5_0")
	if errors.Is(err, uverbs.ErrNotSupported) {
		log.Fatalf("no DEVX here: %v", err) // e.g. rxe0, or firmware without DEVX
	}
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	fmt.Println(devx.Available(c)) // <nil>
}

func ExampleOpenPreferred() {
	dev, err := uverbs.DeviceByName("mlx5_0")
	if err != nil {
		log.Fatal(err)
	}
	c, err := devx.OpenPreferred(dev) // what ibv_open_device does
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if err := devx.Available(c); err != nil {
		log.Printf("verbs only: %v", err)
	}
}

func ExampleGeneralCmd() {
	c, err := devx.OpenByName("mlx5_0")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	in := make([]byte, 16)               // query_hca_cap_in
	out := make([]byte, 0x1010)          // query_hca_cap_out
	prmHeader(in, opQueryHCACap, 0<<1|1) // general device caps, current values
	if err := devx.GeneralCmd(c, in, out); err != nil {
		st, syn := prmStatus(out)
		log.Fatalf("QUERY_HCA_CAP: %v (status %#x, syndrome %#x)", err, st, syn)
	}
}

func ExampleCreateObj() {
	c, err := devx.OpenByName("mlx5_0")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	buf, err := uverbs.AllocBuffer(1 << 16)
	if err != nil {
		log.Fatal(err)
	}
	defer buf.Close()
	umem, err := devx.RegUmem(c, buf.Bytes(), uverbs.AccessLocalWrite, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer umem.Dereg()
	eqn, err := devx.QueryEQN(c, 0)
	if err != nil {
		log.Fatal(err)
	}
	cq, cqn := createCQ(c, umem, eqn)
	defer cq.Destroy()
	fmt.Println("cqn", cqn)
}

func ExampleObj_Query() {
	c, err := devx.OpenByName("mlx5_0")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	var cq *devx.Obj // from devx.CreateObj
	var cqn uint32
	in := make([]byte, 16)     // query_cq_in
	out := make([]byte, 0x110) // query_cq_out
	prmHeader(in, opQueryCQ, 0)
	binary.BigEndian.PutUint32(in[8:], cqn)
	if err := cq.Query(in, out); err != nil {
		log.Fatal(err)
	}
}

func ExampleObj_Modify() {
	var cq *devx.Obj // from devx.CreateObj
	var cqn uint32
	in := make([]byte, 0x110) // modify_cq_in
	out := make([]byte, 16)   // modify_cq_out
	prmHeader(in, opModifyCQ, 0)
	binary.BigEndian.PutUint32(in[8:], cqn)
	if err := cq.Modify(in, out); err != nil {
		log.Fatal(err)
	}
}

func ExampleObj_Destroy() {
	var cq *devx.Obj // from devx.CreateObj
	if err := cq.Destroy(); errors.Is(err, uverbs.ErrClosed) {
		log.Print("already destroyed, or its context closed")
	}
}

func ExampleRegUmem() {
	c, err := devx.OpenByName("mlx5_0")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	buf, err := uverbs.AllocBuffer(2 << 20)
	if err != nil {
		log.Fatal(err)
	}
	defer buf.Close()
	// mlx5dv_devx_umem_reg_ex: pages of 4 KiB to 2 MiB.
	umem, err := devx.RegUmem(c, buf.Bytes(), uverbs.AccessLocalWrite|uverbs.AccessRemoteRead,
		&devx.UmemOptions{PageSizes: 1<<12 | 1<<13 | 1<<14 | 1<<21})
	if err != nil {
		log.Fatal(err)
	}
	defer umem.Dereg()
	fmt.Println("umem id", umem.ID())
}

func ExampleQueryEQN() {
	c, err := devx.OpenByName("mlx5_0")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	eqn, err := devx.QueryEQN(c, 0) // completion vector 0
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("eqn", eqn)
}

func ExampleQueryUAR() {
	c, err := devx.OpenByName("mlx5_0")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	page, err := devx.QueryUAR(c, 0)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("uar page", page)
}

func ExampleObj_QueryAsync() {
	c, err := devx.OpenByName("mlx5_0")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	cc, err := devx.NewCmdComp(c)
	if err != nil {
		log.Fatal(err)
	}
	defer cc.Close()
	var cq *devx.Obj // from devx.CreateObj
	in := make([]byte, 16)
	prmHeader(in, opQueryCQ, 0)
	const outLen = 0x110
	if err := cq.QueryAsync(in, outLen, 42, cc); err != nil {
		log.Fatal(err)
	}
	buf := make([]byte, devx.CmdHeaderSize+outLen)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	resp, err := cc.Get(ctx, buf)
	if err != nil {
		log.Fatal(err)
	}
	st, _ := prmStatus(resp.Out)
	fmt.Println("wr_id", resp.WrID, "status", st)
}

func ExampleNewEventChannel() {
	c, err := devx.OpenByName("mlx5_0")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	// Cookies only: events of one subscription merge while queued.
	ch, err := devx.NewEventChannel(c, devx.OmitData)
	if err != nil {
		log.Fatal(err)
	}
	defer ch.Close()
	fmt.Println("poll fd", ch.Fd())
}

// ExampleSubscribe is mlx5dv_devx_subscribe_devx_event(3): a CQ's
// completion and error events, and the device's port changes, over one
// channel, told apart by their cookies.
func ExampleSubscribe() {
	c, err := devx.OpenByName("mlx5_0")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ch, err := devx.NewEventChannel(c, 0) // with the event queue entries
	if err != nil {
		log.Fatal(err)
	}
	defer ch.Close()
	var cq *devx.Obj // from devx.CreateObj
	const cqCookie, portCookie = 1, 2
	if err := devx.Subscribe(ch, cq, []uint16{eventCompletion, eventCQError}, cqCookie); err != nil {
		log.Fatal(err)
	}
	// nil: unaffiliated (device-level) events.
	if err := devx.Subscribe(ch, nil, []uint16{eventPortChange}, portCookie); err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		ev, err := ch.GetEvent(ctx)
		if errors.Is(err, devx.ErrOverflow) {
			log.Print("the kernel dropped events")
			continue
		}
		if err != nil {
			log.Fatal(err)
		}
		switch ev.Cookie {
		case cqCookie:
			fmt.Printf("CQ event type %#x\n", ev.Type())
		case portCookie:
			fmt.Printf("port change, sub type %d\n", ev.SubType())
		}
	}
}

// ExampleSubscribeFd is mlx5dv_devx_subscribe_devx_event_fd(3): the
// kernel signals an eventfd at each completion event of the CQ instead of
// queueing a record on the channel.
func ExampleSubscribeFd() {
	c, err := devx.OpenByName("mlx5_0")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ch, err := devx.NewEventChannel(c, devx.OmitData)
	if err != nil {
		log.Fatal(err)
	}
	defer ch.Close()
	efd, err := devx.NewEventFD()
	if err != nil {
		log.Fatal(err)
	}
	defer efd.Close()
	var cq *devx.Obj // from devx.CreateObj
	if err := devx.SubscribeFd(ch, efd.Fd(), cq, eventCompletion); err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := efd.Wait(ctx) // completions since the last Wait
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(n, "completion events")
}

func ExampleEventChannel_TryGetEvent() {
	var ch *devx.EventChannel // from devx.NewEventChannel; ch.Fd() is in the caller's epoll set
	for {
		ev, err := ch.TryGetEvent()
		if errors.Is(err, devx.ErrNoEvent) {
			break // back to epoll_wait
		}
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("cookie", ev.Cookie)
	}
}

func ExampleDecodeEvent() {
	rec := make([]byte, devx.EventRecordSize)
	binary.LittleEndian.PutUint64(rec, 7) // the cookie
	rec[8+1] = eventCQError               // mlx5_eqe.type
	ev, n, err := devx.DecodeEvent(rec, false)
	fmt.Println(ev.Cookie, ev.Type(), n, err)
	// Output: 7 4 72 <nil>
}
