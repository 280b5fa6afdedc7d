// Package ioctlmodel is a model of the Linux kernel's validation of
// RDMA_VERBS_IOCTL commands (drivers/infiniband/core/uverbs_ioctl.c and
// the object lookups of rdma_core.c), written as a test helper: given a
// method table transcribed from the kernel's DECLARE_UVERBS_NAMED_METHOD
// declarations and the objects and fds a command may name, Check predicts
// whether the kernel hands the command to the method's handler, or which
// errno it answers instead.
//
// The model is proved against real kernels in the rdma_rxe VM (vm_test.go:
// good and deliberately broken core commands, model and kernel must give
// the same errno) and then used, on the host, to check every mlx5 DEVX
// command the devx package builds (no ConnectX hardware is needed for
// that).
//
// What it models, in the kernel's order:
//
//  1. ib_uverbs_ioctl: header length (24 + 16*num_attrs, at most a page),
//     reserved fields, then ib_uverbs_cmd_verbs: driver id, object/method
//     lookup.
//  2. ib_uverbs_run_method, for each attribute in array order
//     (uverbs_set_attr, uverbs_process_attr): unknown ids (EPROTONOSUPPORT
//     when the user marked them mandatory, ignored otherwise), duplicates,
//     PTR_IN/PTR_OUT lengths against the spec's min/len, zero-filled
//     trailing bytes of extensible structs, the reserved attr_data, the
//     copy of ALLOC_AND_COPY inputs, ENUM_IN element ids, IDR and FD
//     attributes (length 0, handle lookup by type and access, fds by
//     file type), then the mandatory attributes the user left out.
//  3. The generic accessors every handler calls (uverbs_get_flags32/64,
//     uverbs_get_const, uverbs_copy_from, uverbs_copy_to): flags lengths
//     and unknown bits, constant ranges, unreadable inputs and unwritable
//     outputs (EFAULT).
//
// What it does not model: anything a handler decides on its own (resource
// limits, driver-specific checks, device capabilities), concurrency
// (EBUSY from an object locked by another call), and disassociation (EIO).
package ioctlmodel

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// Kind is an attribute spec type (enum uverbs_attr_type).
type Kind uint8

const (
	PtrIn     Kind = iota + 1 // UVERBS_ATTR_TYPE_PTR_IN
	PtrOut                    // UVERBS_ATTR_TYPE_PTR_OUT
	IDR                       // UVERBS_ATTR_TYPE_IDR
	FD                        // UVERBS_ATTR_TYPE_FD
	EnumIn                    // UVERBS_ATTR_TYPE_ENUM_IN
	IDRsArray                 // UVERBS_ATTR_TYPE_IDRS_ARRAY (not modelled beyond its id)
)

