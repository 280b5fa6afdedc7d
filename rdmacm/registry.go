package rdmacm

import (
	"sync"
	"sync/atomic"

	"github.com/pureverbs/pureverbs/uverbs"
)

// The process's rdma_cm state that is not one channel's: an ID can move
// between channels (Migrate) with its events, so IDs and memberships are
// found by the uid their events echo whichever channel reads them, and a
// device's Context serves the IDs of every channel (librdmacm keeps one
// ibv_context per device for the process, too).

// lastUID numbers IDs and memberships for the whole process: the kernel
// echoes the uid in every event, whichever channel the ID is on by then.
var lastUID atomic.Uint64

func newUID() uint64 { return lastUID.Add(1) }

// reg is every live ID and membership, and every open channel. The kernel's handles (ucma's
// ctx_table) are global too.
var reg = struct {
	mu       sync.Mutex
	byUID    map[uint64]*ID
	byHandle map[uint32]*ID
	mcasts   map[uint64]*Multicast // by uid
	chans    map[*EventChannel]struct{}
}{byUID: map[uint64]*ID{}, byHandle: map[uint32]*ID{}, mcasts: map[uint64]*Multicast{},
	chans: map[*EventChannel]struct{}{}}

// register makes id findable by its uid and handle.
func register(id *ID) *ID {
	reg.mu.Lock()
	reg.byUID[id.uid] = id
	reg.byHandle[id.handle] = id
	reg.mu.Unlock()
	return id
}

// unregister forgets id and its memberships (the kernel left the groups).
func unregister(id *ID) {
	reg.mu.Lock()
	delete(reg.byUID, id.uid)
	if reg.byHandle[id.handle] == id {
		// Else the kernel gave the handle to a newer ID (of another
		// file, or of this one after a DESTROY_ID): that one stays.
		delete(reg.byHandle, id.handle)
	}
	var left []*Multicast
	for uid, m := range reg.mcasts {
		if m.id == id {
			left = append(left, m)
			delete(reg.mcasts, uid)
		}
	}
	reg.mu.Unlock()
	for _, m := range left {
		m.mu.Lock()
		m.left = true
		m.mu.Unlock()
	}
}

// lookup finds the ID an event of type typ names: by the uid the kernel
// echoes. A uid no ID has is an ID destroyed since the event was read:
// its handle may already be a new ID's (the kernel hands out the lowest
// free one), so the event is not looked up by it. The kernel queues no
// event for an ID of a connect request before Accept gives it a uid, but
// older kernels reported ESTABLISHED with uid 0: as librdmacm, that one
// is found by its handle, and any other with uid 0 is dropped.
func lookup(typ EventType, uid uint64, handle uint32) *ID {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	if uid != 0 {
		return reg.byUID[uid]
	}
	if typ != EventEstablished {
		return nil
	}
	return reg.byHandle[handle]
}

// sharedDev is a device's Context for rdma_cm IDs, with the number of
// open channels that hold it.
type sharedDev struct {
	name string
	ctx  *uverbs.Context
	attr *uverbs.DeviceAttr
	refs int
	pd   *uverbs.PD // the default PD (defaultPD), nil until first asked for
}

// devs is the shared Contexts by device name.
var devs = struct {
	mu sync.Mutex
	m  map[string]*sharedDev
}{m: map[string]*sharedDev{}}

// acquireDev returns dev's shared Context, opening it on first use, with
// one more reference.
func acquireDev(dev uverbs.Device) (*sharedDev, error) {
	devs.mu.Lock()
	defer devs.mu.Unlock()
	if d := devs.m[dev.Name]; d != nil {
		d.refs++
		return d, nil
	}
	c, err := uverbs.Open(dev)
	if err != nil {
		return nil, err
	}
	a, err := c.QueryDevice()
	if err != nil {
		c.Close()
		return nil, err
	}
	d := &sharedDev{name: dev.Name, ctx: c, attr: a, refs: 1}
	devs.m[dev.Name] = d
	return d, nil
}

// release drops a reference; the last closes the Context (its PDs, CQs
// and QPs with it).
func (d *sharedDev) release() error {
	devs.mu.Lock()
	d.refs--
	last := d.refs == 0
	if last {
		delete(devs.m, d.name)
	}
	devs.mu.Unlock()
	if last {
		return d.ctx.Close()
	}
	return nil
}

// defaultPD returns the default PD of the device whose shared Context is
// ctx, allocating it on first use: librdmacm's cma_dev->pd, which
// rdma_create_qp(3) uses when given no PD. It is released with the
// Context, when the last channel holding it closes.
func defaultPD(ctx *uverbs.Context) (*uverbs.PD, error) {
	devs.mu.Lock()
	defer devs.mu.Unlock()
	var d *sharedDev
	for _, x := range devs.m {
		if x.ctx == ctx {
			d = x
			break
		}
	}
	if d == nil {
		return nil, ErrClosed // the Context's last channel has closed
	}
	if d.pd == nil {
		pd, err := ctx.AllocPD()
		if err != nil {
			return nil, err
		}
		d.pd = pd
	}
	return d.pd, nil
}
