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
		for _, d := range od {
			seen[d.key] = true
			n, ok := byKey[d.key]
			switch {
			case !ok:
				r.Removed = append(r.Removed, d.short)
			case n.src != d.src:
				r.Changed = append(r.Changed, describeChange(d, n))
			default:
				r.Unchanged++
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
	if len(r.Removed) > 0 {
		fmt.Fprintf(&b, "\nINCOMPATIBLE: %d declarations of abi/ are not in the installed headers:\n", len(r.Removed))
		for _, c := range r.Removed {
			fmt.Fprintf(&b, "\t%s\n", c)
		}
	}
	return strings.TrimRight(b.String(), "\n")
}