func (k Kind) String() string {
	switch k {
	case PtrIn:
		return "PTR_IN"
	case PtrOut:
		return "PTR_OUT"
	case IDR:
		return "IDR"
	case FD:
		return "FD"
	case EnumIn:
		return "ENUM_IN"
	case IDRsArray:
		return "IDRS_ARRAY"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Access is an IDR/FD attribute's access mode (enum uverbs_obj_access).
type Access uint8

const (
	Read Access = iota
	Write
	New
	Destroy
)

func (a Access) String() string {
	return [...]string{"READ", "WRITE", "NEW", "DESTROY"}[a]
}

// AnyObject is UVERBS_IDR_ANY_OBJECT: an IDR attribute that accepts a
// handle of any object type.
const AnyObject = 0xFFFF

// NotUverbs is the object type Env.FDs gives a descriptor that is open
// but not a uverbs object fd (a pipe, an eventfd, the command fd itself).
const NotUverbs = 0xFFFE

// Page is PAGE_SIZE on the machines the model is used for.
const Page = 4096

// Attribute flags (UVERBS_ATTR_F_*).
const (
	FlagMandatory   = 1
	FlagValidOutput = 2
)

// AttrSpec is one attribute of a method, as DECLARE_UVERBS_NAMED_METHOD
// declares it, plus what the handler's generic accessors require of it.
type AttrSpec struct {
	ID   uint16
	Name string
	Kind Kind

	// PTR_IN / PTR_OUT sizes (UVERBS_ATTR_SIZE/TYPE/STRUCT/MIN_SIZE).
	MinLen, Len  uint16
	ZeroTrailing bool // UVERBS_ATTR_STRUCT: longer is allowed if the tail is zero (inputs)
	AllocAndCopy bool // UA_ALLOC_AND_COPY: the parser copies a pointer input in
	Mandatory    bool // UA_MANDATORY
	Udata        bool // part of UVERBS_ATTR_UHW()

	// IDR / FD: the object type and access.
	ObjType uint16
	Access  Access

	// ENUM_IN: the number of elements (each a PTR_IN of any size).
	EnumElems uint8

	// What the handler does with the attribute through the generic
	// accessors. Handler-stage rules are checked only once the framework
	// accepted the whole command.
	Flags *FlagsRule // uverbs_get_flags32/64
	Const *ConstRule // uverbs_get_const
	Reads bool       // PTR_IN: the handler copies the value in (uverbs_copy_from)
	// Writes: PTR_OUT: the handler writes the output on success
	// (uverbs_copy_to); a destination it cannot write is EFAULT.
	Writes bool
	// ElemSize: the handler reads the input as an array
	// (uverbs_attr_ptr_get_array_size): its length must be a multiple;
	// MaxElems, when not 0, is the handler's own bound on the count.
	ElemSize, MaxElems uint16
}

// FlagsRule is what uverbs_get_flags32/64 accept: a 4- or 8-byte value
// with no bit outside Allowed (and, for Bits32, no bit above 31).
type FlagsRule struct {
	Allowed uint64
	Bits32  bool
}

// ConstRule is uverbs_get_const's range check on the 8-byte value: for an
// unsigned destination (_uverbs_get_const_unsigned) the value read as u64
// must be at most Max; for a signed one (_uverbs_get_const_signed) the
// value read as s64 must lie in [Min, Max].
type ConstRule struct {
	Signed bool
	Min    int64
	Max    uint64
}

// Method is one ioctl method of an object.
type Method struct {
	Object, ID uint16
	Name       string
	Attrs      []AttrSpec
	// Exclusive lists attribute pairs the handler refuses together
	// (EINVAL), such as DEVX SUBSCRIBE_EVENT's COOKIE and FD_NUM.
	Exclusive [][2]uint16
}

// Attr returns the spec of attribute id, or nil when the method has none.
func (m *Method) Attr(id uint16) *AttrSpec {
	for i := range m.Attrs {
		if m.Attrs[i].ID == id {
			return &m.Attrs[i]
		}
	}
	return nil
}

// API is the ioctl interface of one device: its driver id and methods.
type API struct {
	Name     string
	DriverID uint32
	Methods  []*Method
	// Absent lists object types the device does not implement (the
	// kernel removed them from its uapi tree): an optional IDR or FD
	// attribute naming one fails its lookup with EINVAL.
	Absent []uint16
}

// Method returns the method (object, id), or nil.
func (a *API) Method(object, id uint16) *Method {
	for _, m := range a.Methods {
		if m.Object == object && m.ID == id {
			return m
		}
	}
	return nil
}

// With returns a copy of a with more methods (a device's driver methods
// on top of the core ones).
func (a *API) With(name string, driverID uint32, more ...*Method) *API {
	return &API{Name: name, DriverID: driverID, Methods: append(slices.Clip(a.Methods), more...), Absent: a.Absent}
}

// Env is what a command can name: the handles in the context's IDR with
// their object types, and the open descriptors with theirs.
type Env struct {
	Objects map[uint32]uint16 // handle -> object type
	FDs     map[int64]uint16  // fd -> FD object type, or NotUverbs
}

// Attr is one ib_uverbs_attr as sent. Buf, when not nil, is the memory the
// attribute points to: Exec stores its address in Data, and the model
// reads inputs from it and writes outputs to it. With Buf nil, Data is
// sent as is (an inline value, a handle, an fd, or a deliberately bad
// pointer).
type Attr struct {
	ID       uint16
	Len      uint16
	Flags    uint16
	AttrData uint16
	Data     uint64
	Buf      []byte
}

// Cmd is one RDMA_VERBS_IOCTL command. Length and NumAttrs of zero are
// computed from Attrs; set them to send a broken header.
type Cmd struct {
	Length    uint16
	Object    uint16
	Method    uint16
	NumAttrs  uint16
	Reserved1 uint64
	DriverID  uint32
	Reserved2 uint32
	Attrs     []Attr

	// LengthSet and NumAttrsSet send Length and NumAttrs as given.
	LengthSet, NumAttrsSet bool
}

func (c *Cmd) numAttrs() int {
	if c.NumAttrsSet {
		return int(c.NumAttrs)
	}
	return len(c.Attrs)
}

func (c *Cmd) length() int {
	if c.LengthSet {
		return int(c.Length)
	}
	return 24 + 16*c.numAttrs()
}

// Verdict is the model's answer: Errno 0 means the kernel runs the
// handler (and the handler's generic accessors succeed). Rule names the
// check that decided, Attr the index of the attribute it concerns (-1 for
// none).
type Verdict struct {
	Errno unix.Errno
	Rule  string
	Attr  int
}

func (v Verdict) OK() bool { return v.Errno == 0 }

func (v Verdict) String() string {
	if v.Errno == 0 {
		return "accepted"
	}
	name := unix.ErrnoName(v.Errno)
	if v.Attr >= 0 {
		return fmt.Sprintf("%s: %s (attr %d)", name, v.Rule, v.Attr)
	}
	return fmt.Sprintf("%s: %s", name, v.Rule)
}

func reject(e unix.Errno, attr int, format string, args ...any) Verdict {
	return Verdict{Errno: e, Attr: attr, Rule: fmt.Sprintf(format, args...)}
}

// readable returns the input bytes of a PTR_IN attribute: inline ones
// from Data, others from Buf; ok is false when the pointer is bad.
func readable(a *Attr) ([]byte, bool) {
	if a.Len <= 8 {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], a.Data)
		return b[:a.Len], true
	}
	if a.Buf == nil || len(a.Buf) < int(a.Len) {
		return nil, false
	}
	return a.Buf[:a.Len], true
}

