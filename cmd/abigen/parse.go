package main

import (
	"math"
	"strconv"
	"strings"
)

// Const is an integer constant: an enumerator or an object-like #define.
type Const struct {
	Name  string
	Pos   Pos
	Enum  string // "enum tag", "enum" for an untagged enum, "" for a #define
	Value Value
	Hex   bool // print in hex
	// Sentinel candidate: the last enumerator of its enum, without an
	// explicit value (RDMA_NLDEV_ATTR_MAX, RDMA_NLDEV_NUM_OPS). Such a value
	// counts the enumerators before it and grows with every addition; the
	// allowlist's "sentinel" patterns decide which of them are left out.
	LastImplicit bool
}

// Parser holds everything parsed from a set of headers.
type Parser struct {
	macros     map[string]*Macro
	macroOrder []*Macro
	enums      map[string]Value
	enumConsts []*Const
	aggs       map[string]*Aggregate
	aggOrder   []*Aggregate
	file       string
}

// NewParser returns an empty parser.
func NewParser() *Parser {
	return &Parser{
		macros: map[string]*Macro{},
		enums:  map[string]Value{},
		aggs:   map[string]*Aggregate{},
	}
}

// ParseFile parses one header. name is used in positions and for grouping.
func (p *Parser) ParseFile(name, src string) (err error) {
	defer func() {
		// The parser is written to return errors, but never let a bug in it
		// turn malformed input into a crash.
		if r := recover(); r != nil {
			err = errorf(Pos{name, 0}, "internal error: %v", r)
		}
	}()
	p.file = name
	toks, err := lex(name, src)
	if err != nil {
		return err
	}
	toks, err = p.preprocess(name, toks)
	if err != nil {
		return err
	}
	c := &cursor{p: p, toks: toks, end: Pos{name, strings.Count(src, "\n") + 1}}
	return c.parseTop()
}

type cursor struct {
	p    *Parser
	toks []Token
	i    int
	end  Pos
}

func (c *cursor) eof() bool { return c.i >= len(c.toks) }

func (c *cursor) peek() Token {
	if c.eof() {
		return Token{Kind: TPunct, Text: "<EOF>", Pos: c.end}
	}
	return c.toks[c.i]
}

func (c *cursor) next() Token {
	t := c.peek()
	if !c.eof() {
		c.i++
	}
	return t
}

func (c *cursor) accept(text string) bool {
	if !c.eof() && c.peek().Text == text && c.peek().Kind != TString {
		c.i++
		return true
	}
	return false
}

func (c *cursor) expect(text string) error {
	t := c.peek()
	if !c.accept(text) {
		return errorf(t.Pos, "expected %q, found %q", text, t.Text)
	}
	return nil
}

func (c *cursor) ident() (Token, error) {
	t := c.peek()
	if t.Kind != TIdent || c.eof() {
		return t, errorf(t.Pos, "expected identifier, found %q", t.Text)
	}
	c.i++
	return t, nil
}

// skipStatement skips to the end of an unrecognised top-level construct.
func (c *cursor) skipStatement() error {
	start := c.peek().Pos
	depth := 0
	for !c.eof() {
		t := c.next()
		switch t.Text {
		case "(", "{", "[":
			depth++
		case ")", "]":
			depth--
		case "}":
			depth--
			if depth == 0 {
				c.accept(";")
				return nil
			}
		case ";":
			if depth == 0 {
				return nil
			}
		}
		if depth < 0 {
			return errorf(t.Pos, "unbalanced %q", t.Text)
		}
	}
	if depth != 0 {
		return errorf(start, "unterminated declaration")
	}
	return nil
}

func (c *cursor) parseTop() error {
	for !c.eof() {
		t := c.peek()
		switch t.Text {
		case ";":
			c.next()
		case "struct", "union", "enum":
			if _, err := c.parseTypeSpec(); err != nil {
				return err
			}
			if !c.accept(";") {
				// A declaration of objects of this type; not interesting.
				if err := c.skipStatement(); err != nil {
					return err
				}
			}
		default:
			if err := c.skipStatement(); err != nil {
				return err
			}
		}
	}
	return nil
}

