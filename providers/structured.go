package providers

import (
	"errors"
	"fmt"
	"strconv"
)

// ErrMalformedField is wrapped by the errors of the structured-field
// parsers: the field does not follow RFC 9651 and, as the IETF RateLimit
// draft requires, is ignored as a whole.
var ErrMalformedField = errors.New("malformed structured field")

// sfKind is the type of a structured-field bare item.
type sfKind uint8

const (
	sfInteger sfKind = iota + 1
	sfDecimal
	sfString
	sfToken
	sfBinary
	sfBoolean
	sfDate
)

// sfBare is one bare item. Only the member matching kind is set: i for
// integers and dates, d for decimals, s for strings, tokens and (still
// encoded) byte sequences, b for booleans.
type sfBare struct {
	kind sfKind
	i    int64
	d    float64
	s    string
	b    bool
}

// name is the item's value as a name: strings and tokens only.
func (v sfBare) name() (string, bool) {
	if v.kind == sfString || v.kind == sfToken {
		return v.s, true
	}
	return "", false
}

type sfParam struct {
	key string
	val sfBare
}

// sfItem is an item with its parameters; inner is true for an inner list,
// whose members are not kept.
type sfItem struct {
	val    sfBare
	params []sfParam
	inner  bool
}

// param returns the last parameter called key (RFC 9651 keeps the last of
// duplicates).
func (it sfItem) param(key string) (sfBare, bool) {
	for i := len(it.params) - 1; i >= 0; i-- {
		if it.params[i].key == key {
			return it.params[i].val, true
		}
	}
	return sfBare{}, false
}

// sfMember is one dictionary member.
type sfMember struct {
	key  string
	item sfItem
}

// sfParser parses one field value, following RFC 9651 §4.2.
type sfParser struct {
	s string
	i int
}

func (p *sfParser) fail(what string) error {
	return fmt.Errorf("%s at byte %d: %w", what, p.i, ErrMalformedField)
}

func (p *sfParser) done() bool { return p.i >= len(p.s) }

func (p *sfParser) peek() byte {
	if p.done() {
		return 0
	}
	return p.s[p.i]
}

func (p *sfParser) skipSP() {
	for !p.done() && p.s[p.i] == ' ' {
		p.i++
	}
}

