package sys

import (
	"testing"
	"unsafe"

	"github.com/pureverbs/pureverbs/abi"
)

// The builder's private wire types must match the generated (and
// gcc-checked) abi types byte for byte.
func TestWireTypesMatchABI(t *testing.T) {
	var h ioctlHdr
	var ah abi.IbUverbsIoctlHdr
	var a ioctlAttr
	var aa abi.IbUverbsAttr
	checks := []struct {
		name      string
		got, want uintptr
	}{
		{"hdr size", unsafe.Sizeof(h), unsafe.Sizeof(ah)},
		{"hdr length", unsafe.Offsetof(h.Length), unsafe.Offsetof(ah.Length)},
		{"hdr object_id", unsafe.Offsetof(h.ObjectID), unsafe.Offsetof(ah.ObjectId)},
		{"hdr method_id", unsafe.Offsetof(h.MethodID), unsafe.Offsetof(ah.MethodId)},
		{"hdr num_attrs", unsafe.Offsetof(h.NumAttrs), unsafe.Offsetof(ah.NumAttrs)},
		{"hdr reserved1", unsafe.Offsetof(h.Reserved1), unsafe.Offsetof(ah.Reserved1)},
		{"hdr driver_id", unsafe.Offsetof(h.DriverID), unsafe.Offsetof(ah.DriverId)},
		{"hdr reserved2", unsafe.Offsetof(h.Reserved2), unsafe.Offsetof(ah.Reserved2)},
		{"attrs offset", hdrSize, abi.IbUverbsIoctlHdrAttrsOffset},
		{"attr size", unsafe.Sizeof(a), unsafe.Sizeof(aa)},
		{"attr attr_id", unsafe.Offsetof(a.AttrID), unsafe.Offsetof(aa.AttrId)},
		{"attr len", unsafe.Offsetof(a.Len), unsafe.Offsetof(aa.Len)},
		{"attr flags", unsafe.Offsetof(a.Flags), unsafe.Offsetof(aa.Flags)},
		{"attr attr_data", unsafe.Offsetof(a.AttrData), unsafe.Offsetof(aa.AttrData)},
		{"attr data", unsafe.Offsetof(a.Data), unsafe.Offsetof(aa.Data)},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: %d, abi says %d", c.name, c.got, c.want)
		}
	}
	consts := []struct {
		name      string
		got, want uint64
	}{
		{"RDMA_VERBS_IOCTL", rdmaVerbsIoctl, abi.RDMA_VERBS_IOCTL},
		{"UVERBS_ATTR_F_MANDATORY", attrFMandatory, abi.UVERBS_ATTR_F_MANDATORY},
		{"UVERBS_ATTR_F_VALID_OUTPUT", attrFValidOutput, abi.UVERBS_ATTR_F_VALID_OUTPUT},
		{"UVERBS_OBJECT_DEVICE", objectDevice, abi.UVERBS_OBJECT_DEVICE},
		{"UVERBS_METHOD_INVOKE_WRITE", methodInvokeWrite, abi.UVERBS_METHOD_INVOKE_WRITE},
		{"UVERBS_ATTR_CORE_IN", attrCoreIn, abi.UVERBS_ATTR_CORE_IN},
		{"UVERBS_ATTR_CORE_OUT", attrCoreOut, abi.UVERBS_ATTR_CORE_OUT},
		{"UVERBS_ATTR_WRITE_CMD", attrWriteCmd, abi.UVERBS_ATTR_WRITE_CMD},
		{"UVERBS_ATTR_UHW_IN", attrUHWIn, abi.UVERBS_ATTR_UHW_IN},
		{"UVERBS_ATTR_UHW_OUT", attrUHWOut, abi.UVERBS_ATTR_UHW_OUT},
		{"IB_USER_VERBS_CMD_FLAG_EXTENDED", CmdFlagExtended, abi.IB_USER_VERBS_CMD_FLAG_EXTENDED},
		{"RDMA_USER_CM_CMD_GET_EVENT", ucmCmdGetEvent, abi.RDMA_USER_CM_CMD_GET_EVENT},
		{"RDMA_USER_CM_CMD_MIGRATE_ID", ucmCmdMigrateID, abi.RDMA_USER_CM_CMD_MIGRATE_ID},
		{"struct rdma_ucm_migrate_id", 16, abi.SizeofRdmaUcmMigrateId},
		{"rdma_ucm_migrate_id.id", 8, uint64(unsafe.Offsetof(abi.RdmaUcmMigrateId{}.Id))},
		{"rdma_ucm_migrate_id.fd", 12, uint64(unsafe.Offsetof(abi.RdmaUcmMigrateId{}.Fd))},
	}
	for _, c := range consts {
		if c.got != c.want {
			t.Errorf("%s: %#x, abi says %#x", c.name, c.got, c.want)
		}
	}
}
