package ioctlmodel_test

import (
	"encoding/binary"

	"golang.org/x/sys/unix"

	"github.com/pureverbs/pureverbs/abi"
	m "github.com/pureverbs/pureverbs/internal/testkit/ioctlmodel"
)

// world is what a case's command may name: in the VM the objects of a
// freshly opened rxe context, on the host made-up numbers (the model only
// compares them with Env).
type world struct {
	driverID uint32
	cmdFD    int    // the uverbs command fd (not a uverbs object fd)
	async    int    // the context's async event fd
	comp     int    // a completion channel fd
	pd, cq   uint32 // handles
	bare     bool   // no user context allocated yet (GET_CONTEXT cases)
}

// farFD is a descriptor number no process here has open.
const farFD = 1 << 20

func (w *world) env() *m.Env {
	e := &m.Env{Objects: map[uint32]uint16{}, FDs: map[int64]uint16{int64(w.cmdFD): m.NotUverbs}}
	if w.bare {
		return e
	}
	e.Objects[w.pd] = abi.UVERBS_OBJECT_PD
	e.Objects[w.cq] = abi.UVERBS_OBJECT_CQ
	e.FDs[int64(w.async)] = abi.UVERBS_OBJECT_ASYNC_EVENT
	e.FDs[int64(w.comp)] = abi.UVERBS_OBJECT_COMP_CHANNEL
	return e
}

// A kcase is one command, good or deliberately broken, and the errno the
// kernel is expected to answer (0: accepted). The model must predict it
// (host and VM) and the kernel must answer it (VM).
type kcase struct {
	name  string
	bare  bool // run on a context-less fd
	want  unix.Errno
	build func(w *world) m.Cmd
}

// Attribute constructors; all set UVERBS_ATTR_F_MANDATORY as rdma-core
// does, unless noted.
func in(id uint16, v uint64, size uint16) m.Attr {
	return m.Attr{ID: id, Len: size, Flags: m.FlagMandatory, Data: v}
}

func ptr(id uint16, b []byte) m.Attr {
	return m.Attr{ID: id, Len: uint16(len(b)), Flags: m.FlagMandatory, Buf: b}
}

func out(id uint16, n int) m.Attr {
	return m.Attr{ID: id, Len: uint16(n), Flags: m.FlagMandatory, Buf: make([]byte, n)}
}

func obj(id uint16, v uint64) m.Attr { return m.Attr{ID: id, Flags: m.FlagMandatory, Data: v} }

func optional(a m.Attr) m.Attr { a.Flags &^= m.FlagMandatory; return a }

func cmd(w *world, object, method uint16, attrs ...m.Attr) m.Cmd {
	return m.Cmd{Object: object, Method: method, DriverID: w.driverID, Attrs: attrs}
}

// edit returns c with attribute i changed by f.
func edit(c m.Cmd, i int, f func(a *m.Attr)) m.Cmd {
	c.Attrs = append([]m.Attr(nil), c.Attrs...)
	f(&c.Attrs[i])
	return c
}

func drop(c m.Cmd, i int) m.Cmd {
	c.Attrs = append(append([]m.Attr(nil), c.Attrs[:i]...), c.Attrs[i+1:]...)
	return c
}

func add(c m.Cmd, a ...m.Attr) m.Cmd {
	c.Attrs = append(append([]m.Attr(nil), c.Attrs...), a...)
	return c
}

func qpCap(extra int, tail byte) []byte {
	b := make([]byte, 20+extra)
	binary.LittleEndian.PutUint32(b[0:], 4)  // max_send_wr
	binary.LittleEndian.PutUint32(b[4:], 4)  // max_recv_wr
	binary.LittleEndian.PutUint32(b[8:], 1)  // max_send_sge
	binary.LittleEndian.PutUint32(b[12:], 1) // max_recv_sge
	if extra > 0 {
		b[len(b)-1] = tail
	}
	return b
}

// Good commands.

