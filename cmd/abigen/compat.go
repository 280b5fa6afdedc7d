package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// The uapi headers only grow, so a machine whose linux-libc-dev is newer than
// the one package abi was generated from cannot reproduce abi/ byte for byte,
// but it can check what matters: every declaration of the committed abi/
// (constant, type, accessor, codec) is still generated, identically, from the
// installed headers. Declarations only the headers have are additions: they
// are reported, not failures.

// compatFiles are the generated files whose declarations are compared.
// zlayout_test.go is derived from them; the layout test compiles it against
// the installed headers (go test ./abi).
var compatFiles = []string{"zconst.go", "ztypes.go"}

// CompatReport is the outcome of comparing committed files with a
// regeneration.
type CompatReport struct {
	Unchanged int      // declarations identical in both
	Added     []string // only in the regeneration: "const NAME = V", "type NAME", ...
	Changed   []string // in both, different: a description of each
	Removed   []string // only in the committed files
	// Compatible changes, as the uapi makes them: a struct that grew at
	// its end or whose reserved bytes became fields (with its Sizeof
	// constant), a constant spelled differently with the same value, and
	// a #define the headers dropped (the kernel keeps the value: abi/
	// keeps the constant). Reported, not failures.
	Extended []string
}

// OK reports whether everything committed is still generated identically.
func (r *CompatReport) OK() bool { return len(r.Changed) == 0 && len(r.Removed) == 0 }

// decl is one top-level declaration: its key ("const X", "type T",
// "func (T) M"), its source without comments, and a short form for reports.
type decl struct {
	key, src, short string
}

// decls lists the declarations of one Go file in order.
func decls(name string, src []byte) ([]decl, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution) // no comments
	if err != nil {
		return nil, err
	}
	print := func(n any) (string, error) {
		var b bytes.Buffer
		if err := format.Node(&b, fset, n); err != nil {
			return "", err
		}
		return b.String(), nil
	}
	var out []decl
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.ValueSpec:
					for i, n := range s.Names {
						v := ""
						if i < len(s.Values) {
							var err error
							if v, err = print(s.Values[i]); err != nil {
								return nil, err
							}
						}
						kw := d.Tok.String()
						out = append(out, decl{kw + " " + n.Name, kw + " " + n.Name + " = " + v, n.Name + " = " + v})
					}
				case *ast.TypeSpec:
					src, err := print(s)
					if err != nil {
						return nil, err
					}
					out = append(out, decl{"type " + s.Name.Name, "type " + src, "type " + s.Name.Name})
				}
			}
		case *ast.FuncDecl:
			key := "func " + d.Name.Name
			if d.Recv != nil && len(d.Recv.List) == 1 {
				recv, err := print(d.Recv.List[0].Type)
				if err != nil {
					return nil, err
				}
				key = "func (" + recv + ") " + d.Name.Name
			}
			src, err := print(d)
			if err != nil {
				return nil, err
			}
			out = append(out, decl{key, src, key})
		}
	}
	return out, nil
}

