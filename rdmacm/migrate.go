package rdmacm

import (
	"errors"

	"github.com/pureverbs/pureverbs/internal/sys"
)

// Migrate moves the ID to channel to (rdma_migrate_id(3)): its events,
// those already queued included, come from to's GetEvent from then on,
// and closing the channel it was on no longer destroys it (closing to
// does). A listener's later connect requests arrive on to, their IDs
// created there; multicast memberships move with the ID. The ID's
// Context, PDs and QPs are unaffected: a device's Context is shared by
// every channel and stays open while one of them has an ID on it.
// Migrating to the channel the ID is on does nothing.
//
// A server typically gets connect requests on one channel and moves each
// connection to a channel of its own (librdmacm's rdma_get_request does).
// The ID's other calls must not run while it moves: the kernel takes a
// command for the ID only on the channel it is on. An event the old
// channel's GetEvent had already read is still delivered there, once.
func (id *ID) Migrate(to *EventChannel) error {
	const op = "migrate_id"
	if id == nil || id.channel() == nil {
		return invalid(op, "nil ID")
	}
	if err := to.valid(op); err != nil {
		return err
	}
	id.mig.Lock()
	defer id.mig.Unlock()
	if err := id.hold(op); err != nil { // under mig: a Destroy is before or after
		return err
	}
	defer id.drop()
	from := id.channel()
	if from == to {
		return nil
	}
	if c := id.Context(); c != nil {
		if err := to.hold(c); err != nil {
			return opErr(op, err)
		}
	}
	// The ID is to's once the kernel moved it, before from's fd is let
	// go: from's Close waits for that fd and then kills the IDs still
	// its own.
	if _, err := to.ucm.Migrate(from.ucm, id.handle, func() { id.chp.Store(to) }); err != nil {
		if errors.Is(err, sys.ErrFileClosed) {
			err = ErrClosed
		}
		return opErr(op, err)
	}
	// If to was closed meanwhile, its release destroyed the ID.
	to.mu.Lock()
	closed := to.closed
	to.mu.Unlock()
	if closed {
		id.abandon()
	}
	return nil
}
