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
	bodyView
}

// bodyView is a body as a page shows it: pretty-printed JSON, text, or
// only its size.
type bodyView struct {
	// Size is the body's stored length; Stored is true when the store
	// already cut it (the result limit, or an attempt's copy).
	Size   int
	Stored bool
	// Format is "json" (Text is pretty-printed), "text", or "binary" (only
	// Size and ContentType are shown); empty without a body.
	Format      string
	Text        string
	ContentType string
	// Cut is true when Text is only the first Limit bytes.
	Cut   bool
	Limit int
}

// requestTextLimit is how much of a request body that is not JSON the
// operation page shows (design §14: the first KiB).
const requestTextLimit = 1 << 10

// newAnswerView prepares res for a page; nil for no answer.
func newAnswerView(res *scheduler.Result) *answerView {
	if res == nil {
		return nil
	}
	var contentType string
	for k, h := range res.Headers {
		if http.CanonicalHeaderKey(k) == "Content-Type" {
			contentType = h
		}
	}
	return &answerView{Status: res.Status, Headers: displayHeaders(res.Headers, shownAnswerHeader),
		bodyView: newBodyView(res.Body, contentType, res.Truncated, answerPageLimit)}
}

// newBodyView prepares body for a page: JSON pretty-printed up to
// answerPageLimit bytes, other text up to textLimit bytes, anything else
// by its size. stored says the store already cut it.
func newBodyView(body []byte, contentType string, stored bool, textLimit int) bodyView {
	v := bodyView{Size: len(body), Stored: stored, ContentType: contentType, Limit: answerPageLimit}
	if stored {
		body = trimPartialRune(body)
	}
	var pretty bytes.Buffer
	switch {
	case len(body) == 0:
	case json.Valid(body) && json.Indent(&pretty, body, "", "  ") == nil:
		v.Format, v.Text = "json", pretty.String()
	case printableText(body):
		v.Format, v.Text, v.Limit = "text", string(body), textLimit
	default:
		v.Format = "binary"
	}
	if len(v.Text) > v.Limit {
		v.Text, v.Cut = string(trimPartialRune([]byte(v.Text[:v.Limit]))), true
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