// parseAttributes consumes __attribute__((...)) lists.
func (c *cursor) parseAttributes() (packed bool, align int64, err error) {
	for c.peek().Text == "__attribute__" || c.peek().Text == "__attribute" {
		at := c.next()
		if c.peek().Text != "(" {
			return false, 0, errorf(at.Pos, "expected ( after __attribute__")
		}
		args, next, err := splitArgs(c.toks, c.i)
		if err != nil {
			return false, 0, err
		}
		c.i = next
		for _, a := range args {
			// a is "( list )"
			inner := a
			if len(inner) >= 2 && inner[0].Text == "(" && inner[len(inner)-1].Text == ")" {
				inner = inner[1 : len(inner)-1]
			}
			for k := 0; k < len(inner); k++ {
				switch strings.Trim(inner[k].Text, "_") {
				case "packed":
					packed = true
				case "aligned":
					if k+1 < len(inner) && inner[k+1].Text == "(" {
						sub, nx, err := splitArgs(inner, k+1)
						if err != nil {
							return false, 0, err
						}
						if len(sub) != 1 {
							return false, 0, errorf(at.Pos, "bad aligned attribute")
						}
						v, err := c.p.evalTokens(sub[0], at.Pos)
						if err != nil {
							return false, 0, err
						}
						align = int64(v.V)
						k = nx - 1
					} else {
						align = 16
					}
				}
			}
		}
	}
	return packed, align, nil
}

var typeWords = map[string]bool{"unsigned": true, "signed": true, "char": true, "short": true, "int": true, "long": true, "_Bool": true}
var qualifiers = map[string]bool{"const": true, "volatile": true, "__extension__": true, "__const": true, "__volatile__": true}

// startsType reports whether the next token begins a type name.
func (c *cursor) startsType() bool {
	t := c.peek()
	if t.Kind != TIdent {
		return false
	}
	if typeWords[t.Text] || qualifiers[t.Text] || t.Text == "struct" || t.Text == "union" || t.Text == "enum" {
		return true
	}
	_, ok := scalars[t.Text]
	return ok
}

func (c *cursor) parseTypeSpec() (*CType, error) {
	for qualifiers[c.peek().Text] {
		c.next()
	}
	t := c.peek()
	switch {
	case t.Text == "struct" || t.Text == "union":
		return c.parseAggSpec()
	case t.Text == "enum":
		return c.parseEnum()
	case typeWords[t.Text]:
		var words []string
		for typeWords[c.peek().Text] || qualifiers[c.peek().Text] {
			w := c.next().Text
			if !qualifiers[w] {
				words = append(words, w)
			}
		}
		name, err := canonicalBuiltin(words)
		if err != nil {
			return nil, errorf(t.Pos, "%v", err)
		}
		return scalarType(name), nil
	case t.Text == "void":
		// Only as a pointer's target (parseDeclarator refuses the rest):
		// linux/socket.h aligns __kernel_sockaddr_storage with a void *.
		c.next()
		return &CType{Kind: KScalar, Name: "void"}, nil
	case t.Kind == TIdent:
		if _, ok := scalars[t.Text]; ok {
			c.next()
			return scalarType(t.Text), nil
		}
		return nil, errorf(t.Pos, "unknown type name %q", t.Text)
	}
	return nil, errorf(t.Pos, "expected a type, found %q", t.Text)
}

