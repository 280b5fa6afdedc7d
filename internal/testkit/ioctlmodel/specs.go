package ioctlmodel

import "github.com/pureverbs/pureverbs/abi"

// The method tables, transcribed from the kernel's declarations. Core
// methods: drivers/infiniband/core/uverbs_std_types_{device,async_fd,cq,qp}.c
// and uverbs_std_types.c (PD), as in Linux 6.1 and 6.12 (the attributes
// later kernels added, such as CQ_CREATE's BUFFER_* ids, are left out: on
// the kernels tested they are unknown ids). DEVX methods:
// drivers/infiniband/hw/mlx5/devx.c.
//
// Spec helpers mirror the kernel's macros:
//
//	UVERBS_ATTR_TYPE(T)        MinLen = Len = sizeof(T)
//	UVERBS_ATTR_STRUCT(T, f)   MinLen = offsetofend(T, f), Len = sizeof(T), ZeroTrailing
//	UVERBS_ATTR_MIN_SIZE(n)    MinLen = n, Len = 65535
//	UVERBS_ATTR_CONST_IN       PTR_IN of exactly 8 bytes
//	UVERBS_ATTR_FLAGS_IN       PTR_IN of 4 to 8 bytes
//	UVERBS_ATTR_RAW_FD         PTR_IN TYPE(s32)
//	UVERBS_ATTR_UHW()          UHW_IN PTR_IN MIN_SIZE(0), UHW_OUT PTR_OUT MIN_SIZE(0)

func ptrIn(id uint16, name string, size uint16, mandatory bool) AttrSpec {
	return AttrSpec{ID: id, Name: name, Kind: PtrIn, MinLen: size, Len: size, Mandatory: mandatory, Reads: true}
}

func ptrOut(id uint16, name string, size uint16, mandatory bool) AttrSpec {
	return AttrSpec{ID: id, Name: name, Kind: PtrOut, MinLen: size, Len: size, Mandatory: mandatory, Writes: true}
}

func structIn(id uint16, name string, minLen, size uint16, mandatory bool) AttrSpec {
	return AttrSpec{ID: id, Name: name, Kind: PtrIn, MinLen: minLen, Len: size, ZeroTrailing: true, Mandatory: mandatory, Reads: true}
}

func structOut(id uint16, name string, minLen, size uint16, mandatory bool) AttrSpec {
	return AttrSpec{ID: id, Name: name, Kind: PtrOut, MinLen: minLen, Len: size, ZeroTrailing: true, Mandatory: mandatory, Writes: true}
}

func minIn(id uint16, name string, minLen uint16, mandatory, allocAndCopy bool) AttrSpec {
	return AttrSpec{ID: id, Name: name, Kind: PtrIn, MinLen: minLen, Len: 0xFFFF, Mandatory: mandatory, AllocAndCopy: allocAndCopy, Reads: true}
}

func minOut(id uint16, name string, minLen uint16, mandatory bool) AttrSpec {
	return AttrSpec{ID: id, Name: name, Kind: PtrOut, MinLen: minLen, Len: 0xFFFF, Mandatory: mandatory, Writes: true}
}

func constIn(id uint16, name string, max uint64, mandatory bool) AttrSpec {
	return AttrSpec{ID: id, Name: name, Kind: PtrIn, MinLen: 8, Len: 8, Mandatory: mandatory, Const: &ConstRule{Max: max}}
}

func flagsIn(id uint16, name string, allowed uint64, mandatory bool) AttrSpec {
	return AttrSpec{ID: id, Name: name, Kind: PtrIn, MinLen: 4, Len: 8, Mandatory: mandatory, Flags: &FlagsRule{Allowed: allowed, Bits32: true}}
}

func idr(id uint16, name string, obj uint16, access Access, mandatory bool) AttrSpec {
	return AttrSpec{ID: id, Name: name, Kind: IDR, ObjType: obj, Access: access, Mandatory: mandatory}
}

