package uverbs

import (
	"errors"
	"fmt"
	"sync"

	"github.com/pureverbs/pureverbs/abi"
	"github.com/pureverbs/pureverbs/internal/sys"
)

// MulticastQPN is the destination QP number of a datagram sent to a
// multicast group (IB_MULTICAST_QPN): a UD SendWR whose AH names the
// group's GID sets RemoteQPN to it, and every QP attached to the group
// receives a copy.
const MulticastQPN = 0xffffff

// AttachMcast attaches the UD QP qp to the multicast group gid
// (ibv_attach_mcast(3)), so that datagrams sent to the group are delivered
// to its receive queue. lid is the group's multicast LID on InfiniBand and
// ignored on RoCE (rxe). Attaching a QP to a group it is in already
// succeeds and changes nothing. The kernel refuses, with unix.EINVAL, a QP
// that is not UD and a GID that is not a multicast address (ff00::/8, or
// an IPv4-mapped 224.0.0.0/4); with unix.ENOMEM a group that already holds
// DeviceAttr.MaxMcastQPAttach QPs. The kernel refuses to destroy a QP
// that is attached to a group (QP.Destroy fails with an error wrapping
// unix.EBUSY that counts the groups): detach it first. Closing the
// Context detaches every QP.
//
// On RoCE the kernel's attach programs the netdev's Ethernet filter for
// the group, not the IP layer's membership: on rxe (Linux 6.1 and 6.12,
// measured across two hosts) datagrams to the group reach attached QPs
// only while the host is an IP member of the group on the rxe netdev, as a
// UDP socket that joined it makes the host (net.ListenMulticastUDP, or
// IP_ADD_MEMBERSHIP / IPV6_JOIN_GROUP). rxe never loops a group's
// datagrams back to QPs of the sending device.
func (qp *QP) AttachMcast(gid GID, lid uint16) error {
	return qp.mcastCmd(abi.IB_USER_VERBS_CMD_ATTACH_MCAST, "attach mcast", gid, lid)
}

// DetachMcast detaches qp from the multicast group gid (ibv_detach_mcast(3)).
// Detaching a QP that is not attached to the group fails with unix.EINVAL.
func (qp *QP) DetachMcast(gid GID, lid uint16) error {
	return qp.mcastCmd(abi.IB_USER_VERBS_CMD_DETACH_MCAST, "detach mcast", gid, lid)
}

// The detach request is encoded as an attach request: the conversion
// compiles only while the two structs are identical.
var _ = abi.IbUverbsDetachMcast(abi.IbUverbsAttachMcast{})

func (qp *QP) mcastCmd(cmd uint32, method string, gid GID, lid uint16) error {
	if qp == nil || qp.ctx == nil {
		return invalidErr("qp", method, "nil QP")
	}
	if !qp.hold() {
		return closedErr("qp", method)
	}
	defer qp.drop()
	// ib_uverbs_attach_mcast and ib_uverbs_detach_mcast have one layout.
	req := abi.IbUverbsAttachMcast{Gid: gid, QpHandle: qp.handle, Mlid: lid}
	if err := qp.ctx.execWrite(&sys.WriteCmd{Cmd: cmd, Req: sys.AsBytes(&req)}, "qp", method); err != nil {
		return err
	}
	qp.mcast.update(gid, cmd == abi.IB_USER_VERBS_CMD_ATTACH_MCAST)
	return nil
}

// mcastSet is the multicast groups a QP is attached to, as the kernel
// keeps them (one entry per GID; attaching again changes nothing).
type mcastSet struct {
	mu     sync.Mutex
	groups map[GID]struct{}
}

func (m *mcastSet) update(gid GID, attached bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !attached {
		delete(m.groups, gid)
		return
	}
	if m.groups == nil {
		m.groups = make(map[GID]struct{})
	}
	m.groups[gid] = struct{}{}
}

// busyErr turns the kernel's EBUSY for destroying a QP that is attached to
// multicast groups into an error that says so; errors.Is(err, unix.EBUSY)
// still holds. Other errors pass unchanged.
func (m *mcastSet) busyErr(err error) error {
	m.mu.Lock()
	n := len(m.groups)
	m.mu.Unlock()
	var oe *OpError
	if n == 0 || !errors.Is(err, sys.EBUSY) || !errors.As(err, &oe) {
		return err
	}
	return &OpError{Object: oe.Object, Method: oe.Method,
		Err: fmt.Errorf("%w: attached to %d multicast group(s) (DetachMcast first)", oe.Err, n)}
}
