package uverbs

import (
	"errors"
	"math"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/pureverbs/pureverbs/abi"
	"github.com/pureverbs/pureverbs/internal/sys"
)

// Access is a set of memory access flags (enum ibv_access_flags), for
// RegMR and QPAttr.AccessFlags.
type Access uint32

const (
	AccessLocalWrite   Access = abi.IB_UVERBS_ACCESS_LOCAL_WRITE   // the device may write the memory (receives, RDMA READ responses)
	AccessRemoteWrite  Access = abi.IB_UVERBS_ACCESS_REMOTE_WRITE  // peers may RDMA WRITE it (needs AccessLocalWrite)
	AccessRemoteRead   Access = abi.IB_UVERBS_ACCESS_REMOTE_READ   // peers may RDMA READ it
	AccessRemoteAtomic Access = abi.IB_UVERBS_ACCESS_REMOTE_ATOMIC // peers may run atomics on it (needs AccessLocalWrite)
	AccessMWBind       Access = abi.IB_UVERBS_ACCESS_MW_BIND       // memory windows may be bound to it
	AccessZeroBased    Access = abi.IB_UVERBS_ACCESS_ZERO_BASED    // addresses are offsets from the start
	AccessOnDemand     Access = abi.IB_UVERBS_ACCESS_ON_DEMAND     // on-demand paging (ODP), if the device has it
	AccessHugeTLB      Access = abi.IB_UVERBS_ACCESS_HUGETLB       // the memory is backed by huge pages
	// AccessRelaxedOrdering is an optional flag: devices that do not
	// support it ignore it; kernels without optional access flags
	// (IB_UVERBS_CORE_SUPPORT_OPTIONAL_MR_ACCESS) never see it.
	AccessRelaxedOrdering Access = abi.IB_UVERBS_ACCESS_RELAXED_ORDERING

	accessOptional = Access(abi.IB_UVERBS_ACCESS_OPTIONAL_RANGE)
	accessKnown    = AccessHugeTLB<<1 - 1 | accessOptional
)

var accessNames = [...]string{"LOCAL_WRITE", "REMOTE_WRITE", "REMOTE_READ", "REMOTE_ATOMIC", "MW_BIND", "ZERO_BASED", "ON_DEMAND", "HUGETLB"}

// String returns the flags' names, without their IBV_ACCESS_ prefix,
// joined by "|" ("LOCAL_WRITE|REMOTE_READ"), with unknown bits in hex; "0"
// for none.
func (a Access) String() string {
	if a == 0 {
		return "0"
	}
	var parts []string
	for i, n := range accessNames {
		if a&(1<<i) != 0 {
			parts = append(parts, n)
		}
	}
	if a&AccessRelaxedOrdering != 0 {
		parts = append(parts, "RELAXED_ORDERING")
	}
	if rest := a &^ (AccessHugeTLB<<1 - 1 | AccessRelaxedOrdering); rest != 0 {
		parts = append(parts, "0x"+strconv.FormatUint(uint64(rest), 16))
	}
	return strings.Join(parts, "|")
}

// MR is a registered memory region (struct ibv_mr, ibv_reg_mr(3)).
//
// The MR keeps the registered slice reachable until it is deregistered
// (and as long as the MR itself is reachable): the kernel pins the pages
// and the device reads and writes them by address, so the memory must not
// be freed while registered. Go's heap does not move objects, so any
// []byte may be registered; AllocBuffer gives page-aligned memory outside
// the heap for those who prefer it.
type MR struct {
	ctx    *Context
	handle uint32
	// st is what Rereg may change, replaced as a whole so that readers
	// (LKey, SGE, a bind's checks) need no lock; nil until the first
	// Rereg, meaning first.
	st    atomic.Pointer[mrState]
	first mrState
	life
}

// mrState is an MR's registration: immutable once published.
type mrState struct {
	pd      *PD
	buf     []byte // keeps the registered memory alive
	iova    uint64 // the device's address of buf[0], when iovaSet (RegMRIOVA)
	iovaSet bool
	access  Access
	lkey    uint32
	rkey    uint32
}

