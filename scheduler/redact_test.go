package scheduler

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"
)

// echoes lists the spellings in which a provider might echo value v, each
// written by a standard encoder (not by the redactor under test).
func echoes(v string) map[string]string {
	jsonStd, _ := json.Marshal(v) // escapes <, > and & as \u003c …
	var plain strings.Builder
	enc := json.NewEncoder(&plain)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	jsonPlain := strings.TrimSuffix(plain.String(), "\n")
	var allLower, allUpper strings.Builder
	for _, r := range v {
		if r < 0x10000 {
			fmt.Fprintf(&allLower, `\u%04x`, r)
			fmt.Fprintf(&allUpper, `\u%04X`, r)
		} else {
			allLower.WriteRune(r)
			allUpper.WriteRune(r)
		}
	}
	pathUpper := url.PathEscape(v)
	out := map[string]string{
		"raw":              v,
		"base64":           base64.StdEncoding.EncodeToString([]byte(v)),
		"base64url":        base64.URLEncoding.EncodeToString([]byte(v)),
		"base64raw":        base64.RawStdEncoding.EncodeToString([]byte(v)),
		"base64rawurl":     base64.RawURLEncoding.EncodeToString([]byte(v)),
		"json":             unquote(string(jsonStd)),
		"json-plain":       unquote(jsonPlain),
		"json-slash":       strings.ReplaceAll(unquote(string(jsonStd)), "/", `\/`),
		"json-u-lower":     allLower.String(),
		"json-u-upper":     allUpper.String(),
		"query":            url.QueryEscape(v),
		"path":             pathUpper,
		"path-lower-hex":   lowerHex(pathUpper),
		"query-lower-hex":  lowerHex(url.QueryEscape(v)),
		"html":             html.EscapeString(v),
		"json-of-query":    strings.ReplaceAll(url.QueryEscape(v), "%2F", `%2F`),
		"base64-in-query":  url.QueryEscape(base64.StdEncoding.EncodeToString([]byte(v))),
		"base64-json-slsh": strings.ReplaceAll(base64.StdEncoding.EncodeToString([]byte(v)), "/", `\/`),
	}
	return out
}

// unquote drops the quotes around a JSON string.
func unquote(s string) string { return s[1 : len(s)-1] }

// lowerHex writes the hex digits of percent escapes in lower case.
func lowerHex(s string) string {
	b := []byte(s)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' {
			b[i+1], b[i+2] = lower(b[i+1]), lower(b[i+2])
		}
	}
	return string(b)
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'F' {
		return c + 'a' - 'A'
	}
	return c
}

// testSecret has every character an encoder treats specially: slash,
// plus, equals, ampersand, angle brackets, quote, backslash, percent,
// space and non-ASCII.
const testSecret = `tok/SeCrEt+x=y&z<1>"q\p%41 ü-end`

func TestRedactorEveryEncoding(t *testing.T) {
	creds := map[string]Credentials{
		"bearer": {Type: CredentialBearer, Token: testSecret},
		"header": {Type: CredentialHeader, Name: "X-Key", Value: testSecret},
		"basic":  {Type: CredentialBasic, Username: "ann", Password: testSecret},
		// A placeholder password is not searched alone, but user:password is.
		"basic-placeholder": {Type: CredentialBasic, Username: "ann-user-" + testSecret[:8], Password: "x"},
	}
	for name, c := range creds {
		r := newRedactor(c)
		values := []string{testSecret}
		if c.Type == CredentialBasic {
			values = append(values, c.Username+":"+c.Password)
		}
		if name == "basic-placeholder" {
			values = values[1:]
		}
		for _, v := range values {
			for enc, e := range echoes(v) {
				text := `{"echo":"` + e + `","n":1}`
				got := r.String(text)
				if strings.Contains(got, e) || !strings.Contains(got, redactedMark) {
					t.Errorf("%s, %s of %q: %s → %s", name, enc, v, text, got)
				}
				if !strings.HasPrefix(got, `{"echo":"`) || !strings.HasSuffix(got, `","n":1}`) {
					t.Errorf("%s, %s: the text around the secret changed: %s", name, enc, got)
				}
			}
		}
	}
}

// Each escape syntax is decoded on its own: secrets whose spellings hold
// the escapes of one syntax and no other escape character (testSecret has
// them all, raw).
func TestRedactorEachSyntaxAlone(t *testing.T) {
	for _, secret := range []string{`path/to"key-1234`, `key with/space-1234`, `key<with>'quote-1234`} {
		r := newRedactor(Credentials{Type: CredentialBearer, Token: secret})
		for enc, e := range echoes(secret) {
			text := "echo: " + e + "."
			if got := r.String(text); strings.Contains(got, e) || got != "echo: "+r.mark+"." {
				t.Errorf("%s of %q: %s → %s", enc, secret, text, got)
			}
		}
	}
}

