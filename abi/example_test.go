package abi_test

import (
	"fmt"
	"unsafe"

	"github.com/pureverbs/pureverbs/abi"
)

// Setting the members of struct ib_uverbs_attr, including the attr_data
// union (enum_data.elem_id) and the anonymous data/data_s64 union.
func ExampleIbUverbsAttr() {
	var a abi.IbUverbsAttr
	a.AttrId = abi.UVERBS_ATTR_UHW_IN
	a.Flags = abi.UVERBS_ATTR_F_MANDATORY
	a.AttrData.EnumData().ElemId = 3 // attr_data.enum_data.elem_id
	a.Data = 42                      // data; *a.DataS64() aliases it
	b := (*[abi.SizeofIbUverbsAttr]byte)(unsafe.Pointer(&a))
	fmt.Println(b[:], *a.AttrData.Reserved(), *a.DataS64())
	// Output: [0 16 0 0 1 0 3 0 42 0 0 0 0 0 0 0] 3 42
}
