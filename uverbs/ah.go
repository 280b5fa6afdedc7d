package uverbs

import (
	"fmt"

	"github.com/pureverbs/pureverbs/abi"
	"github.com/pureverbs/pureverbs/internal/sys"
)

// AH is an address handle (struct ibv_ah, ibv_create_ah(3)): the address
// vector a UD send work request names its destination by.
//
// On RoCE devices such as rxe the AHAttr must be global (IsGlobal, DGID,
// SGIDIndex naming a RoCE v2 GID of the port, HopLimit, TrafficClass,
// FlowLabel); the kernel resolves the destination MAC from DGID through
// the netdev's neighbour table when the AH is created, so the destination
// must be reachable then.
type AH struct {
	ctx    *Context
	pd     *PD
	handle uint32
	// num is the provider's number of the AH (rxe: ah_num, carried in UD
	// send WQEs). The data path holds the AH's life while it writes a
	// WQE naming it, so that a concurrent Destroy cannot free a number
	// the kernel would hand to the next AH.
	num  uint32
	attr AHAttr
	life
}

// ahDriver is the provider half of one AH.
type ahDriver interface {
	// udataOut is the driver response of CREATE_AH (nil for none).
	udataOut() []byte
	// created returns the provider's AH number after a successful create;
	// on error the caller destroys the AH.
	created() (num uint32, err error)
}

// ahProvider is implemented by providers that support AHs.
type ahProvider interface{ newAH() ahDriver }

func (a *AHAttr) toABI() abi.IbUverbsAhAttr {
	return abi.IbUverbsAhAttr{
		Grh: abi.IbUverbsGlobalRoute{
			Dgid:         a.DGID,
			FlowLabel:    a.FlowLabel,
			SgidIndex:    a.SGIDIndex,
			HopLimit:     a.HopLimit,
			TrafficClass: a.TrafficClass,
		},
		Dlid:        a.DLID,
		Sl:          a.SL,
		SrcPathBits: a.SrcPathBits,
		StaticRate:  uint8(a.StaticRate),
		IsGlobal:    b2u8(a.IsGlobal),
		PortNum:     a.PortNum,
	}
}

// CreateAH creates an address handle in pd for attr (ibv_create_ah(3)).
// It sends the write command CREATE_AH, as libibverbs does, and keeps the
// number the rxe kernel returns for UD sends (kernels that return none
// get ErrNotSupported). A flow label above 20 bits is ErrInvalid; the
// kernel checks the rest: EINVAL for a port that does not exist or a
// non-global address on RoCE, ENODATA for an SGIDIndex whose GID table
// entry is empty; rxe accepts only RoCE v2 source GIDs, and a destination
// whose MAC cannot be resolved fails with the resolver's error.
func (pd *PD) CreateAH(attr AHAttr) (*AH, error) {
	if pd == nil || pd.ctx == nil {
		return nil, invalidErr("ah", "create", "nil PD")
	}
	if attr.FlowLabel >= 1<<20 {
		return nil, invalidErr("ah", "create", "flow label %#x has more than 20 bits", attr.FlowLabel)
	}
	c := pd.ctx
	if c.Closed() {
		return nil, closedErr("ah", "create")
	}
	if !pd.hold() {
		return nil, closedErr("ah", "create")
	}
	defer pd.drop()
	p, err := c.provider("ah")
	if err != nil {
		return nil, err
	}
	ap, ok := p.(ahProvider)
	if !ok {
		return nil, &OpError{Object: "ah", Method: "create",
			Err: fmt.Errorf("%w: the %s provider has no AH support", ErrNotSupported, p.name())}
	}
	drv := ap.newAH()
	req := abi.IbUverbsCreateAh{PdHandle: pd.handle, Attr: attr.toABI()}
	var resp abi.IbUverbsCreateAhResp
	w := sys.WriteCmd{Cmd: abi.IB_USER_VERBS_CMD_CREATE_AH, Req: sys.AsBytes(&req), Resp: sys.AsBytes(&resp), UdataOut: drv.udataOut()}
	if err := c.execWrite(&w, "ah", "create"); err != nil {
		return nil, c.limitErr(err, "ah", nil)
	}
	ah := &AH{ctx: c, pd: pd, handle: resp.AhHandle, attr: attr}
	num, err := drv.created()
	if err != nil {
		ah.destroyCmd()
		return nil, &OpError{Object: "ah", Method: "create", Err: err}
	}
	ah.num = num
	pd.users.ah.Add(1)
	return ah, nil
}

func (ah *AH) destroyCmd() error {
	return ah.ctx.destroyObject("ah", "destroy", abi.UVERBS_OBJECT_AH, abi.UVERBS_METHOD_AH_DESTROY,
		abi.UVERBS_ATTR_DESTROY_AH_HANDLE, ah.handle, func() *sys.WriteCmd {
			req := abi.IbUverbsDestroyAh{AhHandle: ah.handle}
			return &sys.WriteCmd{Cmd: abi.IB_USER_VERBS_CMD_DESTROY_AH, Req: sys.AsBytes(&req)}
		})
}

// Destroy destroys the AH (ibv_destroy_ah(3)), after the uses in flight
// (UD sends naming it). Destroying twice, or after the Context was
// closed, returns an error wrapping ErrClosed.
func (ah *AH) Destroy() error {
	if ah == nil || ah.ctx == nil {
		return invalidErr("ah", "destroy", "nil AH")
	}
	return ah.dispose("ah", "destroy", func() error {
		err := ah.destroyCmd()
		if err == nil {
			ah.pd.users.ah.Add(-1)
		}
		return err
	})
}

// Attr returns the address vector the AH was created with.
func (ah *AH) Attr() AHAttr {
	if ah == nil {
		return AHAttr{}
	}
	return ah.attr
}

// PD returns the protection domain the AH was created in.
func (ah *AH) PD() *PD {
	if ah == nil {
		return nil
	}
	return ah.pd
}

// Context returns the context the AH was created on.
func (ah *AH) Context() *Context {
	if ah == nil {
		return nil
	}
	return ah.ctx
}

// Handle returns the kernel's handle of the AH.
func (ah *AH) Handle() uint32 {
	if ah == nil {
		return 0
	}
	return ah.handle
}