func getContext(w *world) m.Cmd {
	return cmd(w, abi.UVERBS_OBJECT_DEVICE, abi.UVERBS_METHOD_GET_CONTEXT,
		optional(out(abi.UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS, 4)),
		optional(out(abi.UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT, 8)))
}

func asyncAlloc(w *world) m.Cmd {
	return cmd(w, abi.UVERBS_OBJECT_ASYNC_EVENT, abi.UVERBS_METHOD_ASYNC_EVENT_ALLOC,
		obj(abi.UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE, ^uint64(0)))
}

// cqCreate: rxe needs UHW_OUT for its 16-byte ring mmap info.
func cqCreate(w *world) m.Cmd {
	return cmd(w, abi.UVERBS_OBJECT_CQ, abi.UVERBS_METHOD_CQ_CREATE,
		obj(abi.UVERBS_ATTR_CREATE_CQ_HANDLE, 0),
		in(abi.UVERBS_ATTR_CREATE_CQ_CQE, 16, 4),
		in(abi.UVERBS_ATTR_CREATE_CQ_USER_HANDLE, 0x1234, 8),
		in(abi.UVERBS_ATTR_CREATE_CQ_COMP_VECTOR, 0, 4),
		out(abi.UVERBS_ATTR_CREATE_CQ_RESP_CQE, 4),
		optional(obj(abi.UVERBS_ATTR_CREATE_CQ_EVENT_FD, uint64(w.async))),
		out(abi.UVERBS_ATTR_UHW_OUT, 16))
}

// qpCreate: an RC QP; rxe wants no UHW_IN and 32 bytes of UHW_OUT.
func qpCreate(w *world) m.Cmd {
	return cmd(w, abi.UVERBS_OBJECT_QP, abi.UVERBS_METHOD_QP_CREATE,
		obj(abi.UVERBS_ATTR_CREATE_QP_HANDLE, 0),
		obj(abi.UVERBS_ATTR_CREATE_QP_PD_HANDLE, uint64(w.pd)),
		obj(abi.UVERBS_ATTR_CREATE_QP_SEND_CQ_HANDLE, uint64(w.cq)),
		obj(abi.UVERBS_ATTR_CREATE_QP_RECV_CQ_HANDLE, uint64(w.cq)),
		in(abi.UVERBS_ATTR_CREATE_QP_USER_HANDLE, 0x5678, 8),
		ptr(abi.UVERBS_ATTR_CREATE_QP_CAP, qpCap(0, 0)),
		in(abi.UVERBS_ATTR_CREATE_QP_TYPE, abi.IB_UVERBS_QPT_RC, 8),
		out(abi.UVERBS_ATTR_CREATE_QP_RESP_CAP, 20),
		out(abi.UVERBS_ATTR_CREATE_QP_RESP_QP_NUM, 4),
		out(abi.UVERBS_ATTR_UHW_OUT, 32))
}

func cqDestroy(w *world) m.Cmd {
	return cmd(w, abi.UVERBS_OBJECT_CQ, abi.UVERBS_METHOD_CQ_DESTROY,
		obj(abi.UVERBS_ATTR_DESTROY_CQ_HANDLE, uint64(w.cq)),
		out(abi.UVERBS_ATTR_DESTROY_CQ_RESP, 8))
}

func pdDestroy(w *world) m.Cmd {
	return cmd(w, abi.UVERBS_OBJECT_PD, abi.UVERBS_METHOD_PD_DESTROY,
		obj(abi.UVERBS_ATTR_DESTROY_PD_HANDLE, uint64(w.pd)))
}

func queryPort(w *world) m.Cmd {
	return cmd(w, abi.UVERBS_OBJECT_DEVICE, abi.UVERBS_METHOD_QUERY_PORT,
		in(abi.UVERBS_ATTR_QUERY_PORT_PORT_NUM, 1, 8),
		out(abi.UVERBS_ATTR_QUERY_PORT_RESP, 48))
}

