package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func parse(t *testing.T, src string) *Parser {
	t.Helper()
	p := NewParser()
	if err := p.ParseFile("test.h", src); err != nil {
		t.Fatalf("parse: %v", err)
	}
	return p
}

func evalMacro(t *testing.T, p *Parser, name string) Value {
	t.Helper()
	m := p.macros[name]
	if m == nil {
		t.Fatalf("no macro %s", name)
	}
	body, err := p.expand(m.Body, map[string]bool{name: true})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	v, err := p.evalTokens(body, m.Pos)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return v
}

func TestExpressions(t *testing.T) {
	p := parse(t, `
#define MAGIC 0x1b
struct hdr { __u16 a, b, c, d; __aligned_u64 r; __u32 x, y; };
#define IOCTL _IOWR(MAGIC, 0x01, struct hdr)
#define SHIFT 12
#define FLAG (1UL << SHIFT)
#define CAST ((__u32)-1)
#define NOTU (~0U)
#define NOT (~0)
#define NEG (-5)
#define EXPR ((FLAG | 3) * 2 - 1)
#define TERN (FLAG > 4 ? 10 : 20)
#define SZ sizeof(struct hdr)
#define TWICE(x) ((x) * 2)
#define USE TWICE(FLAG)
#define HEX 0x80000000u
#define OCT 010
#define CH 'a'
#define DIV (100 / 7 % 5)
#define SIGNSHIFT (-16 >> 2)
#define LOGIC (1 && 0 || !0)
enum e { A, B = 10, C, D = B + C, E = 1 << 31, F = FLAG };
`)
	tests := map[string]string{
		"IOCTL": "3222805249", "FLAG": "4096", "CAST": "4294967295", "NOTU": "4294967295",
		"NOT": "-1", "NEG": "-5", "EXPR": "8197", "TERN": "10", "SZ": "24", "USE": "8192",
		"HEX": "2147483648", "OCT": "8", "CH": "97", "DIV": "4", "SIGNSHIFT": "-4", "LOGIC": "1",
	}
	for name, want := range tests {
		if got := evalMacro(t, p, name).String(); got != want {
			t.Errorf("%s = %s, want %s", name, got, want)
		}
	}
	if got := evalMacro(t, p, "IOCTL").V; got != 0xC0181B01 {
		t.Errorf("IOCTL = %#x", got)
	}
	enums := map[string]string{"A": "0", "B": "10", "C": "11", "D": "21", "E": "-2147483648", "F": "4096"}
	for name, want := range enums {
		if got := p.enums[name].String(); got != want {
			t.Errorf("enum %s = %s, want %s", name, got, want)
		}
	}
}

