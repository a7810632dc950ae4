package scheduler

import (
	"encoding/base64"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// redactedMark replaces every spelling of a secret.
const redactedMark = "[redacted]"

// minSecretLen is the shortest secret value searched for on its own: a
// shorter one (a placeholder password such as "x") cannot be told apart
// from ordinary text. It is still redacted as part of user:password.
const minSecretLen = 4

// redactor removes a scope's secrets from provider text in every spelling
// a provider might echo them: raw; base64 (standard, URL, with and without
// padding) of each secret and of basic credentials' user:password; and,
// for each of those, JSON-escaped (\/, \u002f or \u002F, …), URL-encoded
// (query or path escaping, either hex case) and HTML-escaped copies.
// It is the one redactor: response headers, bodies, diagnostics and stored
// result bodies all go through it, before anything is cut. Build it once
// per scope's credentials (redactors does); it is safe for concurrent use.
type redactor struct {
	// forms are the secret spellings, longest first, so a padded base64
	// form goes whole before its unpadded prefix.
	forms []string
}

// newRedactor returns the redactor of c's secrets.
func newRedactor(c Credentials) *redactor {
	var values []string
	for _, s := range c.Secrets() {
		if len(s) >= minSecretLen {
			values = append(values, s)
		}
	}
	if c.Type == CredentialBasic {
		values = append(values, c.Username+":"+c.Password)
	}
	var forms []string
	for _, v := range values {
		forms = append(forms, v,
			base64.StdEncoding.EncodeToString([]byte(v)), base64.URLEncoding.EncodeToString([]byte(v)),
			base64.RawStdEncoding.EncodeToString([]byte(v)), base64.RawURLEncoding.EncodeToString([]byte(v)))
		if strings.Contains(v, " ") { // query escaping writes a space as +
			forms = append(forms, strings.ReplaceAll(v, " ", "+"))
		}
	}
	slices.SortFunc(forms, func(a, b string) int { return len(b) - len(a) })
	return &redactor{forms: slices.Compact(forms)}
}

// String returns s with every spelling of a secret replaced.
func (r *redactor) String(s string) string {
	sp := r.spans(s)
	if len(sp) == 0 {
		return s
	}
	var b strings.Builder
	last := 0
	for _, x := range sp {
		b.WriteString(s[last:x.from])
		b.WriteString(redactedMark)
		last = x.to
	}
	b.WriteString(s[last:])
	return b.String()
}

// Bytes is String for a byte slice; it returns b itself when nothing
// needed redacting.
func (r *redactor) Bytes(b []byte) []byte {
	if len(r.forms) == 0 {
		return b
	}
	s := string(b)
	if out := r.String(s); out != s {
		return []byte(out)
	}
	return b
}

// Cut redacts s, then bounds it to n bytes without splitting a UTF-8
// sequence; whenever something was cut off, the end never keeps the
// beginning of a secret (see trimPartial).
func (r *redactor) Cut(s string, n int) string { return r.bound(r.String(s), n) }

// bound is Cut for s already redacted.
func (r *redactor) bound(s string, n int) string {
	if len(s) <= n {
		return s
	}
	c := n
	for c > 0 && n-c < 3 && s[c]&0xC0 == 0x80 {
		c--
	}
	if s[c]&0xC0 == 0x80 { // not UTF-8 anyway: cut at the byte bound
		c = n
	}
	return r.trimPartial(s[:c])
}

// trimPartial removes from the end of s, which was cut, whatever could be
// the start of a secret in any spelling, and an escape sequence left
// incomplete by the cut: a cut never leaves a prefix of a secret.
func (r *redactor) trimPartial(s string) string {
	if len(r.forms) == 0 {
		return s
	}
	for {
		t := dropIncompleteEscape(s)
		if at := r.partialAt(t); at < len(t) {
			t = t[:at]
		}
		if t == s {
			return s
		}
		s = t
	}
}

// partialAt is where the longest suffix of s that is a proper prefix of a
// form begins, read raw or decoded; len(s) when there is none.
func (r *redactor) partialAt(s string) int {
	at := len(s)
	for _, f := range r.forms {
		for i := max(0, len(s)-len(f)+1); i < at; i++ {
			if strings.HasPrefix(f, s[i:]) {
				at = i
				break
			}
		}
	}
	for _, syn := range escapeSyntaxes {
		if !strings.Contains(s, syn[:1]) {
			continue
		}
		view, starts := decodeView(s, syn)
		for _, f := range r.forms {
			for k := max(0, len(view)-len(f)+1); k < len(view); k++ {
				if int(starts[k]) < at && strings.HasPrefix(f, view[k:]) {
					at = int(starts[k])
					break
				}
			}
		}
	}
	return at
}

// The spellings the redactor decodes, one at a time, each named by the
// character that starts its escapes: JSON strings (twice: as JSON reads
// them, and with a backslash pair left as is, so that an escape after a
// literal backslash counts too), URL percent escapes, HTML character
// references.
const (
	syntaxJSON        = `\`
	syntaxJSONLenient = `\ lenient`
	syntaxURL         = "%"
	syntaxHTML        = "&"
)

var escapeSyntaxes = [...]string{syntaxJSON, syntaxJSONLenient, syntaxURL, syntaxHTML}

// dropIncompleteEscape removes a JSON, URL or HTML escape sequence that s
// ends in the middle of.
func dropIncompleteEscape(s string) string {
	for back := 1; back <= 12 && back <= len(s); back++ {
		i := len(s) - back
		switch s[i] {
		case '\\', '%', '&':
			if _, n := decodeAt(s, i, s[i:i+1]); n == 1 && incompleteEscape(s[i:]) {
				return s[:i]
			}
		}
	}
	return s
}

// incompleteEscape reports whether tail (starting at an escape character)
// could be the beginning of an escape sequence that was cut off.
func incompleteEscape(tail string) bool {
	switch tail[0] {
	case '%':
		return len(tail) < 3 && allHex(tail[1:])
	case '\\':
		if len(tail) == 1 {
			return true
		}
		return tail[1] == 'u' && len(tail) < 6 && allHex(tail[2:])
	default: // '&'
		return !strings.Contains(tail, ";") && len(tail) < 10
	}
}

func allHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isHex(s[i]) {
			return false
		}
	}
	return true
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

// span is a byte range [from, to) of a text to replace.
type span struct{ from, to int }

// spans finds every spelling of a secret in s, raw and decoded, merged and
// in order.
func (r *redactor) spans(s string) []span {
	if len(r.forms) == 0 || s == "" {
		return nil
	}
	var out []span
	find := func(text string, at func(int) int) {
		for _, f := range r.forms {
			for i := 0; ; {
				j := strings.Index(text[i:], f)
				if j < 0 {
					break
				}
				out = append(out, span{at(i + j), at(i + j + len(f))})
				i += j + len(f)
			}
		}
	}
	find(s, func(i int) int { return i })
	for _, syn := range escapeSyntaxes {
		if !strings.Contains(s, syn[:1]) {
			continue
		}
		view, starts := decodeView(s, syn)
		find(view, func(k int) int {
			if k < len(starts) {
				return int(starts[k])
			}
			return len(s)
		})
	}
	if len(out) == 0 {
		return nil
	}
	slices.SortFunc(out, func(a, b span) int { return a.from - b.from })
	merged := out[:1]
	for _, x := range out[1:] {
		if last := &merged[len(merged)-1]; x.from <= last.to {
			last.to = max(last.to, x.to)
		} else {
			merged = append(merged, x)
		}
	}
	return merged
}

// decodeView decodes one layer of the escape syntax syn in s, and says
// for each byte of the view where in s the sequence it came from begins.
func decodeView(s string, syn string) (string, []int32) {
	view := make([]byte, 0, len(s))
	starts := make([]int32, 0, len(s))
	for i := 0; i < len(s); {
		dec, n := decodeAt(s, i, syn)
		view = append(view, dec...)
		for range dec {
			starts = append(starts, int32(i))
		}
		i += n
	}
	return string(view), starts
}

// decodeAt decodes the sequence starting at s[i]: an escape of the syntax
// esc, or one byte as is. It returns the decoded bytes and how many bytes
// of s they took.
func decodeAt(s string, i int, syn string) ([]byte, int) {
	rest := s[i:]
	if rest[0] != syn[0] || syn == syntaxJSONLenient && len(rest) > 1 && rest[1] == '\\' {
		return []byte{rest[0]}, 1
	}
	switch rest[0] {
	case '%':
		if len(rest) >= 3 && isHex(rest[1]) && isHex(rest[2]) {
			v, _ := strconv.ParseUint(rest[1:3], 16, 8)
			return []byte{byte(v)}, 3
		}
	case '\\':
		if len(rest) < 2 {
			break
		}
		if c := strings.IndexByte(`"\/bfnrt`, rest[1]); c >= 0 {
			return []byte{"\"\\/\b\f\n\r\t"[c]}, 2
		}
		if rest[1] == 'u' && len(rest) >= 6 && allHex(rest[2:6]) {
			v, _ := strconv.ParseUint(rest[2:6], 16, 16)
			ru, n := rune(v), 6
			if utf16.IsSurrogate(ru) && len(rest) >= 12 && rest[6] == '\\' && rest[7] == 'u' && allHex(rest[8:12]) {
				lo, _ := strconv.ParseUint(rest[8:12], 16, 16)
				if pair := utf16.DecodeRune(ru, rune(lo)); pair != utf8.RuneError {
					ru, n = pair, 12
				}
			}
			return utf8.AppendRune(nil, ru), n
		}
	case '&':
		if end := strings.IndexByte(rest, ';'); end > 1 && end <= 10 {
			if ru, ok := htmlReference(rest[1:end]); ok {
				return utf8.AppendRune(nil, ru), end + 1
			}
		}
	}
	return []byte{rest[0]}, 1
}

