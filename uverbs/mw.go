package uverbs

import (
	"fmt"
	"sync/atomic"

	"github.com/pureverbs/pureverbs/abi"
	"github.com/pureverbs/pureverbs/internal/sys"
)

// MWType is a memory window's type (enum ibv_mw_type).
type MWType uint8

const (
	// MWType1 windows are bound and rebound with QP.BindMW (ibv_bind_mw),
	// which gives the window a new rkey each time.
	MWType1 MWType = 1
	// MWType2 windows are bound by a WRBindMW work request naming the
	// rkey the window takes, and freed for the next bind by WRLocalInv or
	// a peer's WRSendWithInv.
	MWType2 MWType = 2
)

// String returns "IBV_MW_TYPE_1" or "IBV_MW_TYPE_2", or "MWType(n)" for
// other values.
func (t MWType) String() string {
	switch t {
	case MWType1:
		return "IBV_MW_TYPE_1"
	case MWType2:
		return "IBV_MW_TYPE_2"
	}
	return fmt.Sprintf("MWType(%d)", uint8(t))
}

// MW is a memory window (struct ibv_mw, ibv_alloc_mw(3)): a remote key for
// a range of a memory region registered with AccessMWBind, granted and
// revoked through the send queue instead of by registering memory. Unbound,
// its rkey gives access to nothing.
//
// On rxe (Linux 6.1 and 6.12) the kernel checks an access through a bound
// window against the whole MR's range, not the window's: do not rely on a
// window's bounds there (TestVMMemoryWindows logs what the kernel does).
type MW struct {
	ctx    *Context
	pd     *PD
	handle uint32
	typ    MWType
	rkey   atomic.Uint32 // changes with each QP.BindMW (type 1)
	life
}

// MWBindInfo is what a bind grants (struct ibv_mw_bind_info): remote
// Access (AccessRemoteRead, AccessRemoteWrite, AccessRemoteAtomic) to
// Length bytes at Addr, inside MR. An MR of nil and a Length of 0 unbind
// the window.
type MWBindInfo struct {
	MR     *MR
	Addr   uint64
	Length uint64
	Access Access
}

// check validates b as librxe does before it writes the bind, against
// the MR's registration as it is now.
func (b *MWBindInfo) check(pd *PD) error { return b.checkWith(pd, b.MR.state()) }

// checkWith is check against st, the registration whose lkey the bind
// then carries (read once, under the MR's hold, so that a Rereg between
// the check and the write cannot pair one with the other's key).
func (b *MWBindInfo) checkWith(pd *PD, st *mrState) error {
	if b.MR == nil {
		if b.Addr != 0 || b.Length != 0 {
			return fmt.Errorf("%w: a bind without an MR must have no address and length", ErrInvalid)
		}
		return nil
	}
	if st.pd != pd {
		// ibv_bind_mw answers EPERM here.
		return fmt.Errorf("%w: the MR belongs to another PD (%w)", ErrInvalid, sys.EPERM)
	}
	if b.Length == 0 {
		// The kernel unbinds on a zero length and looks no further at
		// the MR (rxe_check_bind_mw); neither does librxe.
		return nil
	}
	if st.access&AccessMWBind == 0 {
		return fmt.Errorf("%w: the MR was registered without AccessMWBind", ErrInvalid)
	}
	if b.Access&AccessZeroBased != 0 {
		return fmt.Errorf("%w: zero-based windows are not supported", ErrInvalid)
	}
	if b.Access&^(AccessRemoteRead|AccessRemoteWrite|AccessRemoteAtomic|AccessLocalWrite) != 0 {
		return fmt.Errorf("%w: window access %v", ErrInvalid, b.Access)
	}
	start, n := st.ioVA(), uint64(len(st.buf))
	if b.Addr < start || b.Length > n || b.Addr-start > n-b.Length {
		return fmt.Errorf("%w: window [%#x, +%d) outside the MR [%#x, +%d)", ErrInvalid, b.Addr, b.Length, start, n)
	}
	return nil
}

// AllocMW allocates a memory window of type typ in pd (ibv_alloc_mw(3)):
// the write command ALLOC_MW. Devices without windows fail it in the
// kernel (EOPNOTSUPP); rxe has both types.
func (pd *PD) AllocMW(typ MWType) (*MW, error) {
	if pd == nil || pd.ctx == nil {
		return nil, invalidErr("mw", "alloc", "nil PD")
	}
	if typ != MWType1 && typ != MWType2 {
		return nil, invalidErr("mw", "alloc", "type %v", typ)
	}
	c := pd.ctx
	if c.Closed() {
		return nil, closedErr("mw", "alloc")
	}
	if !pd.hold() {
		return nil, closedErr("mw", "alloc")
	}
	defer pd.drop()
	req := abi.IbUverbsAllocMw{PdHandle: pd.handle, MwType: uint8(typ)}
	var resp abi.IbUverbsAllocMwResp
	w := sys.WriteCmd{Cmd: abi.IB_USER_VERBS_CMD_ALLOC_MW, Req: sys.AsBytes(&req), Resp: sys.AsBytes(&resp)}
	if err := c.execWrite(&w, "mw", "alloc"); err != nil {
		return nil, c.limitErr(err, "mw", nil)
	}
	mw := &MW{ctx: c, pd: pd, handle: resp.MwHandle, typ: typ}
	mw.rkey.Store(resp.Rkey)
	pd.users.mw.Add(1)
	return mw, nil
}

