package main

import (
	"bytes"
	"fmt"
	"go/format"
	"path"
	"sort"
	"strings"
)

// CamelCase converts a C identifier: each '_'-separated part is capitalised.
func CamelCase(s string) string {
	var b strings.Builder
	for _, part := range strings.Split(s, "_") {
		if part == "" {
			continue
		}
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return b.String()
}

type goField struct {
	Name    string
	Type    string
	Off     int64
	Size    int64
	CPath   string
	Nested  *goAgg // generated type of the field (or of its array elements)
	IsArray bool
	Comment string
}

// goMethod is a union member, reached through a getter Name() and a setter
// SetName(v). The bytes of the union live in the storage field Store of the
// type: an unexported byte array (a named union's raw, or the unionN field of
// an anonymous union in a struct), or, when the first member of an anonymous
// union fills it, that member's ordinary field.
type goMethod struct {
	Name      string
	Type      string
	Off       int64 // offset of the member in the type
	Size      int64
	CPath     string
	Nested    *goAgg
	Member    string // C description for the doc comment
	Note      string
	Store     string // storage field
	StoreOff  int64  // offset of the storage field in the type
	StoreType string // Go type of the storage field
	StoreSize int64
	Bytes     bool // the storage field is a byte array
}

// unionStore describes the storage field of a union for unionMethods.
type unionStore struct {
	name  string
	off   int64
	typ   string
	size  int64
	bytes bool
}

type flexConst struct {
	Name  string
	Off   int64
	CPath string
}

type goAgg struct {
	Name    string
	Root    string // C spelling for sizeof/offsetof, "" for untagged nested types
	Agg     *Aggregate
	Ext     *External
	Fields  []goField // including padding
	Methods []goMethod
	Flex    []flexConst
	Size    int64
	Align   int64
	Doc     string
}

type emitter struct {
	p      *Parser
	byAgg  map[*Aggregate]*goAgg
	byName map[string]*goAgg
	order  []*goAgg
}

func newEmitter(p *Parser) *emitter {
	return &emitter{p: p, byAgg: map[*Aggregate]*goAgg{}, byName: map[string]*goAgg{}}
}

func (e *emitter) register(g *goAgg) error {
	if old, ok := e.byName[g.Name]; ok {
		return fmt.Errorf("type name %s used for both %s and %s", g.Name, describe(old), describe(g))
	}
	e.byName[g.Name] = g
	e.order = append(e.order, g)
	return nil
}

func describe(g *goAgg) string {
	if g.Root != "" {
		return g.Root
	}
	if g.Agg != nil {
		return "an inline aggregate at " + g.Agg.Pos.String()
	}
	return g.Name
}

func memberSize(t *CType) int64 {
	if t.Kind == KArray && t.Len < 0 {
		return 0
	}
	return t.Size
}

// goType returns the Go spelling of t. owner and member name untagged
// inline aggregates.
func (e *emitter) goType(t *CType, owner, member string) (string, *goAgg, error) {
	switch t.Kind {
	case KScalar:
		return scalars[t.Name].goType, nil, nil
	case KEnum:
		return "uint32", nil, nil
	case KPointer:
		return "uintptr", nil, nil
	case KArray:
		el, nested, err := e.goType(t.Elem, owner, member)
		if err != nil {
			return "", nil, err
		}
		n := t.Len
		if n < 0 {
			n = 0
		}
		return fmt.Sprintf("[%d]%s", n, el), nested, nil
	case KExternal:
		g, err := e.external(t.External)
		return g.Name, nil, err
	case KAgg:
		g, err := e.aggregate(t.Agg, owner+CamelCase(member))
		if err != nil {
			return "", nil, err
		}
		if t.Agg.Tag != "" {
			return g.Name, nil, nil
		}
		return g.Name, g, nil
	}
	return "", nil, fmt.Errorf("unsupported type kind %d", t.Kind)
}

func (e *emitter) external(x *External) (*goAgg, error) {
	if g, ok := e.byName[x.GoName]; ok {
		return g, nil
	}
	g := &goAgg{Name: x.GoName, Root: x.C, Ext: x, Size: x.Size, Align: x.Align,
		Doc: fmt.Sprintf("%s is an opaque copy of %s (not in the parsed headers).", x.GoName, x.C)}
	if x.Align > 1 {
		g.Fields = append(g.Fields, goField{Name: "_", Type: pinType(x.Align)})
	}
	g.Fields = append(g.Fields, goField{Name: "Raw", Type: fmt.Sprintf("[%d]byte", x.Size), Size: x.Size})
	return g, e.register(g)
}

func pinType(align int64) string {
	return fmt.Sprintf("[0]uint%d", align*8)
}

// aggregate returns the Go type for a, building it on first use.
func (e *emitter) aggregate(a *Aggregate, nestedName string) (*goAgg, error) {
	if g, ok := e.byAgg[a]; ok {
		return g, nil
	}
	if err := a.layout(); err != nil {
		return nil, err
	}
	g := &goAgg{Agg: a, Size: a.Size, Align: a.Align}
	if a.Tag != "" {
		g.Name = CamelCase(a.Tag)
		g.Root = a.Key()
		g.Doc = fmt.Sprintf("%s is %s from %s.", g.Name, a.Key(), a.File)
	} else {
		g.Name = nestedName
		kind := "struct"
		if a.Union {
			kind = "union"
		}
		g.Doc = fmt.Sprintf("%s is the inline %s defined at %s.", g.Name, kind, a.Pos)
	}
	e.byAgg[a] = g
	if err := e.register(g); err != nil {
		return nil, err
	}
	var err error
	if a.Union {
		err = e.buildUnion(g)
	} else {
		err = e.buildStruct(g)
	}
	if err != nil {
		return nil, err
	}
	return g, nil
}

func (e *emitter) buildUnion(g *goAgg) error {
	a := g.Agg
	if a.Align > 1 {
		g.Fields = append(g.Fields, goField{Name: "_", Type: pinType(a.Align)})
	}
	st := unionStore{name: "raw", typ: fmt.Sprintf("[%d]byte", a.Size), size: a.Size, bytes: true}
	if a.Size > 0 {
		g.Fields = append(g.Fields, goField{Name: st.name, Type: st.typ, Size: a.Size, Comment: "union storage; use the accessor methods"})
	}
	g.Doc += fmt.Sprintf(" It is a union of %d bytes; use the accessor methods.", a.Size)
	if err := e.unionMethods(g, a.Members, 0, g.Name, "", st); err != nil {
		return err
	}
	return checkNames(g)
}

// unionMethods adds a getter and a setter per member of a union (anonymous
// members are flattened, as C does). st is the union's storage field.
func (e *emitter) unionMethods(g *goAgg, members []*Member, base int64, owner, what string, st unionStore) error {
	for _, m := range members {
		if m.Name == "" {
			if err := e.unionMethods(g, m.Type.Agg.Members, base+m.Offset, owner, what, st); err != nil {
				return err
			}
			continue
		}
		if memberSize(m.Type) == 0 {
			g.Flex = append(g.Flex, flexConst{Name: g.Name + CamelCase(m.Name) + "Offset", Off: base + m.Offset, CPath: m.Name})
			continue
		}
		typ, nested, err := e.goType(m.Type, owner, m.Name)
		if err != nil {
			return err
		}
		gm := goMethod{Name: CamelCase(m.Name), Type: typ, Off: base + m.Offset, Size: memberSize(m.Type), CPath: m.Name, Nested: nested, Member: what,
			Store: st.name, StoreOff: st.off, StoreType: st.typ, StoreSize: st.size, Bytes: st.bytes}
		if gm.Off < st.off || gm.Off+gm.Size > st.off+st.size {
			return fmt.Errorf("%s: union member %s lies outside the union's storage", m.Pos, m.Name)
		}
		if m.Type.Kind == KScalar && scalars[m.Type.Name].be {
			gm.Note = " The value is big-endian (" + m.Type.Name + ")."
		}
		g.Methods = append(g.Methods, gm)
	}
	return nil
}

func (e *emitter) buildStruct(g *goAgg) error {
	a := g.Agg
	var items []goField
	var walk func(members []*Member, base int64) error
	walk = func(members []*Member, base int64) error {
		for _, m := range members {
			off := base + m.Offset
			if m.Name != "" {
				typ, nested, err := e.goType(m.Type, g.Name, m.Name)
				if err != nil {
					return err
				}
				f := goField{Name: CamelCase(m.Name), Type: typ, Off: off, Size: memberSize(m.Type), CPath: m.Name, Nested: nested, IsArray: m.Type.Kind == KArray}
				if m.Type.Kind == KScalar && scalars[m.Type.Name].be {
					f.Comment = "big-endian (" + m.Type.Name + ")"
				}
				items = append(items, f)
				continue
			}
			u := m.Type.Agg
			if !u.Union {
				if err := walk(u.Members, off); err != nil {
					return err
				}
				continue
			}
			rest := u.Members
			var st unionStore
			if len(u.Members) > 0 {
				first := u.Members[0]
				if first.Name != "" && u.Size > 0 && memberSize(first.Type) == u.Size && first.Type.Align == u.Align {
					typ, nested, err := e.goType(first.Type, g.Name, first.Name)
					if err != nil {
						return err
					}
					items = append(items, goField{Name: CamelCase(first.Name), Type: typ, Off: off, Size: u.Size, CPath: first.Name, Nested: nested,
						IsArray: first.Type.Kind == KArray, Comment: "anonymous union; other members via methods"})
					rest = u.Members[1:]
					st = unionStore{name: CamelCase(first.Name), off: off, typ: typ, size: u.Size}
				} else if u.Size > 0 {
					st = unionStore{name: fmt.Sprintf("union%d", off), off: off, typ: fmt.Sprintf("[%d]byte", u.Size), size: u.Size, bytes: true}
					items = append(items, goField{Name: st.name, Type: st.typ, Off: off, Size: u.Size, Comment: "anonymous union storage; members via methods"})
				}
			}
			if err := e.unionMethods(g, rest, off, g.Name, "anonymous union", st); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(a.Members, 0); err != nil {
		return err
	}
	sort.SliceStable(items, func(i, j int) bool { return items[i].Off < items[j].Off })
	// Trailing zero-size members (flexible arrays) cannot be Go fields: Go
	// pads a struct that ends in a zero-size field.
	for len(items) > 0 && items[len(items)-1].Size == 0 {
		f := items[len(items)-1]
		items = items[:len(items)-1]
		g.Flex = append([]flexConst{{Name: g.Name + f.Name + "Offset", Off: f.Off, CPath: f.CPath}}, g.Flex...)
	}
	var maxAlign int64 = 1
	for _, f := range items {
		al := e.fieldAlign(f)
		if f.Off%al != 0 {
			return fmt.Errorf("%s: member %s at offset %d is misaligned for Go (packed structs are not supported)", a.Pos, f.CPath, f.Off)
		}
		maxAlign = max(maxAlign, al)
	}
	if maxAlign > a.Align {
		return fmt.Errorf("%s: %s has C alignment %d but Go alignment %d (packed structs are not supported)", a.Pos, a.Key(), a.Align, maxAlign)
	}
	if maxAlign < a.Align {
		g.Fields = append(g.Fields, goField{Name: "_", Type: pinType(a.Align), Comment: "C alignment"})
	}
	var cur int64
	for _, f := range items {
		if f.Off < cur {
			return fmt.Errorf("%s: member %s overlaps the previous member", a.Pos, f.CPath)
		}
		if f.Off > cur {
			g.Fields = append(g.Fields, goField{Name: "_", Type: fmt.Sprintf("[%d]byte", f.Off-cur), Off: cur, Size: f.Off - cur})
		}
		g.Fields = append(g.Fields, f)
		cur = f.Off + f.Size
	}
	if a.Size > cur {
		g.Fields = append(g.Fields, goField{Name: "_", Type: fmt.Sprintf("[%d]byte", a.Size-cur), Off: cur, Size: a.Size - cur})
	}
	return checkNames(g)
}

func (e *emitter) fieldAlign(f goField) int64 {
	t := f.Type
	for strings.HasPrefix(t, "[") {
		t = t[strings.Index(t, "]")+1:]
	}
	switch t {
	case "uint8", "int8", "bool", "byte":
		return 1
	case "uint16", "int16":
		return 2
	case "uint32", "int32":
		return 4
	case "uint64", "int64", "uintptr":
		return 8
	}
	if g, ok := e.byName[t]; ok {
		return g.Align
	}
	return 1
}

func checkNames(g *goAgg) error {
	seen := map[string]string{}
	for _, f := range g.Fields {
		if f.Name == "_" {
			continue
		}
		if o, ok := seen[f.Name]; ok {
			return fmt.Errorf("%s: Go name %s.%s used by both %s and %s", g.Doc, g.Name, f.Name, o, f.CPath)
		}
		seen[f.Name] = f.CPath
	}
	for _, m := range g.Methods {
		for _, name := range []string{m.Name, "Set" + m.Name} {
			if o, ok := seen[name]; ok {
				return fmt.Errorf("%s: Go name %s.%s used by both %s and %s", g.Doc, g.Name, name, o, m.CPath)
			}
			seen[name] = m.CPath
		}
	}
	for _, name := range []string{codecEncode, codecDecode} {
		if o, ok := seen[name]; ok {
			return fmt.Errorf("%s: Go name %s.%s used by both %s and the generated byte codec", g.Doc, g.Name, name, o)
		}
	}
	return nil
}

// Allowlist selects what to emit.
type Allowlist struct {
	Aggs        []string // "struct glob" / "union glob"
	Consts      []string
	ExcludeCons []string
	Sentinels   []string // last enumerators with implicit values to leave out
}

// isSentinel reports whether c is an enum's bound or count sentinel that the
// allowlist leaves out.
func (al *Allowlist) isSentinel(c *Const) bool {
	return c.LastImplicit && matchAny(al.Sentinels, c.Name)
}

// ParseAllowlist reads the allowlist format (see allowlist.txt).
func ParseAllowlist(name, text string) (*Allowlist, error) {
	al := &Allowlist{}
	for i, line := range strings.Split(text, "\n") {
		if k := strings.IndexByte(line, '#'); k >= 0 {
			line = line[:k]
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) != 2 {
			return nil, errorf(Pos{name, i + 1}, "want \"kind pattern\"")
		}
		if _, err := path.Match(f[1], ""); err != nil {
			return nil, errorf(Pos{name, i + 1}, "bad pattern %q", f[1])
		}
		switch f[0] {
		case "struct", "union":
			al.Aggs = append(al.Aggs, f[0]+" "+f[1])
		case "const":
			al.Consts = append(al.Consts, f[1])
		case "!const":
			al.ExcludeCons = append(al.ExcludeCons, f[1])
		case "sentinel":
			al.Sentinels = append(al.Sentinels, f[1])
		default:
			return nil, errorf(Pos{name, i + 1}, "unknown kind %q", f[0])
		}
	}
	return al, nil
}

func matchAny(pats []string, s string) bool {
	for _, p := range pats {
		if ok, _ := path.Match(p, s); ok {
			return true
		}
	}
	return false
}

// Output is the generated source.
type Output struct {
	Const, Types, Layout []byte
	NumConsts, NumTypes  int
	Skipped              []string // macros that are not integer constants
}

// Generate produces the Go files. header is the comment block placed at the top.
func Generate(p *Parser, files []string, al *Allowlist, header string) (*Output, error) {
	// Constants.
	type cdef struct {
		*Const
		seq int
	}
	var consts []cdef
	names := map[string]*Const{}
	var skipped []string
	add := func(c *Const, seq int) error {
		if o, ok := names[c.Name]; ok {
			if o.Value == c.Value {
				return nil
			}
			return errorf(c.Pos, "constant %s redefined with a different value (first at %s)", c.Name, o.Pos)
		}
		names[c.Name] = c
		consts = append(consts, cdef{c, seq})
		return nil
	}
	for i, c := range p.enumConsts {
		if !matchAny(al.Consts, c.Name) || matchAny(al.ExcludeCons, c.Name) {
			continue
		}
		if al.isSentinel(c) {
			skipped = append(skipped, fmt.Sprintf("%s: %s: sentinel (last enumerator of %s)", c.Pos, c.Name, c.Enum))
			continue
		}
		if err := add(c, c.Pos.Line*2+1); err != nil {
			return nil, err
		}
		_ = i
	}
	for _, m := range p.macroOrder {
		if m.Func || len(m.Body) == 0 || !matchAny(al.Consts, m.Name) || matchAny(al.ExcludeCons, m.Name) {
			continue
		}
		if cur, ok := p.macros[m.Name]; !ok || cur != m {
			continue // #undef'd
		}
		body, err := p.expand(m.Body, map[string]bool{m.Name: true})
		if err != nil {
			skipped = append(skipped, fmt.Sprintf("%s: %s: %v", m.Pos, m.Name, err))
			continue
		}
		v, err := p.evalTokens(body, m.Pos)
		if err != nil {
			skipped = append(skipped, fmt.Sprintf("%s: %s: %v", m.Pos, m.Name, err))
			continue
		}
		if _, isEnum := p.enums[m.Name]; isEnum {
			return nil, errorf(m.Pos, "%s is both a macro and an enumerator", m.Name)
		}
		if err := add(&Const{Name: m.Name, Pos: m.Pos, Value: v, Hex: isHexish(m.Body)}, m.Pos.Line*2); err != nil {
			return nil, err
		}
	}
	fileIdx := map[string]int{}
	for i, f := range files {
		fileIdx[f] = i
	}
	sort.SliceStable(consts, func(i, j int) bool {
		a, b := consts[i], consts[j]
		if fileIdx[a.Pos.File] != fileIdx[b.Pos.File] {
			return fileIdx[a.Pos.File] < fileIdx[b.Pos.File]
		}
		return a.seq < b.seq
	})

	// Types.
	e := newEmitter(p)
	for _, a := range p.aggOrder {
		if !matchAny(al.Aggs, a.Key()) {
			continue
		}
		if _, err := e.aggregate(a, ""); err != nil {
			return nil, err
		}
	}
	// Order: by file, then source position; nested types follow their parent
	// in creation order; externals last.
	rank := map[*goAgg]int{}
	for i, g := range e.order {
		rank[g] = i
	}
	order := append([]*goAgg(nil), e.order...)
	key := func(g *goAgg) (int, int) {
		if g.Agg == nil {
			return len(files), 0
		}
		return fileIdx[g.Agg.File], 0
	}
	sort.SliceStable(order, func(i, j int) bool {
		fi, _ := key(order[i])
		fj, _ := key(order[j])
		return fi < fj
	})
	for _, g := range order {
		for _, fc := range g.Flex {
			if _, ok := names[fc.Name]; ok {
				return nil, fmt.Errorf("constant name %s clashes", fc.Name)
			}
		}
		if _, ok := names["Sizeof"+g.Name]; ok {
			return nil, fmt.Errorf("constant name Sizeof%s clashes", g.Name)
		}
	}

	out := &Output{NumConsts: len(consts), Skipped: skipped}
	// zconst.go
	var b bytes.Buffer
	b.WriteString(header)
	b.WriteString("\npackage abi\n\n")
	lastFile, lastEnum := "", "\x00"
	open := false
	for _, c := range consts {
		group := c.Enum
		if c.Pos.File != lastFile || group != lastEnum {
			if open {
				b.WriteString(")\n\n")
			}
			if c.Pos.File != lastFile {
				fmt.Fprintf(&b, "// Constants from %s.\n\n", c.Pos.File)
			}
			if group != "" {
				fmt.Fprintf(&b, "// %s\n", group)
			} else {
				b.WriteString("// #define\n")
			}
			b.WriteString("const (\n")
			open = true
			lastFile, lastEnum = c.Pos.File, group
		}
		fmt.Fprintf(&b, "\t%s = %s\n", c.Name, formatValue(c.Value, c.Hex))
	}
	if open {
		b.WriteString(")\n")
	}
	var err error
	if out.Const, err = format.Source(b.Bytes()); err != nil {
		return nil, fmt.Errorf("formatting zconst.go: %v", err)
	}

	// ztypes.go
	need := e.codecTypes(order)
	b.Reset()
	b.WriteString("// Sizes of the generated types (C sizeof).\nconst (\n")
	for _, g := range order {
		fmt.Fprintf(&b, "\tSizeof%s = %d\n", g.Name, g.Size)
	}
	b.WriteString(")\n\n")
	var flex []string
	for _, g := range order {
		for _, fc := range g.Flex {
			root := g.Root
			if root == "" {
				root = g.Name
			}
			flex = append(flex, fmt.Sprintf("\t%s = %d // offsetof(%s, %s)\n", fc.Name, fc.Off, root, fc.CPath))
		}
	}
	if len(flex) > 0 {
		b.WriteString("// Offsets of zero-size trailing members (flexible arrays), which are not\n// Go fields because Go pads a struct that ends in a zero-size field.\nconst (\n")
		b.WriteString(strings.Join(flex, ""))
		b.WriteString(")\n\n")
	}
	for _, g := range order {
		fmt.Fprintf(&b, "// %s\ntype %s struct {\n", g.Doc, g.Name)
		for _, f := range g.Fields {
			fmt.Fprintf(&b, "\t%s %s", f.Name, f.Type)
			if f.Comment != "" {
				fmt.Fprintf(&b, " // %s", f.Comment)
			}
			b.WriteString("\n")
		}
		b.WriteString("}\n\n")
		for _, m := range g.Methods {
			if err := e.writeAccessors(&b, g, m); err != nil {
				return nil, fmt.Errorf("%s.%s: %v", g.Name, m.Name, err)
			}
		}
		if need[g] {
			if err := e.writeCodec(&b, g); err != nil {
				return nil, err
			}
		}
	}
	body := b.String()
	b.Reset()
	b.WriteString(header)
	b.WriteString("\npackage abi\n\n")
	if strings.Contains(body, "binary.") {
		b.WriteString("import \"encoding/binary\"\n\n")
	}
	b.WriteString(body)
	if out.Types, err = format.Source(b.Bytes()); err != nil {
		return nil, fmt.Errorf("formatting ztypes.go: %v\n%s", err, b.Bytes())
	}
	out.NumTypes = len(order)

	// zlayout_test.go
	b.Reset()
	b.WriteString(header)
	b.WriteString("\npackage abi\n\nimport \"unsafe\"\n\n")
	b.WriteString("var layoutHeaders = []string{\n")
	// linux/netlink.h defines NLA_F_* used by rdma_netlink.h without including it.
	for _, f := range append([]string{"linux/netlink.h"}, files...) {
		fmt.Fprintf(&b, "\t%q,\n", f)
	}
	b.WriteString("}\n\nvar layoutTable = []layoutType{\n")
	for _, g := range order {
		if g.Root == "" {
			continue
		}
		fmt.Fprintf(&b, "\t{c: %q, goName: %q, size: unsafe.Sizeof(%s{}), align: unsafe.Alignof(%s{}), rows: func() []layoutRow {\n", g.Root, g.Name, g.Name, g.Name)
		if g.Ext != nil {
			b.WriteString("\t\treturn nil // opaque\n\t}},\n")
			continue
		}
		var rows bytes.Buffer
		var decls []string
		decl := func(typ string) string {
			name := fmt.Sprintf("w%d", len(decls))
			decls = append(decls, fmt.Sprintf("\t\t%s := new(%s)\n", name, typ))
			return name
		}
		layoutRows(&rows, g, "v", "v", "v", "", "", decl)
		fmt.Fprintf(&b, "\t\tv := new(%s)\n", g.Name)
		b.WriteString(strings.Join(decls, ""))
		b.WriteString("\t\treturn []layoutRow{\n")
		b.Write(rows.Bytes())
		b.WriteString("\t\t}\n\t}},\n")
	}
	b.WriteString("}\n\nvar constTable = []constRow{\n")
	for _, c := range consts {
		if c.Value.Neg() {
			fmt.Fprintf(&b, "\t{%q, true, -(%s)},\n", c.Name, c.Name)
		} else {
			fmt.Fprintf(&b, "\t{%q, false, %s},\n", c.Name, c.Name)
		}
	}
	b.WriteString("}\n")
	if out.Layout, err = format.Source(b.Bytes()); err != nil {
		return nil, fmt.Errorf("formatting zlayout_test.go: %v", err)
	}
	return out, nil
}

func formatValue(v Value, hex bool) string {
	if v.Neg() {
		return v.String()
	}
	if hex && v.V > 9 {
		return fmt.Sprintf("0x%x", v.V)
	}
	return v.String()
}
