package providers

import (
	"net/http"
	"strings"
	"time"
)

// BudgetHeaders names the headers in which a provider states its budget
// figures, as canonical or lower-case header names.
type BudgetHeaders struct {
	// Limit names the header with the window's budget size.
	Limit string
	// Remaining names the header with the requests left in the window.
	Remaining string
	// Reset names the header with the time the budget refills.
	Reset string
	// ResetForm says how Reset is written.
	ResetForm ResetForm
}

// ReadBudget reads the budget figures named by names from h, for a response
// that arrived at now. The Budget is nil unless the remaining figure is a
// non-negative integer: a missing or malformed remaining must never look
// like an exhausted budget. Limit is 0 and ResetAt zero when not stated or
// unusable. The Hint is the reset header read with ParseReset (converted
// through h's Date header), named after the header in lower case; it is
// returned even without a Budget, and is the zero Hint when the header is
// absent. Values are read up to the first ',' or ';', so an old IETF
// `RateLimit-Limit: 100, 100;w=60` yields 100.
func ReadBudget(h http.Header, names BudgetHeaders, now time.Time) (*Budget, Hint) {
	var hint Hint
	if names.Reset != "" {
		if v := h.Get(names.Reset); v != "" {
			hint = ParseReset(names.ResetForm, strings.ToLower(names.Reset), firstElement(v), h.Get("Date"), now)
			hint.Raw = cut(v, maxRaw)
		}
	}
	remaining, ok := count(h.Get(names.Remaining))
	if names.Remaining == "" || !ok {
		return nil, hint
	}
	b := &Budget{Remaining: remaining}
	if names.Limit != "" {
		b.Limit, _ = count(h.Get(names.Limit))
	}
	if hint.Usable() {
		b.ResetAt = hint.At
	}
	return b, hint
}

// count reads a budget figure: a non-negative integer (a fraction is
// dropped) before any ',' or ';'.
func count(v string) (int64, bool) {
	if v == "" {
		return 0, false
	}
	n, note := parseNumber(firstElement(v))
	if note != "" {
		return 0, false
	}
	return n.whole, true
}

// firstElement is v up to its first ',' or ';'.
func firstElement(v string) string {
	if i := strings.IndexAny(v, ",;"); i >= 0 {
		return v[:i]
	}
	return v
}