func canonicalBuiltin(words []string) (string, error) {
	uns, sgn, longs := false, false, 0
	base := ""
	for _, w := range words {
		switch w {
		case "unsigned":
			uns = true
		case "signed":
			sgn = true
		case "long":
			longs++
		case "char", "short", "int", "_Bool":
			if base != "" && !(base == "int" || w == "int") {
				return "", errorf(Pos{}, "bad type %q", strings.Join(words, " "))
			}
			if base == "" || base == "int" {
				base = w
			}
		}
	}
	if uns && sgn {
		return "", errorf(Pos{}, "bad type %q", strings.Join(words, " "))
	}
	if base == "_Bool" {
		return "_Bool", nil
	}
	if longs > 0 {
		if base != "" && base != "int" {
			return "", errorf(Pos{}, "bad type %q", strings.Join(words, " "))
		}
		base = "long"
		if longs > 1 {
			base = "long long"
		}
	}
	if base == "" {
		base = "int"
	}
	switch {
	case uns:
		return "unsigned " + base, nil
	case sgn && base == "char":
		return "signed char", nil
	}
	return base, nil
}

func (c *cursor) parseAggSpec() (*CType, error) {
	kw := c.next()
	union := kw.Text == "union"
	packed1, align1, err := c.parseAttributes()
	if err != nil {
		return nil, err
	}
	tag := ""
	if c.peek().Kind == TIdent && c.peek().Text != "__attribute__" {
		tag = c.next().Text
	}
	key := kw.Text + " " + tag
	if c.peek().Text != "{" {
		if tag == "" {
			return nil, errorf(kw.Pos, "%s without tag or body", kw.Text)
		}
		if a, ok := c.p.aggs[key]; ok {
			return &CType{Kind: KAgg, Agg: a}, nil
		}
		if e, ok := externals[key]; ok {
			return &CType{Kind: KExternal, Name: key, External: e, Size: e.Size, Align: e.Align}, nil
		}
		a := &Aggregate{Tag: tag, Union: union, Pos: kw.Pos, File: c.p.file}
		c.p.aggs[key] = a
		return &CType{Kind: KAgg, Agg: a}, nil
	}
	var a *Aggregate
	if tag != "" {
		if old, ok := c.p.aggs[key]; ok {
			if old.Complete {
				return nil, errorf(kw.Pos, "redefinition of %s (first at %s)", key, old.Pos)
			}
			a = old
			a.Pos, a.File = kw.Pos, c.p.file
		} else {
			a = &Aggregate{Tag: tag, Union: union, Pos: kw.Pos, File: c.p.file}
			c.p.aggs[key] = a
		}
	} else {
		a = &Aggregate{Union: union, Pos: kw.Pos, File: c.p.file}
	}
	c.next() // {
	if err := c.parseMembers(a); err != nil {
		return nil, err
	}
	packed2, align2, err := c.parseAttributes()
	if err != nil {
		return nil, err
	}
	a.Packed = packed1 || packed2
	a.AlignAt = max(align1, align2)
	a.Complete = true
	if tag != "" {
		c.p.aggOrder = append(c.p.aggOrder, a)
	}
	return &CType{Kind: KAgg, Agg: a}, nil
}

func (c *cursor) parseMembers(a *Aggregate) error {
	names := map[string]bool{}
	add := func(m *Member) error {
		if m.Name != "" {
			if names[m.Name] {
				return errorf(m.Pos, "duplicate member %s", m.Name)
			}
			names[m.Name] = true
		}
		a.Members = append(a.Members, m)
		return nil
	}
	for {
		t := c.peek()
		if c.eof() {
			return errorf(a.Pos, "unterminated %s body", map[bool]string{true: "union", false: "struct"}[a.Union])
		}
		if c.accept("}") {
			return nil
		}
		if c.accept(";") {
			continue
		}
		if _, _, err := c.parseAttributes(); err != nil {
			return err
		}
		if t.Text == "__DECLARE_FLEX_ARRAY" {
			c.next()
			if err := c.expect("("); err != nil {
				return err
			}
			elem, err := c.parseTypeSpec()
			if err != nil {
				return err
			}
			if err := c.expect(","); err != nil {
				return err
			}
			name, err := c.ident()
			if err != nil {
				return err
			}
			if err := c.expect(")"); err != nil {
				return err
			}
			if err := c.expect(";"); err != nil {
				return err
			}
			if err := add(&Member{Name: name.Text, Pos: t.Pos, Type: &CType{Kind: KArray, Elem: elem, Len: -1}}); err != nil {
				return err
			}
			continue
		}
		typ, err := c.parseTypeSpec()
		if err != nil {
			return err
		}
		if _, _, err := c.parseAttributes(); err != nil {
			return err
		}
		if c.accept(";") {
			if typ.Kind == KAgg && typ.Agg.Tag == "" {
				if err := add(&Member{Type: typ, Pos: t.Pos}); err != nil {
					return err
				}
				for _, m := range typ.Agg.Members {
					if m.Name != "" && names[m.Name] {
						return errorf(m.Pos, "duplicate member %s", m.Name)
					}
					names[m.Name] = true
				}
				continue
			}
			return errorf(t.Pos, "declaration does not declare anything")
		}
		for {
			m, err := c.parseDeclarator(typ)
			if err != nil {
				return err
			}
			if err := add(m); err != nil {
				return err
			}
			if c.accept(",") {
				continue
			}
			if c.peek().Text == ":" {
				return errorf(c.peek().Pos, "bit-field %s is not supported", m.Name)
			}
			if err := c.expect(";"); err != nil {
				return err
			}
			break
		}
	}
}

