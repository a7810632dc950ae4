package providers

import (
	"strings"
	"time"
)

// Intercom is the profile for the Intercom REST API (providers.md §13).
//
// 429 rate_limit_exceeded is rateLimited, waiting for X-RateLimit-Reset
// (epoch seconds, converted through Date); X-RateLimit-Limit/-Remaining
// give the budget. Limits are per app × workspace plus a workspace cap,
// both the scope's. Errors come as `{"type": "error.list", "errors":
// [{"code": …}]}`: 401 token_* codes, unauthorized and missing_authorization
// are authRevoked; 403 (api_plan_restricted, action_forbidden) and 400
// (parameter_invalid, parameter_not_found, type_mismatch, data_invalid)
// permanent. providers.md lists server_error, service_unavailable and
// request_timeout as transient; Intercom honours no idempotency keys, so
// for a mutation server_error and request_timeout are an unknown outcome
// (invariant 4), while service_unavailable (503) is transient.
type Intercom struct{ *table }

var _ Profile = (*Intercom)(nil)

// NewIntercom returns the Intercom profile.
func NewIntercom() *Intercom {
	code := func(codes ...string) func(r *reading) bool {
		return func(r *reading) bool { return r.fields().has("errors[].code", codes...) }
	}
	codeReason := func(fallback string) func(r *reading) string {
		return func(r *reading) string {
			if c := r.fields().first("errors[].code"); c != "" {
				return strings.ReplaceAll(Cut(c, 64), "_", "-")
			}
			return fallback
		}
	}
	t := table{
		name: "intercom", title: "Intercom REST API", ref: "providers.md §13",
		rateHints: []hinter{retryAfter(), fromHeader("X-Ratelimit-Reset", ResetEpochSeconds)},
		budgets: []budgetReader{headerBudget{names: BudgetHeaders{Limit: "X-Ratelimit-Limit", Remaining: "X-Ratelimit-Remaining", Reset: "X-Ratelimit-Reset", ResetForm: ResetEpochSeconds},
			note: "per app × workspace, in 10-s slices of the per-minute limit"}},
		idemNote: "none",
		// 10,000 calls per minute per app, distributed over 10-s windows.
		defaults:     Defaults{MaxConcurrent: 10, Requests: 1666, Per: 10 * time.Second},
		defaultsNote: "10,000/min per app sliced into 10-s windows (1,666 per 10 s); 25,000/min per workspace",
	}
	rules := []rule{
		{Signal: Signal{Status: "429", Class: ClassRateLimited, Reason: "rate-limit-exceeded"}},
		{Signal: Signal{Status: "401", Class: ClassAuthRevoked, Reason: "token-revoked | token-expired | token-not-found | token-unauthorized | token-blocked | unauthorized | missing-authorization"},
			reasonOf: codeReason("unauthorized")},
		{Signal: Signal{Status: "403", Class: ClassPermanent, Reason: "api-plan-restricted | action-forbidden | forbidden"}, reasonOf: codeReason("forbidden")},
		{Signal: Signal{Status: "400,404,422", Class: ClassPermanent, Reason: "parameter-invalid | parameter-not-found | type-mismatch | data-invalid | not-found | …"},
			reasonOf: codeReason("bad-request")},
		{
			Signal: Signal{Status: "4xx,5xx", When: "errors[].code request_timeout", Class: ClassUnknownOutcome, ReadClass: ClassTransient, Reason: "request-timeout",
				Note: "providers.md says transient; the write may have landed"},
			match: code("request_timeout"),
		},
		{Signal: Signal{Status: "503", Class: ClassTransient, Reason: "service-unavailable"}},
		noKeysServerError("5xx", "server-error", "Intercom honours no idempotency keys; a server_error may come after the write landed"),
	}
	return &Intercom{newTable(t, rules)}
}
