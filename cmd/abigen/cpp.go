package main

import (
	"strings"
)

// Macro is a #define.
type Macro struct {
	Name   string
	Func   bool
	Params []string
	Body   []Token
	Pos    Pos
}

type condState struct {
	active bool // this branch is being compiled
	taken  bool // some branch of this #if was taken
	outer  bool // the enclosing region is active
	pos    Pos
}

// preprocess runs the directives of one file. It records macros in p and
// returns the macro-expanded tokens of the active, non-directive lines.
func (p *Parser) preprocess(file string, toks []Token) ([]Token, error) {
	var out, chunk []Token
	var stack []condState
	active := func() bool { return len(stack) == 0 || stack[len(stack)-1].active }
	flush := func() error {
		if len(chunk) == 0 {
			return nil
		}
		e, err := p.expand(chunk, nil)
		if err != nil {
			return err
		}
		out = append(out, e...)
		chunk = chunk[:0]
		return nil
	}
	for i := 0; i < len(toks); {
		t := toks[i]
		if !(t.BOL && t.Kind == TPunct && t.Text == "#") {
			if active() {
				chunk = append(chunk, t)
			}
			i++
			continue
		}
		// Directive line.
		j := i + 1
		for j < len(toks) && !toks[j].BOL {
			j++
		}
		line := toks[i+1 : j]
		i = j
		if len(line) == 0 {
			continue // null directive
		}
		if err := flush(); err != nil {
			return nil, err
		}
		name := line[0].Text
		args := line[1:]
		switch name {
		case "ifdef", "ifndef":
			if len(args) < 1 || args[0].Kind != TIdent {
				return nil, errorf(t.Pos, "#%s without macro name", name)
			}
			_, def := p.macros[args[0].Text]
			cond := def == (name == "ifdef")
			outer := active()
			stack = append(stack, condState{active: outer && cond, taken: cond, outer: outer, pos: t.Pos})
		case "if":
			outer := active()
			cond := false
			if outer {
				v, err := p.evalCond(args, t.Pos)
				if err != nil {
					return nil, err
				}
				cond = v
			}
			stack = append(stack, condState{active: outer && cond, taken: cond, outer: outer, pos: t.Pos})
		case "elif":
			if len(stack) == 0 {
				return nil, errorf(t.Pos, "#elif without #if")
			}
			s := &stack[len(stack)-1]
			if s.taken || !s.outer {
				s.active = false
				continue
			}
			v, err := p.evalCond(args, t.Pos)
			if err != nil {
				return nil, err
			}
			s.active, s.taken = v, v
		case "else":
			if len(stack) == 0 {
				return nil, errorf(t.Pos, "#else without #if")
			}
			s := &stack[len(stack)-1]
			s.active = s.outer && !s.taken
			s.taken = true
		case "endif":
			if len(stack) == 0 {
				return nil, errorf(t.Pos, "#endif without #if")
			}
			stack = stack[:len(stack)-1]
		case "define":
			if !active() {
				continue
			}
			if err := p.define(args, t.Pos); err != nil {
				return nil, err
			}
		case "undef":
			if active() && len(args) > 0 {
				delete(p.macros, args[0].Text)
			}
		case "include", "pragma", "line", "warning", "ident":
			// Includes are not followed: the header list is explicit.
		case "error":
			if active() {
				return nil, errorf(t.Pos, "#error %s", joinTokens(args))
			}
		default:
			if active() {
				return nil, errorf(t.Pos, "unknown directive #%s", name)
			}
		}
	}
	if len(stack) > 0 {
		return nil, errorf(stack[len(stack)-1].pos, "unterminated #if")
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return out, nil
}

func joinTokens(ts []Token) string {
	var b strings.Builder
	for i, t := range ts {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(t.Text)
	}
	return b.String()
}

func (p *Parser) define(args []Token, pos Pos) error {
	if len(args) == 0 || args[0].Kind != TIdent {
		return errorf(pos, "#define without macro name")
	}
	m := &Macro{Name: args[0].Text, Pos: pos}
	rest := args[1:]
	// A function-like macro has '(' immediately after the name.
	if len(rest) > 0 && rest[0].Text == "(" && !rest[0].Space {
		m.Func = true
		k := 1
		for {
			if k >= len(rest) {
				return errorf(pos, "unterminated parameter list in #define %s", m.Name)
			}
			t := rest[k]
			k++
			if t.Text == ")" {
				break
			}
			if t.Text == "," {
				continue
			}
			if t.Kind != TIdent && t.Text != "..." {
				return errorf(pos, "bad parameter %q in #define %s", t.Text, m.Name)
			}
			m.Params = append(m.Params, t.Text)
		}
		rest = rest[k:]
	}
	m.Body = append([]Token(nil), rest...)
	for i := range m.Body {
		m.Body[i].BOL = false
	}
	if _, ok := p.macros[m.Name]; !ok {
		p.macroOrder = append(p.macroOrder, m)
	} else {
		// Redefinition: keep the first position in the order list but the new body.
		for i, o := range p.macroOrder {
			if o.Name == m.Name {
				p.macroOrder[i] = m
			}
		}
	}
	p.macros[m.Name] = m
	return nil
}

func (p *Parser) evalCond(args []Token, pos Pos) (bool, error) {
	// Replace defined(X) / defined X before expansion.
	var ts []Token
	for i := 0; i < len(args); i++ {
		t := args[i]
		if t.Kind == TIdent && t.Text == "defined" {
			name := ""
			if i+1 < len(args) && args[i+1].Text == "(" {
				if i+3 >= len(args) || args[i+3].Text != ")" {
					return false, errorf(pos, "bad defined()")
				}
				name = args[i+2].Text
				i += 3
			} else if i+1 < len(args) {
				name = args[i+1].Text
				i++
			} else {
				return false, errorf(pos, "bad defined")
			}
			v := "0"
			if _, ok := p.macros[name]; ok {
				v = "1"
			}
			ts = append(ts, Token{Kind: TNumber, Text: v, Pos: t.Pos})
			continue
		}
		ts = append(ts, t)
	}
	e, err := p.expand(ts, nil)
	if err != nil {
		return false, err
	}
	// Unknown identifiers in #if are 0.
	for i := range e {
		if e[i].Kind == TIdent && !isBuiltinFunc(e[i].Text) {
			if _, ok := p.enums[e[i].Text]; !ok {
				e[i] = Token{Kind: TNumber, Text: "0", Pos: e[i].Pos}
			}
		}
	}
	v, err := p.evalTokens(e, pos)
	if err != nil {
		return false, err
	}
	return v.V != 0, nil
}

// expand macro-expands toks. hide holds the macros being expanded.
func (p *Parser) expand(toks []Token, hide map[string]bool) ([]Token, error) {
	var out []Token
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		if t.Kind != TIdent || hide[t.Text] {
			out = append(out, t)
			continue
		}
		m, ok := p.macros[t.Text]
		if !ok {
			out = append(out, t)
			continue
		}
		h := map[string]bool{m.Name: true}
		for k := range hide {
			h[k] = true
		}
		if !m.Func {
			body := retarget(m.Body, t.Pos)
			e, err := p.expand(body, h)
			if err != nil {
				return nil, err
			}
			out = append(out, e...)
			continue
		}
		if i+1 >= len(toks) || toks[i+1].Text != "(" {
			out = append(out, t)
			continue
		}
		args, next, err := splitArgs(toks, i+1)
		if err != nil {
			return nil, err
		}
		if len(args) == 1 && len(args[0]) == 0 && len(m.Params) == 0 {
			args = nil
		}
		if len(args) != len(m.Params) {
			return nil, errorf(t.Pos, "macro %s expects %d arguments, got %d", m.Name, len(m.Params), len(args))
		}
		var body []Token
		for _, bt := range m.Body {
			if bt.Text == "#" || bt.Text == "##" {
				return nil, errorf(t.Pos, "macro %s: # and ## are not supported", m.Name)
			}
			idx := -1
			if bt.Kind == TIdent {
				for k, pn := range m.Params {
					if pn == bt.Text {
						idx = k
					}
				}
			}
			if idx < 0 {
				bt.Pos = t.Pos
				body = append(body, bt)
				continue
			}
			a, err := p.expand(args[idx], hide)
			if err != nil {
				return nil, err
			}
			body = append(body, a...)
		}
		e, err := p.expand(body, h)
		if err != nil {
			return nil, err
		}
		out = append(out, e...)
		i = next - 1
	}
	return out, nil
}

func retarget(ts []Token, pos Pos) []Token {
	out := make([]Token, len(ts))
	for i, t := range ts {
		t.Pos = pos
		t.BOL = false
		out[i] = t
	}
	return out
}

// splitArgs parses a parenthesised, comma-separated argument list starting at
// toks[open] == "(". It returns the arguments and the index after ")".
func splitArgs(toks []Token, open int) ([][]Token, int, error) {
	depth := 0
	var args [][]Token
	var cur []Token
	for i := open; i < len(toks); i++ {
		t := toks[i]
		switch t.Text {
		case "(":
			depth++
			if depth == 1 {
				continue
			}
		case ")":
			depth--
			if depth == 0 {
				args = append(args, cur)
				return args, i + 1, nil
			}
		case ",":
			if depth == 1 {
				args = append(args, cur)
				cur = nil
				continue
			}
		}
		cur = append(cur, t)
	}
	return nil, 0, errorf(toks[open].Pos, "unterminated macro argument list")
}