func (c *cursor) parseDeclarator(base *CType) (*Member, error) {
	typ := base
	for c.accept("*") {
		for qualifiers[c.peek().Text] {
			c.next()
		}
		typ = &CType{Kind: KPointer, Name: "pointer", Size: 8, Align: 8}
	}
	name, err := c.ident()
	if err != nil {
		return nil, err
	}
	if typ.Kind == KScalar && typ.Name == "void" {
		return nil, errorf(c.peek().Pos, "member %s of type void", name)
	}
	var dims []int64
	for c.accept("[") {
		if c.accept("]") {
			if len(dims) > 0 {
				return nil, errorf(name.Pos, "only the first array dimension may be empty")
			}
			dims = append(dims, -1)
			continue
		}
		v, err := c.parseExpr(0)
		if err != nil {
			return nil, err
		}
		if v.Neg() || v.V > math.MaxInt32 {
			return nil, errorf(name.Pos, "bad array size %s", v)
		}
		dims = append(dims, int64(v.V))
		if err := c.expect("]"); err != nil {
			return nil, err
		}
	}
	for k := len(dims) - 1; k >= 0; k-- {
		typ = &CType{Kind: KArray, Elem: typ, Len: dims[k]}
	}
	_, align, err := c.parseAttributes()
	if err != nil {
		return nil, err
	}
	if align > 0 {
		if err := typ.complete(); err != nil {
			return nil, err
		}
		cp := *typ
		cp.Align = max(cp.Align, align)
		typ = &cp
	}
	return &Member{Name: name.Text, Type: typ, Pos: name.Pos}, nil
}

func (c *cursor) parseEnum() (*CType, error) {
	kw := c.next()
	if _, _, err := c.parseAttributes(); err != nil {
		return nil, err
	}
	tag := ""
	if c.peek().Kind == TIdent {
		tag = c.next().Text
	}
	typ := &CType{Kind: KEnum, Name: "enum " + tag, Size: 4, Align: 4}
	if !c.accept("{") {
		if tag == "" {
			return nil, errorf(kw.Pos, "enum without tag or body")
		}
		return typ, nil
	}
	enumName := "enum"
	if tag != "" {
		enumName = "enum " + tag
	}
	next := Value{V: 0, Bits: 32}
	nextHex := false
	var last *Const
	lastImplicit := false
	for !c.accept("}") {
		if c.eof() {
			return nil, errorf(kw.Pos, "unterminated enum")
		}
		name, err := c.ident()
		if err != nil {
			return nil, err
		}
		v := next
		hex := nextHex // implicit values print like the one they follow
		implicit := true
		if c.accept("=") {
			implicit = false
			start := c.i
			v, err = c.parseExpr(0)
			if err != nil {
				return nil, err
			}
			hex = isHexish(c.toks[start:c.i])
		}
		v = enumValue(v)
		if _, dup := c.p.enums[name.Text]; dup {
			return nil, errorf(name.Pos, "redefinition of enumerator %s", name.Text)
		}
		c.p.enums[name.Text] = v
		k := &Const{Name: name.Text, Pos: name.Pos, Enum: enumName, Value: v, Hex: hex}
		c.p.enumConsts = append(c.p.enumConsts, k)
		last = k
		lastImplicit = implicit
		nextHex = hex
		next, err = binop("+", v, Value{V: 1, Bits: 32}, name.Pos)
		if err != nil {
			return nil, err
		}
		if !c.accept(",") {
			if err := c.expect("}"); err != nil {
				return nil, err
			}
			break
		}
	}
	if last != nil {
		last.LastImplicit = lastImplicit
	}
	if _, _, err := c.parseAttributes(); err != nil {
		return nil, err
	}
	return typ, nil
}

