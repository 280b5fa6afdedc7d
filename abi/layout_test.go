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
// members) compare only the offset. A union member, reached through a
// getter and a setter rather than a field, has the offset its accessors
// claim and a check (made by probe) that they really use those bytes.
type layoutRow struct {
	c     string
	off   uintptr
	size  uintptr
	flex  bool
	check func() string
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

// probe returns a check that the accessors get and set of a union member
// of type V read and write exactly the bytes [at, at+sizeof(V)) of *root,
// holding V's memory image (whose layout the rows of V's own type compare
// with C). Bytes of V that the getter leaves zero are padding; all others
// must come from the root's bytes at the same position.
func probe[R, V any](root *R, at uintptr, get func() V, set func(V)) func() string {
	return func() string {
		b := unsafe.Slice((*byte)(unsafe.Pointer(root)), unsafe.Sizeof(*root))
		var v V
		n := unsafe.Sizeof(v)
		if at+n > uintptr(len(b)) {
			return fmt.Sprintf("member [%d, %d) outside the %d-byte type", at, at+n, len(b))
		}
		for i := range b {
			b[i] = byte(i%251) + 1 // never 0, distinct within 251 bytes
		}
		pattern := bytes.Clone(b)
		v = get()
		img := unsafe.Slice((*byte)(unsafe.Pointer(&v)), n)
		nonzero := 0
		for i, c := range img {
			if c == 0 {
				continue
			}
			if c != pattern[at+uintptr(i)] {
				return fmt.Sprintf("getter: byte %d of the value is %#x, want %#x (from offset %d)", i, c, pattern[at+uintptr(i)], at+uintptr(i))
			}
			nonzero++
		}
		if n > 0 && nonzero == 0 {
			return "getter: returned the zero value"
		}
		clear(b)
		set(v)
		for i, c := range b {
			var want byte
			if uintptr(i) >= at && uintptr(i) < at+n {
				want = img[uintptr(i)-at]
			}
			if c != want {
				return fmt.Sprintf("setter: byte %d of the type is %#x, want %#x", i, c, want)
			}
		}
		return ""
	}
}

// TestLayoutAgainstC compiles a C program with the installed uapi headers
// and compares every size, alignment, offset and constant of the generated
// Go side with it. The installed headers may be newer than the ones abi/ was
// generated from: the uapi only grows, so this is a compatibility check
// (everything generated still has the same value and layout); what the
// newer headers add is not generated and not compared here (make
// check-generate lists it). Enum sentinels such as RDMA_NLDEV_ATTR_MAX,
// which grow with every addition, are not generated.
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
	pinned, installed := headerVersions()
	if pinned != installed {
		t.Logf("abi/ was generated from linux-libc-dev %s, the installed headers are %s: compatible (additions not compared; make check-generate lists them)", pinned, installed)
	}
}

// headerVersions returns the linux-libc-dev version named in zconst.go's
// Source line and the installed one (dpkg-query), or "unknown".
func headerVersions() (pinned, installed string) {
	pinned, installed = "unknown", "unknown"
	if b, err := os.ReadFile("zconst.go"); err == nil {
		for _, l := range strings.SplitN(string(b), "\n", 5) {
			if v, ok := strings.CutPrefix(l, "// Source: "); ok {
				if _, v, ok = strings.Cut(v, "(linux-libc-dev "); ok {
					pinned = strings.TrimSuffix(v, ")")
				}
			}
		}
	}
	if out, err := exec.Command("dpkg-query", "-W", "-f=${Version}", "linux-libc-dev").Output(); err == nil && len(out) > 0 {
		installed = strings.TrimSpace(string(out))
	}
	return pinned, installed
}

// TestUnionAccessors runs the probe of every union member accessor (no C
// compiler needed): each getter must read, and each setter write, exactly
// the member's bytes at the offset that TestLayoutAgainstC compares with C.
func TestUnionAccessors(t *testing.T) {
	n := 0
	for _, lt := range layoutTable {
		for _, r := range lt.rows() {
			if r.check == nil {
				continue
			}
			if msg := r.check(); msg != "" {
				t.Errorf("%s.%s (%s): %s", lt.c, r.c, lt.goName, msg)
			}
			n++
		}
	}
	if n == 0 {
		t.Fatal("no union accessors in the layout table")
	}
	t.Logf("probed %d union member accessors", n)
}
