package rdmacm

import (
	"encoding/binary"
	"net/netip"
	"sync"

	"github.com/pureverbs/pureverbs/abi"
	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/uverbs"
)

// Multicast is a group a UD ID (PortSpaceUDP, PortSpaceIPoIB, or
// PortSpaceIB made by CreateIDType) joined
// (rdma_join_multicast(3)). The join completes with EventMulticastJoin
// (Event.Multicast is this; Event.UD the group's address vector, QP
// number 0xffffff and Q_Key, what a sender posts to), or fails with
// EventMulticastError. On the join the ID's QP, if it has one and the
// membership is not send-only, is attached to the group, as librdmacm's
// ucma_process_join attaches it.
type Multicast struct {
	id     *ID
	uid    uint64
	handle uint32 // the kernel's
	addr   netip.Addr
	send   bool // send-only: the QP is never attached

	mu       sync.Mutex
	gid      uverbs.GID
	lid      uint16
	attached bool // the ID's QP is attached to gid
	left     bool
}

// Addr returns the group's address as given to JoinMulticast.
func (m *Multicast) Addr() netip.Addr {
	if m == nil {
		return netip.Addr{}
	}
	return m.addr
}

// ID returns the ID that joined the group.
func (m *Multicast) ID() *ID {
	if m == nil {
		return nil
	}
	return m.id
}

// JoinMulticast joins the group of IP multicast address addr on the ID's
// device (rdma_join_multicast_ex(3)): the ID must be bound or have
// resolved an address. sendOnly joins as a send-only full member
// (RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER): its QP is not attached, so it
// receives nothing the group is sent. As with librdmacm, the kernel
// judges the address; on rxe (6.1 and 6.12) a unicast one joins but the
// QP's attach fails (EventMulticastError, Status -1, Err EINVAL), and an
// IPv6 group fails here with errno 524 (the kernel's ENOTSUPP).
func (id *ID) JoinMulticast(addr netip.Addr, sendOnly bool) (*Multicast, error) {
	const op = "join_multicast"
	if err := checkAddr(op, "group", addr); err != nil {
		return nil, err
	}
	return id.join(op, addr, func(s *abi.KernelSockaddrStorage) uint16 { return putSockaddr(s, netip.AddrPortFrom(addr, 0)) }, sendOnly)
}

// JoinMulticastGID joins the multicast group of GID mgid
// (rdma_join_multicast_ex(3)) given as an AF_IB address (a struct
// sockaddr_ib with the GID and no P_Key, service ID or scope), as
// librdmacm joins one: for IB devices, whose groups need not have an IP
// address. The kernel's connection manager has no AF_IB groups on RoCE:
// on rxe the join fails with errno 524 (the kernel's ENOTSUPP), as
// mckey -M shows. Multicast.Addr is then the GID as an IPv6 address.
func (id *ID) JoinMulticastGID(mgid uverbs.GID, sendOnly bool) (*Multicast, error) {
	return id.join("join_multicast", netip.AddrFrom16(mgid), func(s *abi.KernelSockaddrStorage) uint16 {
		b := sys.AsBytes(s)
		clear(b)
		binary.LittleEndian.PutUint16(b[0:], familyIB) // sib_family; then sib_pkey, sib_flowinfo: 0
		copy(b[8:24], mgid[:])                         // sib_addr; then sib_sid, sib_sid_mask, sib_scope_id: 0
		return sockaddrIBLen
	}, sendOnly)
}

// sockaddrIBLen is sizeof(struct sockaddr_ib).
const sockaddrIBLen = 48

// join sends the join of the group that put writes (returning its
// length) and registers the membership.
func (id *ID) join(op string, addr netip.Addr, put func(*abi.KernelSockaddrStorage) uint16, sendOnly bool) (*Multicast, error) {
	if err := id.hold(op); err != nil {
		return nil, err
	}
	defer id.drop()
	if id.qpType != uverbs.QPTypeUD {
		return nil, invalid(op, "the ID is for %v QPs: multicast needs a UD ID", id.qpType)
	}
	if id.Context() == nil {
		return nil, invalid(op, "the ID is not bound to a device yet (bind or resolve an address first)")
	}
	ch := id.channel()
	m := &Multicast{id: id, uid: newUID(), addr: addr, send: sendOnly}
	req := abi.RdmaUcmJoinMcast{Uid: m.uid, Id: id.handle}
	req.AddrSize = put(&req.Addr)
	if sendOnly {
		req.JoinFlags = abi.RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER
	}
	// Registered before the command: the join's event may be queued
	// before the command returns.
	reg.mu.Lock()
	reg.mcasts[m.uid] = m
	reg.mu.Unlock()
	var resp abi.RdmaUcmCreateIdResp
	if err := ch.command(op, abi.RDMA_USER_CM_CMD_JOIN_MCAST, sys.AsBytes(&req), 0, sys.AsBytes(&resp)); err != nil {
		reg.mu.Lock()
		delete(reg.mcasts, m.uid)
		reg.mu.Unlock()
		return nil, err
	}
	m.mu.Lock()
	m.handle = resp.Id
	m.mu.Unlock()
	return m, nil
}

// Leave leaves the group (rdma_leave_multicast(3)): the QP is detached
// first. Events of the membership still queued are dropped. Leaving
// twice returns ErrClosed.
func (m *Multicast) Leave() error {
	const op = "leave_multicast"
	if m == nil || m.id == nil {
		return invalid(op, "nil Multicast")
	}
	reg.mu.Lock()
	delete(reg.mcasts, m.uid)
	reg.mu.Unlock()
	m.mu.Lock()
	if m.left {
		m.mu.Unlock()
		return opErr(op, ErrClosed)
	}
	m.left = true
	attached, gid, lid, handle := m.attached, m.gid, m.lid, m.handle
	m.attached = false
	m.mu.Unlock()
	if attached {
		if qp := m.id.qp(); qp != nil {
			qp.DetachMcast(gid, lid)
		}
	}
	if err := m.id.hold(op); err != nil {
		return err // the ID's destruction left the group already
	}
	defer m.id.drop()
	req := abi.RdmaUcmDestroyId{Id: handle}
	var resp abi.RdmaUcmDestroyIdResp
	return m.id.channel().command(op, abi.RDMA_USER_CM_CMD_LEAVE_MCAST, sys.AsBytes(&req), 0, sys.AsBytes(&resp))
}

// mcastEvent completes a multicast event: the membership it names (by
// uid), the group's address vector, and on a join the QP's attachment
// (ucma_process_join). It reports false for a membership left since.
func (ch *EventChannel) mcastEvent(ev *Event, r *abi.RdmaUcmEventResp) bool {
	reg.mu.Lock()
	m := reg.mcasts[r.Uid]
	reg.mu.Unlock()
	if m == nil {
		return false
	}
	ev.ID, ev.Multicast = m.id, m
	m.id.param(ev, r)
	if ev.Type != EventMulticastJoin {
		return true
	}
	gid, lid := ev.UD.AH.DGID, ev.UD.AH.DLID
	// The attach is made under m.mu and only while m is joined: a Leave
	// that ran since the lookup above saw no attachment to undo, and one
	// made now would stay for the QP's life.
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.left {
		return false
	}
	m.gid, m.lid = gid, lid
	if qp := m.id.qp(); qp != nil && !m.send {
		if err := qp.AttachMcast(gid, lid); err != nil {
			ev.failed(EventMulticastError, err)
			return true
		}
		m.attached = true
	}
	return true
}