func gidEntry(w *world) m.Cmd {
	return cmd(w, abi.UVERBS_OBJECT_DEVICE, abi.UVERBS_METHOD_QUERY_GID_ENTRY,
		in(abi.UVERBS_ATTR_QUERY_GID_ENTRY_PORT, 1, 8),
		in(abi.UVERBS_ATTR_QUERY_GID_ENTRY_GID_INDEX, 0, 8),
		in(abi.UVERBS_ATTR_QUERY_GID_ENTRY_FLAGS, 0, 8),
		out(abi.UVERBS_ATTR_QUERY_GID_ENTRY_RESP_ENTRY, 32))
}

// allocPDWrite is ALLOC_PD through INVOKE_WRITE; struct ib_uverbs_alloc_pd
// is the 8-byte response field only, so CORE_IN travels inline.
func allocPDWrite(w *world) m.Cmd {
	return cmd(w, abi.UVERBS_OBJECT_DEVICE, abi.UVERBS_METHOD_INVOKE_WRITE,
		in(abi.UVERBS_ATTR_CORE_IN, 0, 8),
		out(abi.UVERBS_ATTR_CORE_OUT, 4),
		in(abi.UVERBS_ATTR_WRITE_CMD, abi.IB_USER_VERBS_CMD_ALLOC_PD, 8))
}

// Attribute positions in the good commands, for the broken variants.
const (
	cqHandle, cqCQE, cqUserHandle, cqVector, cqResp, cqEventFD = 0, 1, 2, 3, 4, 5
	qpPD, qpSendCQ, qpCapAttr, qpType, qpRespCap, qpRespNum    = 1, 2, 5, 6, 7, 8
)