// noMRState is the registration of a nil MR: all zero, never written.
var noMRState mrState

// state returns the MR's current registration (noMRState for a nil MR, so
// that its getters return zero values).
func (mr *MR) state() *mrState {
	if mr == nil {
		return &noMRState
	}
	if s := mr.st.Load(); s != nil {
		return s
	}
	return &mr.first
}

// RegMR registers buf (all of its len(buf) bytes) for access by the
// device (ibv_reg_mr(3)); its I/O virtual address is buf's address, as
// with ibv_reg_mr. LKey goes into local scatter/gather entries, RKey and
// Addr to peers that RDMA READ, WRITE or run atomics on it.
//
// The MR holds buf until Dereg: do not let the memory be reused for
// something else meanwhile (an AllocBuffer must not be closed first).
// Registration pins the pages and counts against RLIMIT_MEMLOCK unless the
// process has CAP_IPC_LOCK.
//
// An empty buf, a nil PD or access bits this library does not know are
// ErrInvalid before any system call. The kernel refuses (EINVAL)
// AccessRemoteWrite or AccessRemoteAtomic without AccessLocalWrite, and
// AccessOnDemand on devices without ODP (ErrNotSupported; 6.1 says
// EINVAL). Optional
// flags (AccessRelaxedOrdering) are dropped, as libibverbs does, on
// kernels that do not accept them. RegMR uses the write command REG_MR.
func (pd *PD) RegMR(buf []byte, access Access) (*MR, error) {
	return pd.regMR(buf, 0, false, access)
}

// RegMRIOVA registers buf as RegMR does, but the device knows it at the
// I/O virtual address iova (ibv_reg_mr_iova(3)): local SGEs and peers'
// RDMA address it from iova (MR.IOVA, MR.SGE), and buf's own address plays
// no part on the wire. The kernel requires iova to have the same offset
// within a page as buf's address (ErrInvalid here otherwise), and the
// range not to wrap.
func (pd *PD) RegMRIOVA(buf []byte, iova uint64, access Access) (*MR, error) {
	return pd.regMR(buf, iova, true, access)
}

func (pd *PD) regMR(buf []byte, iova uint64, iovaSet bool, access Access) (*MR, error) {
	if pd == nil || pd.ctx == nil {
		return nil, invalidErr("mr", "reg", "nil PD")
	}
	if len(buf) == 0 {
		return nil, invalidErr("mr", "reg", "empty buffer")
	}
	if access&^accessKnown != 0 {
		return nil, invalidErr("mr", "reg", "unknown access flags %#x", uint32(access&^accessKnown))
	}
	if iovaSet {
		page := uint64(sys.PageSize)
		if addr := sys.SliceAddr(buf); iova%page != addr%page {
			return nil, invalidErr("mr", "reg", "iova %#x and the buffer's address %#x differ in their offset within a page", iova, addr)
		}
		if iova+uint64(len(buf))-1 < iova {
			return nil, invalidErr("mr", "reg", "iova %#x + %d bytes wraps", iova, len(buf))
		}
	}
	c := pd.ctx
	if c.coreSupport&abi.IB_UVERBS_CORE_SUPPORT_OPTIONAL_MR_ACCESS == 0 {
		access &^= accessOptional
	}
	if c.Closed() {
		return nil, closedErr("mr", "reg")
	}
	if !pd.hold() {
		return nil, closedErr("mr", "reg")
	}
	defer pd.drop()
	// buf is stored in the (heap) MR before its address is taken: that
	// keeps the memory reachable and, for Go memory, in the heap.
	mr := &MR{ctx: c, first: mrState{pd: pd, buf: buf, access: access, iova: iova, iovaSet: iovaSet}}
	req := mr.first.regRequest(pd.handle)
	var resp abi.IbUverbsRegMrResp
	w := sys.WriteCmd{Cmd: abi.IB_USER_VERBS_CMD_REG_MR, Req: sys.AsBytes(&req), Resp: sys.AsBytes(&resp)}
	if err := c.execWrite(&w, "mr", "reg"); err != nil {
		return nil, c.limitErr(memlockErr(err, len(buf)), "mr", nil)
	}
	mr.handle, mr.first.lkey, mr.first.rkey = resp.MrHandle, resp.Lkey, resp.Rkey
	pd.users.mr.Add(1)
	return mr, nil
}

