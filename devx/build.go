package devx

import (
	"encoding/binary"

	"github.com/pureverbs/pureverbs/abi"
	"github.com/pureverbs/pureverbs/internal/sys"
)

// The command builders: one per DEVX ioctl, in the attribute order and
// encoding libmlx5 uses (providers/mlx5/verbs.c): every attribute it
// fills is marked mandatory, except the page-size bitmap of the legacy
// umem registration; u32 inputs travel as 4 inline bytes, u64 inputs and
// constants as 8, command buffers inline when 8 bytes or less and by
// pointer otherwise, outputs always by pointer. They only fill cmd; the
// golden tests read what they built.

func buildGeneral(cmd *sys.Ioctl, drv uint32, in, out []byte) {
	cmd.Reset(abi.MLX5_IB_OBJECT_DEVX, abi.MLX5_IB_METHOD_DEVX_OTHER, drv)
	cmd.BytesIn(abi.MLX5_IB_ATTR_DEVX_OTHER_CMD_IN, in, true)
	cmd.BytesOut(abi.MLX5_IB_ATTR_DEVX_OTHER_CMD_OUT, out, true)
}

func buildObjCreate(cmd *sys.Ioctl, drv uint32, in, out []byte) sys.Attr {
	cmd.Reset(abi.MLX5_IB_OBJECT_DEVX_OBJ, abi.MLX5_IB_METHOD_DEVX_OBJ_CREATE, drv)
	h := cmd.IDRNew(abi.MLX5_IB_ATTR_DEVX_OBJ_CREATE_HANDLE)
	cmd.BytesIn(abi.MLX5_IB_ATTR_DEVX_OBJ_CREATE_CMD_IN, in, true)
	cmd.BytesOut(abi.MLX5_IB_ATTR_DEVX_OBJ_CREATE_CMD_OUT, out, true)
	return h
}

func buildObjQuery(cmd *sys.Ioctl, drv, handle uint32, in, out []byte) {
	cmd.Reset(abi.MLX5_IB_OBJECT_DEVX_OBJ, abi.MLX5_IB_METHOD_DEVX_OBJ_QUERY, drv)
	cmd.IDRIn(abi.MLX5_IB_ATTR_DEVX_OBJ_QUERY_HANDLE, handle, true)
	cmd.BytesIn(abi.MLX5_IB_ATTR_DEVX_OBJ_QUERY_CMD_IN, in, true)
	cmd.BytesOut(abi.MLX5_IB_ATTR_DEVX_OBJ_QUERY_CMD_OUT, out, true)
}

func buildObjModify(cmd *sys.Ioctl, drv, handle uint32, in, out []byte) {
	cmd.Reset(abi.MLX5_IB_OBJECT_DEVX_OBJ, abi.MLX5_IB_METHOD_DEVX_OBJ_MODIFY, drv)
	cmd.IDRIn(abi.MLX5_IB_ATTR_DEVX_OBJ_MODIFY_HANDLE, handle, true)
	cmd.BytesIn(abi.MLX5_IB_ATTR_DEVX_OBJ_MODIFY_CMD_IN, in, true)
	cmd.BytesOut(abi.MLX5_IB_ATTR_DEVX_OBJ_MODIFY_CMD_OUT, out, true)
}

func buildObjDestroy(cmd *sys.Ioctl, drv, handle uint32) {
	cmd.Reset(abi.MLX5_IB_OBJECT_DEVX_OBJ, abi.MLX5_IB_METHOD_DEVX_OBJ_DESTROY, drv)
	cmd.IDRIn(abi.MLX5_IB_ATTR_DEVX_OBJ_DESTROY_HANDLE, handle, true)
}

// buildObjQueryAsync: ASYNC_QUERY reuses QUERY's HANDLE and CMD_IN ids.
func buildObjQueryAsync(cmd *sys.Ioctl, drv, handle uint32, in []byte, outLen uint16, wrID uint64, compFD int) {
	cmd.Reset(abi.MLX5_IB_OBJECT_DEVX_OBJ, abi.MLX5_IB_METHOD_DEVX_OBJ_ASYNC_QUERY, drv)
	cmd.IDRIn(abi.MLX5_IB_ATTR_DEVX_OBJ_QUERY_HANDLE, handle, true)
	cmd.BytesIn(abi.MLX5_IB_ATTR_DEVX_OBJ_QUERY_CMD_IN, in, true)
	cmd.ConstIn(abi.MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_OUT_LEN, uint64(outLen), true)
	cmd.InlineIn(abi.MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_WR_ID, wrID, 8, true)
	cmd.FDIn(abi.MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_FD, compFD, true)
}

// buildUmemReg: pgszLegacy sends the page-size bitmap as an optional
// attribute (mlx5dv_devx_umem_reg), which kernels without it ignore;
// otherwise it is mandatory (mlx5dv_devx_umem_reg_ex).
func buildUmemReg(cmd *sys.Ioctl, drv uint32, addr, length uint64, access uint32, pgsz uint64, pgszLegacy bool, outID *uint32) sys.Attr {
	cmd.Reset(abi.MLX5_IB_OBJECT_DEVX_UMEM, abi.MLX5_IB_METHOD_DEVX_UMEM_REG, drv)
	cmd.InlineIn(abi.MLX5_IB_ATTR_DEVX_UMEM_REG_ADDR, addr, 8, true)
	cmd.InlineIn(abi.MLX5_IB_ATTR_DEVX_UMEM_REG_LEN, length, 8, true)
	cmd.InlineIn(abi.MLX5_IB_ATTR_DEVX_UMEM_REG_ACCESS, uint64(access), 4, true)
	cmd.InlineIn(abi.MLX5_IB_ATTR_DEVX_UMEM_REG_PGSZ_BITMAP, pgsz, 8, !pgszLegacy)
	sys.PtrOut(cmd, abi.MLX5_IB_ATTR_DEVX_UMEM_REG_OUT_ID, outID, true)
	return cmd.IDRNew(abi.MLX5_IB_ATTR_DEVX_UMEM_REG_HANDLE)
}

