package uverbs

import (
	"fmt"
	"math"

	"github.com/pureverbs/pureverbs/abi"
	"github.com/pureverbs/pureverbs/internal/sys"
)

// The provider seam. The core verbs commands (CQ/CREATE, QP/CREATE, ...)
// are the same for every device; what differs per driver is the private
// "udata" each create carries (UHW_IN / UHW_OUT) and what user space does
// with it afterwards: rxe hands back mmap offsets of kernel-owned rings,
// mlx5 expects user-allocated buffers and doorbell records described in
// UHW_IN. A provider is chosen by the context's driver id; drivers without
// one get ErrNotSupported for the objects that need provider help (CQ, QP).
//
// The data path (posting WQEs, polling CQEs, doorbells) will hang off the
// per-object driver values (cqDriver, qpDriver) created here.

// provider creates the per-object driver state for one kind of device.
type provider interface {
	name() string
	// newCQ and newQP allocate the object and its driver state as one
	// heap object: creates are the connection set-up path, where each
	// allocation costs about 220 instructions and the collector's time.
	newCQ() (*CQ, cqDriver)
	newQP() (*QP, qpDriver)
	// qpCreateFlags are the QP create flags the provider takes.
	qpCreateFlags() QPCreateFlags
}

// cqDriver is the provider half of one CQ.
type cqDriver interface {
	// poll reads up to len(wcs) completions (the caller holds the CQ).
	poll(wcs []WC) (int, error)
	// ready returns how many completions wait, without consuming them.
	ready() int
	// empty reports that no completion waits, without a lock or a hold
	// (the empty poll of a busy-polling loop); false when unsure. It may
	// run concurrently with poll and after release: released rings stay
	// readable (sys.Mapping), so it never faults.
	empty() bool
	// snap and moved watch the ring for the completion channel's arm
	// bookkeeping (arm.go): snap records the ring before an arm (false
	// when the driver cannot watch it), moved reports whether a
	// completion may have arrived since, erring towards true. Like empty
	// they take no lock and run after release too.
	snap() (ringSnap, bool)
	moved(s ringSnap) bool
	// udataIn and udataOut return the UHW_IN / UHW_OUT buffers of the
	// create command (nil for none). They must stay valid (heap) until
	// created returns.
	udataIn() []byte
	udataOut() []byte
	// created runs after a successful create: it maps the queues. On
	// error the caller destroys the kernel object.
	created(c *Context) error
	// release unmaps the queues; it is idempotent.
	release() error
	// resizeOut returns the RESIZE_CQ command's driver response buffer
	// (nil if the provider takes none); resized runs after the kernel
	// resized the CQ, to map the new ring. Both run under the CQ's
	// exclusive hold.
	resizeOut() []byte
	resized(c *Context) error
}

// qpDriver is the provider half of one QP.
type qpDriver interface {
	udataIn() []byte
	udataOut() []byte
	// created maps the send queue, and the receive queue unless the QP
	// takes its receives from an SRQ; handle is the QP's, for doorbells.
	created(c *Context, handle uint32, hasSRQ bool) error
	release() error
	// postSend and postRecv write work requests to the queues and ring
	// the doorbell if the device needs one (the caller holds the QP).
	postSend(qp *QP, wrs []SendWR) error
	postRecv(qp *QP, wrs []RecvWR) error
}

// providerFor returns the provider of a driver id.
func providerFor(driverID uint32) (provider, bool) {
	switch driverID {
	case abi.RDMA_DRIVER_RXE:
		return rxeProvider{}, true
	case abi.RDMA_DRIVER_MLX5:
		return mlx5Provider{}, true
	}
	return nil, false
}

// provider returns c's provider or an error matching ErrNotSupported.
func (c *Context) provider(object string) (provider, error) {
	p, ok := providerFor(c.driverID)
	if !ok {
		return nil, &OpError{Object: object, Method: "create",
			Err: fmt.Errorf("%w: no user-space provider for driver id %d (%s)", ErrNotSupported, c.driverID, c.dev.Driver)}
	}
	// A provider without a data path for some objects says so before
	// anything is sent to the kernel.
	if u, ok := p.(interface{ unsupported(object string) error }); ok {
		if err := u.unsupported(object); err != nil {
			return nil, &OpError{Object: object, Method: "create", Err: err}
		}
	}
	return p, nil
}

// ---- rxe -------------------------------------------------------------

// rxeProvider implements the rdma_rxe user ABI (rdma_user_rxe.h, ABI
// version 2): CQ and QP creates return struct mminfo records naming
// kernel-allocated rings, which are mapped once from the command fd.
type rxeProvider struct{}

func (rxeProvider) name() string { return "rxe" }

// qpCreateFlags: librxe takes none (RXE_QP_CREATE_FLAGS_SUP is 0).
func (rxeProvider) qpCreateFlags() QPCreateFlags { return 0 }
func (rxeProvider) newCQ() (*CQ, cqDriver) {
	o := new(struct {
		cq CQ
		d  rxeCQ
	})
	return &o.cq, &o.d
}

func (rxeProvider) newQP() (*QP, qpDriver) {
	o := new(struct {
		qp QP
		d  rxeQP
	})
	return &o.qp, &o.d
}

// rxeQueue is one mapped rxe ring (struct rxe_queue_buf).
type rxeQueue struct {
	mi abi.Mminfo
	m  *sys.Mapping
}

func (q *rxeQueue) mapQueue(c *Context, object, name string) error {
	if q.mi.Size == 0 || q.mi.Offset > math.MaxInt64 {
		return &OpError{Object: object, Method: "mmap",
			Err: fmt.Errorf("%w: provider returned mmap info offset %#x size %d", ErrInvalid, q.mi.Offset, q.mi.Size)}
	}
	m, err := sys.Mmap(c.cmd, int64(q.mi.Offset), int(q.mi.Size), name)
	if err != nil {
		return c.opErr(object, "mmap", err)
	}
	q.m = m
	return nil
}

// unmap ends the ring's use (destroy, Close, a failed create). It is
// sys.Mapping.Retire: no system call now; the range is munmapped when the
// Mapping is collected, or replaced when Context.Close closes the command
// fd, so the kernel can still tear the context down at once.
func (q *rxeQueue) unmap() error {
	if q.m == nil {
		return nil
	}
	return q.m.Retire()
}
