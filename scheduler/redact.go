package scheduler

import (
	"encoding/base64"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"pacer/providers"
)

// redactedMark replaces every spelling of a secret, unless a secret could
// be spelled with it (see markFor).
const redactedMark = "[redacted]"

// otherMarks are the marks tried when a secret could be spelled with
// redactedMark, in order.
var otherMarks = [...]string{"<redacted>", "{redacted}", "(redacted)", "[REDACTED]", "<REDACTED>", "[…]", "«…»"}

// markFor returns the first mark that no spelling in forms can overlap:
// none contains its brackets (a spelling that overlaps a mark has to
// reach its first or last byte) nor lies within two marks side by side.
// clean is false when every mark could be overlapped.
func markFor(forms []string) (mark string, clean bool) {
	for _, m := range append([]string{redactedMark}, otherMarks[:]...) {
		first, _ := utf8.DecodeRuneInString(m)
		last, _ := utf8.DecodeLastRuneInString(m)
		ok := true
		for _, f := range forms {
			if strings.ContainsRune(f, first) || strings.ContainsRune(f, last) || strings.Contains(m+m, f) {
				ok = false
				break
			}
		}
		if ok {
			return m, true
		}
	}
	return redactedMark, false
}

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
	// shortest is the length of the shortest form: no shorter text can
	// spell one, raw or decoded (decoding never lengthens a text).
	shortest int
	// mark replaces each; clean is true when no form can overlap it.
	mark  string
	clean bool
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
	forms = slices.Compact(forms)
	mark, clean := markFor(forms)
	r := &redactor{forms: forms, mark: mark, clean: clean}
	if len(forms) > 0 {
		r.shortest = len(forms[len(forms)-1])
	}
	return r
}