func buildUmemDereg(cmd *sys.Ioctl, drv, handle uint32) {
	cmd.Reset(abi.MLX5_IB_OBJECT_DEVX_UMEM, abi.MLX5_IB_METHOD_DEVX_UMEM_DEREG, drv)
	cmd.IDRIn(abi.MLX5_IB_ATTR_DEVX_UMEM_DEREG_HANDLE, handle, true)
}

func buildQueryEQN(cmd *sys.Ioctl, drv, vector uint32, eqn *uint32) {
	cmd.Reset(abi.MLX5_IB_OBJECT_DEVX, abi.MLX5_IB_METHOD_DEVX_QUERY_EQN, drv)
	cmd.InlineIn(abi.MLX5_IB_ATTR_DEVX_QUERY_EQN_USER_VEC, uint64(vector), 4, true)
	sys.PtrOut(cmd, abi.MLX5_IB_ATTR_DEVX_QUERY_EQN_DEV_EQN, eqn, true)
}

func buildQueryUAR(cmd *sys.Ioctl, drv, userIdx uint32, devIdx *uint32) {
	cmd.Reset(abi.MLX5_IB_OBJECT_DEVX, abi.MLX5_IB_METHOD_DEVX_QUERY_UAR, drv)
	cmd.InlineIn(abi.MLX5_IB_ATTR_DEVX_QUERY_UAR_USER_IDX, uint64(userIdx), 4, true)
	sys.PtrOut(cmd, abi.MLX5_IB_ATTR_DEVX_QUERY_UAR_DEV_IDX, devIdx, true)
}

func buildCmdCompAlloc(cmd *sys.Ioctl, drv uint32) sys.Attr {
	cmd.Reset(abi.MLX5_IB_OBJECT_DEVX_ASYNC_CMD_FD, abi.MLX5_IB_METHOD_DEVX_ASYNC_CMD_FD_ALLOC, drv)
	return cmd.FDNew(abi.MLX5_IB_ATTR_DEVX_ASYNC_CMD_FD_ALLOC_HANDLE)
}

func buildEventChannelAlloc(cmd *sys.Ioctl, drv, flags uint32) sys.Attr {
	cmd.Reset(abi.MLX5_IB_OBJECT_DEVX_ASYNC_EVENT_FD, abi.MLX5_IB_METHOD_DEVX_ASYNC_EVENT_FD_ALLOC, drv)
	a := cmd.FDNew(abi.MLX5_IB_ATTR_DEVX_ASYNC_EVENT_FD_ALLOC_HANDLE)
	cmd.InlineIn(abi.MLX5_IB_ATTR_DEVX_ASYNC_EVENT_FD_ALLOC_FLAGS, uint64(flags), 4, true)
	return a
}

// eventList encodes event numbers as the kernel's u16 array.
func eventList(events []uint16) []byte {
	b := make([]byte, 2*len(events))
	for i, e := range events {
		binary.LittleEndian.PutUint16(b[2*i:], e)
	}
	return b
}

// buildSubscribe is mlx5dv_devx_subscribe_devx_event: the cookie is
// always sent (0 included), the object handle only for affiliated
// events.
func buildSubscribe(cmd *sys.Ioctl, drv uint32, chFD int, obj uint32, hasObj bool, events []byte, cookie uint64) {
	cmd.Reset(abi.MLX5_IB_OBJECT_DEVX, abi.MLX5_IB_METHOD_DEVX_SUBSCRIBE_EVENT, drv)
	cmd.FDIn(abi.MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_FD_HANDLE, chFD, true)
	cmd.InlineIn(abi.MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_COOKIE, cookie, 8, true)
	if hasObj {
		cmd.IDRIn(abi.MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_OBJ_HANDLE, obj, true)
	}
	cmd.BytesIn(abi.MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_TYPE_NUM_LIST, events, true)
}

// buildSubscribeFd is mlx5dv_devx_subscribe_devx_event_fd: one event
// number, the eventfd to signal, and no cookie (the kernel refuses a
// cookie together with FD_NUM).
func buildSubscribeFd(cmd *sys.Ioctl, drv uint32, chFD int, obj uint32, hasObj bool, event uint16, fd int) {
	cmd.Reset(abi.MLX5_IB_OBJECT_DEVX, abi.MLX5_IB_METHOD_DEVX_SUBSCRIBE_EVENT, drv)
	cmd.FDIn(abi.MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_FD_HANDLE, chFD, true)
	if hasObj {
		cmd.IDRIn(abi.MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_OBJ_HANDLE, obj, true)
	}
	cmd.InlineIn(abi.MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_TYPE_NUM_LIST, uint64(event), 2, true)
	cmd.InlineIn(abi.MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_FD_NUM, uint64(uint32(int32(fd))), 4, true)
}
