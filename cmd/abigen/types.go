package main

// TypeKind classifies a C type.
type TypeKind int

// Type kinds.
const (
	KScalar TypeKind = iota
	KEnum
	KPointer
	KArray
	KAgg
	KExternal
)

// CType is a C type.
type CType struct {
	Kind     TypeKind
	Name     string // scalar spelling, enum tag or external name
	Size     int64
	Align    int64
	Signed   bool
	Elem     *CType // arrays
	Len      int64  // arrays; -1 for a flexible array member
	Agg      *Aggregate
	External *External
}

// Aggregate is a struct or union.
type Aggregate struct {
	Tag      string // empty for an untagged inline definition
	Union    bool
	Members  []*Member
	Packed   bool
	AlignAt  int64 // __attribute__((aligned(N)))
	Pos      Pos
	File     string
	Complete bool
	Size     int64
	Align    int64
	laid     bool
	laying   bool
}

// Key is the C tag name, e.g. "struct ib_uverbs_attr".
func (a *Aggregate) Key() string {
	if a.Union {
		return "union " + a.Tag
	}
	return "struct " + a.Tag
}

// Member is a struct or union member. Name is empty for an anonymous member.
type Member struct {
	Name   string
	Type   *CType
	Offset int64
	Pos    Pos
}

// External is a type from a header outside the parsed set, described by hand.
type External struct {
	C      string // "struct sockaddr_in"
	GoName string
	Size   int64
	Align  int64
}

var externals = map[string]*External{
	"struct sockaddr_in":  {C: "struct sockaddr_in", GoName: "SockaddrIn", Size: 16, Align: 4},
	"struct sockaddr_in6": {C: "struct sockaddr_in6", GoName: "SockaddrIn6", Size: 28, Align: 4},
}

// externalConsts are integer constants from headers outside the parsed set.
var externalConsts = map[string]Value{
	"ETH_ALEN":            {V: 6, Bits: 32},
	"NLA_F_NESTED":        {V: 1 << 15, Bits: 32},
	"NLA_F_NET_BYTEORDER": {V: 1 << 14, Bits: 32},
}

type scalarInfo struct {
	size   int64
	signed bool
	goType string
	be     bool
}

// scalars maps typedef names and canonical builtin spellings to their
// x86-64/arm64 Linux representation.
var scalars = map[string]scalarInfo{
	"__u8": {1, false, "uint8", false}, "__s8": {1, true, "int8", false},
	"__u16": {2, false, "uint16", false}, "__s16": {2, true, "int16", false},
	"__u32": {4, false, "uint32", false}, "__s32": {4, true, "int32", false},
	"__u64": {8, false, "uint64", false}, "__s64": {8, true, "int64", false},
	"__le16": {2, false, "uint16", false}, "__le32": {4, false, "uint32", false}, "__le64": {8, false, "uint64", false},
	"__be16": {2, false, "uint16", true}, "__be32": {4, false, "uint32", true}, "__be64": {8, false, "uint64", true},
	"__aligned_u64": {8, false, "uint64", false}, "__aligned_be64": {8, false, "uint64", true},
	"__aligned_le64": {8, false, "uint64", false}, "__aligned_s64": {8, true, "int64", false},
	"__kernel_size_t":      {8, false, "uint64", false},
	"__kernel_sa_family_t": {2, false, "uint16", false},
	"char":                 {1, true, "int8", false}, "signed char": {1, true, "int8", false}, "unsigned char": {1, false, "uint8", false},
	"short": {2, true, "int16", false}, "unsigned short": {2, false, "uint16", false},
	"int": {4, true, "int32", false}, "unsigned int": {4, false, "uint32", false},
	"long": {8, true, "int64", false}, "unsigned long": {8, false, "uint64", false},
	"long long": {8, true, "int64", false}, "unsigned long long": {8, false, "uint64", false},
	"_Bool": {1, false, "bool", false},
}

func scalarType(name string) *CType {
	si := scalars[name]
	return &CType{Kind: KScalar, Name: name, Size: si.size, Align: si.size, Signed: si.signed}
}

func roundUp(n, a int64) int64 {
	if a <= 1 {
		return n
	}
	return (n + a - 1) / a * a
}

// layout computes offsets, sizes and alignments with the x86-64 SysV rules.
func (a *Aggregate) layout() error {
	if a.laid {
		return nil
	}
	if !a.Complete {
		return errorf(a.Pos, "%s is incomplete (declared but never defined)", a.Key())
	}
	if a.laying {
		return errorf(a.Pos, "%s contains itself", a.Key())
	}
	a.laying = true
	defer func() { a.laying = false }()
	var off, size, align int64 = 0, 0, 1
	for i, m := range a.Members {
		if err := m.Type.complete(); err != nil {
			return err
		}
		ma := m.Type.Align
		if a.Packed {
			ma = 1
		}
		msize := m.Type.Size
		if m.Type.Kind == KArray && m.Type.Len < 0 {
			msize = 0
			if !a.Union && i != len(a.Members)-1 {
				return errorf(m.Pos, "flexible array member %s is not last", m.Name)
			}
		}
		if ma > align {
			align = ma
		}
		if a.Union {
			m.Offset = 0
			if msize > size {
				size = msize
			}
			continue
		}
		off = roundUp(off, ma)
		m.Offset = off
		off += msize
		size = off
	}
	if a.AlignAt > align {
		align = a.AlignAt
	}
	a.Size = roundUp(size, align)
	a.Align = align
	a.laid = true
	return nil
}

// complete makes sure sizes are known (lays out aggregates).
func (t *CType) complete() error {
	switch t.Kind {
	case KAgg:
		if err := t.Agg.layout(); err != nil {
			return err
		}
		t.Size, t.Align = t.Agg.Size, t.Agg.Align
	case KArray:
		if err := t.Elem.complete(); err != nil {
			return err
		}
		t.Align = t.Elem.Align
		if t.Len >= 0 {
			t.Size = t.Len * t.Elem.Size
		}
	}
	return nil
}