func TestLayout(t *testing.T) {
	p := parse(t, `
struct inner { __u8 a; __aligned_u64 b; };
struct outer {
	__u8 c;
	struct inner in;
	__u16 d;
	union {
		struct { __u8 e; __u8 f; } ef;
		__u16 g;
	} u;
	union {
		__aligned_u64 h;
		__s64 hs;
	};
	struct { __u32 i; __u32 j; };
	__u8 arr[3][2];
	__u32 flex[];
};
struct fa {
	__u32 n;
	union {
		__DECLARE_FLEX_ARRAY(__u8, bytes);
		__DECLARE_FLEX_ARRAY(struct inner, items);
	};
};
union top { __u8 raw[16]; struct { __be64 hi; __be64 lo; } g; };
struct p { __u8 a; __u32 b; } __attribute__((packed));
`)
	outer := p.aggs["struct outer"]
	if err := outer.layout(); err != nil {
		t.Fatal(err)
	}
	offs := map[string]int64{}
	for _, m := range outer.Members {
		offs[m.Name] = m.Offset
	}
	want := map[string]int64{"c": 0, "in": 8, "d": 24, "u": 26, "": 40, "arr": 48, "flex": 56}
	// the anonymous struct {i,j} is the second unnamed member; the map keeps the last one
	for k, v := range want {
		if offs[k] != v {
			t.Errorf("offset of %q = %d, want %d", k, offs[k], v)
		}
	}
	if outer.Size != 56 || outer.Align != 8 {
		t.Errorf("outer size/align = %d/%d, want 56/8", outer.Size, outer.Align)
	}
	fa := p.aggs["struct fa"]
	if err := fa.layout(); err != nil {
		t.Fatal(err)
	}
	if fa.Size != 8 || fa.Align != 8 {
		t.Errorf("fa size/align = %d/%d, want 8/8", fa.Size, fa.Align)
	}
	pk := p.aggs["struct p"]
	if err := pk.layout(); err != nil {
		t.Fatal(err)
	}
	if pk.Size != 5 || pk.Align != 1 {
		t.Errorf("packed size/align = %d/%d, want 5/1", pk.Size, pk.Align)
	}

	al, err := ParseAllowlist("al", "struct outer\nstruct fa\nunion top\nconst *\n")
	if err != nil {
		t.Fatal(err)
	}
	out, err := Generate(p, []string{"test.h"}, al, "// hdr\n")
	if err != nil {
		t.Fatal(err)
	}
	src := squash(string(out.Types))
	for _, s := range []string{
		"type Outer struct {",
		"\t_  [7]byte\n\tIn Inner",
		"U   OuterU",
		"H   uint64 // anonymous union; other members via methods",
		"func (x *Outer) Hs() int64 {\n\tvar s [8]byte\n\tbinary.LittleEndian.PutUint64(s[:], x.H)\n\treturn int64(binary.LittleEndian.Uint64(s[:]))\n}",
		"func (x *Outer) SetHs(v int64) {\n\tvar s [8]byte\n\tbinary.LittleEndian.PutUint64(s[:], uint64(v))\n\tx.H = binary.LittleEndian.Uint64(s[:])\n}",
		"type OuterU struct {\n\t_ [0]uint16\n\traw [2]byte // union storage; use the accessor methods\n}",
		"func (x *OuterU) G() uint16 { return binary.LittleEndian.Uint16(x.raw[:]) }",
		"func (x *OuterU) SetG(v uint16) {\n\tbinary.LittleEndian.PutUint16(x.raw[:], v)\n}",
		"func (x *OuterUEf) encodeTo(b []byte) {\n\t_ = b[1] // one bounds check\n\tb[0] = x.E\n\tb[1] = x.F\n}",
		"func (x *Top) Raw() (v [16]uint8) {\n\tcopy(v[:], x.raw[:16])\n\treturn v\n}",
		"func (x *Top) SetG(v TopG) {\n\tv.encodeTo(x.raw[:16])\n}",
		"func (x *TopG) decodeFrom(b []byte) {\n\t_ = b[15] // one bounds check\n\tx.Hi = binary.LittleEndian.Uint64(b[:])\n\tx.Lo = binary.LittleEndian.Uint64(b[8:])\n}",
		"\tI   uint32\n\tJ   uint32",
		"Arr [3][2]uint8",
		"OuterFlexOffset = 56",
		"FaBytesOffset   = 8",
		"FaItemsOffset   = 8",
		"type Fa struct {\n\t_ [0]uint64 // C alignment\n\tN uint32\n\t_ [4]byte\n}",
		"func (x *OuterU) Ef() (v OuterUEf) {\n\tv.decodeFrom(x.raw[:2])\n\treturn v\n}",
		"func (x *Top) G() (v TopG)",
		"SizeofOuter = 56",
	} {
		if !strings.Contains(src, squash(s)) {
			t.Errorf("generated types lack %q", s)
		}
	}
	if strings.Contains(src, "unsafe") {
		t.Error("generated types use unsafe")
	}
	if t.Failed() {
		t.Log(src)
	}
	// Packed structs with misaligned members are refused, not miscompiled.
	al2, _ := ParseAllowlist("al", "struct p\n")
	if _, err := Generate(p, []string{"test.h"}, al2, ""); err == nil || !strings.Contains(err.Error(), "packed") {
		t.Errorf("packed struct: err = %v, want a packed error", err)
	}
}