// enumValue gives an enumerator the type int when its value fits, as C does.
func enumValue(v Value) Value {
	if v.Neg() {
		if int64(v.V) >= math.MinInt32 {
			return mkValue(v.V, 32, false)
		}
		return v
	}
	if v.V <= math.MaxInt32 {
		return mkValue(v.V, 32, false)
	}
	return v
}

func isHexish(ts []Token) bool {
	for _, t := range ts {
		if t.Text == "<<" || t.Text == "|" || t.Text == "~" || (t.Kind == TIdent && strings.HasPrefix(t.Text, "_IO")) ||
			(t.Kind == TNumber && (strings.HasPrefix(t.Text, "0x") || strings.HasPrefix(t.Text, "0X"))) {
			return true
		}
	}
	return false
}

// Value is a C integer constant with its type (32/64 bits, signedness).
// V is stored sign-extended for signed types.
type Value struct {
	V        uint64
	Bits     uint8
	Unsigned bool
}

func mkValue(v uint64, bits uint8, uns bool) Value {
	if bits < 64 {
		v &= 1<<bits - 1
		if !uns && v&(1<<(bits-1)) != 0 {
			v |= ^uint64(0) << bits
		}
	}
	return Value{V: v, Bits: bits, Unsigned: uns}
}

// Neg reports whether the value is negative.
func (v Value) Neg() bool { return !v.Unsigned && int64(v.V) < 0 }

func (v Value) String() string {
	if v.Neg() {
		return strconv.FormatInt(int64(v.V), 10)
	}
	return strconv.FormatUint(v.V, 10)
}

func parseNumber(t Token) (Value, error) {
	s := t.Text
	suf := ""
	for len(s) > 0 && strings.ContainsRune("uUlL", rune(s[len(s)-1])) {
		suf = s[len(s)-1:] + suf
		s = s[:len(s)-1]
	}
	suf = strings.ToLower(suf)
	if suf != "" && suf != "u" && suf != "l" && suf != "ul" && suf != "lu" && suf != "ll" && suf != "ull" && suf != "llu" {
		return Value{}, errorf(t.Pos, "bad integer suffix in %q", t.Text)
	}
	base := 10
	digits := s
	switch {
	case strings.HasPrefix(s, "0x") || strings.HasPrefix(s, "0X"):
		base, digits = 16, s[2:]
	case strings.HasPrefix(s, "0b") || strings.HasPrefix(s, "0B"):
		base, digits = 2, s[2:]
	case len(s) > 1 && s[0] == '0':
		base, digits = 8, s[1:]
	}
	n, err := strconv.ParseUint(digits, base, 64)
	if err != nil {
		return Value{}, errorf(t.Pos, "bad integer constant %q", t.Text)
	}
	uns := strings.Contains(suf, "u")
	long := strings.Contains(suf, "l")
	type cand struct {
		bits uint8
		uns  bool
	}
	var cands []cand
	switch {
	case !uns && !long && base == 10:
		cands = []cand{{32, false}, {64, false}}
	case !uns && !long:
		cands = []cand{{32, false}, {32, true}, {64, false}, {64, true}}
	case uns && !long:
		cands = []cand{{32, true}, {64, true}}
	case !uns && long && base == 10:
		cands = []cand{{64, false}}
	case !uns && long:
		cands = []cand{{64, false}, {64, true}}
	default:
		cands = []cand{{64, true}}
	}
	for _, cd := range cands {
		limit := uint64(1)<<(cd.bits-1) - 1
		if cd.uns {
			limit = limit<<1 | 1
		}
		if n <= limit {
			return mkValue(n, cd.bits, cd.uns), nil
		}
	}
	return mkValue(n, 64, true), nil
}

