package providers

import (
	"strings"
	"time"
)

// SalesforceAPILimitWait is how long a scope whose org spent its rolling
// 24-hour API allowance waits before probing again: Salesforce sends no
// hint, old calls age out of the window gradually, and probing every
// minute would only add refused calls.
const SalesforceAPILimitWait = time.Hour

// Salesforce is the profile for the Salesforce REST API (providers.md §6).
//
// A 403 with errorCode REQUEST_LIMIT_EXCEEDED is a rate limit, not a
// permission error: the org's rolling 24-hour API allowance is spent (wait
// SalesforceAPILimitWait), or, when the message names
// ConcurrentPerOrgLongTxn, too many long-running requests are in flight
// (the policy's default delay) (verify). Errors are a JSON array
// `[{message, errorCode, fields}]`; no Retry-After is sent. 401
// INVALID_SESSION_ID is authRevoked (refreshing is the token owner's job);
// other 403s (INSUFFICIENT_ACCESS) and 400s (MALFORMED_QUERY,
// INVALID_FIELD, REQUIRED_FIELD_MISSING, DUPLICATE_VALUE, …) are
// permanent, with the errorCode as reason; 300 (an external ID matching
// several records) is permanent. 503 is transient; other 5xx an unknown
// outcome for a mutation. Sforce-Limit-Info (api-usage=USED/LIMIT) gives
// the budget. The limit is per org, which is the scope: it pauses no
// other scope (the org's other integrations share it, unseen).
type Salesforce struct{ *table }

var _ Profile = (*Salesforce)(nil)

// NewSalesforce returns the Salesforce profile.
func NewSalesforce() *Salesforce {
	code := func(codes ...string) func(r *reading) bool {
		return func(r *reading) bool { return r.fields().has("[].errorCode", codes...) }
	}
	codeReason := func(fallback string) func(r *reading) string {
		return func(r *reading) string {
			if c := r.fields().first("[].errorCode"); c != "" {
				return strings.ReplaceAll(strings.ToLower(Cut(c, 64)), "_", "-")
			}
			return fallback
		}
	}
	t := table{
		name: "salesforce", title: "Salesforce REST API", ref: "providers.md §6",
		budgets: []budgetReader{funcBudget{
			desc: BudgetSource{Remaining: "sforce-limit-info", Limit: "sforce-limit-info", Note: "api-usage=USED/LIMIT of the org's rolling 24 h (or per-app-api-usage), the most constrained"},
			fn:   salesforceBudget,
		}},
		idemNote:     "none: upsert by external ID (PATCH /sobjects/{object}/{externalIdField}/{value}) makes a resend harmless",
		defaults:     Defaults{MaxConcurrent: 4},
		defaultsNote: "the org's 24-h allowance depends on edition and licences: learned from Sforce-Limit-Info",
		notes: []string{
			"The limit is per org, shared with the customer's other integrations: it pauses only the org's scope.",
		},
	}
	rules := []rule{
		{
			Signal: Signal{Status: "403", When: "errorCode REQUEST_LIMIT_EXCEEDED, message ConcurrentPerOrgLongTxn", Class: ClassRateLimited, Reason: "concurrent-limit",
				Note: "too many long-running requests in flight", Verify: true},
			match: func(r *reading) bool {
				if !code("REQUEST_LIMIT_EXCEEDED")(r) {
					return false
				}
				for _, m := range r.fields().get("[].message") {
					if strings.Contains(strings.ToLower(m), "concurrent") {
						return true
					}
				}
				return false
			},
		},
		{
			Signal: Signal{Status: "403", When: "errorCode REQUEST_LIMIT_EXCEEDED", Class: ClassRateLimited, Reason: "api-limit",
				Note: "the org's rolling 24-h API allowance is spent; no Retry-After is sent"},
			match: code("REQUEST_LIMIT_EXCEEDED"),
			hints: []hinter{retryAfter(), fixedHint{name: "salesforce-api-limit-default", wait: SalesforceAPILimitWait, note: "24-h allowance spent; probing hourly"}},
		},
		{Signal: Signal{Status: "401", Class: ClassAuthRevoked, Reason: "invalid-session-id | unauthorized", Note: "INVALID_SESSION_ID: expired or revoked; a refresh answering invalid_grant means revoked"},
			reasonOf: codeReason("unauthorized")},
		{Signal: Signal{Status: "403", When: "any other errorCode (INSUFFICIENT_ACCESS, …)", Class: ClassPermanent, Reason: "insufficient-access | permission"},
			reasonOf: codeReason("permission")},
		{Signal: Signal{Status: "300", Class: ClassPermanent, Reason: "ambiguous-external-id", Note: "the external ID matches several records; nothing was written"}},
		{Signal: Signal{Status: "400", Class: ClassPermanent, Reason: "malformed-query | invalid-field | required-field-missing | duplicate-value | … | bad-request", Note: "the errorCode, in lower case"},
			reasonOf: codeReason("bad-request")},
		{Signal: Signal{Status: "503", Class: ClassTransient, Reason: "unavailable", Note: "maintenance or overload"}},
		noKeysServerError("5xx", "server-error", "Salesforce honours no idempotency keys; a 5xx may come after the write landed (upsert by external ID makes a resend safe)"),
	}
	return &Salesforce{newTable(t, rules)}
}

// salesforceBudget reads Sforce-Limit-Info: `api-usage=25/15000` and the
// older `per-app-api-usage=17/250(appName=…)`; the most constrained.
func salesforceBudget(r *reading) *Budget {
	kv := keyValues(r.header("Sforce-Limit-Info"))
	var best *Budget
	for _, key := range []string{"api-usage", "per-app-api-usage"} {
		v, _, _ := strings.Cut(kv[key], "(")
		if b := usedOfLimit(v); b != nil && (best == nil || b.Remaining < best.Remaining) {
			best = b
		}
	}
	return best
}