// CheckCompat compares the committed files in dir with gen (file name ->
// content of a regeneration from the installed headers).
func CheckCompat(dir string, gen map[string][]byte) (*CompatReport, error) {
	r := &CompatReport{}
	for _, name := range compatFiles {
		old, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		od, err := decls(filepath.Join(dir, name), old)
		if err != nil {
			return nil, err
		}
		nd, err := decls("regenerated/"+name, gen[name])
		if err != nil {
			return nil, err
		}
		byKey := map[string]decl{}
		for _, d := range nd {
			byKey[d.key] = d
		}
		seen := map[string]bool{}
		// The types that grew compatibly, whose Sizeof may change.
		grown := map[string]bool{}
		for _, d := range od {
			if n, ok := byKey[d.key]; ok && n.src != d.src && strings.HasPrefix(d.key, "type ") {
				if how, ok := extends(d.src, n.src); ok {
					grown["Sizeof"+strings.TrimPrefix(d.key, "type ")] = true
					r.Extended = append(r.Extended, d.key+": "+how)
					seen[d.key] = true
				}
			}
		}
		for _, d := range od {
			if seen[d.key] {
				continue
			}
			seen[d.key] = true
			n, ok := byKey[d.key]
			switch {
			case !ok && strings.HasPrefix(d.key, "const ") && headerConst(strings.TrimPrefix(d.key, "const ")):
				r.Extended = append(r.Extended, d.short+": no longer defined by the headers (the kernel keeps the value)")
			case !ok:
				r.Removed = append(r.Removed, d.short)
			case n.src == d.src:
				r.Unchanged++
			case sameValue(d, n):
				r.Unchanged++
			case grown[strings.TrimPrefix(d.key, "const ")] && grows(d, n):
				r.Extended = append(r.Extended, describeChange(d, n))
			default:
				r.Changed = append(r.Changed, describeChange(d, n))
			}
		}
		for _, d := range nd {
			if !seen[d.key] {
				r.Added = append(r.Added, d.short)
			}
		}
	}
	return r, nil
}

// headerConst reports whether a constant is a header's own #define or
// enumerator (UPPER_CASE) rather than one the generator derives from a
// type (SizeofX, XYOffset), which goes only with its type.
func headerConst(name string) bool {
	return name == strings.ToUpper(name)
}

// constValue is a constant declaration's value as an integer.
func constValue(d decl) (int64, bool) {
	v, err := strconv.ParseInt(strings.TrimPrefix(d.src, d.key+" = "), 0, 64)
	return v, err == nil
}

// sameValue reports whether two constants' values are the same integer
// spelled differently (0x1000 and 4096).
func sameValue(old, new decl) bool {
	if !strings.HasPrefix(old.key, "const ") {
		return false
	}
	o, ok1 := constValue(old)
	n, ok2 := constValue(new)
	return ok1 && ok2 && o == n
}

// grows reports whether a constant's new value is larger (a Sizeof).
func grows(old, new decl) bool {
	o, ok1 := constValue(old)
	n, ok2 := constValue(new)
	return ok1 && ok2 && n > o
}

// field is one field of a generated struct type.
type field struct{ name, typ string }

// structFields returns the fields of a "type T struct{...}" declaration.
func structFields(src string) ([]field, bool) {
	f, err := parser.ParseFile(token.NewFileSet(), "", "package p\n"+src, parser.SkipObjectResolution)
	if err != nil || len(f.Decls) != 1 {
		return nil, false
	}
	g, ok := f.Decls[0].(*ast.GenDecl)
	if !ok || len(g.Specs) != 1 {
		return nil, false
	}
	st, ok := g.Specs[0].(*ast.TypeSpec).Type.(*ast.StructType)
	if !ok {
		return nil, false
	}
	var out []field
	for _, fl := range st.Fields.List {
		var b bytes.Buffer
		if err := format.Node(&b, token.NewFileSet(), fl.Type); err != nil {
			return nil, false
		}
		for _, n := range fl.Names {
			out = append(out, field{n.Name, b.String()})
		}
	}
	return out, true
}

// scalarSize is the size of a fixed-size integer type or an array of one.
func scalarSize(typ string) (int, bool) {
	if rest, ok := strings.CutPrefix(typ, "["); ok {
		n, elem, ok := strings.Cut(rest, "]")
		k, err := strconv.Atoi(n)
		if !ok || err != nil {
			return 0, false
		}
		e, ok := scalarSize(elem)
		return k * e, ok
	}
	switch typ {
	case "uint8", "int8", "byte":
		return 1, true
	case "uint16", "int16":
		return 2, true
	case "uint32", "int32":
		return 4, true
	case "uint64", "int64":
		return 8, true
	}
	return 0, false
}

