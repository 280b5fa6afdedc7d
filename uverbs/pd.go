package uverbs

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/pureverbs/pureverbs/abi"
	"github.com/pureverbs/pureverbs/internal/sys"
)

// PD is a protection domain (struct ibv_pd, ibv_alloc_pd(3)).
type PD struct {
	ctx    *Context
	handle uint32
	users  users // live QPs, MRs, MWs, AHs and SRQs in it, for Dealloc's EBUSY
	life         // held by the creates of QPs, MRs, AHs and SRQs in it
}

// AllocPD allocates a protection domain (ibv_alloc_pd(3)). Like
// libibverbs it uses the write command ALLOC_PD (through the INVOKE_WRITE
// ioctl when the kernel has it).
func (c *Context) AllocPD() (*PD, error) {
	if c == nil {
		return nil, invalidErr("pd", "alloc", "nil context")
	}
	if c.Closed() {
		return nil, closedErr("pd", "alloc")
	}
	var req abi.IbUverbsAllocPd
	var resp abi.IbUverbsAllocPdResp
	w := sys.WriteCmd{Cmd: abi.IB_USER_VERBS_CMD_ALLOC_PD, Req: sys.AsBytes(&req), Resp: sys.AsBytes(&resp)}
	if err := c.execWrite(&w, "pd", "alloc"); err != nil {
		return nil, c.limitErr(err, "pd", nil)
	}
	return &PD{ctx: c, handle: resp.PdHandle}, nil
}

// Context returns the context the PD was allocated on.
func (pd *PD) Context() *Context {
	if pd == nil {
		return nil
	}
	return pd.ctx
}

// Handle returns the kernel's handle of the PD.
func (pd *PD) Handle() uint32 {
	if pd == nil {
		return 0
	}
	return pd.handle
}

// Dealloc deallocates the PD (ibv_dealloc_pd(3)). It fails with the
// kernel's EBUSY (errors.Is(err, unix.EBUSY)), naming what this library
// knows still lives in the PD, while QPs, MRs, AHs or SRQs use it; the PD
// then stays usable. It fails with an error wrapping ErrClosed when the
// PD was already deallocated (or its Context closed). It waits for
// creates in flight that use the PD.
func (pd *PD) Dealloc() error {
	if pd == nil || pd.ctx == nil {
		return invalidErr("pd", "dealloc", "nil PD")
	}
	pd.rw.Lock()
	defer pd.rw.Unlock()
	if pd.dead {
		return closedErr("pd", "dealloc")
	}
	c := pd.ctx
	cmd := c.get()
	cmd.Reset(abi.UVERBS_OBJECT_PD, abi.UVERBS_METHOD_PD_DESTROY, c.driverID)
	cmd.IDRIn(abi.UVERBS_ATTR_DESTROY_PD_HANDLE, pd.handle, true)
	err := cmd.Exec(c.cmd)
	c.put(cmd)
	if err == sys.ENOTTY || err == sys.EPROTONOSUPPORT || err == sys.EOPNOTSUPP {
		req := abi.IbUverbsDeallocPd{PdHandle: pd.handle}
		err = c.execWrite(&sys.WriteCmd{Cmd: abi.IB_USER_VERBS_CMD_DEALLOC_PD, Req: sys.AsBytes(&req)}, "pd", "dealloc")
	} else if err != nil {
		err = c.opErr("pd", "dealloc", err)
	}
	if err != nil {
		err = busyErr(err, &pd.users)
		if errors.Is(err, ErrClosed) {
			// The context is closed: the kernel released the PD with it.
			pd.dead = true
		}
		return err
	}
	pd.dead = true
	return nil
}

// users counts the live objects this library created that hold a parent
// busy in the kernel (a PD's QPs, MRs, MWs, AHs and SRQs; an SRQ's QPs),
// so that the kernel's EBUSY can say what is still there.
type users struct{ qp, mr, mw, ah, srq atomic.Int32 }

func (u *users) describe() string {
	var parts []string
	for _, x := range []struct {
		n    int32
		name string
	}{{u.qp.Load(), "QP"}, {u.mr.Load(), "MR"}, {u.mw.Load(), "MW"}, {u.ah.Load(), "AH"}, {u.srq.Load(), "SRQ"}} {
		switch {
		case x.n == 1:
			parts = append(parts, "1 "+x.name)
		case x.n > 1:
			parts = append(parts, strconv.Itoa(int(x.n))+" "+x.name+"s")
		}
	}
	return strings.Join(parts, ", ")
}

// busyErr turns the kernel's EBUSY for destroying a parent into an error
// that names its live children; errors.Is(err, unix.EBUSY) still holds.
// Other errors pass unchanged.
func busyErr(err error, u *users) error {
	var oe *OpError
	if !errors.Is(err, sys.EBUSY) || !errors.As(err, &oe) {
		return err
	}
	what := u.describe()
	if what == "" {
		what = "objects in the kernel"
	}
	return &OpError{Object: oe.Object, Method: oe.Method,
		Err: fmt.Errorf("%w: still used by %s (destroy them first)", oe.Err, what)}
}