func fd(id uint16, name string, obj uint16, access Access, mandatory bool) AttrSpec {
	return AttrSpec{ID: id, Name: name, Kind: FD, ObjType: obj, Access: access, Mandatory: mandatory}
}

// uhw is UVERBS_ATTR_UHW(). What the driver does with the udata is its
// own business (rxe's CQ and QP creates write their mmap info to UHW_OUT),
// so neither is marked as read or written.
func uhw() []AttrSpec {
	return []AttrSpec{
		{ID: abi.UVERBS_ATTR_UHW_IN, Name: "UHW_IN", Kind: PtrIn, MinLen: 0, Len: 0xFFFF, Udata: true},
		{ID: abi.UVERBS_ATTR_UHW_OUT, Name: "UHW_OUT", Kind: PtrOut, MinLen: 0, Len: 0xFFFF, Udata: true},
	}
}

func method(object, id uint16, name string, attrs ...[]AttrSpec) *Method {
	m := &Method{Object: object, ID: id, Name: name}
	for _, a := range attrs {
		m.Attrs = append(m.Attrs, a...)
	}
	return m
}

func list(a ...AttrSpec) []AttrSpec { return a }

// Sizes of the uapi structs the core specs name.
const (
	sizeofQueryPortRespEx = 48 // struct ib_uverbs_query_port_resp_ex; offsetofend(reserved / active_speed_ex) = 48
	sizeofGIDEntry        = 32 // struct ib_uverbs_gid_entry; offsetofend(netdev_ifindex) = 32
	sizeofQPCap           = 20 // struct ib_uverbs_qp_cap; offsetofend(max_inline_data) = 20
	sizeofDestroyCQResp   = 8  // struct ib_uverbs_destroy_cq_resp
	sizeofDestroyQPResp   = 4  // struct ib_uverbs_destroy_qp_resp
)

