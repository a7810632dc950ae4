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
			hint.Raw = Cut(v, maxRaw)
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

// budgetReader is one source of budget figures a profile reads from every
// response.
type budgetReader interface {
	source() BudgetSource
	read(r *reading) *Budget
}

// headerBudget reads BudgetHeaders through ReadBudget. When resource is
// set, the header it names says which budget the figures count; the
// value defaultResource is the profile's default budget.
type headerBudget struct {
	names                     BudgetHeaders
	note                      string
	resource, defaultResource string
}

func (b headerBudget) source() BudgetSource {
	s := BudgetSource{Remaining: strings.ToLower(b.names.Remaining), Limit: strings.ToLower(b.names.Limit), Reset: strings.ToLower(b.names.Reset), Note: b.note}
	if s.Reset != "" {
		s.ResetFormat = b.names.ResetForm.String()
	}
	if b.resource != "" {
		s.Resource = strings.ToLower(b.resource) + " (default " + b.defaultResource + ")"
	}
	return s
}

func (b headerBudget) read(r *reading) *Budget {
	budget, _ := ReadBudget(r.h, b.names, r.now)
	if budget != nil && b.resource != "" {
		if name := ResourceName(r.header(b.resource)); name != b.defaultResource {
			budget.Resource = name
		}
	}
	return budget
}

// ResourceName is a provider's name for one of its budgets as pacer keeps
// it: trimmed, at most MaxResource bytes of ASCII letters, digits and
// "_-.:/+=" (the rest dropped; case is kept, as a partition key's base64
// needs), so that no answer can smuggle markup
// or an unbounded key into the scope's budgets.
func ResourceName(v string) string {
	var b strings.Builder
	for _, c := range strings.TrimSpace(v) {
		if b.Len() >= MaxResource {
			break
		}
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("_-.:/+=", c) {
			b.WriteRune(c)
		}
	}
	return b.String()
}

// ietfBudget reads the IETF RateLimit fields called field and policy, and
// the old RateLimit-* fields when old is set.
type ietfBudget struct {
	field, policy string
	old           bool
}

func (b ietfBudget) source() BudgetSource {
	note := "IETF draft: remaining r and reset t of the most constrained request policy; quota q from " + strings.ToLower(b.policy)
	if b.old {
		note += "; else the old ratelimit-limit/-remaining/-reset (delta-seconds)"
	}
	return BudgetSource{Remaining: strings.ToLower(b.field), Limit: strings.ToLower(b.policy), Reset: strings.ToLower(b.field), ResetFormat: ResetDeltaSeconds.String(), Note: note}
}

func (b ietfBudget) read(r *reading) *Budget {
	budget, _ := readIETF(r.h, b.field, b.policy, b.old, r.now)
	return budget
}

// funcBudget computes figures from a provider-specific header or body.
type funcBudget struct {
	desc BudgetSource
	fn   func(r *reading) *Budget
}

func (b funcBudget) source() BudgetSource    { return b.desc }
func (b funcBudget) read(r *reading) *Budget { return b.fn(r) }

// usedOfLimit reads "used/limit" (Shopify's call limit, Salesforce's
// api-usage) as a Budget; nil unless both are non-negative integers with
// limit > 0.
func usedOfLimit(v string) *Budget {
	used, limit, ok := strings.Cut(strings.TrimSpace(v), "/")
	if !ok {
		return nil
	}
	u, okU := count(used)
	l, okL := count(limit)
	if !okU || !okL || l <= 0 {
		return nil
	}
	return &Budget{Remaining: max(l-u, 0), Limit: l}
}

// keyValues reads `k=v; k=v` or `k=v, k=v` pairs (Sforce-Limit-Info,
// zendesk-ratelimit-tickets-index), keys lower-cased, values trimmed.
func keyValues(v string) map[string]string {
	out := map[string]string{}
	for _, part := range strings.FieldsFunc(v, func(r rune) bool { return r == ';' || r == ',' }) {
		k, val, ok := strings.Cut(part, "=")
		if !ok {
			continue
		}
		out[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(val)
	}
	return out
}
