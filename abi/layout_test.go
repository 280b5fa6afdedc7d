package abi

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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
// generated from (their LINUX_VERSION_CODE is higher than the Source line's
// linux-libc-dev): the uapi only grows, so this is then a compatibility
// check. Everything generated must keep its value and layout, except in
// the uapi's own ways of growing: a struct may grow at its end, a reserved
// field may shrink where its bytes became new fields (every other field
// at its offset), and a #define may go (the kernel keeps its value). Those
// are logged. What the newer headers add is not generated and not compared
// here (make check-generate lists it). Enum sentinels such as
// RDMA_NLDEV_ATTR_MAX, which grow with every addition, are not generated.
func TestLayoutAgainstC(t *testing.T) {
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc not found: install gcc (apt-get install gcc) to compare the generated layouts with the C headers")
	}
	tables := make([][]layoutRow, len(layoutTable))
	for i, lt := range layoutTable {
		tables[i] = lt.rows()
	}
	dir := t.TempDir()
	exe := filepath.Join(dir, "layout")
	// Constants the headers no longer define: left out of the program,
	// then judged once its version line says whether the headers are newer.
	gone := map[string]bool{}
	for {
		cfile := filepath.Join(dir, "layout.c")
		if err := os.WriteFile(cfile, layoutProgram(tables, gone), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(cc, "-w", "-o", exe, cfile)
		cmd.Env = append(os.Environ(), "LC_ALL=C")
		out, err := cmd.CombinedOutput()
		if err == nil {
			break
		}
		more := undeclared(out, gone)
		if len(more) == 0 {
			t.Fatalf("compiling %s: %v\n%s", cfile, err, out)
		}
		for _, n := range more {
			gone[n] = true
		}
	}
	out, err := exec.Command(exe).Output()
	if err != nil {
		t.Fatalf("running layout program: %v", err)
	}

	pinned, installed := headerVersions()
	var newer bool
	var headers string
	var nTypes, nFields, nConsts int
	var grown []string
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
		case "V":
			code, ok := versionCode(pinned)
			newer = ok && num(1) > code
			headers = fmt.Sprintf("%d.%d.%d", num(1)>>16, num(1)>>8&0xff, num(1)&0xff)
			if !ok {
				t.Logf("no linux-libc-dev version in zconst.go's Source line (%q): layouts compared exactly", pinned)
			}
		case "T":
			lt := layoutTable[num(1)]
			switch {
			case uint64(lt.size) == num(2) && uint64(lt.align) == num(3):
			case newer && uint64(lt.size) < num(2) && uint64(lt.align) == num(3):
				grown = append(grown, fmt.Sprintf("%s grew from %d to %d bytes", lt.c, lt.size, num(2)))
			default:
				t.Errorf("%s (%s): C size/align %d/%d, Go %d/%d", lt.c, lt.goName, num(2), num(3), lt.size, lt.align)
			}
			nTypes++
		case "F":
			i, j := num(1), num(2)
			lt, r := layoutTable[i], tables[i][j]
			if uint64(r.off) != num(3) {
				t.Errorf("%s.%s (%s): C offset %d, Go %d", lt.c, r.c, lt.goName, num(3), r.off)
			}
			switch {
			case r.flex || uint64(r.size) == num(4):
			case newer && isReserved(r.c) && num(4) < uint64(r.size):
				grown = append(grown, fmt.Sprintf("%s.%s shrank from %d to %d bytes (the rest became fields)", lt.c, r.c, r.size, num(4)))
			default:
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
	for n := range gone {
		if !newer {
			t.Errorf("constant %s: not defined by the headers (linux-libc-dev %s, abi/ generated from %s)", n, installed, pinned)
			continue
		}
		grown = append(grown, n+" is no longer defined (the kernel keeps its value)")
	}
	if nTypes != len(layoutTable) || nConsts+len(gone) != len(constTable) {
		t.Fatalf("C program printed %d types and %d constants (%d left out), want %d and %d", nTypes, nConsts, len(gone), len(layoutTable), len(constTable))
	}
	t.Logf("compared %d structs, %d fields, %d constants", nTypes, nFields, nConsts)
	if newer {
		slices.Sort(grown)
		t.Logf("abi/ was generated from linux-libc-dev %s, the headers here are newer (Linux %s; linux-libc-dev %s): compatible; grown as the uapi grows: %d\n\t%s",
			pinned, headers, installed, len(grown), strings.Join(grown, "\n\t"))
	} else if pinned != installed {
		t.Logf("abi/ was generated from linux-libc-dev %s, the installed headers are %s: compatible (additions not compared; make check-generate lists them)", pinned, installed)
	}
}

// layoutProgram is the C program TestLayoutAgainstC runs: a line for the
// headers' LINUX_VERSION_CODE, one per type, field and constant (but
// those in gone).
func layoutProgram(tables [][]layoutRow, gone map[string]bool) []byte {
	var src bytes.Buffer
	src.WriteString("#include <stdio.h>\n#include <stddef.h>\n#include <linux/version.h>\n")
	for _, h := range layoutHeaders {
		fmt.Fprintf(&src, "#include <%s>\n", h)
	}
	src.WriteString("int main(void) {\n\tprintf(\"V %lu\\n\", (unsigned long)LINUX_VERSION_CODE);\n")
	for i, lt := range layoutTable {
		fmt.Fprintf(&src, "\tprintf(\"T %d %%zu %%zu\\n\", sizeof(%s), __alignof__(%s));\n", i, lt.c, lt.c)
		for j, r := range tables[i] {
			if r.flex {
				fmt.Fprintf(&src, "\tprintf(\"F %d %d %%zu 0\\n\", offsetof(%s, %s));\n", i, j, lt.c, r.c)
			} else {
				fmt.Fprintf(&src, "\tprintf(\"F %d %d %%zu %%zu\\n\", offsetof(%s, %s), sizeof(((%s *)0)->%s));\n", i, j, lt.c, r.c, lt.c, r.c)
			}
		}
	}
	for i, c := range constTable {
		if gone[c.name] {
			continue
		}
		fmt.Fprintf(&src, "\tif ((%s) < 0) printf(\"C %d 1 %%llu\\n\", (unsigned long long)-(long long)(%s)); else printf(\"C %d 0 %%llu\\n\", (unsigned long long)(%s));\n", c.name, i, c.name, i, c.name)
	}
	src.WriteString("\treturn 0;\n}\n")
	return src.Bytes()
}

// undeclared returns the constants of constTable that gcc's output says
// are undeclared and not yet in gone.
func undeclared(gccOut []byte, gone map[string]bool) []string {
	var out []string
	for _, c := range constTable {
		if !gone[c.name] && (bytes.Contains(gccOut, []byte("'"+c.name+"' undeclared")) ||
			bytes.Contains(gccOut, []byte("\u2018"+c.name+"\u2019 undeclared"))) {
			out = append(out, c.name)
		}
	}
	return out
}

// isReserved reports whether a C member designator ends in a reserved
// field (reserved, reserved1, ...; a member of a nested struct too).
func isReserved(c string) bool {
	if i := strings.LastIndexAny(c, ".>"); i >= 0 {
		c = c[i+1:]
	}
	return strings.HasPrefix(c, "reserved")
}

// versionCode returns LINUX_VERSION_CODE for a linux-libc-dev version
// ("6.1.187-1": KERNEL_VERSION(6, 1, 187), the sublevel capped at 255 as
// the headers cap it).
func versionCode(v string) (uint64, bool) {
	base, _, _ := strings.Cut(v, "-")
	base, _, _ = strings.Cut(base, "+")
	parts := strings.Split(base, ".")
	if len(parts) < 2 {
		return 0, false
	}
	var n [3]uint64
	for i := 0; i < 3 && i < len(parts); i++ {
		k, err := strconv.ParseUint(parts[i], 10, 64)
		if err != nil {
			return 0, false
		}
		n[i] = k
	}
	return n[0]<<16 | n[1]<<8 | min(n[2], 255), true
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

// TestVersionCode: linux-libc-dev versions as LINUX_VERSION_CODE, which
// decides whether TestLayoutAgainstC allows the uapi's growth.
func TestVersionCode(t *testing.T) {
	for _, c := range []struct {
		v    string
		code uint64
		ok   bool
	}{
		{"6.1.187-1", 6<<16 | 1<<8 | 187, true},
		{"6.1.300-1", 6<<16 | 1<<8 | 255, true}, // the headers cap the sublevel
		{"6.12.117-1", 6<<16 | 12<<8 | 117, true},
		{"6.12-1~bpo12+1", 6<<16 | 12<<8, true},
		{"6.12.9+bpo-amd64", 6<<16 | 12<<8 | 9, true},
		{"unknown", 0, false},
		{"", 0, false},
	} {
		code, ok := versionCode(c.v)
		if code != c.code || ok != c.ok {
			t.Errorf("versionCode(%q) = %d, %v; want %d, %v", c.v, code, ok, c.code, c.ok)
		}
	}
	for c, want := range map[string]bool{"reserved": true, "reserved1": true, "legacy_resp.reserved": true, "reserved_at_0": true, "flags": false, "resp.flags": false} {
		if isReserved(c) != want {
			t.Errorf("isReserved(%q) = %v", c, !want)
		}
	}
}
