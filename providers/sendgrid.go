package providers

import "strings"

// SendGrid is the profile for the SendGrid v3 API (providers.md §15).
//
// 429 (`errors[{message: "too many requests"}]`) is rateLimited, waiting
// for X-RateLimit-Reset (epoch seconds, converted through Date);
// X-RateLimit-Limit/-Remaining give the budget, per endpoint (the numbers
// are unpublished). A 403 whose errors[].message is "Too many bad
// requests. Temporary block" (SendGrid's error docs) is rateLimited, the
// same waits. 401 is authRevoked, any other 403 (a key lacking a scope) and
// 400 (`errors[{field, message}]`) permanent. mail/send's 202 means queued,
// not delivered: success. SendGrid honours no idempotency keys, so a 5xx
// (other than 503) on a send is an unknown outcome: a resend may mail
// twice.
type SendGrid struct{ *table }

var _ Profile = (*SendGrid)(nil)

// NewSendGrid returns the SendGrid profile.
func NewSendGrid() *SendGrid {
	t := table{
		name: "sendgrid", title: "SendGrid v3 API", ref: "providers.md §15",
		rateHints: []hinter{retryAfter(), fromHeader("X-Ratelimit-Reset", ResetEpochSeconds)},
		budgets: []budgetReader{headerBudget{names: BudgetHeaders{Limit: "X-Ratelimit-Limit", Remaining: "X-Ratelimit-Remaining", Reset: "X-Ratelimit-Reset", ResetForm: ResetEpochSeconds},
			note: "per endpoint"}},
		idemNote:     "none: a send resent after a timeout may mail twice",
		defaults:     Defaults{MaxConcurrent: 4},
		defaultsNote: "limits are per endpoint and unpublished: learned from the headers",
	}
	rules := []rule{
		{Signal: Signal{Status: "429", Class: ClassRateLimited, Reason: "rate-limit", Note: `errors[{message: "too many requests"}]`}},
		{Signal: Signal{Status: "202", Class: ClassSuccess, Note: "mail/send: queued, not delivered"}},
		{
			Signal: Signal{Status: "403", When: `errors[].message "Too many bad requests. Temporary block"`, Class: ClassRateLimited, Reason: "temporary-block",
				Note: "SendGrid blocks a sender of many bad requests for a while: rate limited, by its body"},
			match: func(r *reading) bool {
				for _, m := range r.fields().get("errors[].message") {
					if strings.Contains(strings.ToLower(m), "temporary block") {
						return true
					}
				}
				return false
			},
		},
		{Signal: Signal{Status: "403", Class: ClassPermanent, Reason: "missing-scope", Note: "the API key lacks a scope"}},
		{Signal: Signal{Status: "503", Class: ClassTransient, Reason: "unavailable"}},
		noKeysServerError("5xx", "server-error", "SendGrid honours no idempotency keys; a resent send may mail twice"),
	}
	return &SendGrid{newTable(t, rules)}
}