// regRequest is the REG_MR request for s in the PD with handle pd.
func (s *mrState) regRequest(pd uint32) abi.IbUverbsRegMr {
	return abi.IbUverbsRegMr{
		Start:       sys.SliceAddr(s.buf),
		Length:      uint64(len(s.buf)),
		HcaVa:       s.ioVA(),
		PdHandle:    pd,
		AccessFlags: uint32(s.access),
	}
}

// ioVA is the device's address of the region's first byte.
func (s *mrState) ioVA() uint64 {
	if s.iovaSet {
		return s.iova
	}
	return sys.SliceAddr(s.buf)
}

// Dereg deregisters the MR (ibv_dereg_mr(3)), after the uses in flight.
// The device then no longer accesses the memory; the MR stops keeping it
// alive once the MR itself is unreachable. Deregistering twice, or after
// the Context was closed (which released the MR in the kernel), returns
// an error wrapping ErrClosed.
func (mr *MR) Dereg() error {
	if mr == nil || mr.ctx == nil {
		return invalidErr("mr", "dereg", "nil MR")
	}
	return mr.dispose("mr", "dereg", func() error {
		err := mr.ctx.destroyObject("mr", "dereg", abi.UVERBS_OBJECT_MR, abi.UVERBS_METHOD_MR_DESTROY,
			abi.UVERBS_ATTR_DESTROY_MR_HANDLE, mr.handle, func() *sys.WriteCmd {
				req := abi.IbUverbsDeregMr{MrHandle: mr.handle}
				return &sys.WriteCmd{Cmd: abi.IB_USER_VERBS_CMD_DEREG_MR, Req: sys.AsBytes(&req)}
			})
		if err == nil {
			mr.state().pd.users.mr.Add(-1)
		}
		return err
	})
}

// ReregFlags says what Rereg changes (enum ibv_rereg_mr_flags; the
// kernel's enum ib_mr_rereg_flags has the same bits).
type ReregFlags uint32

const (
	ReregTranslation ReregFlags = 1 << 0 // the memory: buf (IBV_REREG_MR_CHANGE_TRANSLATION)
	ReregPD          ReregFlags = 1 << 1 // the protection domain (IBV_REREG_MR_CHANGE_PD)
	ReregAccess      ReregFlags = 1 << 2 // the access flags (IBV_REREG_MR_CHANGE_ACCESS)

	reregKnown = ReregTranslation | ReregPD | ReregAccess
)

