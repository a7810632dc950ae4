package providers

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// maxBodyInDetail bounds how much of a response body a Detail quotes.
const maxBodyInDetail = 512

// describe builds an Outcome.Detail: the status line, notes, then the
// first bytes of body, made printable and bounded to MaxDetail.
func describe(resp *http.Response, body []byte, notes ...string) string {
	var b strings.Builder
	b.WriteString("HTTP ")
	b.WriteString(strconv.Itoa(resp.StatusCode))
	if text := http.StatusText(resp.StatusCode); text != "" {
		b.WriteString(" ")
		b.WriteString(text)
	}
	for _, n := range notes {
		if n != "" {
			b.WriteString("; ")
			b.WriteString(printable(Cut(n, MaxDetail/4)))
		}
	}
	if len(body) > 0 {
		b.WriteString("; body: ")
		quoted := string(body[:min(len(body), maxBodyInDetail+4)])
		b.WriteString(printable(Cut(quoted, maxBodyInDetail)))
		if len(body) > maxBodyInDetail {
			b.WriteString("…")
		}
	}
	return bound(b.String())
}

// printable replaces invalid UTF-8 and control characters so a Detail
// stays one readable line.
func printable(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

// hintNotes says, for each hint present with a Note, what was ignored or
// adjusted and why.
func hintNotes(hints ...Hint) []string {
	var out []string
	for _, h := range hints {
		if h.Source != "" && h.Note != "" {
			out = append(out, fmt.Sprintf("%s %q %s", h.Source, Cut(h.Raw, 64), h.Note))
		}
	}
	return out
}