func (p *sfParser) skipOWS() {
	for !p.done() && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

// parseSFList parses an RFC 9651 List. Inner lists are accepted and kept
// without their members.
func parseSFList(s string) ([]sfItem, error) {
	p := &sfParser{s: s}
	p.skipSP()
	var out []sfItem
	for !p.done() {
		it, err := p.itemOrInnerList()
		if err != nil {
			return nil, err
		}
		out = append(out, it)
		if err := p.nextMember(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// parseSFDict parses an RFC 9651 Dictionary.
func parseSFDict(s string) ([]sfMember, error) {
	p := &sfParser{s: s}
	p.skipSP()
	var out []sfMember
	for !p.done() {
		key, err := p.key()
		if err != nil {
			return nil, err
		}
		var it sfItem
		if p.peek() == '=' {
			p.i++
			if it, err = p.itemOrInnerList(); err != nil {
				return nil, err
			}
		} else {
			it.val = sfBare{kind: sfBoolean, b: true}
			if it.params, err = p.params(); err != nil {
				return nil, err
			}
		}
		out = append(out, sfMember{key: key, item: it})
		if err := p.nextMember(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// nextMember consumes the separator after a list or dictionary member.
func (p *sfParser) nextMember() error {
	p.skipOWS()
	if p.done() {
		return nil
	}
	if p.s[p.i] != ',' {
		return p.fail("expected ','")
	}
	p.i++
	p.skipOWS()
	if p.done() {
		return p.fail("trailing ','")
	}
	return nil
}

func (p *sfParser) itemOrInnerList() (sfItem, error) {
	if p.peek() != '(' {
		return p.item()
	}
	p.i++
	for {
		p.skipSP()
		if p.done() {
			return sfItem{}, p.fail("unterminated inner list")
		}
		if p.s[p.i] == ')' {
			p.i++
			params, err := p.params()
			return sfItem{params: params, inner: true}, err
		}
		if _, err := p.item(); err != nil {
			return sfItem{}, err
		}
		if c := p.peek(); c != ' ' && c != ')' {
			return sfItem{}, p.fail("expected ' ' or ')' in inner list")
		}
	}
}

func (p *sfParser) item() (sfItem, error) {
	v, err := p.bare()
	if err != nil {
		return sfItem{}, err
	}
	params, err := p.params()
	return sfItem{val: v, params: params}, err
}

func (p *sfParser) params() ([]sfParam, error) {
	var out []sfParam
	for p.peek() == ';' {
		p.i++
		p.skipSP()
		key, err := p.key()
		if err != nil {
			return nil, err
		}
		v := sfBare{kind: sfBoolean, b: true}
		if p.peek() == '=' {
			p.i++
			if v, err = p.bare(); err != nil {
				return nil, err
			}
		}
		out = append(out, sfParam{key: key, val: v})
	}
	return out, nil
}

func (p *sfParser) key() (string, error) {
	start := p.i
	if c := p.peek(); !(c >= 'a' && c <= 'z' || c == '*') {
		return "", p.fail("expected a key")
	}
	for !p.done() {
		c := p.s[p.i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == '*') {
			break
		}
		p.i++
	}
	return p.s[start:p.i], nil
}

func (p *sfParser) bare() (sfBare, error) {
	c := p.peek()
	switch {
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	case c == '"':
		return p.string()
	case c == '*' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		return p.token(), nil
	case c == ':':
		return p.binary()
	case c == '?':
		if p.i+1 < len(p.s) && (p.s[p.i+1] == '0' || p.s[p.i+1] == '1') {
			v := sfBare{kind: sfBoolean, b: p.s[p.i+1] == '1'}
			p.i += 2
			return v, nil
		}
		return sfBare{}, p.fail("bad boolean")
	case c == '@':
		p.i++
		v, err := p.number()
		if err != nil || v.kind != sfInteger {
			return sfBare{}, p.fail("bad date")
		}
		v.kind = sfDate
		return v, nil
	}
	return sfBare{}, p.fail("expected an item")
}

// number parses an Integer (at most 15 digits) or a Decimal (at most 12
// integer and 3 fraction digits).
func (p *sfParser) number() (sfBare, error) {
	start := p.i
	if p.peek() == '-' {
		p.i++
	}
	digitsStart, dot := p.i, -1
	for !p.done() {
		c := p.s[p.i]
		if c == '.' && dot < 0 {
			dot = p.i
		} else if c < '0' || c > '9' {
			break
		}
		p.i++
	}
	text := p.s[start:p.i]
	switch {
	case dot < 0:
		if n := p.i - digitsStart; n == 0 || n > 15 {
			return sfBare{}, p.fail("bad integer")
		}
		v, err := strconv.ParseInt(text, 10, 64)
		if err != nil {
			return sfBare{}, p.fail("bad integer")
		}
		return sfBare{kind: sfInteger, i: v}, nil
	default:
		if n := dot - digitsStart; n == 0 || n > 12 {
			return sfBare{}, p.fail("bad decimal")
		}
		if n := p.i - dot - 1; n == 0 || n > 3 {
			return sfBare{}, p.fail("bad decimal")
		}
		v, err := strconv.ParseFloat(text, 64)
		if err != nil {
			return sfBare{}, p.fail("bad decimal")
		}
		return sfBare{kind: sfDecimal, d: v}, nil
	}
}

func (p *sfParser) string() (sfBare, error) {
	p.i++ // opening quote
	var b []byte
	for !p.done() {
		c := p.s[p.i]
		p.i++
		switch {
		case c == '\\':
			if p.done() || (p.s[p.i] != '"' && p.s[p.i] != '\\') {
				return sfBare{}, p.fail("bad escape in string")
			}
			b = append(b, p.s[p.i])
			p.i++
		case c == '"':
			return sfBare{kind: sfString, s: string(b)}, nil
		case c < 0x20 || c > 0x7e:
			return sfBare{}, p.fail("bad character in string")
		default:
			b = append(b, c)
		}
	}
	return sfBare{}, p.fail("unterminated string")
}

func (p *sfParser) token() sfBare {
	start := p.i
	p.i++
	for !p.done() && isTokenChar(p.s[p.i]) {
		p.i++
	}
	return sfBare{kind: sfToken, s: p.s[start:p.i]}
}

// isTokenChar reports whether c is an RFC 9110 tchar, ':' or '/'.
func isTokenChar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	switch c {
	case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~', ':', '/':
		return true
	}
	return false
}

func (p *sfParser) binary() (sfBare, error) {
	p.i++ // opening colon
	start := p.i
	for !p.done() {
		c := p.s[p.i]
		if c == ':' {
			v := sfBare{kind: sfBinary, s: p.s[start:p.i]}
			p.i++
			return v, nil
		}
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '=') {
			return sfBare{}, p.fail("bad character in byte sequence")
		}
		p.i++
	}
	return sfBare{}, p.fail("unterminated byte sequence")
}