// Rereg changes the MR in place (ibv_rereg_mr(3)): what flags names, in
// one kernel command (REREG_MR), keeping the MR's handle. With ReregPD
// the MR moves to pd, with ReregTranslation it covers buf instead (at
// buf's address, as RegMR: an IOVA of RegMRIOVA does not carry over),
// with ReregAccess it gets access. Arguments flags does not name are
// ignored, except access, which must then be 0 (as in libibverbs). The
// keys may change: read LKey and RKey again and tell peers.
//
// Before any system call: no flags or unknown ones, ReregPD with a nil PD
// or one of another Context, ReregTranslation with an empty buf, and
// unknown access bits are ErrInvalid; a deregistered MR, a destroyed PD or
// a closed Context are ErrClosed. Rereg waits for uses of the MR in flight
// (a bind reading its keys) and holds the new PD against a concurrent
// Dealloc, as RegMR does.
//
// Devices decide what they can change: a driver without rereg fails with
// ErrNotSupported (EOPNOTSUPP), and so does rxe on 6.1. rxe on later
// kernels changes the PD and the access flags but not the translation
// (ErrNotSupported). libibverbs' rxe provider has no rereg_mr, so
// ibv_rereg_mr itself refuses on rxe (EOPNOTSUPP) before the kernel
// sees it; this library asks the kernel. On an error the MR keeps what
// this library knew of it; if the kernel failed mid-way (a driver may have
// changed the PD before refusing the access), ibv_rereg_mr(3) says the MR
// should only be deregistered.
func (mr *MR) Rereg(flags ReregFlags, pd *PD, buf []byte, access Access) error {
	const object, method = "mr", "rereg"
	if mr == nil || mr.ctx == nil {
		return invalidErr(object, method, "nil MR")
	}
	switch {
	case flags == 0:
		return invalidErr(object, method, "no change requested (flags 0)")
	case flags&^reregKnown != 0:
		return invalidErr(object, method, "unknown flags %#x", uint32(flags&^reregKnown))
	case flags&ReregPD != 0 && (pd == nil || pd.ctx == nil):
		return invalidErr(object, method, "ReregPD with a nil PD")
	case flags&ReregPD != 0 && pd.ctx != mr.ctx:
		return invalidErr(object, method, "the PD belongs to another Context")
	case flags&ReregTranslation != 0 && len(buf) == 0:
		return invalidErr(object, method, "ReregTranslation with an empty buffer")
	case flags&ReregAccess == 0 && access != 0:
		return invalidErr(object, method, "access %v without ReregAccess", access)
	case access&^accessKnown != 0:
		return invalidErr(object, method, "unknown access flags %#x", uint32(access&^accessKnown))
	}
	c := mr.ctx
	if c.coreSupport&abi.IB_UVERBS_CORE_SUPPORT_OPTIONAL_MR_ACCESS == 0 {
		access &^= accessOptional
	}
	mr.rw.Lock()
	defer mr.rw.Unlock()
	if mr.dead || c.Closed() {
		return closedErr(object, method)
	}
	if flags&ReregPD != 0 {
		if !pd.hold() {
			return closedErr(object, method)
		}
		defer pd.drop()
	}
	old := mr.state()
	next := new(mrState)
	req := old.rereg(next, mr.handle, flags, pd, buf, access)
	var resp abi.IbUverbsReregMrResp
	w := sys.WriteCmd{Cmd: abi.IB_USER_VERBS_CMD_REREG_MR, Req: sys.AsBytes(&req), Resp: sys.AsBytes(&resp)}
	if err := c.execWrite(&w, object, method); err != nil {
		if flags&ReregTranslation != 0 {
			err = memlockErr(err, len(next.buf))
		}
		return err
	}
	next.lkey, next.rkey = resp.Lkey, resp.Rkey
	if next.pd != old.pd {
		next.pd.users.mr.Add(1)
		old.pd.users.mr.Add(-1)
	}
	mr.st.Store(next)
	runtime.KeepAlive(buf)
	return nil
}

// rereg fills next with s changed as flags say and returns the REREG_MR
// request for the MR with handle h; next's keys are the response's.
func (s *mrState) rereg(next *mrState, h uint32, flags ReregFlags, pd *PD, buf []byte, access Access) abi.IbUverbsReregMr {
	*next = *s
	req := abi.IbUverbsReregMr{MrHandle: h, Flags: uint32(flags)}
	if flags&ReregTranslation != 0 {
		// Stored before its address is taken, as in RegMR. The IOVA
		// is the new memory's address, as libibverbs' providers pass.
		next.buf, next.iova, next.iovaSet = buf, 0, false
		addr := sys.SliceAddr(next.buf)
		req.Start, req.Length, req.HcaVa = addr, uint64(len(buf)), addr
	}
	if flags&ReregPD != 0 {
		next.pd, req.PdHandle = pd, pd.handle
	}
	if flags&ReregAccess != 0 {
		next.access, req.AccessFlags = access, uint32(access)
	}
	return req
}

