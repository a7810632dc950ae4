package providers

import (
	"strings"
	"time"
)

// genericXHeaders are the de-facto X-RateLimit-* headers many providers
// send; their reset's form is guessed (providers.md §0).
func genericXHeaders() BudgetHeaders {
	return BudgetHeaders{
		Limit: "X-Ratelimit-Limit", Remaining: "X-Ratelimit-Remaining",
		Reset: "X-Ratelimit-Reset", ResetForm: ResetAuto,
	}
}

// genericRateHints are the standards' wait sources in providers.md §0's
// precedence: Retry-After, then the provider's reset, then the IETF t.
func genericRateHints() []hinter {
	return []hinter{retryAfter(), fromHeader("X-Ratelimit-Reset", ResetAuto), ietfHint{field: "Ratelimit", policy: "Ratelimit-Policy", old: true}}
}

// genericBudgets are the standards' budget sources: the IETF RateLimit
// fields (every form) and the de-facto X-RateLimit-* headers.
func genericBudgets() []budgetReader {
	return []budgetReader{
		ietfBudget{field: "Ratelimit", policy: "Ratelimit-Policy", old: true},
		headerBudget{names: genericXHeaders(), note: "de-facto headers; reset form guessed: >1e12 epoch-millis, >1e9 epoch-seconds, else delta-seconds"},
	}
}

// genericRules are the standards' signals beyond the status alone
// (providers.md §0): the IETF RateLimit draft's problem types, and the
// idempotency draft's 409 "original request still in flight".
func genericRules() []rule {
	problem := func(suffix, reason string) rule {
		return rule{
			Signal: Signal{Status: "4xx,503", When: `problem+json type …#` + suffix, Class: ClassRateLimited, Reason: reason,
				Note: "IETF RateLimit draft problem type: the request was refused for a quota, so it had no effect"},
			match: func(r *reading) bool { return strings.HasSuffix(r.fields().first("type"), "#"+suffix) },
		}
	}
	return []rule{
		problem("quota-exceeded", "quota-exceeded"),
		problem("temporary-reduced-capacity", "reduced-capacity"),
		problem("abnormal-usage-detected", "abnormal-usage"),
		{
			Signal: Signal{Status: "409", When: "the request carried the idempotency key", Class: ClassTransient, Reason: "idempotency-key-in-use",
				Note: "IETF idempotency draft: the original request with this key is still in flight; retry unchanged later"},
			match: func(r *reading) bool { return r.ex.IdempotencyKeySent },
		},
	}
}

// Generic is the profile for providers pacer has no specific knowledge of.
// It follows the HTTP standards only (providers.md §0): RFC 9110
// Retry-After, RFC 6585 429, the IETF RateLimit fields (every form) and
// problem types, the IETF idempotency draft, and the de-facto
// X-RateLimit-* headers.
//
// Classes: 2xx success (even with the budget spent: the scheduler pauses the
// scope from Budget); 429 rateLimited, and so is a 4xx or 503 whose
// problem+json type is one of the RateLimit draft's (quota-exceeded,
// temporary-reduced-capacity, abnormal-usage-detected); 401 authRevoked;
// 408, 423, 425 and 503 transient (503 means the request was not
// processed, RFC 9110 §15.6.4, so a mutation is transient too); other 5xx
// transient for reads and for mutations that carried the idempotency key,
// unknownOutcome for other mutations; 409 transient when the idempotency
// key was sent (the IETF idempotency draft's "original request still in
// flight"), permanent otherwise; every other 4xx permanent (403 with
// Reason "permission").
//
// Hint precedence: Retry-After, then X-RateLimit-Reset, then the IETF
// reset. A transient outcome carries only Retry-After.
type Generic struct{ *table }

var _ Profile = (*Generic)(nil)

// NewGeneric returns the generic profile. With opts.IdempotencyHeader set,
// the provider is taken to honour keys in that header for 24 hours, on every
// mutation.
func NewGeneric(opts Options) *Generic {
	t := table{
		name: "generic", title: "Any HTTP API (standards only)", ref: "providers.md §0",
		rateHints: genericRateHints(),
		budgets:   genericBudgets(),
		idemNote:  `none unless the scope sets "idempotencyHeader"; then keys are taken to be kept 24 h on every mutation`,
		// Nothing is documented for an unknown provider: a modest
		// concurrency and no rate budget.
		defaults:     Defaults{MaxConcurrent: 4},
		defaultsNote: "nothing is documented for an unknown provider: a modest concurrency, no rate budget",
	}
	if opts.IdempotencyHeader != "" {
		t.idem = Idempotency{Header: opts.IdempotencyHeader, Retention: 24 * time.Hour}
		t.idemNote = "the scope's idempotencyHeader; retention assumed 24 h"
	}
	return &Generic{newTable(t, genericRules())}
}
