package bwtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pureverbs/pureverbs/internal/testkit"
)

// TestOneKernelCoversBoth: a VM test that some tools run on one kernel
// only (testkit.OneKernel) still runs on both kernels of make test with
// some tool: each of its names is split to both kernels, or left whole
// in a tool. A split is the test's first statement.
func TestOneKernelCoversBoth(t *testing.T) {
	if testkit.InVM() {
		t.Skip("host-only: parses the module's sources, which the guest does not have")
	}
	files, err := filepath.Glob("../../../cmd/*/*_test.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no test files under cmd/: %v", err)
	}
	split := map[string][]string{} // test name → kernels it is split to
	whole := map[string]bool{}
	tools := map[string][]string{}
	fset := token.NewFileSet()
	for _, f := range files {
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		tool := filepath.Base(filepath.Dir(f))
		for _, d := range file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "TestVM") || fn.Body == nil {
				continue
			}
			name := fn.Name.Name
			k, first := oneKernelCall(fn.Body.List, 0)
			for i := range fn.Body.List {
				if _, ok := oneKernelCall(fn.Body.List, i); ok && i > 0 {
					t.Errorf("%s %s: testkit.OneKernel is statement %d, not the first", tool, name, i+1)
				}
			}
			if first {
				split[name] = append(split[name], k)
				tools[name] = append(tools[name], tool+" on "+k)
			} else {
				whole[name] = true
			}
		}
	}
	if len(split) == 0 {
		t.Fatal("no test calls testkit.OneKernel: the parse of cmd/ found nothing")
	}
	for name, ks := range split {
		if whole[name] {
			continue
		}
		if !slices.Contains(ks, "Kernel61") || !slices.Contains(ks, "Kernel612") {
			t.Errorf("%s runs on one kernel in every tool that has it (%s): split it the other way in one of them", name, strings.Join(tools[name], ", "))
		}
	}
}

// oneKernelCall reports whether statement i of list calls
// testkit.OneKernel(t, testkit.K), and K.
func oneKernelCall(list []ast.Stmt, i int) (string, bool) {
	if i >= len(list) {
		return "", false
	}
	es, ok := list[i].(*ast.ExprStmt)
	if !ok {
		return "", false
	}
	call, ok := es.X.(*ast.CallExpr)
	if !ok || len(call.Args) != 2 {
		return "", false
	}
	if sel, ok := call.Fun.(*ast.SelectorExpr); !ok || sel.Sel.Name != "OneKernel" {
		return "", false
	}
	k, ok := call.Args[1].(*ast.SelectorExpr)
	if !ok {
		return "", false
	}
	return k.Sel.Name, true
}