func promote(v Value) Value {
	if v.Bits < 32 {
		return mkValue(v.V, 32, false)
	}
	return v
}

func common(a, b Value) (uint8, bool) {
	a, b = promote(a), promote(b)
	if a.Bits == b.Bits {
		return a.Bits, a.Unsigned || b.Unsigned
	}
	if a.Bits > b.Bits {
		return a.Bits, a.Unsigned
	}
	return b.Bits, b.Unsigned
}

func boolValue(b bool) Value {
	if b {
		return Value{V: 1, Bits: 32}
	}
	return Value{V: 0, Bits: 32}
}

func binop(op string, a, b Value, pos Pos) (Value, error) {
	a, b = promote(a), promote(b)
	switch op {
	case "<<", ">>":
		if b.Neg() || b.V >= uint64(a.Bits) {
			return Value{}, errorf(pos, "shift count %s out of range", b)
		}
		if op == "<<" {
			return mkValue(a.V<<b.V, a.Bits, a.Unsigned), nil
		}
		if a.Unsigned {
			return mkValue(a.V>>b.V, a.Bits, true), nil
		}
		return mkValue(uint64(int64(a.V)>>b.V), a.Bits, false), nil
	case "&&":
		return boolValue(a.V != 0 && b.V != 0), nil
	case "||":
		return boolValue(a.V != 0 || b.V != 0), nil
	}
	bits, uns := common(a, b)
	a, b = mkValue(a.V, bits, uns), mkValue(b.V, bits, uns)
	x, y := a.V, b.V
	sx, sy := int64(x), int64(y)
	switch op {
	case "+":
		return mkValue(x+y, bits, uns), nil
	case "-":
		return mkValue(x-y, bits, uns), nil
	case "*":
		return mkValue(x*y, bits, uns), nil
	case "/", "%":
		if y == 0 {
			return Value{}, errorf(pos, "division by zero")
		}
		if uns {
			if op == "/" {
				return mkValue(x/y, bits, uns), nil
			}
			return mkValue(x%y, bits, uns), nil
		}
		if op == "/" {
			return mkValue(uint64(sx/sy), bits, uns), nil
		}
		return mkValue(uint64(sx%sy), bits, uns), nil
	case "&":
		return mkValue(x&y, bits, uns), nil
	case "|":
		return mkValue(x|y, bits, uns), nil
	case "^":
		return mkValue(x^y, bits, uns), nil
	case "==":
		return boolValue(x == y), nil
	case "!=":
		return boolValue(x != y), nil
	case "<", ">", "<=", ">=":
		var lt, eq bool
		if uns {
			lt, eq = x < y, x == y
		} else {
			lt, eq = sx < sy, sx == sy
		}
		switch op {
		case "<":
			return boolValue(lt), nil
		case ">":
			return boolValue(!lt && !eq), nil
		case "<=":
			return boolValue(lt || eq), nil
		default:
			return boolValue(!lt), nil
		}
	}
	return Value{}, errorf(pos, "unsupported operator %q", op)
}

var precedence = map[string]int{
	"||": 1, "&&": 2, "|": 3, "^": 4, "&": 5, "==": 6, "!=": 6,
	"<": 7, ">": 7, "<=": 7, ">=": 7, "<<": 8, ">>": 8, "+": 9, "-": 9, "*": 10, "/": 10, "%": 10,
}