// Core returns the core methods the tests exercise, as every device has
// them, for a device with the given driver id.
func Core(name string, driverID uint32) *API {
	const (
		dev   = abi.UVERBS_OBJECT_DEVICE
		cq    = abi.UVERBS_OBJECT_CQ
		qp    = abi.UVERBS_OBJECT_QP
		pd    = abi.UVERBS_OBJECT_PD
		async = abi.UVERBS_OBJECT_ASYNC_EVENT
	)
	return &API{Name: name, DriverID: driverID, Methods: []*Method{
		method(dev, abi.UVERBS_METHOD_GET_CONTEXT, "DEVICE/GET_CONTEXT", list(
			ptrOut(abi.UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS, "NUM_COMP_VECTORS", 4, false),
			ptrOut(abi.UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT, "CORE_SUPPORT", 8, false),
		), uhw()),
		method(dev, abi.UVERBS_METHOD_QUERY_PORT, "DEVICE/QUERY_PORT", list(
			constIn(abi.UVERBS_ATTR_QUERY_PORT_PORT_NUM, "PORT_NUM", 0xFF, true),
			structOut(abi.UVERBS_ATTR_QUERY_PORT_RESP, "RESP", sizeofQueryPortRespEx, sizeofQueryPortRespEx, true),
		)),
		method(dev, abi.UVERBS_METHOD_QUERY_GID_ENTRY, "DEVICE/QUERY_GID_ENTRY", list(
			constIn(abi.UVERBS_ATTR_QUERY_GID_ENTRY_PORT, "PORT", 0xFFFFFFFF, true),
			constIn(abi.UVERBS_ATTR_QUERY_GID_ENTRY_GID_INDEX, "GID_INDEX", 0xFFFFFFFF, true),
			flagsIn(abi.UVERBS_ATTR_QUERY_GID_ENTRY_FLAGS, "FLAGS", 0, true),
			structOut(abi.UVERBS_ATTR_QUERY_GID_ENTRY_RESP_ENTRY, "RESP_ENTRY", sizeofGIDEntry, sizeofGIDEntry, true),
		)),
		method(dev, abi.UVERBS_METHOD_INVOKE_WRITE, "DEVICE/INVOKE_WRITE", list(
			constIn(abi.UVERBS_ATTR_WRITE_CMD, "WRITE_CMD", 0xFFFFFFFF, true),
			AttrSpec{ID: abi.UVERBS_ATTR_CORE_IN, Name: "CORE_IN", Kind: PtrIn, MinLen: 4, Len: 0xFFFF},
			AttrSpec{ID: abi.UVERBS_ATTR_CORE_OUT, Name: "CORE_OUT", Kind: PtrOut, MinLen: 0, Len: 0xFFFF},
		), uhw()),
		method(async, abi.UVERBS_METHOD_ASYNC_EVENT_ALLOC, "ASYNC_EVENT/ALLOC", list(
			fd(abi.UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE, "FD_HANDLE", async, New, true),
		)),
		method(pd, abi.UVERBS_METHOD_PD_DESTROY, "PD/DESTROY", list(
			idr(abi.UVERBS_ATTR_DESTROY_PD_HANDLE, "HANDLE", pd, Destroy, true),
		)),
		method(cq, abi.UVERBS_METHOD_CQ_CREATE, "CQ/CREATE", list(
			idr(abi.UVERBS_ATTR_CREATE_CQ_HANDLE, "HANDLE", cq, New, true),
			ptrIn(abi.UVERBS_ATTR_CREATE_CQ_CQE, "CQE", 4, true),
			ptrIn(abi.UVERBS_ATTR_CREATE_CQ_USER_HANDLE, "USER_HANDLE", 8, true),
			fd(abi.UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL, "COMP_CHANNEL", abi.UVERBS_OBJECT_COMP_CHANNEL, Read, false),
			ptrIn(abi.UVERBS_ATTR_CREATE_CQ_COMP_VECTOR, "COMP_VECTOR", 4, true),
			flagsIn(abi.UVERBS_ATTR_CREATE_CQ_FLAGS, "FLAGS",
				abi.IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION|abi.IB_UVERBS_CQ_FLAGS_IGNORE_OVERRUN, false),
			ptrOut(abi.UVERBS_ATTR_CREATE_CQ_RESP_CQE, "RESP_CQE", 4, true),
			fd(abi.UVERBS_ATTR_CREATE_CQ_EVENT_FD, "EVENT_FD", async, Read, false),
		), uhw()),
		method(cq, abi.UVERBS_METHOD_CQ_DESTROY, "CQ/DESTROY", list(
			idr(abi.UVERBS_ATTR_DESTROY_CQ_HANDLE, "HANDLE", cq, Destroy, true),
			ptrOut(abi.UVERBS_ATTR_DESTROY_CQ_RESP, "RESP", sizeofDestroyCQResp, true),
		)),
		method(qp, abi.UVERBS_METHOD_QP_CREATE, "QP/CREATE", list(
			idr(abi.UVERBS_ATTR_CREATE_QP_HANDLE, "HANDLE", qp, New, true),
			idr(abi.UVERBS_ATTR_CREATE_QP_XRCD_HANDLE, "XRCD_HANDLE", abi.UVERBS_OBJECT_XRCD, Read, false),
			idr(abi.UVERBS_ATTR_CREATE_QP_PD_HANDLE, "PD_HANDLE", pd, Read, false),
			idr(abi.UVERBS_ATTR_CREATE_QP_SRQ_HANDLE, "SRQ_HANDLE", abi.UVERBS_OBJECT_SRQ, Read, false),
			idr(abi.UVERBS_ATTR_CREATE_QP_SEND_CQ_HANDLE, "SEND_CQ_HANDLE", cq, Read, false),
			idr(abi.UVERBS_ATTR_CREATE_QP_RECV_CQ_HANDLE, "RECV_CQ_HANDLE", cq, Read, false),
			idr(abi.UVERBS_ATTR_CREATE_QP_IND_TABLE_HANDLE, "IND_TABLE_HANDLE", abi.UVERBS_OBJECT_RWQ_IND_TBL, Read, false),
			ptrIn(abi.UVERBS_ATTR_CREATE_QP_USER_HANDLE, "USER_HANDLE", 8, true),
			structIn(abi.UVERBS_ATTR_CREATE_QP_CAP, "CAP", sizeofQPCap, sizeofQPCap, true),
			constIn(abi.UVERBS_ATTR_CREATE_QP_TYPE, "TYPE", 0xFFFFFFFF, true),
			flagsIn(abi.UVERBS_ATTR_CREATE_QP_FLAGS, "FLAGS",
				abi.IB_UVERBS_QP_CREATE_BLOCK_MULTICAST_LOOPBACK|abi.IB_UVERBS_QP_CREATE_SCATTER_FCS|
					abi.IB_UVERBS_QP_CREATE_CVLAN_STRIPPING|abi.IB_UVERBS_QP_CREATE_PCI_WRITE_END_PADDING|
					abi.IB_UVERBS_QP_CREATE_SQ_SIG_ALL, false),
			ptrIn(abi.UVERBS_ATTR_CREATE_QP_SOURCE_QPN, "SOURCE_QPN", 4, false),
			fd(abi.UVERBS_ATTR_CREATE_QP_EVENT_FD, "EVENT_FD", async, Read, false),
			structOut(abi.UVERBS_ATTR_CREATE_QP_RESP_CAP, "RESP_CAP", sizeofQPCap, sizeofQPCap, true),
			ptrOut(abi.UVERBS_ATTR_CREATE_QP_RESP_QP_NUM, "RESP_QP_NUM", 4, true),
		), uhw()),
		method(qp, abi.UVERBS_METHOD_QP_DESTROY, "QP/DESTROY", list(
			idr(abi.UVERBS_ATTR_DESTROY_QP_HANDLE, "HANDLE", qp, Destroy, true),
			ptrOut(abi.UVERBS_ATTR_DESTROY_QP_RESP, "RESP", sizeofDestroyQPResp, true),
		)),
	}}
}