// squash collapses runs of blanks so that gofmt's column alignment does
// not matter.
func squash(s string) string {
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == '\t' }), " ")
}

func TestMalformed(t *testing.T) {
	bad := map[string]string{
		"unterminated struct":  "struct a { __u32 x;",
		"unterminated comment": "/* foo",
		"unterminated if":      "#ifdef X\nstruct a { __u32 x; };",
		"stray endif":          "#endif",
		"bad number":           "enum { A = 0x };",
		"division by zero":     "enum { A = 1 / 0 };",
		"bit-field":            "struct a { __u32 x : 3; };",
		"unknown type":         "struct a { foo_t x; };",
		"duplicate member":     "struct a { __u32 x; __u32 x; };",
		"redefinition":         "struct a { __u32 x; };\nstruct a { __u32 y; };",
		"undefined in enum":    "enum { A = NOPE };",
		"missing bracket":      "struct a { __u32 x[4; };",
		"unknown directive":    "#frobnicate\n",
		"shift too far":        "enum { A = 1 << 40 };",
		"flex not last":        "struct a { __u32 x[]; __u32 y; };\nenum { B = sizeof(struct a) };",
		"macro arity":          "#define F(a,b) a\nenum { A = F(1) };",
		"error directive":      "#error nope\n",
		"incomplete sizeof":    "struct a;\nenum { A = sizeof(struct a) };",
		"unterminated args":    "#define F(a) a\nenum { A = F(1 };",
		"bad unary":            "enum { A = * };",
		"void member":          "struct a { void x; };",
	}
	for name, src := range bad {
		p := NewParser()
		err := p.ParseFile("bad.h", src)
		if err == nil {
			t.Errorf("%s: no error", name)
			continue
		}
		if !strings.HasPrefix(err.Error(), "bad.h:") || strings.Contains(err.Error(), "internal error") {
			t.Errorf("%s: error %q lacks a position or is an internal error", name, err)
		}
	}
}

// TestTruncations feeds every prefix of a header to the parser: it must
// return (or not) an error, never panic.
func TestTruncations(t *testing.T) {
	src := `#ifndef X_H
#define X_H
#define A (1UL << 3)
#define F(x) ((x) + 1)
enum e { E0, E1 = F(A), E2 };
struct s {
	__u16 a;
	union { struct { __u8 b; __u8 c; } bc; __u16 d; } u;
	union { __aligned_u64 x; __s64 y; };
	__u32 arr[E2];
	__aligned_u64 flex[];
} __attribute__((packed));
#endif
`
	if data, err := os.ReadFile(filepath.Join("/usr/include", Headers[1])); err == nil {
		src += string(data)
	}
	for i := 0; i <= len(src); i++ {
		p := NewParser()
		if err := p.ParseFile("t.h", src[:i]); err != nil && strings.Contains(err.Error(), "internal error") {
			t.Fatalf("prefix %d: %v", i, err)
		}
	}
}

