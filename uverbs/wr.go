package uverbs

import (
	"fmt"
	"strconv"

	"github.com/pureverbs/pureverbs/internal/sys"
)

// SGE is a scatter/gather element (struct ibv_sge): Length bytes at Addr,
// inside a memory region whose local key is LKey. MR.SGE builds one from an
// offset into the region.
type SGE struct {
	Addr   uint64
	Length uint32
	LKey   uint32
}

// WROpcode is a send work request opcode (enum ibv_wr_opcode).
type WROpcode uint32

// Send opcodes rxe implements (ibv_post_send(3)).
const (
	WRRDMAWrite         WROpcode = 0
	WRRDMAWriteWithImm  WROpcode = 1
	WRSend              WROpcode = 2
	WRSendWithImm       WROpcode = 3
	WRRDMARead          WROpcode = 4
	WRAtomicCmpAndSwp   WROpcode = 5
	WRAtomicFetchAndAdd WROpcode = 6
	// WRLocalInv invalidates the type 2 memory window (or memory region)
	// whose rkey is InvalidateRKey (RC).
	WRLocalInv WROpcode = 7
	// WRBindMW binds BindMW to BindInfo under the rkey BindRKey (RC, UC);
	// QP.BindMW is the ibv_bind_mw form for type 1 windows.
	WRBindMW WROpcode = 8
	// WRSendWithInv is a send that also invalidates the peer's window
	// (or region) InvalidateRKey when it arrives (RC).
	WRSendWithInv WROpcode = 9
)

var wrOpcodeNames = [...]string{"RDMA_WRITE", "RDMA_WRITE_WITH_IMM", "SEND", "SEND_WITH_IMM", "RDMA_READ", "ATOMIC_CMP_AND_SWP", "ATOMIC_FETCH_AND_ADD",
	"LOCAL_INV", "BIND_MW", "SEND_WITH_INV"}

// String returns the IBV_WR_* name, or "WROpcode(n)" for other values.
func (o WROpcode) String() string {
	if int(o) < len(wrOpcodeNames) {
		return "IBV_WR_" + wrOpcodeNames[o]
	}
	return "WROpcode(" + strconv.FormatUint(uint64(o), 10) + ")"
}

// SendFlags are the flags of a send work request (enum ibv_send_flags).
type SendFlags uint32

const (
	SendFence     SendFlags = 1 << 0 // wait for prior RDMA reads and atomics
	SendSignaled  SendFlags = 1 << 1 // generate a completion (always, with QPInitAttr.SigAll)
	SendSolicited SendFlags = 1 << 2 // set the solicited-event bit
	SendInline    SendFlags = 1 << 3 // copy SendWR.Inline into the work queue
	// SendIPCsum asks for checksum offload (IBV_SEND_IP_CSUM), which only
	// raw packet QPs of some devices do: rxe ignores it, as librxe passes
	// it on, so a C program's flags port unchanged.
	SendIPCsum SendFlags = 1 << 4
)

// SendWR is a send work request (struct ibv_send_wr). One value can be
// reused for every post: posting copies it into the send queue and keeps
// no reference.
type SendWR struct {
	// ID is returned in the work completion (wr_id).
	ID     uint64
	Opcode WROpcode
	Flags  SendFlags
	// SGL lists the local buffers (registered memory) to send from, or, for
	// RDMA reads and atomics, to write the result to.
	SGL []SGE
	// Inline is the payload of a SendInline request: up to the QP's
	// MaxInlineData bytes, copied into the queue at post time, so the
	// memory need not be registered. With SendInline, SGL must be empty
	// (libibverbs gathers inline data from the SGL's addresses; a Go slice
	// cannot be read wrongly).
	Inline []byte
	// ImmData is the immediate data of *_WITH_IMM opcodes, in host order;
	// it travels in network order, as ibv_post_send's big-endian imm_data
	// does, so a C peer sees htonl(ImmData).
	ImmData uint32
	// RemoteAddr and RKey name the remote memory of RDMA and atomic
	// requests (wr.rdma / wr.atomic).
	RemoteAddr uint64
	RKey       uint32
	// CompareAdd and Swap are the operands of the atomics: the value
	// compared with (CMP_AND_SWP) or added (FETCH_AND_ADD), and the value
	// swapped in.
	CompareAdd uint64
	Swap       uint64
	// UD: the address handle of the destination, its QPN and Q_Key
	// (wr.ud). The AH must belong to the QP's PD and stay alive until the
	// request completes (the kernel looks it up when it sends).
	AH         *AH
	RemoteQPN  uint32
	RemoteQKey uint32
	// InvalidateRKey is the rkey WRLocalInv and WRSendWithInv invalidate
	// (ibv_send_wr's invalidate_rkey).
	InvalidateRKey uint32
	// WRBindMW: the window, the rkey it takes (IncRKey of its current
	// one, as ibv_inc_rkey gives), and what it grants (bind_mw).
	BindMW   *MW
	BindRKey uint32
	BindInfo MWBindInfo
}

// RecvWR is a receive work request (struct ibv_recv_wr).
type RecvWR struct {
	ID  uint64
	SGL []SGE
}

// WCStatus is a work completion status (enum ibv_wc_status).
type WCStatus uint32