// htmlReference decodes the name of an HTML character reference (between
// & and ;): numeric, or one of the names an HTML escaper writes.
func htmlReference(name string) (rune, bool) {
	switch name {
	case "amp":
		return '&', true
	case "lt":
		return '<', true
	case "gt":
		return '>', true
	case "quot":
		return '"', true
	case "apos":
		return '\'', true
	}
	if !strings.HasPrefix(name, "#") {
		return 0, false
	}
	num, base := name[1:], 10
	if strings.HasPrefix(num, "x") || strings.HasPrefix(num, "X") {
		num, base = num[1:], 16
	}
	v, err := strconv.ParseUint(num, base, 21)
	if err != nil || !utf8.ValidRune(rune(v)) {
		return 0, false
	}
	return rune(v), true
}

// Header returns a copy of h with every value redacted.
func (r *redactor) Header(h http.Header) http.Header {
	if len(r.forms) == 0 || h == nil {
		return h
	}
	out := make(http.Header, len(h))
	for k, vs := range h {
		rv := make([]string, len(vs))
		for i, v := range vs {
			rv[i] = r.String(v)
		}
		out[k] = rv
	}
	return out
}

// Error returns err with its message redacted; errors.Is and errors.As
// still see err.
func (r *redactor) Error(err error) error {
	if err == nil {
		return nil
	}
	if msg := err.Error(); r.String(msg) != msg {
		return &redactedError{err: err, msg: r.String(msg)}
	}
	return err
}

// redactedError is an error whose message had secrets in it.
type redactedError struct {
	err error
	msg string
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// redactors keeps one redactor per scope, rebuilt when the scope's
// credentials change.
type redactors struct {
	mu sync.Mutex
	m  map[string]cachedRedactor
}

type cachedRedactor struct {
	creds Credentials
	r     *redactor
}

// of returns the redactor for sc's current credentials.
func (rs *redactors) of(sc Scope) *redactor {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if c, ok := rs.m[sc.Name]; ok && c.creds == sc.Credentials {
		return c.r
	}
	if rs.m == nil {
		rs.m = map[string]cachedRedactor{}
	}
	r := newRedactor(sc.Credentials)
	rs.m[sc.Name] = cachedRedactor{creds: sc.Credentials, r: r}
	return r
}
