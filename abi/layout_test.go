package abi

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// layoutRow is one member of a generated type: its C designator relative to
// the root type, and the Go offset and size. flex rows (zero-size trailing
// members) compare only the offset.
type layoutRow struct {
	c    string
	off  uintptr
	size uintptr
	flex bool
}

type layoutType struct {
	c      string // "struct ib_uverbs_attr"
	goName string
	size   uintptr
	align  uintptr
	rows   func() []layoutRow
}

type constRow struct {
	name string
	neg  bool   // the value is -mag
	mag  uint64 // absolute value
}

func off[T, F any](v *T, f *F) uintptr {
	return uintptr(unsafe.Pointer(f)) - uintptr(unsafe.Pointer(v))
}

// TestLayoutAgainstC compiles a C program with the same uapi headers and
// compares every size, alignment, offset and constant with the Go side.
func TestLayoutAgainstC(t *testing.T) {
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc not found: install gcc (apt-get install gcc) to compare the generated layouts with the C headers")
	}
	var src bytes.Buffer
	src.WriteString("#include <stdio.h>\n#include <stddef.h>\n")
	for _, h := range layoutHeaders {
		fmt.Fprintf(&src, "#include <%s>\n", h)
	}
	src.WriteString("int main(void) {\n")
	tables := make([][]layoutRow, len(layoutTable))
	for i, lt := range layoutTable {
		fmt.Fprintf(&src, "\tprintf(\"T %d %%zu %%zu\\n\", sizeof(%s), __alignof__(%s));\n", i, lt.c, lt.c)
		tables[i] = lt.rows()
		for j, r := range tables[i] {
			if r.flex {
				fmt.Fprintf(&src, "\tprintf(\"F %d %d %%zu 0\\n\", offsetof(%s, %s));\n", i, j, lt.c, r.c)
			} else {
				fmt.Fprintf(&src, "\tprintf(\"F %d %d %%zu %%zu\\n\", offsetof(%s, %s), sizeof(((%s *)0)->%s));\n", i, j, lt.c, r.c, lt.c, r.c)
			}
		}
	}
	for i, c := range constTable {
		fmt.Fprintf(&src, "\tif ((%s) < 0) printf(\"C %d 1 %%llu\\n\", (unsigned long long)-(long long)(%s)); else printf(\"C %d 0 %%llu\\n\", (unsigned long long)(%s));\n", c.name, i, c.name, i, c.name)
	}
	src.WriteString("\treturn 0;\n}\n")

	dir := t.TempDir()
	cfile := filepath.Join(dir, "layout.c")
	exe := filepath.Join(dir, "layout")
	if err := os.WriteFile(cfile, src.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(cc, "-w", "-o", exe, cfile).CombinedOutput(); err != nil {
		t.Fatalf("compiling %s: %v\n%s", cfile, err, out)
	}
	out, err := exec.Command(exe).Output()
	if err != nil {
		t.Fatalf("running layout program: %v", err)
	}

	var nTypes, nFields, nConsts int
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		num := func(k int) uint64 {
			n, err := strconv.ParseUint(f[k], 10, 64)
			if err != nil {
				t.Fatalf("bad line %q", sc.Text())
			}
			return n
		}
		switch f[0] {
		case "T":
			lt := layoutTable[num(1)]
			if uint64(lt.size) != num(2) || uint64(lt.align) != num(3) {
				t.Errorf("%s (%s): C size/align %d/%d, Go %d/%d", lt.c, lt.goName, num(2), num(3), lt.size, lt.align)
			}
			nTypes++
		case "F":
			i, j := num(1), num(2)
			lt, r := layoutTable[i], tables[i][j]
			if uint64(r.off) != num(3) {
				t.Errorf("%s.%s (%s): C offset %d, Go %d", lt.c, r.c, lt.goName, num(3), r.off)
			}
			if !r.flex && uint64(r.size) != num(4) {
				t.Errorf("%s.%s (%s): C size %d, Go %d", lt.c, r.c, lt.goName, num(4), r.size)
			}
			nFields++
		case "C":
			c := constTable[num(1)]
			if c.neg != (num(2) == 1) || c.mag != num(3) {
				t.Errorf("constant %s: C %s%d, Go neg=%v %d", c.name, map[bool]string{true: "-"}[num(2) == 1], num(3), c.neg, c.mag)
			}
			nConsts++
		}
	}
	if nTypes != len(layoutTable) || nConsts != len(constTable) {
		t.Fatalf("C program printed %d types and %d constants, want %d and %d", nTypes, nConsts, len(layoutTable), len(constTable))
	}
	t.Logf("compared %d structs, %d fields, %d constants", nTypes, nFields, nConsts)
}