// extends reports whether the struct new is old grown the way the uapi
// grows its structs, and how: every field of old in order, except that
// a reserved field (Reserved, Reserved1, ...) may be replaced by fields
// of integer types filling exactly its bytes (a shorter reserved array
// among them), and new fields may follow the last. The layout itself is
// compared with the C compiler by abi's TestLayoutAgainstC.
func extends(oldSrc, newSrc string) (string, bool) {
	o, ok1 := structFields(oldSrc)
	n, ok2 := structFields(newSrc)
	if !ok1 || !ok2 {
		return "", false
	}
	var how []string
	j := 0
	for _, f := range o {
		if j < len(n) && n[j] == f {
			j++
			continue
		}
		size, ok := scalarSize(f.typ)
		if !ok || !strings.HasPrefix(f.name, "Reserved") {
			return "", false
		}
		var into []string
		for sum := 0; sum < size; j++ {
			if j == len(n) {
				return "", false
			}
			k, ok := scalarSize(n[j].typ)
			if !ok {
				return "", false
			}
			sum += k
			if sum > size {
				return "", false
			}
			into = append(into, n[j].name+" "+n[j].typ)
		}
		how = append(how, fmt.Sprintf("%s %s became %s", f.name, f.typ, strings.Join(into, ", ")))
	}
	if j < len(n) {
		var tail []string
		for _, f := range n[j:] {
			tail = append(tail, f.name+" "+f.typ)
		}
		how = append(how, "grew at its end by "+strings.Join(tail, ", "))
	}
	if len(how) == 0 {
		return "", false
	}
	return strings.Join(how, "; "), true
}

func describeChange(old, new decl) string {
	if strings.HasPrefix(old.key, "const ") {
		return fmt.Sprintf("%s, the headers give %s", old.short, strings.TrimPrefix(new.short, strings.TrimPrefix(old.key, "const ")+" = "))
	}
	lines := func(s string) []string {
		var out []string
		for _, l := range strings.Split(s, "\n") {
			out = append(out, strings.Join(strings.Fields(l), " ")) // gofmt's column alignment aside
		}
		return out
	}
	ol, nl := lines(old.src), lines(new.src)
	var diff []string
	for _, l := range ol {
		if !slices.Contains(nl, l) {
			diff = append(diff, "\t- "+l)
		}
	}
	for _, l := range nl {
		if !slices.Contains(ol, l) {
			diff = append(diff, "\t+ "+l)
		}
	}
	return old.key + " differs:\n" + strings.Join(diff, "\n")
}

// String formats the report for people: what was compared, every
// incompatibility, and the additions (names only).
func (r *CompatReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d declarations of abi/ are generated unchanged", r.Unchanged)
	if len(r.Added) > 0 {
		fmt.Fprintf(&b, "\nadditions in the installed headers, not in abi/ (reported, not failures; make generate would add them): %d\n", len(r.Added))
		for _, a := range r.Added {
			fmt.Fprintf(&b, "\t%s\n", a)
		}
	}
	if len(r.Changed) > 0 {
		fmt.Fprintf(&b, "\nINCOMPATIBLE: %d declarations of abi/ differ in the installed headers:\n", len(r.Changed))
		for _, c := range r.Changed {
			fmt.Fprintf(&b, "\t%s\n", c)
		}
	}
	if len(r.Extended) > 0 {
		fmt.Fprintf(&b, "\ncompatible changes in the installed headers (the uapi's own ways of growing; reported, not failures): %d\n", len(r.Extended))
		for _, e := range r.Extended {
			fmt.Fprintf(&b, "\t%s\n", strings.ReplaceAll(e, "\n", "\n\t"))
		}
	}
	if len(r.Removed) > 0 {
		fmt.Fprintf(&b, "\nINCOMPATIBLE: %d declarations of abi/ are not in the installed headers:\n", len(r.Removed))
		for _, c := range r.Removed {
			fmt.Fprintf(&b, "\t%s\n", c)
		}
	}
	return strings.TrimRight(b.String(), "\n")
}