// Dealloc frees the window (ibv_dealloc_mw(3)): the MW/DESTROY ioctl, or
// the write command DEALLOC_MW on kernels without it. Its rkey stops
// working at once. A second Dealloc returns an error wrapping ErrClosed.
func (mw *MW) Dealloc() error {
	if mw == nil || mw.ctx == nil {
		return invalidErr("mw", "dealloc", "nil MW")
	}
	return mw.dispose("mw", "dealloc", func() error {
		err := mw.ctx.destroyObject("mw", "dealloc", abi.UVERBS_OBJECT_MW, abi.UVERBS_METHOD_MW_DESTROY,
			abi.UVERBS_ATTR_DESTROY_MW_HANDLE, mw.handle, func() *sys.WriteCmd {
				req := abi.IbUverbsDeallocMw{MwHandle: mw.handle}
				return &sys.WriteCmd{Cmd: abi.IB_USER_VERBS_CMD_DEALLOC_MW, Req: sys.AsBytes(&req)}
			})
		if err == nil {
			mw.pd.users.mw.Add(-1)
		}
		return err
	})
}

// RKey returns the window's current remote key: the one of the last
// QP.BindMW for type 1, the one allocated or set with SetRKey for type 2.
func (mw *MW) RKey() uint32 {
	if mw == nil {
		return 0
	}
	return mw.rkey.Load()
}

// SetRKey records the rkey a type 2 window was bound with by a WRBindMW
// request that completed successfully (libibverbs' callers update
// ibv_mw.rkey themselves likewise).
func (mw *MW) SetRKey(rkey uint32) {
	if mw == nil {
		return
	}
	mw.rkey.Store(rkey)
}

// Type returns the window's type.
func (mw *MW) Type() MWType {
	if mw == nil {
		return 0
	}
	return mw.typ
}

// Handle returns the kernel's handle of the window.
func (mw *MW) Handle() uint32 {
	if mw == nil {
		return 0
	}
	return mw.handle
}

// PD returns the protection domain of the window.
func (mw *MW) PD() *PD {
	if mw == nil {
		return nil
	}
	return mw.pd
}

// Context returns the context the window was allocated on.
func (mw *MW) Context() *Context {
	if mw == nil {
		return nil
	}
	return mw.ctx
}

// IncRKey returns rkey with its key byte (the low 8 bits, which the
// consumer owns) incremented and the index part unchanged
// (ibv_inc_rkey(3)): the rkey of the next bind of a window.
func IncRKey(rkey uint32) uint32 { return rkey&^0xff | (rkey+1)&0xff }

// BindMW binds the type 1 window mw to info (ibv_bind_mw(3)) by posting a
// bind work request with id and flags on qp (RC or UC, in mw's PD), and
// returns the window's new rkey, IncRKey of the old one, which peers may
// use once the bind completes (a completion with WCBindMW when flags has
// SendSignaled; ordered before later requests of the QP). A zero Length
// (with an MR of nil, or of the window's PD) unbinds the window. Errors:
// those of PostSend, and ErrInvalid for a type 2 window, a window or MR of
// another PD (the MR's also matching unix.EPERM, as ibv_bind_mw's), and,
// checked before posting where librxe leaves them to the kernel's bind
// (a completion with WCMWBindErr), an MR without AccessMWBind or a range
// outside the MR.
func (qp *QP) BindMW(mw *MW, id uint64, flags SendFlags, info MWBindInfo) (uint32, error) {
	if qp == nil || qp.ctx == nil || mw == nil || mw.ctx == nil {
		return 0, invalidErr("qp", "bind_mw", "nil QP or MW")
	}
	if mw.typ != MWType1 {
		return 0, invalidErr("qp", "bind_mw", "%v window: bind it with a WRBindMW work request", mw.typ)
	}
	if mw.pd != qp.pd {
		return 0, invalidErr("qp", "bind_mw", "the window belongs to another PD")
	}
	if err := info.check(qp.pd); err != nil {
		return 0, &OpError{Object: "qp", Method: "bind_mw", Err: err}
	}
	rkey := IncRKey(mw.rkey.Load())
	wr := [1]SendWR{{ID: id, Opcode: WRBindMW, Flags: flags, BindMW: mw, BindRKey: rkey, BindInfo: info}}
	if err := qp.PostSend(wr[:]); err != nil {
		return 0, err
	}
	mw.rkey.Store(rkey)
	return rkey, nil
}