// Rxe is the rdma_rxe device of Linux 6.1 and 6.12: the core methods, no
// driver methods, and no XRC domains or RWQ indirection tables.
func Rxe() *API {
	a := Core("rxe", abi.RDMA_DRIVER_RXE)
	a.Absent = []uint16{abi.UVERBS_OBJECT_XRCD, abi.UVERBS_OBJECT_RWQ_IND_TBL}
	return a
}

// PRM command header sizes (MLX5_ST_SZ_BYTES of general_obj_in_cmd_hdr and
// general_obj_out_cmd_hdr): the least a DEVX command buffer may hold.
const (
	DevxCmdInMin  = 16
	DevxCmdOutMin = 16
)

// DevxMaxEvents is the devx handler's MAX_NUM_EVENTS per subscription.
const DevxMaxEvents = 16

// Allowed bits of the DEVX flags attributes.
const (
	devxUmemAccess = abi.IB_UVERBS_ACCESS_LOCAL_WRITE | abi.IB_UVERBS_ACCESS_REMOTE_WRITE | abi.IB_UVERBS_ACCESS_REMOTE_READ
	devxEvChFlags  = abi.MLX5_IB_UAPI_DEVX_CR_EV_CH_FLAGS_OMIT_DATA
)

// DevxMethods are the DEVX methods of drivers/infiniband/hw/mlx5/devx.c
// (MLX5_IB_OBJECT_DEVX, DEVX_OBJ, DEVX_UMEM, DEVX_ASYNC_CMD_FD and
// DEVX_ASYNC_EVENT_FD), attribute by attribute.
func DevxMethods() []*Method {
	const (
		devx    = abi.MLX5_IB_OBJECT_DEVX
		obj     = abi.MLX5_IB_OBJECT_DEVX_OBJ
		umem    = abi.MLX5_IB_OBJECT_DEVX_UMEM
		cmdFD   = abi.MLX5_IB_OBJECT_DEVX_ASYNC_CMD_FD
		eventFD = abi.MLX5_IB_OBJECT_DEVX_ASYNC_EVENT_FD
	)
	typeList := minIn(abi.MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_TYPE_NUM_LIST, "TYPE_NUM_LIST", 2, true, true)
	typeList.ElemSize, typeList.MaxElems = 2, DevxMaxEvents
	subscribe := method(devx, abi.MLX5_IB_METHOD_DEVX_SUBSCRIBE_EVENT, "DEVX/SUBSCRIBE_EVENT", list(
		fd(abi.MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_FD_HANDLE, "FD_HANDLE", eventFD, Read, true),
		idr(abi.MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_OBJ_HANDLE, "OBJ_HANDLE", obj, Read, false),
		typeList,
		ptrIn(abi.MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_COOKIE, "COOKIE", 8, false),
		ptrIn(abi.MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_FD_NUM, "FD_NUM", 4, false),
	))
	subscribe.Exclusive = [][2]uint16{{abi.MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_COOKIE, abi.MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_FD_NUM}}
	return []*Method{
		method(devx, abi.MLX5_IB_METHOD_DEVX_OTHER, "DEVX/OTHER", list(
			minIn(abi.MLX5_IB_ATTR_DEVX_OTHER_CMD_IN, "CMD_IN", DevxCmdInMin, true, true),
			minOut(abi.MLX5_IB_ATTR_DEVX_OTHER_CMD_OUT, "CMD_OUT", DevxCmdOutMin, true),
		)),
		method(devx, abi.MLX5_IB_METHOD_DEVX_QUERY_UAR, "DEVX/QUERY_UAR", list(
			ptrIn(abi.MLX5_IB_ATTR_DEVX_QUERY_UAR_USER_IDX, "USER_IDX", 4, true),
			ptrOut(abi.MLX5_IB_ATTR_DEVX_QUERY_UAR_DEV_IDX, "DEV_IDX", 4, true),
		)),
		method(devx, abi.MLX5_IB_METHOD_DEVX_QUERY_EQN, "DEVX/QUERY_EQN", list(
			ptrIn(abi.MLX5_IB_ATTR_DEVX_QUERY_EQN_USER_VEC, "USER_VEC", 4, true),
			ptrOut(abi.MLX5_IB_ATTR_DEVX_QUERY_EQN_DEV_EQN, "DEV_EQN", 4, true),
		)),
		subscribe,
		method(obj, abi.MLX5_IB_METHOD_DEVX_OBJ_CREATE, "DEVX_OBJ/CREATE", list(
			idr(abi.MLX5_IB_ATTR_DEVX_OBJ_CREATE_HANDLE, "HANDLE", obj, New, true),
			minIn(abi.MLX5_IB_ATTR_DEVX_OBJ_CREATE_CMD_IN, "CMD_IN", DevxCmdInMin, true, true),
			minOut(abi.MLX5_IB_ATTR_DEVX_OBJ_CREATE_CMD_OUT, "CMD_OUT", DevxCmdOutMin, true),
		)),
		method(obj, abi.MLX5_IB_METHOD_DEVX_OBJ_DESTROY, "DEVX_OBJ/DESTROY", list(
			idr(abi.MLX5_IB_ATTR_DEVX_OBJ_DESTROY_HANDLE, "HANDLE", obj, Destroy, true),
		)),
		method(obj, abi.MLX5_IB_METHOD_DEVX_OBJ_MODIFY, "DEVX_OBJ/MODIFY", list(
			idr(abi.MLX5_IB_ATTR_DEVX_OBJ_MODIFY_HANDLE, "HANDLE", AnyObject, Write, true),
			minIn(abi.MLX5_IB_ATTR_DEVX_OBJ_MODIFY_CMD_IN, "CMD_IN", DevxCmdInMin, true, true),
			minOut(abi.MLX5_IB_ATTR_DEVX_OBJ_MODIFY_CMD_OUT, "CMD_OUT", DevxCmdOutMin, true),
		)),
		method(obj, abi.MLX5_IB_METHOD_DEVX_OBJ_QUERY, "DEVX_OBJ/QUERY", list(
			idr(abi.MLX5_IB_ATTR_DEVX_OBJ_QUERY_HANDLE, "HANDLE", AnyObject, Read, true),
			minIn(abi.MLX5_IB_ATTR_DEVX_OBJ_QUERY_CMD_IN, "CMD_IN", DevxCmdInMin, true, true),
			minOut(abi.MLX5_IB_ATTR_DEVX_OBJ_QUERY_CMD_OUT, "CMD_OUT", DevxCmdOutMin, true),
		)),
		// ASYNC_QUERY reuses QUERY's HANDLE and CMD_IN ids, as devx.c does.
		method(obj, abi.MLX5_IB_METHOD_DEVX_OBJ_ASYNC_QUERY, "DEVX_OBJ/ASYNC_QUERY", list(
			idr(abi.MLX5_IB_ATTR_DEVX_OBJ_QUERY_HANDLE, "HANDLE", AnyObject, Read, true),
			minIn(abi.MLX5_IB_ATTR_DEVX_OBJ_QUERY_CMD_IN, "CMD_IN", DevxCmdInMin, true, true),
			constIn(abi.MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_OUT_LEN, "OUT_LEN", 0xFFFF, true),
			fd(abi.MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_FD, "FD", cmdFD, Read, true),
			ptrIn(abi.MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_WR_ID, "WR_ID", 8, true),
		)),
		method(umem, abi.MLX5_IB_METHOD_DEVX_UMEM_REG, "DEVX_UMEM/REG", list(
			idr(abi.MLX5_IB_ATTR_DEVX_UMEM_REG_HANDLE, "HANDLE", umem, New, true),
			ptrIn(abi.MLX5_IB_ATTR_DEVX_UMEM_REG_ADDR, "ADDR", 8, true),
			ptrIn(abi.MLX5_IB_ATTR_DEVX_UMEM_REG_LEN, "LEN", 8, true),
			ptrIn(abi.MLX5_IB_ATTR_DEVX_UMEM_REG_DMABUF_FD, "DMABUF_FD", 4, false),
			flagsIn(abi.MLX5_IB_ATTR_DEVX_UMEM_REG_ACCESS, "ACCESS", devxUmemAccess, false),
			constIn(abi.MLX5_IB_ATTR_DEVX_UMEM_REG_PGSZ_BITMAP, "PGSZ_BITMAP", ^uint64(0), false),
			ptrOut(abi.MLX5_IB_ATTR_DEVX_UMEM_REG_OUT_ID, "OUT_ID", 4, true),
		)),
		method(umem, abi.MLX5_IB_METHOD_DEVX_UMEM_DEREG, "DEVX_UMEM/DEREG", list(
			idr(abi.MLX5_IB_ATTR_DEVX_UMEM_DEREG_HANDLE, "HANDLE", umem, Destroy, true),
		)),
		method(cmdFD, abi.MLX5_IB_METHOD_DEVX_ASYNC_CMD_FD_ALLOC, "DEVX_ASYNC_CMD_FD/ALLOC", list(
			fd(abi.MLX5_IB_ATTR_DEVX_ASYNC_CMD_FD_ALLOC_HANDLE, "HANDLE", cmdFD, New, true),
		)),
		method(eventFD, abi.MLX5_IB_METHOD_DEVX_ASYNC_EVENT_FD_ALLOC, "DEVX_ASYNC_EVENT_FD/ALLOC", list(
			fd(abi.MLX5_IB_ATTR_DEVX_ASYNC_EVENT_FD_ALLOC_HANDLE, "HANDLE", eventFD, New, true),
			flagsIn(abi.MLX5_IB_ATTR_DEVX_ASYNC_EVENT_FD_ALLOC_FLAGS, "FLAGS", devxEvChFlags, true),
		)),
	}
}

// Mlx5 is an mlx5 device with DEVX: the core methods and the DEVX ones.
func Mlx5() *API {
	return Core("mlx5", abi.RDMA_DRIVER_MLX5).With("mlx5", abi.RDMA_DRIVER_MLX5, DevxMethods()...)
}
