package cmexample

import (
	"context"
	"errors"

	"github.com/pureverbs/pureverbs/internal/cmsync"
	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/rdmacm"
	"github.com/pureverbs/pureverbs/uverbs"
)

// GRHLen is struct ibv_grh's size: every UD receive starts with it.
const GRHLen = 40

// UDNode is one UD ID of udaddy or mckey and what it sends and receives
// with (struct cmatest_node).
type UDNode struct {
	ID                    *rdmacm.ID
	Connected             bool
	PD                    *uverbs.PD
	CQ                    *uverbs.CQ
	QP                    *uverbs.QP
	MR                    *uverbs.MR
	AH                    *uverbs.AH
	Mem                   []byte
	RemoteQPN, RemoteQKey uint32
}

// Destroy takes the node down, its ID last (destroy_node).
func (n *UDNode) Destroy() {
	if n.ID == nil {
		return
	}
	if n.AH != nil {
		n.AH.Destroy()
	}
	if n.QP != nil {
		n.QP.Destroy(context.Background())
	}
	if n.CQ != nil {
		n.CQ.Destroy(context.Background())
	}
	if n.MR != nil {
		n.MR.Dereg()
	}
	if n.PD != nil {
		n.PD.Dealloc()
	}
	n.ID.Destroy()
}

// InitUD is verify_test_params, init_node and create_message: the
// message must fit the port's active MTU; a PD, a CQ, the ID's UD QP
// (with flags) and, when there are messages, the buffer with room for
// the GRH. It returns the status the C example returns and, for a CQ or
// a QP the library refused, the error (the errno C's next perror prints).
func (e *Env) InitUD(n *UDNode, flags uverbs.QPCreateFlags) (int, error) {
	c := n.ID.Context()
	pa, err := c.QueryPort(n.ID.Port())
	if err != nil {
		return cmsync.ErrnoValue(err), nil // ibv_query_port's return
	}
	if mtu := pa.ActiveMTU.Bytes(); e.O.Count != 0 && e.O.Size > mtu { // "message_count &&": a negative -C too
		e.Printf("%s: message_size %d is larger than active mtu %d\n", e.Name, e.O.Size, mtu)
		return -22, nil // -EINVAL
	}
	if n.PD, err = c.AllocPD(); err != nil {
		e.Printf("%s: unable to allocate PD\n", e.Name)
		return -ENOMEM, nil
	}
	cqe, wrs := 2, 1
	if e.O.Count != 0 { // "message_count ? message_count * 2 : 2": a negative -C fails the CQ
		cqe, wrs = 2*e.O.Count, e.O.Count
	}
	if n.CQ, err = c.CreateCQ(cqe, nil); err != nil {
		e.Printf("%s: unable to create CQ\n", e.Name)
		if errors.Is(err, uverbs.ErrInvalid) {
			// A count out of range (-C past 2^30 or negative: C's
			// int doubles and wraps), which librxe passes on and the
			// kernel refuses: mckey -M's perror prints its EINVAL.
			err = sys.EINVAL
		}
		return -ENOMEM, err
	}
	n.QP, err = n.ID.CreateQP(n.PD, uverbs.QPInitAttr{Type: uverbs.QPTypeUD, SendCQ: n.CQ, RecvCQ: n.CQ, CreateFlags: flags,
		Cap: uverbs.QPCap{MaxSendWR: wrs, MaxRecvWR: wrs, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		e.Perror("unable to create QP", err)
		return CMFailed, err
	}
	e.ZeroCount()
	if e.O.Count == 0 {
		return 0, nil
	}
	if e.O.Size+GRHLen < 0 { // malloc of the wrapped size_t fails
		e.Printf("failed message allocation\n")
		e.Printf("%s: failed to create messages: %d\n", e.Name, -1)
		return -1, nil
	}
	n.Mem = make([]byte, e.O.Size+GRHLen)
	if n.MR, err = n.PD.RegMR(n.Mem, uverbs.AccessLocalWrite); err != nil {
		e.Printf("failed to reg MR\n")
		e.Printf("%s: failed to create messages: %d\n", e.Name, -1)
		return -1, nil
	}
	return 0, nil
}

// UDSend is the node's message as post_sends sends it: SEND with its QP
// number as immediate data, to its peer's QP through its AH.
func (n *UDNode) UDSend(size int, flags uverbs.SendFlags) uverbs.SendWR {
	return uverbs.SendWR{Opcode: uverbs.WRSendWithImm, Flags: flags, ImmData: n.QP.QPN(),
		SGL: []uverbs.SGE{n.MR.SGE(0, size)}, AH: n.AH, RemoteQPN: n.RemoteQPN, RemoteQKey: n.RemoteQKey}
}