func TestRedactorLeavesPlainTextAlone(t *testing.T) {
	r := newRedactor(Credentials{Type: CredentialBasic, Username: "ann", Password: "x"})
	for _, s := range []string{"x-ratelimit: 1", `{"x":"\u0078"}`, "a%20b&amp;c", "Annex"} {
		if got := r.String(s); got != s {
			t.Errorf("%q → %q: a placeholder password alone is not a secret", s, got)
		}
	}
}

// A cut through a secret, in any spelling, keeps none of its start.
func TestRedactorCutKeepsNoPrefix(t *testing.T) {
	r := newRedactor(Credentials{Type: CredentialBearer, Token: testSecret})
	for enc, e := range echoes(testSecret) {
		text := strings.Repeat("a", 100) + e + strings.Repeat("b", 100)
		for n := 100; n <= 100+len(e); n++ {
			got := r.trimPartial(r.String(text[:n]))
			for k := 1; k <= len(e) && k <= len(got); k++ {
				if strings.HasSuffix(got, e[:k]) {
					t.Fatalf("%s cut at %d keeps %q of %q", enc, n-100, got[100:], e)
				}
			}
			if len(got) < 100 {
				t.Fatalf("%s cut at %d: took away more than the secret: %q", enc, n-100, got)
			}
		}
		if got := r.Cut(text, 100+len(e)/2); !strings.HasPrefix(got, strings.Repeat("a", 100)) || strings.Contains(got, e[:len(e)/2]) {
			t.Fatalf("%s: Cut through the secret = %q", enc, got)
		}
	}
}

// The redactor is applied before the cut: a secret across the bound is
// replaced, not kept in part.
func TestRedactorCutRedactsFirst(t *testing.T) {
	secret := "SeCrEt-0123456789-abc"
	r := newRedactor(Credentials{Type: CredentialBearer, Token: secret})
	text := strings.Repeat("x", 494) + secret + " tail"
	got := r.Cut(text, 512)
	if strings.Contains(got, secret[:4]) {
		t.Fatalf("cut at 512 keeps part of the secret: …%s", got[480:])
	}
}

// FuzzRedact: the echo of a secret is found wherever it stands in a text,
// no spelling of the secret survives redaction, and a cut keeps none. (Text right
// before the echo that leaves a JSON, URL or HTML escape open makes the
// echo read as something else, so it is not an echo of the secret:
// skipped.)
func FuzzRedact(f *testing.F) {
	f.Add(testSecret, "before ", " after", uint8(0), 10)
	f.Add("SeCrEt-0123456789-abc", `{"a":"`, `"}`, uint8(6), 3)
	f.Add("tok/SECRET", `tok\/`, "", uint8(8), 5)
	f.Add("a b/c+d", "%", "%2", uint8(10), 2)
	f.Fuzz(func(t *testing.T, secret, before, after string, which uint8, cutAt int) {
		if len(secret) < minSecretLen || !utf8.ValidString(secret) || strings.ContainsAny(secret, "\r\n") ||
			dropIncompleteEscape(before) != before {
			t.Skip()
		}
		r := newRedactor(Credentials{Type: CredentialBearer, Token: secret})
		if !r.clean {
			t.Skip() // a secret spelled like every mark
		}
		es := echoes(secret)
		names := make([]string, 0, len(es))
		for n := range es {
			names = append(names, n)
		}
		sortStrings(names)
		e := es[names[int(which)%len(names)]]
		text := before + e + after
		got := r.String(text)
		if !strings.Contains(got, r.mark) {
			t.Fatalf("the echo of %q in %q was not found: %q", secret, text, got)
		}
		// With no escape around the echo, no spelling of the secret is left
		// anywhere (escapes around it may make one appear that reads as
		// something else, such as %000%00), and a cut keeps none.
		if strings.ContainsAny(before+after, `\%&`) {
			return
		}
		for n, x := range es {
			if strings.Contains(got, x) {
				t.Fatalf("%s of %q survives in %q → %q", n, secret, text, got)
			}
		}
		n := len(before) + max(0, min(cutAt, len(e)))
		cut := r.trimPartial(r.String(text[:n]))
		for nm, x := range es {
			if strings.Contains(cut, x) {
				t.Fatalf("%s survives a cut: %q", nm, cut)
			}
			if k := min(len(x), 4); len(cut) > len(before) && strings.HasSuffix(cut, x[:k]) {
				t.Fatalf("a cut keeps the start of %s: %q", nm, cut)
			}
		}
	})
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}
