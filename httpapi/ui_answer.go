package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"unicode"
	"unicode/utf8"

	"pacer/scheduler"
)

// answerPageLimit bounds the body an answer shows on a page: the stored
// answer may reach the result limit (1 MiB by default), more than a person
// reads; the API has it whole.
const answerPageLimit = 16 << 10

// answerView is a provider's answer as a page shows it: its status, its
// headers and its body as JSON, text or a size.
type answerView struct {
	Status  int
	Headers []uiHeader
	// Size is the body's stored length; Stored is true when the store
	// already cut it (the result limit, or an attempt's copy).
	Size   int
	Stored bool
	// Format is "json" (Text is pretty-printed), "text", or "binary" (only
	// Size and ContentType are shown); empty without a body.
	Format      string
	Text        string
	ContentType string
	// Cut is true when Text is only the first answerPageLimit bytes.
	Cut bool
}

// newAnswerView prepares res for a page; nil for no answer.
func newAnswerView(res *scheduler.Result) *answerView {
	if res == nil {
		return nil
	}
	v := &answerView{Status: res.Status, Headers: displayHeaders(res.Headers, shownAnswerHeader), Size: len(res.Body), Stored: res.Truncated}
	for k, h := range res.Headers {
		if http.CanonicalHeaderKey(k) == "Content-Type" {
			v.ContentType = h
		}
	}
	body := res.Body
	if res.Truncated {
		body = trimPartialRune(body)
	}
	var pretty bytes.Buffer
	switch {
	case len(body) == 0:
	case json.Valid(body) && json.Indent(&pretty, body, "", "  ") == nil:
		v.Format, v.Text = "json", pretty.String()
	case printableText(body):
		v.Format, v.Text = "text", string(body)
	default:
		v.Format = "binary"
	}
	if len(v.Text) > answerPageLimit {
		v.Text, v.Cut = string(trimPartialRune([]byte(v.Text[:answerPageLimit]))), true
	}
	return v
}

// printableText reports whether b is UTF-8 text a page can show: no
// control characters but tabs and line breaks.
func printableText(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if unicode.IsControl(r) && r != '\t' && r != '\n' && r != '\r' {
			return false
		}
	}
	return true
}

// trimPartialRune drops an incomplete UTF-8 sequence that a cut left at
// the end of b.
func trimPartialRune(b []byte) []byte {
	for i := 1; i <= utf8.UTFMax-1 && i <= len(b); i++ {
		if utf8.RuneStart(b[len(b)-i]) {
			if !utf8.FullRune(b[len(b)-i:]) {
				return b[:len(b)-i]
			}
			break
		}
	}
	return b
}

// shownAnswerHeader reports whether pages may show a response header's
// value: not cookies, authentication challenges or anything named like a
// secret (the sender redacted the scope's own secrets already; these may
// carry others).
func shownAnswerHeader(name string) bool {
	switch http.CanonicalHeaderKey(name) {
	case "Set-Cookie", "Set-Cookie2", "Cookie", "Authorization", "Proxy-Authorization":
		return false
	}
	return !secretQueryKey.MatchString(name)
}

// Limit is how many bytes of a body the page shows.
func (answerView) Limit() int { return answerPageLimit }
