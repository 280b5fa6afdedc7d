package rdmacm

import (
	"github.com/pureverbs/pureverbs/abi"
	"github.com/pureverbs/pureverbs/internal/sys"
)

// Options of an ID (rdma_set_option(3), level RDMA_OPTION_ID). Each is
// one SET_OPTION command; the kernel checks when an option may change
// and refuses with its errno (errors.Is(err, unix.EINVAL)).

// SetTOS sets the type of service of the ID's traffic (rdma_set_option(3),
// RDMA_OPTION_ID_TOS): on RoCE the GRH's traffic class, taken by the
// route, so set it before ResolveRoute (a client) or Listen (a server).
func (id *ID) SetTOS(tos uint8) error {
	return id.setOption("set_option tos", abi.RDMA_OPTION_ID_TOS, []byte{tos})
}

// SetReuseAddr lets the ID bind a port another ID holds
// (rdma_set_option(3), RDMA_OPTION_ID_REUSEADDR, SO_REUSEADDR's
// counterpart); set before BindAddr.
func (id *ID) SetReuseAddr(on bool) error {
	return id.setOption("set_option reuseaddr", abi.RDMA_OPTION_ID_REUSEADDR, int32Bytes(on))
}

// SetAFOnly makes an ID bound to an IPv6 address take IPv6 only
// (rdma_set_option(3), RDMA_OPTION_ID_AFONLY, IPV6_V6ONLY's
// counterpart); set before BindAddr.
func (id *ID) SetAFOnly(on bool) error {
	return id.setOption("set_option afonly", abi.RDMA_OPTION_ID_AFONLY, int32Bytes(on))
}

// SetAckTimeout sets the QP's local ACK timeout, 4.096 µs * 2^t
// (rdma_set_option(3), RDMA_OPTION_ID_ACK_TIMEOUT), which the connection
// then gives the QP at RTS in place of the one the CM computes from the
// path. The InfiniBand field has 5 bits (0-31), but, as with librdmacm,
// a larger t is passed on unchecked: the kernel's rdma_set_ack_timeout
// stores any value for an RC ID (and refuses other QP types with
// EINVAL), and the device decides what it means.
func (id *ID) SetAckTimeout(t uint8) error {
	return id.setOption("set_option ack_timeout", abi.RDMA_OPTION_ID_ACK_TIMEOUT, []byte{t})
}

func int32Bytes(on bool) []byte {
	b := make([]byte, 4)
	if on {
		b[0] = 1 // little-endian int 1
	}
	return b
}

func (id *ID) setOption(op string, name uint32, val []byte) error {
	if err := id.hold(op); err != nil {
		return err
	}
	defer id.drop()
	req := abi.RdmaUcmSetOption{Id: id.handle, Level: abi.RDMA_OPTION_ID, Optname: name, Optlen: uint32(len(val))}
	return id.channel().commandIn(op, abi.RDMA_USER_CM_CMD_SET_OPTION, sys.AsBytes(&req), 0, val)
}