// String returns s with every spelling of a secret replaced.
func (r *redactor) String(s string) string {
	// The mark is chosen so that it cannot help spell a secret anew; when
	// no mark is clean (markFor), a few more passes merge what it spells.
	for range 4 {
		sp := r.spans(s)
		if len(sp) == 0 {
			return s
		}
		var b strings.Builder
		last := 0
		for _, x := range sp {
			b.WriteString(s[last:x.from])
			b.WriteString(r.mark)
			last = x.to
		}
		b.WriteString(s[last:])
		s = b.String()
	}
	return s
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
	return r.trimPartial(providers.Cut(s, n))
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
		d, ok := decodeFor(s, syn)
		if !ok {
			continue
		}
		for _, f := range r.forms {
			for k := max(0, len(d.text)-len(f)+1); k < len(d.text); k++ {
				if from := d.from(k); from < at && strings.HasPrefix(f, d.text[k:]) {
					at = from
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

// escapeStarts are the characters that start an escape of any syntax: a
// text without them decodes to itself.
const escapeStarts = syntaxJSON + syntaxURL + syntaxHTML

// dropIncompleteEscape removes a JSON, URL or HTML escape sequence that s
// ends in the middle of.
func dropIncompleteEscape(s string) string {
	for back := 1; back <= 12 && back <= len(s); back++ {
		i := len(s) - back
		switch s[i] {
		case '\\', '%', '&':
			if _, n := decodeAt(s, i, s[i:i+1], nil); n == 1 && incompleteEscape(s[i:]) {
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
	if len(r.forms) == 0 || len(s) < r.shortest {
		return nil
	}
	var out []span
	find := func(text string, from, to func(int) int) {
		for _, f := range r.forms {
			for i := 0; ; {
				j := strings.Index(text[i:], f)
				if j < 0 {
					break
				}
				out = append(out, span{from(i + j), to(i + j + len(f))})
				i += j + len(f)
			}
		}
	}
	same := func(i int) int { return i }
	find(s, same, same)
	if strings.ContainsAny(s, escapeStarts) {
		for _, syn := range escapeSyntaxes {
			if d, ok := decodeFor(s, syn); ok {
				find(d.text, d.from, d.to)
			}
		}
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

// decoded is a text with one layer of one escape syntax decoded, and where
// each escape came from.
type decoded struct {
	text  string
	marks []mark // one per escape decoded, in order
}

// mark says that the vn bytes of the decoded text at v came from the
// escape of sn bytes at s in the source.
type mark struct{ v, vn, s, sn int }

// at returns the last mark that begins at or before the decoded offset k,
// or false.
func (d *decoded) at(k int) (mark, bool) {
	i := sort.Search(len(d.marks), func(i int) bool { return d.marks[i].v > k }) - 1
	if i < 0 {
		return mark{}, false
	}
	return d.marks[i], true
}

// from is where in the source the decoded byte k comes from: the start of
// its escape, if it came from one.
func (d *decoded) from(k int) int {
	m, ok := d.at(k)
	switch {
	case !ok:
		return k
	case k < m.v+m.vn:
		return m.s
	}
	return m.s + m.sn + k - m.v - m.vn
}

// to is where in the source the decoded text up to k (exclusive) ends: past
// the whole escape that the byte before k came from.
func (d *decoded) to(k int) int {
	if k == 0 {
		return 0
	}
	m, ok := d.at(k - 1)
	switch {
	case !ok:
		return k
	case k-1 < m.v+m.vn:
		return m.s + m.sn
	}
	return m.s + m.sn + k - m.v - m.vn
}

// decodeFor is decode, skipping at once a syntax s cannot hold.
func decodeFor(s, syn string) (decoded, bool) {
	if syn == syntaxJSONLenient && !strings.Contains(s, `\\`) || !strings.Contains(s, syn[:1]) {
		return decoded{}, false
	}
	return decode(s, syn)
}

// decode decodes one layer of the escape syntax syn in s; false when s
// holds no escape of it.
func decode(s string, syn string) (decoded, bool) {
	var (
		view  []byte
		marks []mark
		last  int // s[:last] is in view
		buf   [utf8.UTFMax]byte
	)
	for i := 0; i < len(s); {
		j := strings.IndexByte(s[i:], syn[0])
		if j < 0 {
			break
		}
		e := i + j
		dec, n := decodeAt(s, e, syn, buf[:0])
		if n == 1 { // not an escape
			i = e + 1
			continue
		}
		if view == nil {
			view = make([]byte, 0, len(s))
			marks = make([]mark, 0, strings.Count(s[e:], syn[:1]))
		}
		view = append(view, s[last:e]...)
		marks = append(marks, mark{v: len(view), vn: len(dec), s: e, sn: n})
		view = append(view, dec...)
		i, last = e+n, e+n
	}
	if marks == nil {
		return decoded{}, false
	}
	view = append(view, s[last:]...)
	return decoded{text: string(view), marks: marks}, true
}

// decodeAt decodes the sequence starting at s[i]: an escape of the syntax
// syn, or one byte as is. It appends the decoded bytes to dst and says how
// many bytes of s they took.
func decodeAt(s string, i int, syn string, dst []byte) ([]byte, int) {
	rest := s[i:]
	if rest[0] != syn[0] || syn == syntaxJSONLenient && len(rest) > 1 && rest[1] == '\\' {
		return append(dst, rest[0]), 1
	}
	switch rest[0] {
	case '%':
		if len(rest) >= 3 && isHex(rest[1]) && isHex(rest[2]) {
			v, _ := strconv.ParseUint(rest[1:3], 16, 8)
			return append(dst, byte(v)), 3
		}
	case '\\':
		if len(rest) < 2 {
			break
		}
		if c := strings.IndexByte(`"\/bfnrt`, rest[1]); c >= 0 {
			return append(dst, "\"\\/\b\f\n\r\t"[c]), 2
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
			return utf8.AppendRune(dst, ru), n
		}
	case '&':
		if end := strings.IndexByte(rest, ';'); end > 1 && end <= 10 {
			if ru, ok := htmlReference(rest[1:end]); ok {
				return utf8.AppendRune(dst, ru), end + 1
			}
		}
	}
	return append(dst, rest[0]), 1
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

// Header returns h with every value redacted, and whether a value held a
// secret: h itself when none did, else a redacted copy. It never changes h.
func (r *redactor) Header(h http.Header) (http.Header, bool) {
	if len(r.forms) == 0 || !r.anyIn(h) {
		return h, false
	}
	out := make(http.Header, len(h))
	for k, vs := range h {
		rv := make([]string, len(vs))
		for i, v := range vs {
			rv[i] = r.String(v)
		}
		out[k] = rv
	}
	return out, true
}

// anyIn reports whether a value of h holds a secret: whether String would
// change it.
func (r *redactor) anyIn(h http.Header) bool {
	for _, vs := range h {
		for _, v := range vs {
			if len(r.spans(v)) > 0 {
				return true
			}
		}
	}
	return false
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