func cases() []kcase {
	e := func(name string, want unix.Errno, build func(w *world) m.Cmd) kcase {
		return kcase{name: name, want: want, build: build}
	}
	bare := func(name string, want unix.Errno, build func(w *world) m.Cmd) kcase {
		return kcase{name: name, bare: true, want: want, build: build}
	}
	const ok = unix.Errno(0)
	setLen := func(n uint16) func(*m.Attr) { return func(a *m.Attr) { a.Len = n } }
	setData := func(v uint64) func(*m.Attr) { return func(a *m.Attr) { a.Data = v } }
	return []kcase{
		// Header and method lookup.
		bare("get_context", ok, getContext),
		bare("header length one attr too long", unix.EINVAL, func(w *world) m.Cmd {
			c := getContext(w)
			c.Length, c.LengthSet = 24+16*3, true
			return c
		}),
		bare("header num_attrs beyond a page", unix.EINVAL, func(w *world) m.Cmd {
			c := getContext(w)
			c.NumAttrs, c.NumAttrsSet = 300, true
			c.Length, c.LengthSet = 24+16*300, true
			return c
		}),
		bare("header reserved1 set", unix.EPROTONOSUPPORT, func(w *world) m.Cmd { c := getContext(w); c.Reserved1 = 1; return c }),
		bare("header reserved2 set", unix.EPROTONOSUPPORT, func(w *world) m.Cmd { c := getContext(w); c.Reserved2 = 1; return c }),
		bare("header driver id mlx5 on rxe", unix.EINVAL, func(w *world) m.Cmd { c := getContext(w); c.DriverID = abi.RDMA_DRIVER_MLX5; return c }),
		bare("unknown method of DEVICE", unix.EPROTONOSUPPORT, func(w *world) m.Cmd { c := getContext(w); c.Method = 0x1F; return c }),
		e("DEVX event channel alloc on rxe", unix.EPROTONOSUPPORT, func(w *world) m.Cmd {
			return cmd(w, abi.MLX5_IB_OBJECT_DEVX_ASYNC_EVENT_FD, abi.MLX5_IB_METHOD_DEVX_ASYNC_EVENT_FD_ALLOC,
				obj(abi.MLX5_IB_ATTR_DEVX_ASYNC_EVENT_FD_ALLOC_HANDLE, 0),
				in(abi.MLX5_IB_ATTR_DEVX_ASYNC_EVENT_FD_ALLOC_FLAGS, 0, 8))
		}),
		e("DEVX general command on rxe", unix.EPROTONOSUPPORT, func(w *world) m.Cmd {
			return cmd(w, abi.MLX5_IB_OBJECT_DEVX, abi.MLX5_IB_METHOD_DEVX_OTHER,
				ptr(abi.MLX5_IB_ATTR_DEVX_OTHER_CMD_IN, make([]byte, 16)),
				out(abi.MLX5_IB_ATTR_DEVX_OTHER_CMD_OUT, 16))
		}),

		// Attribute rules, on GET_CONTEXT.
		bare("unknown attr marked mandatory", unix.EPROTONOSUPPORT, func(w *world) m.Cmd { return add(getContext(w), in(0x1E, 0, 8)) }),
		bare("unknown attr not mandatory is ignored", ok, func(w *world) m.Cmd { return add(getContext(w), optional(in(0x1E, 0, 8))) }),
		bare("unknown driver attr not mandatory, bad length, ignored", ok, func(w *world) m.Cmd {
			return add(getContext(w), optional(m.Attr{ID: 0x1005, Len: 9999, Data: 1}))
		}),
		bare("u32 output sent as 8 bytes", unix.EINVAL, func(w *world) m.Cmd {
			return edit(getContext(w), 0, func(a *m.Attr) { a.Len, a.Buf = 8, make([]byte, 8) })
		}),
		bare("attr_data reserved set", unix.EINVAL, func(w *world) m.Cmd { return edit(getContext(w), 0, func(a *m.Attr) { a.AttrData = 1 }) }),
		bare("duplicate attribute", unix.EINVAL, func(w *world) m.Cmd {
			return add(getContext(w), optional(out(abi.UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS, 4)))
		}),
		bare("unknown flag bits and VALID_OUTPUT from the user are ignored", ok, func(w *world) m.Cmd {
			return edit(getContext(w), 1, func(a *m.Attr) { a.Flags = 0xFFF0 | m.FlagValidOutput })
		}),
		bare("output sent inline (no buffer)", unix.EFAULT, func(w *world) m.Cmd {
			return edit(getContext(w), 0, func(a *m.Attr) { a.Buf, a.Data = nil, 0 })
		}),

		// FD NEW.
		e("async event alloc", ok, asyncAlloc),
		e("async event alloc: FD attr with length", unix.EINVAL, func(w *world) m.Cmd { return edit(asyncAlloc(w), 0, setLen(4)) }),
		e("async event alloc: FD attr_data set", unix.EINVAL, func(w *world) m.Cmd { return edit(asyncAlloc(w), 0, func(a *m.Attr) { a.AttrData = 2 }) }),
		e("async event alloc: mandatory FD missing", unix.EINVAL, func(w *world) m.Cmd { return drop(asyncAlloc(w), 0) }),
		e("async event alloc: FD twice", unix.EINVAL, func(w *world) m.Cmd { return add(asyncAlloc(w), obj(abi.UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE, 0)) }),
		e("async event alloc: value of a NEW fd is ignored", ok, func(w *world) m.Cmd { return edit(asyncAlloc(w), 0, setData(12345)) }),

		// CQ create: PTR_IN sizes, FDs, flags, outputs, ordering.
		e("cq create", ok, cqCreate),
		e("cq create: u32 CQE as 8 bytes", unix.EINVAL, func(w *world) m.Cmd { return edit(cqCreate(w), cqCQE, setLen(8)) }),
		e("cq create: u64 user handle as 16-byte pointer", unix.EINVAL, func(w *world) m.Cmd {
			return edit(cqCreate(w), cqUserHandle, func(a *m.Attr) { a.Len, a.Buf = 16, make([]byte, 16) })
		}),
		e("cq create: CQE attr_data set", unix.EINVAL, func(w *world) m.Cmd { return edit(cqCreate(w), cqCQE, func(a *m.Attr) { a.AttrData = 0x100 }) }),
		e("cq create: IDR NEW with a length", unix.EINVAL, func(w *world) m.Cmd { return edit(cqCreate(w), cqHandle, setLen(4)) }),
		e("cq create: mandatory COMP_VECTOR missing", unix.EINVAL, func(w *world) m.Cmd { return drop(cqCreate(w), cqVector) }),
		e("cq create: on a completion channel", ok, func(w *world) m.Cmd {
			return add(cqCreate(w), optional(obj(abi.UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL, uint64(w.comp))))
		}),
		e("cq create: COMP_CHANNEL is the async fd", unix.EBADF, func(w *world) m.Cmd {
			return add(cqCreate(w), obj(abi.UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL, uint64(w.async)))
		}),
		e("cq create: COMP_CHANNEL is the command fd", unix.EBADF, func(w *world) m.Cmd {
			return add(cqCreate(w), obj(abi.UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL, uint64(w.cmdFD)))
		}),
		e("cq create: COMP_CHANNEL not open", unix.EBADF, func(w *world) m.Cmd {
			return add(cqCreate(w), obj(abi.UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL, farFD))
		}),
		e("cq create: COMP_CHANNEL beyond an int", unix.EINVAL, func(w *world) m.Cmd {
			return add(cqCreate(w), obj(abi.UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL, 1<<40))
		}),
		e("cq create: EVENT_FD is a completion channel", unix.EBADF, func(w *world) m.Cmd {
			return edit(cqCreate(w), cqEventFD, setData(uint64(w.comp)))
		}),
		e("cq create: flags 0 as u32", ok, func(w *world) m.Cmd { return add(cqCreate(w), in(abi.UVERBS_ATTR_CREATE_CQ_FLAGS, 0, 4)) }),
		e("cq create: flags of 5 bytes", unix.EINVAL, func(w *world) m.Cmd { return add(cqCreate(w), in(abi.UVERBS_ATTR_CREATE_CQ_FLAGS, 0, 5)) }),
		e("cq create: flags of 2 bytes", unix.EINVAL, func(w *world) m.Cmd { return add(cqCreate(w), in(abi.UVERBS_ATTR_CREATE_CQ_FLAGS, 0, 2)) }),
		e("cq create: unknown flag bit", unix.EINVAL, func(w *world) m.Cmd { return add(cqCreate(w), in(abi.UVERBS_ATTR_CREATE_CQ_FLAGS, 1<<4, 8)) }),
		e("cq create: RESP_CQE as 8 bytes", unix.EINVAL, func(w *world) m.Cmd {
			return edit(cqCreate(w), cqResp, func(a *m.Attr) { a.Len, a.Buf = 8, make([]byte, 8) })
		}),
		e("cq create: RESP_CQE inline (no buffer)", unix.EFAULT, func(w *world) m.Cmd {
			return edit(cqCreate(w), cqResp, func(a *m.Attr) { a.Buf, a.Data = nil, 0 })
		}),
		e("cq create: unknown driver attr marked mandatory", unix.EPROTONOSUPPORT, func(w *world) m.Cmd { return add(cqCreate(w), in(0x1005, 0, 8)) }),
		e("cq create: unknown attr not mandatory", ok, func(w *world) m.Cmd { return add(cqCreate(w), optional(in(0x1E, 7, 8))) }),
		e("cq create: first error wins (bad length, then unknown mandatory)", unix.EINVAL, func(w *world) m.Cmd {
			return add(edit(cqCreate(w), cqCQE, setLen(8)), in(0x1E, 0, 8))
		}),
		e("cq create: first error wins (unknown mandatory, then bad length)", unix.EPROTONOSUPPORT, func(w *world) m.Cmd {
			c := edit(cqCreate(w), cqCQE, setLen(8))
			c.Attrs = append([]m.Attr{in(0x1E, 0, 8)}, c.Attrs...)
			return c
		}),

		// QP create: IDR lookups, extensible structs, constants.
		e("qp create", ok, qpCreate),
		e("qp create: no such PD", unix.ENOENT, func(w *world) m.Cmd { return edit(qpCreate(w), qpPD, setData(9999)) }),
		e("qp create: PD handle names a CQ", unix.EINVAL, func(w *world) m.Cmd { return edit(qpCreate(w), qpPD, setData(uint64(w.cq))) }),
		e("qp create: send CQ handle names a PD", unix.EINVAL, func(w *world) m.Cmd { return edit(qpCreate(w), qpSendCQ, setData(uint64(w.pd))) }),
		e("qp create: negative PD handle", unix.EINVAL, func(w *world) m.Cmd { return edit(qpCreate(w), qpPD, setData(^uint64(0))) }),
		e("qp create: no such SRQ", unix.ENOENT, func(w *world) m.Cmd { return add(qpCreate(w), obj(abi.UVERBS_ATTR_CREATE_QP_SRQ_HANDLE, 77777)) }),
		e("qp create: XRCD handle on a device without XRC domains", unix.EINVAL, func(w *world) m.Cmd {
			return add(qpCreate(w), optional(obj(abi.UVERBS_ATTR_CREATE_QP_XRCD_HANDLE, uint64(w.pd))))
		}),
		e("qp create: CAP shorter than its last member", unix.EINVAL, func(w *world) m.Cmd {
			return edit(qpCreate(w), qpCapAttr, func(a *m.Attr) { a.Len, a.Buf = 16, qpCap(0, 0)[:16] })
		}),
		e("qp create: CAP longer, zero tail", ok, func(w *world) m.Cmd {
			return edit(qpCreate(w), qpCapAttr, func(a *m.Attr) { a.Len, a.Buf = 28, qpCap(8, 0) })
		}),
		e("qp create: CAP longer, non-zero tail", unix.EOPNOTSUPP, func(w *world) m.Cmd {
			return edit(qpCreate(w), qpCapAttr, func(a *m.Attr) { a.Len, a.Buf = 28, qpCap(8, 1) })
		}),
		e("qp create: CAP pointer unreadable", unix.EFAULT, func(w *world) m.Cmd {
			return edit(qpCreate(w), qpCapAttr, func(a *m.Attr) { a.Buf, a.Data = nil, 0x10 })
		}),
		e("qp create: longer CAP pointer unreadable", unix.EOPNOTSUPP, func(w *world) m.Cmd {
			return edit(qpCreate(w), qpCapAttr, func(a *m.Attr) { a.Len, a.Buf, a.Data = 28, nil, 0x10 })
		}),
		e("qp create: TYPE constant as 4 bytes", unix.EINVAL, func(w *world) m.Cmd { return edit(qpCreate(w), qpType, setLen(4)) }),
		e("qp create: TYPE constant out of range", unix.EINVAL, func(w *world) m.Cmd { return edit(qpCreate(w), qpType, setData(1<<40)) }),
		e("qp create: unknown create flag", unix.EINVAL, func(w *world) m.Cmd { return add(qpCreate(w), in(abi.UVERBS_ATTR_CREATE_QP_FLAGS, 1<<20, 8)) }),
		e("qp create: RESP_CAP shorter than its last member", unix.EINVAL, func(w *world) m.Cmd {
			return edit(qpCreate(w), qpRespCap, func(a *m.Attr) { a.Len, a.Buf = 16, make([]byte, 16) })
		}),
		e("qp create: RESP_CAP longer", ok, func(w *world) m.Cmd {
			return edit(qpCreate(w), qpRespCap, func(a *m.Attr) { a.Len, a.Buf = 32, make([]byte, 32) })
		}),
		e("qp create: RESP_QP_NUM inline (no buffer)", unix.EFAULT, func(w *world) m.Cmd {
			return edit(qpCreate(w), qpRespNum, func(a *m.Attr) { a.Buf, a.Data = nil, 0 })
		}),
		e("qp create: with the async fd as EVENT_FD", ok, func(w *world) m.Cmd {
			return add(qpCreate(w), optional(obj(abi.UVERBS_ATTR_CREATE_QP_EVENT_FD, uint64(w.async))))
		}),

		// Destroy (IDR DESTROY access).
		e("cq destroy", ok, cqDestroy),
		e("cq destroy: no such CQ", unix.ENOENT, func(w *world) m.Cmd { return edit(cqDestroy(w), 0, setData(9999)) }),
		e("cq destroy: handle names a PD", unix.EINVAL, func(w *world) m.Cmd { return edit(cqDestroy(w), 0, setData(uint64(w.pd))) }),
		e("cq destroy: negative handle", unix.EINVAL, func(w *world) m.Cmd { return edit(cqDestroy(w), 0, setData(1<<63)) }),
		e("cq destroy: RESP too short", unix.EINVAL, func(w *world) m.Cmd {
			return edit(cqDestroy(w), 1, func(a *m.Attr) { a.Len, a.Buf = 4, make([]byte, 4) })
		}),
		e("pd destroy", ok, pdDestroy),
		e("pd destroy: IDR with a length", unix.EINVAL, func(w *world) m.Cmd { return edit(pdDestroy(w), 0, setLen(8)) }),

		// Constants and struct outputs.
		e("query port", ok, queryPort),
		e("query port: PORT_NUM constant as 4 bytes", unix.EINVAL, func(w *world) m.Cmd { return edit(queryPort(w), 0, setLen(4)) }),
		e("query port: PORT_NUM above u8", unix.EINVAL, func(w *world) m.Cmd { return edit(queryPort(w), 0, setData(256)) }),
		e("query port: PORT_NUM with bit 63", unix.EINVAL, func(w *world) m.Cmd { return edit(queryPort(w), 0, setData(1<<63|1)) }),
		e("query port: RESP shorter than the struct", unix.EINVAL, func(w *world) m.Cmd {
			return edit(queryPort(w), 1, func(a *m.Attr) { a.Len, a.Buf = 40, make([]byte, 40) })
		}),
		e("query port: RESP longer than the struct", ok, func(w *world) m.Cmd {
			return edit(queryPort(w), 1, func(a *m.Attr) { a.Len, a.Buf = 64, make([]byte, 64) })
		}),
		e("query port: RESP inline (no buffer)", unix.EFAULT, func(w *world) m.Cmd { return edit(queryPort(w), 1, func(a *m.Attr) { a.Buf, a.Data = nil, 0 }) }),
		e("query port: mandatory RESP missing", unix.EINVAL, func(w *world) m.Cmd { return drop(queryPort(w), 1) }),
		e("query gid entry", ok, gidEntry),
		e("query gid entry: flags as u32", ok, func(w *world) m.Cmd { return edit(gidEntry(w), 2, setLen(4)) }),
		e("query gid entry: unknown flag", unix.EINVAL, func(w *world) m.Cmd { return edit(gidEntry(w), 2, setData(1)) }),
		e("query gid entry: flags of 6 bytes", unix.EINVAL, func(w *world) m.Cmd { return edit(gidEntry(w), 2, setLen(6)) }),
		e("query gid entry: GID_INDEX constant as 4 bytes", unix.EINVAL, func(w *world) m.Cmd { return edit(gidEntry(w), 1, setLen(4)) }),

		// INVOKE_WRITE.
		e("invoke write alloc pd", ok, allocPDWrite),
		e("invoke write: WRITE_CMD as 4 bytes", unix.EINVAL, func(w *world) m.Cmd { return edit(allocPDWrite(w), 2, setLen(4)) }),
		e("invoke write: WRITE_CMD missing", unix.EINVAL, func(w *world) m.Cmd { return drop(allocPDWrite(w), 2) }),
		e("invoke write: CORE_IN below its minimum", unix.EINVAL, func(w *world) m.Cmd { return edit(allocPDWrite(w), 0, setLen(2)) }),
	}
}
