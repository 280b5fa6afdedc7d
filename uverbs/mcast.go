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
// to its receive queue. lid is the group's multicast LID on InfiniBand;
// RoCE (rxe) does not route by it, but the kernel keeps each (gid, lid)
// pair as an attachment of its own (ib_uverbs_attach_mcast), so detach
// with the lid the QP was attached with. Attaching a QP again with the
// same gid and lid succeeds and changes nothing. Use one lid per gid (0 on
// RoCE): on rxe (Linux 6.1 and 6.12) a second lid for a gid makes the
// kernel count two attachments where rxe keeps one membership, the second
// detach then fails, and Destroy of the QP fails with EBUSY from then on.
// The kernel refuses, with unix.EINVAL, a QP that is not UD and a GID
// that is not a multicast address (ff00::/8, or an IPv4-mapped
// 224.0.0.0/4); with unix.ENOMEM a group that already holds
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
// IP_ADD_MEMBERSHIP / IPV6_JOIN_GROUP). The IP layer then also loops
// the group's datagrams back to the sending host, so QPs of the sending
// device that are attached to the group receive them too (a QP on rxe0
// receives what another QP on rxe0 sends to the group).
func (qp *QP) AttachMcast(gid GID, lid uint16) error {
	return qp.mcastCmd(abi.IB_USER_VERBS_CMD_ATTACH_MCAST, "attach mcast", gid, lid)
}

// DetachMcast detaches qp from the multicast group gid (ibv_detach_mcast(3)).
// Detaching a QP that is not attached to the group with that lid fails
// with unix.EINVAL.
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
	err := qp.ctx.execWrite(&sys.WriteCmd{Cmd: cmd, Req: sys.AsBytes(&req)}, "qp", method)
	attach := cmd == abi.IB_USER_VERBS_CMD_ATTACH_MCAST
	switch {
	case err == nil:
		qp.mcast.update(mcastKey{gid, lid}, attach)
	case !attach && errors.Is(err, sys.EINVAL):
		// ib_uverbs_detach_mcast drops its entry before the driver's
		// detach, whose failure it returns: rxe keeps one membership per
		// GID, so detaching the second LID of a GID fails there, but
		// the entry is gone all the same (and when there was none, there
		// is none here either).
		qp.mcast.update(mcastKey{gid, lid}, false)
	}
	return err
}

// mcastSet is the multicast attachments of a QP, as the kernel keeps them
// (one entry per GID and LID; attaching again changes nothing).
type mcastSet struct {
	mu     sync.Mutex
	groups map[mcastKey]struct{}
}

// mcastKey is what the kernel's list of a QP's attachments compares.
type mcastKey struct {
	gid GID
	lid uint16
}

func (m *mcastSet) update(k mcastKey, attached bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !attached {
		delete(m.groups, k)
		return
	}
	if m.groups == nil {
		m.groups = make(map[mcastKey]struct{})
	}
	m.groups[k] = struct{}{}
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