// evalTokens evaluates a complete constant expression.
func (p *Parser) evalTokens(ts []Token, pos Pos) (Value, error) {
	if len(ts) == 0 {
		return Value{}, errorf(pos, "empty expression")
	}
	c := &cursor{p: p, toks: ts, end: pos}
	v, err := c.parseExpr(0)
	if err != nil {
		return Value{}, err
	}
	if !c.eof() {
		return Value{}, errorf(c.peek().Pos, "unexpected %q in expression", c.peek().Text)
	}
	return v, nil
}

func (c *cursor) parseExpr(minPrec int) (Value, error) {
	lhs, err := c.parseUnary()
	if err != nil {
		return Value{}, err
	}
	for {
		t := c.peek()
		if c.eof() {
			return lhs, nil
		}
		if t.Text == "?" && minPrec == 0 {
			c.next()
			a, err := c.parseExpr(0)
			if err != nil {
				return Value{}, err
			}
			if err := c.expect(":"); err != nil {
				return Value{}, err
			}
			b, err := c.parseExpr(0)
			if err != nil {
				return Value{}, err
			}
			bits, uns := common(a, b)
			if lhs.V != 0 {
				return mkValue(promote(a).V, bits, uns), nil
			}
			return mkValue(promote(b).V, bits, uns), nil
		}
		prec, ok := precedence[t.Text]
		if !ok || t.Kind != TPunct || prec <= minPrec-1 || prec < minPrec {
			return lhs, nil
		}
		c.next()
		rhs, err := c.parseExpr(prec + 1)
		if err != nil {
			return Value{}, err
		}
		lhs, err = binop(t.Text, lhs, rhs, t.Pos)
		if err != nil {
			return Value{}, err
		}
	}
}

// parseTypeName parses a type name as used in casts and sizeof.
func (c *cursor) parseTypeName() (*CType, error) {
	typ, err := c.parseTypeSpec()
	if err != nil {
		return nil, err
	}
	for c.accept("*") {
		typ = &CType{Kind: KPointer, Name: "pointer", Size: 8, Align: 8}
	}
	if err := typ.complete(); err != nil {
		return nil, err
	}
	return typ, nil
}

func (c *cursor) parseUnary() (Value, error) {
	t := c.next()
	switch {
	case t.Text == "<EOF>" && t.Kind == TPunct:
		return Value{}, errorf(t.Pos, "unexpected end of expression")
	case t.Kind == TNumber:
		return parseNumber(t)
	case t.Kind == TChar:
		s, err := strconv.Unquote(t.Text)
		if err != nil || len(s) != 1 {
			return Value{}, errorf(t.Pos, "unsupported character constant %s", t.Text)
		}
		return Value{V: uint64(s[0]), Bits: 32}, nil
	case t.Kind == TPunct && t.Text == "(":
		if c.startsType() {
			typ, err := c.parseTypeName()
			if err != nil {
				return Value{}, err
			}
			if err := c.expect(")"); err != nil {
				return Value{}, err
			}
			v, err := c.parseUnary()
			if err != nil {
				return Value{}, err
			}
			return castTo(typ, v, t.Pos)
		}
		v, err := c.parseExpr(0)
		if err != nil {
			return Value{}, err
		}
		return v, c.expect(")")
	case t.Kind == TPunct && (t.Text == "-" || t.Text == "+" || t.Text == "~" || t.Text == "!"):
		v, err := c.parseUnary()
		if err != nil {
			return Value{}, err
		}
		v = promote(v)
		switch t.Text {
		case "-":
			return mkValue(-v.V, v.Bits, v.Unsigned), nil
		case "~":
			return mkValue(^v.V, v.Bits, v.Unsigned), nil
		case "!":
			return boolValue(v.V == 0), nil
		}
		return v, nil
	case t.Kind == TIdent && t.Text == "sizeof":
		if err := c.expect("("); err != nil {
			return Value{}, err
		}
		if !c.startsType() {
			return Value{}, errorf(t.Pos, "sizeof of an expression is not supported")
		}
		typ, err := c.parseTypeName()
		if err != nil {
			return Value{}, err
		}
		if err := c.expect(")"); err != nil {
			return Value{}, err
		}
		return Value{V: uint64(typ.Size), Bits: 64, Unsigned: true}, nil
	case t.Kind == TIdent && isBuiltinFunc(t.Text):
		return c.parseIOC(t)
	case t.Kind == TIdent:
		if v, ok := c.p.enums[t.Text]; ok {
			return v, nil
		}
		if v, ok := externalConsts[t.Text]; ok {
			return v, nil
		}
		if m, ok := c.p.macros[t.Text]; ok && !m.Func {
			return Value{}, errorf(t.Pos, "macro %s is recursive", t.Text)
		}
		return Value{}, errorf(t.Pos, "undefined identifier %s", t.Text)
	}
	return Value{}, errorf(t.Pos, "unexpected %q in expression", t.Text)
}

