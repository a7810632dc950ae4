package stored

import (
	"unicode/utf8"

	"pacer/providers"
)

// AttemptHint is the hint an attempt and its operation's last outcome
// store of an answer: nil when the answer carried none, its time in UTC.
func AttemptHint(h providers.Hint) *providers.Hint {
	if h == (providers.Hint{}) {
		return nil
	}
	h.At = h.At.UTC()
	return &h
}

// AttemptDetail is the detail an attempt stores of an outcome: at most
// providers.MaxDetail bytes, cut on a UTF-8 boundary.
func AttemptDetail(s string) string { return Bound(s, providers.MaxDetail) }

// Bound cuts s to at most n bytes on a UTF-8 boundary.
func Bound(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