// LKey returns the local key (for scatter/gather entries).
func (mr *MR) LKey() uint32 { return mr.state().lkey }

// RKey returns the remote key (for peers' RDMA operations).
func (mr *MR) RKey() uint32 { return mr.state().rkey }

// Addr returns the address of the first byte of the registered memory.
// For an MR of RegMR it is also the I/O virtual address that local SGEs
// and peers' RDMA operations name (with RKey); IOVA returns that address
// in every case.
func (mr *MR) Addr() uint64 { return sys.SliceAddr(mr.state().buf) }

// IOVA returns the address the device knows the region's first byte by:
// Addr, unless it was registered with RegMRIOVA. Local SGEs, peers' RDMA
// and memory window binds use it.
func (mr *MR) IOVA() uint64 { return mr.state().ioVA() }

// SGE returns the scatter/gather element of length bytes at offset off of
// the region, in the device's addresses (IOVA). It does not check the
// range against the region: a request reaching outside it completes with
// a local protection or length error. Arguments no SGE can express (off
// or length negative, length above math.MaxUint32, off+length or the
// address overflowing) and a nil MR give an SGE of Length math.MaxUint32, which
// PostSend and PostRecv refuse with an error matching ErrInvalid (a
// message is at most 2 GiB, a receive's buffers total less than 4 GiB),
// rather than a silently truncated one.
func (mr *MR) SGE(off, length int) SGE {
	if mr == nil || off < 0 || length < 0 || uint64(length) > math.MaxUint32 || off > math.MaxInt-length {
		return SGE{Length: math.MaxUint32}
	}
	s := mr.state()
	addr := s.ioVA() + uint64(off)
	if addr < uint64(off) || addr+uint64(length) < addr {
		return SGE{Length: math.MaxUint32, LKey: s.lkey}
	}
	return SGE{Addr: addr, Length: uint32(length), LKey: s.lkey}
}

// Len returns the number of registered bytes.
func (mr *MR) Len() int { return len(mr.state().buf) }

// Bytes returns the registered memory.
func (mr *MR) Bytes() []byte { return mr.state().buf }

// Access returns the access flags the MR was registered with (without
// optional flags the kernel would not accept).
func (mr *MR) Access() Access { return mr.state().access }

// PD returns the protection domain the MR is registered in.
func (mr *MR) PD() *PD { return mr.state().pd }

// Context returns the context the MR was registered on.
func (mr *MR) Context() *Context {
	if mr == nil {
		return nil
	}
	return mr.ctx
}

// Handle returns the kernel's handle of the MR.
func (mr *MR) Handle() uint32 {
	if mr == nil {
		return 0
	}
	return mr.handle
}

// dispose is the end of an object without events (PD, MR, AH):
// exclusively, after the uses in flight, refuse a second call, run the
// kernel destroy, and mark the object dead when it succeeded or the
// Context is closed (the kernel released the object with the command fd).
// A kernel refusal (EBUSY) leaves the object usable.
func (l *life) dispose(object, method string, kernel func() error) error {
	l.rw.Lock()
	defer l.rw.Unlock()
	if l.dead {
		return closedErr(object, method)
	}
	err := kernel()
	if err == nil || errors.Is(err, ErrClosed) {
		l.dead = true
	}
	return err
}

// destroyObject sends the ioctl destroy method of an object without a
// destroy response (MR, AH) and falls back to the write command that
// fallback builds on kernels without it, as libibverbs does.
func (c *Context) destroyObject(object, method string, obj, meth, attr uint16, handle uint32, fallback func() *sys.WriteCmd) error {
	cmd := c.get()
	cmd.Reset(obj, meth, c.driverID)
	cmd.IDRIn(attr, handle, true)
	err := cmd.Exec(c.cmd)
	c.put(cmd)
	switch err {
	case nil:
		return nil
	case sys.ENOTTY, sys.EPROTONOSUPPORT, sys.EOPNOTSUPP:
		return c.execWrite(fallback(), object, method)
	}
	return c.opErr(object, method, err)
}
