package abi_test

import (
	"encoding/binary"
	"fmt"

	"github.com/pureverbs/pureverbs/abi"
)

// Setting the members of struct ib_uverbs_attr, including the attr_data
// union (enum_data.elem_id) and the anonymous data/data_s64 union. Union
// members are values: read with the getter, write back with the setter.
func ExampleIbUverbsAttr() {
	var a abi.IbUverbsAttr
	a.AttrId = abi.UVERBS_ATTR_UHW_IN
	a.Flags = abi.UVERBS_ATTR_F_MANDATORY
	ed := a.AttrData.EnumData()
	ed.ElemId = 3 // attr_data.enum_data.elem_id
	a.AttrData.SetEnumData(ed)
	a.Data = 42 // data; a.DataS64() reads the same bytes
	fmt.Println(a.AttrData.Reserved(), a.DataS64())
	a.SetDataS64(-1)
	fmt.Printf("%#x\n", a.Data)

	// The C layout of the struct, as the kernel sees it (package abi has no
	// unsafe; the library's internal/sys views the struct's memory directly).
	b := binary.LittleEndian.AppendUint16(nil, a.AttrId)
	b = binary.LittleEndian.AppendUint16(b, a.Len)
	b = binary.LittleEndian.AppendUint16(b, a.Flags)
	b = binary.LittleEndian.AppendUint16(b, a.AttrData.Reserved())
	b = binary.LittleEndian.AppendUint64(b, a.Data)
	fmt.Println(b, len(b) == abi.SizeofIbUverbsAttr)
	// Output:
	// 3 42
	// 0xffffffffffffffff
	// [0 16 0 0 1 0 3 0 255 255 255 255 255 255 255 255] true
}
