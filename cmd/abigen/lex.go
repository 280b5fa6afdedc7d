package main

import (
	"fmt"
	"strings"
)

// Pos is a source position used in error messages.
type Pos struct {
	File string
	Line int
}

func (p Pos) String() string { return fmt.Sprintf("%s:%d", p.File, p.Line) }

// TokKind classifies a token.
type TokKind int

// Token kinds.
const (
	TIdent TokKind = iota
	TNumber
	TString
	TChar
	TPunct
)

// Token is one preprocessing token.
type Token struct {
	Kind  TokKind
	Text  string
	Pos   Pos
	BOL   bool // first token of a logical source line
	Space bool // preceded by white space or a comment
}

func (t Token) String() string { return t.Text }

// Error is a positioned error.
type Error struct {
	Pos Pos
	Msg string
}

func (e *Error) Error() string { return e.Pos.String() + ": " + e.Msg }

func errorf(p Pos, format string, args ...any) error {
	return &Error{Pos: p, Msg: fmt.Sprintf(format, args...)}
}

var puncts = []string{
	"<<=", ">>=", "...", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "->", "++", "--", "##",
	"+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=",
}

func isIdentStart(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isIdentChar(c byte) bool { return isIdentStart(c) || (c >= '0' && c <= '9') }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// lex splits C source text into tokens. Comments and line continuations are
// removed; BOL marks the first token of every logical line.
func lex(file, src string) ([]Token, error) {
	var toks []Token
	line := 1
	bol := true
	space := false
	i := 0
	n := len(src)
	for i < n {
		c := src[i]
		switch {
		case c == '\n':
			line++
			bol = true
			space = true
			i++
			continue
		case c == '\\' && i+1 < n && src[i+1] == '\n':
			line++
			i += 2
			continue
		case c == '\\' && i+2 < n && src[i+1] == '\r' && src[i+2] == '\n':
			line++
			i += 3
			continue
		case c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v':
			space = true
			i++
			continue
		case c == '/' && i+1 < n && src[i+1] == '*':
			start := line
			j := strings.Index(src[i+2:], "*/")
			if j < 0 {
				return nil, errorf(Pos{file, start}, "unterminated comment")
			}
			line += strings.Count(src[i:i+2+j], "\n")
			i += j + 4
			space = true
			continue
		case c == '/' && i+1 < n && src[i+1] == '/':
			for i < n && src[i] != '\n' {
				if src[i] == '\\' && i+1 < n && src[i+1] == '\n' {
					line++
					i++
				}
				i++
			}
			space = true
			continue
		}
		pos := Pos{file, line}
		start := i
		var kind TokKind
		switch {
		case isIdentStart(c):
			for i < n && isIdentChar(src[i]) {
				i++
			}
			kind = TIdent
		case isDigit(c) || (c == '.' && i+1 < n && isDigit(src[i+1])):
			for i < n && (isIdentChar(src[i]) || src[i] == '.') {
				i++
			}
			kind = TNumber
		case c == '"' || c == '\'':
			q := c
			i++
			for i < n && src[i] != q {
				if src[i] == '\\' {
					i++
				}
				if i < n && src[i] == '\n' {
					return nil, errorf(pos, "unterminated literal")
				}
				i++
			}
			if i >= n {
				return nil, errorf(pos, "unterminated literal")
			}
			i++
			kind = TString
			if q == '\'' {
				kind = TChar
			}
		default:
			kind = TPunct
			l := 1
			for _, p := range puncts {
				if strings.HasPrefix(src[i:], p) {
					l = len(p)
					break
				}
			}
			i += l
		}
		toks = append(toks, Token{Kind: kind, Text: src[start:i], Pos: pos, BOL: bol, Space: space})
		bol = false
		space = false
	}
	return toks, nil
}