// Completion statuses (ibv_poll_cq(3)).
const (
	WCSuccess          WCStatus = 0
	WCLocLenErr        WCStatus = 1
	WCLocQPOpErr       WCStatus = 2
	WCLocEECOpErr      WCStatus = 3
	WCLocProtErr       WCStatus = 4
	WCWRFlushErr       WCStatus = 5
	WCMWBindErr        WCStatus = 6
	WCBadRespErr       WCStatus = 7
	WCLocAccessErr     WCStatus = 8
	WCRemInvReqErr     WCStatus = 9
	WCRemAccessErr     WCStatus = 10
	WCRemOpErr         WCStatus = 11
	WCRetryExcErr      WCStatus = 12
	WCRNRRetryExcErr   WCStatus = 13
	WCLocRDDViolErr    WCStatus = 14
	WCRemInvRDReqErr   WCStatus = 15
	WCRemAbortErr      WCStatus = 16
	WCInvEECNErr       WCStatus = 17
	WCInvEECStateErr   WCStatus = 18
	WCFatalErr         WCStatus = 19
	WCRespTimeoutErr   WCStatus = 20
	WCGeneralErr       WCStatus = 21
	WCTMErr            WCStatus = 22
	WCTMRndvIncomplete WCStatus = 23
)

// The texts of ibv_wc_status_str(3) (libibverbs/enum_strs.c).
var wcStatusText = [...]string{
	"success", "local length error", "local QP operation error", "local EE context operation error",
	"local protection error", "Work Request Flushed Error", "memory management operation error",
	"bad response error", "local access error", "remote invalid request error", "remote access error",
	"remote operation error", "transport retry counter exceeded", "RNR retry counter exceeded",
	"local RDD violation error", "remote invalid RD request", "aborted error", "invalid EE context number",
	"invalid EE context state", "fatal error", "response timeout error", "general error",
	"TM error", "TM software rendezvous",
}

// String returns ibv_wc_status_str's text ("unknown" for other values).
func (s WCStatus) String() string {
	if int(s) < len(wcStatusText) {
		return wcStatusText[s]
	}
	return "unknown"
}

// WCOpcode is the operation a completion reports (enum ibv_wc_opcode).
type WCOpcode uint32

// Completion opcodes, the values of enum ibv_wc_opcode.
const (
	WCSend            WCOpcode = 0
	WCRDMAWrite       WCOpcode = 1
	WCRDMARead        WCOpcode = 2
	WCCompSwap        WCOpcode = 3
	WCFetchAdd        WCOpcode = 4
	WCBindMW          WCOpcode = 5
	WCLocalInv        WCOpcode = 6
	WCRecv            WCOpcode = 128
	WCRecvRDMAWithImm WCOpcode = 129
)

// String returns the IBV_WC_* name, or "WCOpcode(n)" for other values.
func (o WCOpcode) String() string {
	switch o {
	case WCSend:
		return "IBV_WC_SEND"
	case WCRDMAWrite:
		return "IBV_WC_RDMA_WRITE"
	case WCRDMARead:
		return "IBV_WC_RDMA_READ"
	case WCCompSwap:
		return "IBV_WC_COMP_SWAP"
	case WCFetchAdd:
		return "IBV_WC_FETCH_ADD"
	case WCBindMW:
		return "IBV_WC_BIND_MW"
	case WCLocalInv:
		return "IBV_WC_LOCAL_INV"
	case WCRecv:
		return "IBV_WC_RECV"
	case WCRecvRDMAWithImm:
		return "IBV_WC_RECV_RDMA_WITH_IMM"
	}
	return "WCOpcode(" + strconv.FormatUint(uint64(o), 10) + ")"
}

// WCFlags are a completion's flags. rxe writes the kernel's ib_wc_flags,
// which agree with libibverbs' IBV_WC_GRH and IBV_WC_WITH_IMM; the
// kernel's WITH_INVALIDATE (4) is what libibverbs, copying it unchanged,
// calls IBV_WC_IP_CSUM_OK. These constants are the kernel's meaning.
type WCFlags uint32

const (
	WCGRH            WCFlags = 1 << 0 // the first 40 bytes of a UD receive hold the GRH
	WCWithImm        WCFlags = 1 << 1 // ImmData is valid
	WCWithInvalidate WCFlags = 1 << 2 // ImmData holds the rkey the sender invalidated (ibv_wc.invalidated_rkey)
)

// WC is a work completion (struct ibv_wc).
type WC struct {
	ID        uint64
	Status    WCStatus
	Opcode    WCOpcode // valid only when Status is WCSuccess
	VendorErr uint32
	ByteLen   uint32
	// ImmData (host order) when Flags has WCWithImm; the invalidated rkey
	// when Flags has WCWithInvalidate.
	ImmData      uint32
	QPNum        uint32
	SrcQP        uint32
	Flags        WCFlags
	PKeyIndex    uint16
	SLID         uint16
	SL           uint8
	DLIDPathBits uint8
	PortNum      uint8
}

// Errors of the data path.
var (
	// ErrQueueFull: the send or receive queue has no free slot (libibverbs
	// returns ENOMEM). It matches unix.ENOMEM.
	ErrQueueFull error = queueFull{}
	// ErrNotReady: the QP is not in a state that accepts this post.
	ErrNotReady = fmt.Errorf("%w: QP state does not allow this post", ErrInvalid)
)

type queueFull struct{}

func (queueFull) Error() string        { return "uverbs: work queue full" }
func (queueFull) Is(target error) bool { return target == sys.ENOMEM }

// PostError reports the work request a post stopped at (ibv_post_send's
// bad_wr): requests before Index were posted and will complete; Index and
// those after it were not.
type PostError struct {
	Op    string // "post_send", "post_recv", "post_srq_recv"
	Index int
	Err   error
}

// Error names the post, the index of the work request and the reason.
func (e *PostError) Error() string {
	return fmt.Sprintf("uverbs: %s: work request %d: %v", e.Op, e.Index, e.Err)
}

// Unwrap returns Err.
func (e *PostError) Unwrap() error { return e.Err }

// badWR builds a PostError whose error wraps ErrInvalid.
func badWR(op string, i int, format string, args ...any) error {
	return &PostError{Op: op, Index: i, Err: fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)}
}
