package async_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pureverbs/pureverbs/async"
	"github.com/pureverbs/pureverbs/uverbs"
)

// Watch a device's asynchronous events until the context ends, as
// ibv_asyncwatch does: get, print, acknowledge.
func Example() {
	dev, err := uverbs.OpenByName("rxe0") // ibv_open_device
	if err != nil {
		fmt.Println(err) // errors.Is(err, uverbs.ErrNoDevice) without RDMA
		return
	}
	defer dev.Close()

	events, err := async.NewReader(dev)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for ev, err := range events.All(ctx) { // ibv_get_async_event
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(ev) // IBV_EVENT_PORT_ACTIVE (9), port 1
		events.Ack(ev)  // ibv_ack_async_event
	}
}

// The non-blocking pattern of the ibv_get_async_event(3) example: the
// descriptor is already non-blocking; poll it in your own loop and call
// TryGet when it is readable.
func ExampleReader_TryGet() {
	dev, err := uverbs.OpenByName("rxe0")
	if err != nil {
		return
	}
	defer dev.Close()
	events, _ := async.NewReader(dev)
	fmt.Println("poll fd", events.Fd(), "for POLLIN, then:")
	for {
		ev, err := events.TryGet()
		if errors.Is(err, async.ErrNoEvent) { // also matches unix.EAGAIN
			break
		}
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(ev)
		events.Ack(ev)
	}
}