func TestCamelCase(t *testing.T) {
	for in, want := range map[string]string{
		"ib_uverbs_ioctl_hdr":           "IbUverbsIoctlHdr",
		"mlx5_ib_alloc_ucontext_req_v2": "Mlx5IbAllocUcontextReqV2",
		"reserved1":                     "Reserved1",
		"_sockaddr_in":                  "SockaddrIn",
		"object_id":                     "ObjectId",
	} {
		if got := CamelCase(in); got != want {
			t.Errorf("CamelCase(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRealHeaders runs the whole generator on the installed headers.
func TestRealHeaders(t *testing.T) {
	if _, err := os.Stat(filepath.Join("/usr/include", Headers[0])); err != nil {
		t.Skip("uapi headers not installed (apt-get install linux-libc-dev)")
	}
	dir := t.TempDir()
	if err := run("/usr/include", dir, "", "test", false); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "zconst.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"RDMA_VERBS_IOCTL = 0xc0181b01", "UVERBS_ATTR_UHW_IN", "RDMA_NLDEV_CMD_NEWLINK", "IB_USER_VERBS_CMD_FLAG_EXTENDED = 0x80000000"} {
		if !strings.Contains(string(b), s) {
			t.Errorf("zconst.go lacks %q", s)
		}
	}
	if !strings.HasPrefix(string(b), "// Code generated by cmd/abigen; DO NOT EDIT.\n// Source: /usr/include/rdma (linux-libc-dev test)\n") {
		t.Errorf("bad header: %.200s", b)
	}
}

// unionHeader exercises every shape of union member the accessors support:
// scalars of each width and signedness, byte arrays, arrays of arrays,
// arrays of padded structs, anonymous structs flattened into a union,
// unions nested inside union members, an anonymous union whose first member
// does not fill it (byte storage), one whose first member does (typed
// storage), and an anonymous union inside a named inline struct.
const unionHeader = `
struct inner { __u8 a; __aligned_u64 b; };
union mix {
	struct inner in[2];
	__s16 s[3][2];
	__s8 c;
	__u8 raw[32];
	__s64 q;
	struct { __u32 lo; __be32 hi; };
	struct { __u8 tag; union { __u16 h; __u8 hb[2]; } sub; } nest;
};
struct host {
	__u16 tag;
	union { __u8 b; __u32 w; __s16 hw[2]; };
	union mix m;
	union { struct inner first; __u64 q2; __be32 be; __u8 bytes[3]; };
	struct { __u8 pad; union { __u32 x; __u16 y; }; } anon;
	union { __u64 big[2]; struct inner two; } arr2[2];
};
`

// TestUnionAccessorsCompile generates package abi from unionHeader into a
// temporary module with the hand-written abi/layout_test.go, builds and vets
// it, checks that the non-test code does not import unsafe, and runs its
// tests: the accessor probes (TestUnionAccessors) and, when gcc is
// installed, the comparison with the C layout of unionHeader.
func TestUnionAccessorsCompile(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go command not found")
	}
	p := parse(t, unionHeader)
	al, err := ParseAllowlist("al", "struct host\nunion mix\n")
	if err != nil {
		t.Fatal(err)
	}
	out, err := Generate(p, []string{"test.h"}, al, "// test\n")
	if err != nil {
		t.Fatal(err)
	}
	layoutTest, err := os.ReadFile(filepath.Join("..", "..", "abi", "layout_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, data := range map[string][]byte{
		"go.mod":          []byte("module example.com/abi\n\ngo 1.26\n"),
		"ztypes.go":       out.Types,
		"zlayout_test.go": out.Layout,
		"layout_test.go":  layoutTest,
		"test.h":          []byte(unionHeader),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	goCmd := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(gobin, args...)
		cmd.Dir = dir
		// CPATH lets TestLayoutAgainstC (when gcc is installed) find test.h.
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off", "CGO_ENABLED=0", "CPATH="+dir)
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s\n%s", strings.Join(args, " "), err, b, out.Types)
		}
		return string(b)
	}
	goCmd("vet", ".")
	if imps := goCmd("list", "-f", "{{.Imports}}", "."); strings.Contains(imps, "unsafe") {
		t.Errorf("generated package imports %s", imps)
	}
	res := goCmd("test", "-count=1", "-v", ".")
	if !strings.Contains(res, "--- PASS: TestUnionAccessors") {
		t.Errorf("probes did not pass:\n%s", res)
	}
	t.Log(strings.TrimSpace(res))
}

// TestSentinels: an enum's last enumerator without an explicit value that
// matches a "sentinel" pattern counts the ones before it and is left out;
// an explicit *_MAX value, a *_MAX that is not last, and a #define are
// ordinary constants.
func TestSentinels(t *testing.T) {
	p := parse(t, `
enum attr { ATTR_UNSPEC, ATTR_A, ATTR_B, ATTR_MAX };
enum { CMD_GET = 1, CMD_SET, CMD_NUM_OPS, };
enum fixed { FIXED_A, FIXED_MAX = 7 };
enum notlast { NL_MAX, NL_OTHER };
#define NAME_MAX_LEN 64
#define DEV_NAME_MAX 64
`)
	al, err := ParseAllowlist("al", "const *\nsentinel *_MAX\nsentinel *_NUM_OPS\n")
	if err != nil {
		t.Fatal(err)
	}
	out, err := Generate(p, []string{"test.h"}, al, "// test\n")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"ATTR_MAX", "CMD_NUM_OPS"} {
		if strings.Contains(string(out.Const), name) || strings.Contains(string(out.Layout), name) {
			t.Errorf("sentinel %s was emitted:\n%s", name, out.Const)
		}
	}
	for _, s := range []string{"ATTR_B = 2", "CMD_SET = 2", "FIXED_MAX = 7", "NL_MAX = 0", "NL_OTHER = 1", "DEV_NAME_MAX = 64", "NAME_MAX_LEN = 64"} {
		if !strings.Contains(squash(string(out.Const)), squash(s)) {
			t.Errorf("zconst.go lacks %q:\n%s", s, out.Const)
		}
	}
	if n := len(out.Skipped); n != 2 {
		t.Errorf("Skipped = %q, want the two sentinels", out.Skipped)
	}
}

// compatV1 is the header abi/ was "generated from" in TestCheckCompat; the
// other versions are what a user's machine may have instead.
const compatV1 = `
#define VERSION 6
enum attr { ATTR_UNSPEC, ATTR_A, ATTR_B, ATTR_MAX };
struct req { __u32 handle; __u32 flags; __aligned_u64 addr; };
union data { __u64 q; __u8 b[8]; };
struct use { union data d; };
struct port { __u32 caps; __u16 flags2; __u8 reserved[6]; };
`

func TestCheckCompat(t *testing.T) {
	al, err := ParseAllowlist("al", "const *\nsentinel *_MAX\nstruct *\nunion *\n")
	if err != nil {
		t.Fatal(err)
	}
	gen := func(src string) map[string][]byte {
		t.Helper()
		out, err := Generate(parse(t, src), []string{"test.h"}, al, "// Code generated by cmd/abigen; DO NOT EDIT.\n// Source: test\n")
		if err != nil {
			t.Fatal(err)
		}
		return out.files()
	}
	dir := t.TempDir()
	for name, data := range gen(compatV1) {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name, src        string
		ok               bool
		added, bad       []string // substrings of Added, of Changed+Removed
		extended         []string // substrings of Extended
		unchangedAtLeast int
	}{
		{name: "same", src: compatV1, ok: true, unchangedAtLeast: 10},
		{name: "grown", ok: true, unchangedAtLeast: 10,
			// New enumerators before the sentinel (its value changes: not
			// ABI), a new define, a new struct.
			src: `
#define VERSION 6
#define NEW_FLAG 0x10
enum attr { ATTR_UNSPEC, ATTR_A, ATTR_B, ATTR_C, ATTR_D, ATTR_MAX };
struct req { __u32 handle; __u32 flags; __aligned_u64 addr; };
union data { __u64 q; __u8 b[8]; };
struct use { union data d; };
struct port { __u32 caps; __u16 flags2; __u8 reserved[6]; };
struct newer { __u64 x; };
`,
			added: []string{"ATTR_C = 3", "ATTR_D = 4", "NEW_FLAG = 0x10", "type Newer", "SizeofNewer = 8"}},
		{name: "changed", ok: false,
			src: `
#define VERSION 7
enum attr { ATTR_UNSPEC, ATTR_NEW, ATTR_A, ATTR_B, ATTR_MAX };
struct req { __u32 handle; __u64 flags; __aligned_u64 addr; };
union data { __u64 q; __u8 b[8]; };
struct use { union data d; };
struct port { __u32 caps; __u16 flags2; __u8 reserved[6]; };
`,
			bad:   []string{"VERSION = 6, the headers give 7", "ATTR_A = 1, the headers give 2", "type Req differs", "+ Flags uint64", "SizeofReq = 16, the headers give 24"},
			added: []string{"ATTR_NEW = 1"}},
		{name: "extended", ok: true, unchangedAtLeast: 8,
			// As the uapi grows a struct: reserved bytes become fields,
			// a response gains a field at its end, a #define goes (its
			// users spelled out) and another is spelled another way.
			src: `
#define VERSION 0x6
enum attr { ATTR_UNSPEC, ATTR_A, ATTR_B, ATTR_MAX };
struct req { __u32 handle; __u32 flags; __aligned_u64 addr; __u32 more; __u32 reserved; };
union data { __u64 q; __u8 b[8]; };
struct use { union data d; };
struct port { __u32 caps; __u16 flags2; __u8 reserved[2]; __u32 speed; };
`,
			extended: []string{"type Req: grew at its end by More uint32, Reserved uint32", "SizeofReq = 16, the headers give 24",
				"type Port: Reserved [6]uint8 became Reserved [2]uint8, Speed uint32"}},
		{name: "reserved-misused", ok: false,
			// Reserved bytes that became a field larger than they were, or
			// a field of a non-integer type: not the uapi's way.
			src: strings.Replace(compatV1, "__u8 reserved[6]; };", "__u8 reserved[2]; __aligned_u64 speed; };", 1),
			bad: []string{"type Port differs"}},
		{name: "define-dropped", ok: true,
			src:      strings.Replace(compatV1, "#define VERSION 6\n", "", 1),
			extended: []string{"VERSION = 6: no longer defined"}},
		{name: "removed", ok: false,
			src: `
#define VERSION 6
enum attr { ATTR_UNSPEC, ATTR_A, ATTR_B, ATTR_MAX };
struct req { __u32 handle; __u32 flags; __aligned_u64 addr; };
`,
			bad: []string{"type Data", "type Use", "func (*Data) SetQ", "SizeofUse = 8"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := CheckCompat(dir, gen(tt.src))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("report:\n%s", r)
			if r.OK() != tt.ok {
				t.Errorf("OK() = %v, want %v", r.OK(), tt.ok)
			}
			if r.Unchanged < tt.unchangedAtLeast {
				t.Errorf("%d unchanged, want at least %d", r.Unchanged, tt.unchangedAtLeast)
			}
			for _, a := range tt.added {
				if !slices.ContainsFunc(r.Added, func(s string) bool { return strings.Contains(s, a) }) {
					t.Errorf("additions %q lack %q", r.Added, a)
				}
			}
			if !tt.ok && len(tt.added) == 0 && len(r.Added) != 0 {
				t.Errorf("unexpected additions %q", r.Added)
			}
			for _, e := range tt.extended {
				if !slices.ContainsFunc(r.Extended, func(s string) bool { return strings.Contains(s, e) }) {
					t.Errorf("compatible changes %q lack %q", r.Extended, e)
				}
			}
			bad := append(slices.Clone(r.Changed), r.Removed...)
			for _, b := range tt.bad {
				if !slices.ContainsFunc(bad, func(s string) bool { return strings.Contains(s, b) }) {
					t.Errorf("incompatibilities %q lack %q", bad, b)
				}
			}
			for _, s := range r.Added {
				if strings.Contains(s, "ATTR_MAX") {
					t.Errorf("sentinel reported as an addition: %s", s)
				}
			}
		})
	}
}

// TestCommittedCompatible: the committed abi/ is compatible with the
// installed headers, whichever linux-libc-dev they come from (the pinned
// one or a newer one); additions are logged. scripts/check-generate.sh
// adds the byte-exact comparison where the pinned version is installed.
func TestCommittedCompatible(t *testing.T) {
	if _, err := os.Stat(filepath.Join("/usr/include", Headers[0])); err != nil {
		t.Skip("uapi headers not installed (apt-get install linux-libc-dev)")
	}
	out, err := generate("/usr/include", "", libcDevVersion(), false)
	if err != nil {
		t.Fatal(err)
	}
	r, err := CheckCompat(filepath.Join("..", "..", "abi"), out.files())
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK() {
		t.Fatalf("abi/ is not compatible with /usr/include (linux-libc-dev %s):\n%s", libcDevVersion(), r)
	}
	t.Logf("linux-libc-dev %s: %s", libcDevVersion(), r)
}