// writable reports whether the kernel can write Len bytes where a PTR_OUT
// attribute points (outputs are always pointers, whatever their length).
func writable(a *Attr) bool {
	return a.Len == 0 || (a.Buf != nil && len(a.Buf) >= int(a.Len))
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// Check predicts the kernel's answer to c on a device with api, in a
// context holding env.
func (api *API) Check(env *Env, c *Cmd) Verdict {
	n := c.numAttrs()
	if l := c.length(); l > Page || l != 24+16*n {
		return reject(unix.EINVAL, -1, "header length %d, want 24+16*%d and at most a page", l, n)
	}
	if c.Reserved1 != 0 || c.Reserved2 != 0 {
		return reject(unix.EPROTONOSUPPORT, -1, "reserved header field set")
	}
	if c.DriverID != api.DriverID {
		return reject(unix.EINVAL, -1, "driver id %d, device has %d", c.DriverID, api.DriverID)
	}
	m := api.Method(c.Object, c.Method)
	if m == nil {
		return reject(unix.EPROTONOSUPPORT, -1, "no method %#x of object %#x on %s", c.Method, c.Object, api.Name)
	}
	if n > len(c.Attrs) {
		// The kernel would read past the array the user meant: model
		// only what was given.
		return reject(unix.EFAULT, -1, "num_attrs %d beyond the %d attributes given", n, len(c.Attrs))
	}
	present := map[uint16]int{}
	for i := range n {
		a := &c.Attrs[i]
		s := m.Attr(a.ID)
		if s == nil {
			if a.Flags&FlagMandatory != 0 {
				return reject(unix.EPROTONOSUPPORT, i, "unknown attribute %#x marked mandatory", a.ID)
			}
			continue
		}
		if _, dup := present[a.ID]; dup {
			return reject(unix.EINVAL, i, "duplicate attribute %s", s.Name)
		}
		if v := api.processAttr(env, s, a, i); !v.OK() {
			return v
		}
		present[a.ID] = i
	}
	for i := range m.Attrs {
		s := &m.Attrs[i]
		if _, ok := present[s.ID]; s.Mandatory && !ok {
			return reject(unix.EINVAL, -1, "mandatory attribute %s missing", s.Name)
		}
	}
	for _, p := range m.Exclusive {
		i0, ok0 := present[p[0]]
		_, ok1 := present[p[1]]
		if ok0 && ok1 {
			return reject(unix.EINVAL, i0, "%s: attributes %#x and %#x together", m.Name, p[0], p[1])
		}
	}
	// The handler's generic accessors.
	for i := range m.Attrs {
		s := &m.Attrs[i]
		idx, ok := present[s.ID]
		if !ok {
			continue
		}
		if v := handlerRules(s, &c.Attrs[idx], idx); !v.OK() {
			return v
		}
	}
	return Verdict{Attr: -1}
}

// processAttr is uverbs_process_attr.
func (api *API) processAttr(env *Env, s *AttrSpec, a *Attr, i int) Verdict {
	switch s.Kind {
	case EnumIn:
		elem, res := uint8(a.AttrData), uint8(a.AttrData>>8)
		if elem >= s.EnumElems {
			return reject(unix.EOPNOTSUPP, i, "%s: enum element %d of %d", s.Name, elem, s.EnumElems)
		}
		if res != 0 {
			return reject(unix.EINVAL, i, "%s: enum reserved byte set", s.Name)
		}
		// The element specs of the methods modelled here take any size.
		return Verdict{Attr: -1}
	case PtrIn, PtrOut:
		if s.Kind == PtrIn && a.Len > s.Len && s.ZeroTrailing {
			b, ok := readable(a)
			if !ok || !allZero(b[s.Len:]) {
				return reject(unix.EOPNOTSUPP, i, "%s: %d bytes, the %d beyond the known struct are not zero", s.Name, a.Len, a.Len-s.Len)
			}
		}
		if a.Len < s.MinLen || (!s.ZeroTrailing && a.Len > s.Len) {
			return reject(unix.EINVAL, i, "%s: length %d outside [%d, %d]", s.Name, a.Len, s.MinLen, s.Len)
		}
		if a.AttrData != 0 {
			return reject(unix.EINVAL, i, "%s: reserved attr_data %#x", s.Name, a.AttrData)
		}
		if s.Kind == PtrIn && s.AllocAndCopy && a.Len > 8 {
			if _, ok := readable(a); !ok {
				return reject(unix.EFAULT, i, "%s: input pointer %#x unreadable", s.Name, a.Data)
			}
		}
		return Verdict{Attr: -1}
	case IDR, FD:
		if a.AttrData != 0 {
			return reject(unix.EINVAL, i, "%s: reserved attr_data %#x", s.Name, a.AttrData)
		}
		if a.Len != 0 {
			return reject(unix.EINVAL, i, "%s: %s attribute with length %d (must be 0)", s.Name, s.Kind, a.Len)
		}
		if s.ObjType != AnyObject && slices.Contains(api.Absent, s.ObjType) {
			return reject(unix.EINVAL, i, "%s: %s has no object type %#x", s.Name, api.Name, s.ObjType)
		}
		if s.Access == New {
			return Verdict{Attr: -1} // the value sent is ignored
		}
		if s.Kind == IDR {
			return lookupIDR(env, s, a, i)
		}
		return lookupFD(env, s, a, i)
	}
	return reject(unix.EOPNOTSUPP, i, "%s: attribute kind %s not modelled", s.Name, s.Kind)
}

// lookupIDR is rdma_lookup_get_uobject for an IDR handle.
func lookupIDR(env *Env, s *AttrSpec, a *Attr, i int) Verdict {
	id := int64(a.Data)
	if id < 0 {
		return reject(unix.EINVAL, i, "%s: negative handle %d", s.Name, id)
	}
	if id > 0xFFFFFFFF {
		return reject(unix.ENOENT, i, "%s: no object %d", s.Name, id)
	}
	typ, ok := env.Objects[uint32(id)]
	if !ok {
		return reject(unix.ENOENT, i, "%s: no object %d", s.Name, id)
	}
	if s.ObjType != AnyObject && typ != s.ObjType {
		return reject(unix.EINVAL, i, "%s: object %d has type %#x, want %#x", s.Name, id, typ, s.ObjType)
	}
	return Verdict{Attr: -1}
}

// lookupFD is rdma_lookup_get_uobject for an fd.
func lookupFD(env *Env, s *AttrSpec, a *Attr, i int) Verdict {
	v := int64(a.Data)
	if v != int64(int32(v)) {
		return reject(unix.EINVAL, i, "%s: fd %d does not fit an int", s.Name, v)
	}
	if s.Access != Read {
		return reject(unix.EOPNOTSUPP, i, "%s: fd objects can only be read", s.Name)
	}
	typ, ok := env.FDs[v]
	if !ok {
		return reject(unix.EBADF, i, "%s: fd %d is not open", s.Name, v)
	}
	if typ != s.ObjType {
		return reject(unix.EBADF, i, "%s: fd %d is of type %#x, want %#x", s.Name, v, typ, s.ObjType)
	}
	return Verdict{Attr: -1}
}

// handlerRules are the generic accessors' checks.
func handlerRules(s *AttrSpec, a *Attr, i int) Verdict {
	if f := s.Flags; f != nil {
		var v uint64
		switch a.Len {
		case 8:
			v = a.Data
		case 4:
			v = uint64(uint32(a.Data))
		default:
			return reject(unix.EINVAL, i, "%s: flags of %d bytes (4 or 8)", s.Name, a.Len)
		}
		if v&^f.Allowed != 0 {
			return reject(unix.EINVAL, i, "%s: unknown flag bits %#x", s.Name, v&^f.Allowed)
		}
		if f.Bits32 && v > 0xFFFFFFFF {
			return reject(unix.EINVAL, i, "%s: flags above 32 bits", s.Name)
		}
	}
	if c := s.Const; c != nil {
		if c.Signed {
			v := int64(a.Data)
			if v < c.Min || (v > 0 && uint64(v) > c.Max) {
				return reject(unix.EINVAL, i, "%s: constant %d outside [%d, %d]", s.Name, v, c.Min, c.Max)
			}
		} else if a.Data > c.Max {
			return reject(unix.EINVAL, i, "%s: constant %#x above %#x", s.Name, a.Data, c.Max)
		}
	}
	if s.ElemSize > 0 {
		if a.Len%s.ElemSize != 0 {
			return reject(unix.EINVAL, i, "%s: %d bytes is not a whole number of %d-byte elements", s.Name, a.Len, s.ElemSize)
		}
		if s.MaxElems > 0 && a.Len/s.ElemSize > s.MaxElems {
			return reject(unix.EINVAL, i, "%s: %d elements, at most %d", s.Name, a.Len/s.ElemSize, s.MaxElems)
		}
	}
	if s.Kind == PtrIn && s.Reads {
		if _, ok := readable(a); !ok {
			return reject(unix.EFAULT, i, "%s: input pointer %#x unreadable", s.Name, a.Data)
		}
	}
	if s.Kind == PtrOut && s.Writes && !writable(a) {
		return reject(unix.EFAULT, i, "%s: output pointer %#x unwritable", s.Name, a.Data)
	}
	return Verdict{Attr: -1}
}

// Describe formats a command for failure messages.
func (c *Cmd) Describe(api *API) string {
	var b strings.Builder
	name := fmt.Sprintf("%#x/%#x", c.Object, c.Method)
	var m *Method
	if api != nil {
		if m = api.Method(c.Object, c.Method); m != nil {
			name = m.Name
		}
	}
	fmt.Fprintf(&b, "%s len=%d n=%d drv=%d", name, c.length(), c.numAttrs(), c.DriverID)
	for _, a := range c.Attrs {
		an := fmt.Sprintf("%#x", a.ID)
		if m != nil {
			if s := m.Attr(a.ID); s != nil {
				an = s.Name
			}
		}
		fmt.Fprintf(&b, " [%s len=%d fl=%d ad=%d", an, a.Len, a.Flags, a.AttrData)
		if a.Buf != nil {
			fmt.Fprintf(&b, " buf(%d)]", len(a.Buf))
		} else {
			fmt.Fprintf(&b, " data=%#x]", a.Data)
		}
	}
	return b.String()
}