func castTo(typ *CType, v Value, pos Pos) (Value, error) {
	switch typ.Kind {
	case KScalar, KEnum, KPointer:
	default:
		return Value{}, errorf(pos, "cast to non-integer type")
	}
	bits := uint8(typ.Size * 8)
	uns := !typ.Signed
	if typ.Kind == KEnum {
		uns = true
	}
	v = mkValue(v.V, bits, uns)
	return promote(v), nil
}

func isBuiltinFunc(s string) bool {
	switch s {
	case "_IO", "_IOR", "_IOW", "_IOWR", "_IOC", "sizeof":
		return true
	}
	return false
}

// parseIOC evaluates the asm-generic ioctl number macros:
// dir<<30 | size<<16 | type<<8 | nr.
func (c *cursor) parseIOC(t Token) (Value, error) {
	if c.peek().Text != "(" {
		return Value{}, errorf(t.Pos, "%s needs arguments", t.Text)
	}
	args, next, err := splitArgs(c.toks, c.i)
	if err != nil {
		return Value{}, err
	}
	c.i = next
	eval := func(a []Token) (uint64, error) {
		v, err := c.p.evalTokens(a, t.Pos)
		return v.V, err
	}
	size := func(a []Token) (uint64, error) {
		sc := &cursor{p: c.p, toks: a, end: t.Pos}
		typ, err := sc.parseTypeName()
		if err != nil {
			return 0, err
		}
		if !sc.eof() {
			return 0, errorf(t.Pos, "bad type argument to %s", t.Text)
		}
		return uint64(typ.Size), nil
	}
	var dir, typ, nr, sz uint64
	want := map[string]int{"_IO": 2, "_IOR": 3, "_IOW": 3, "_IOWR": 3, "_IOC": 4}[t.Text]
	if len(args) != want {
		return Value{}, errorf(t.Pos, "%s expects %d arguments", t.Text, want)
	}
	switch t.Text {
	case "_IOC":
		vals := make([]uint64, 4)
		for i, a := range args {
			if vals[i], err = eval(a); err != nil {
				return Value{}, err
			}
		}
		dir, typ, nr, sz = vals[0], vals[1], vals[2], vals[3]
	default:
		dir = map[string]uint64{"_IO": 0, "_IOW": 1, "_IOR": 2, "_IOWR": 3}[t.Text]
		if typ, err = eval(args[0]); err != nil {
			return Value{}, err
		}
		if nr, err = eval(args[1]); err != nil {
			return Value{}, err
		}
		if want == 3 {
			if sz, err = size(args[2]); err != nil {
				return Value{}, err
			}
		}
	}
	if dir > 3 || typ > 0xff || nr > 0xff || sz >= 1<<14 {
		return Value{}, errorf(t.Pos, "%s argument out of range", t.Text)
	}
	bits := uint8(32)
	if want == 3 {
		bits = 64 // sizeof() makes the expression unsigned long
	}
	return mkValue(dir<<30|sz<<16|typ<<8|nr, bits, true), nil
}
