package providers

import (
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

// Generic is the profile for providers pacer has no specific knowledge of.
// It follows the HTTP standards only (providers.md §0): RFC 9110
// Retry-After, RFC 6585 429, the IETF RateLimit fields (every form) and the
// de-facto X-RateLimit-* headers.
//
// Classes: 2xx success (even with the budget spent: the scheduler pauses the
// scope from Budget); 429 rateLimited; 401 authRevoked; 408, 423, 425 and
// 503 transient (503 means the request was not processed, RFC 9110
// §15.6.4, so a mutation is transient too); other 5xx transient for reads
// and for mutations that carried the idempotency key, unknownOutcome for
// other mutations; 409 transient when the idempotency key was sent (the
// IETF idempotency draft's "original request still in flight"), permanent
// otherwise; every other 4xx permanent (403 with Reason "permission").
//
// Hint precedence: Retry-After, then X-RateLimit-Reset, then the IETF
// reset. A transient outcome carries only Retry-After.
type Generic struct {
	idem Idempotency
}

var _ Profile = (*Generic)(nil)

// NewGeneric returns the generic profile. With opts.IdempotencyHeader set,
// the provider is taken to honour keys in that header for 24 hours, on every
// mutation.
func NewGeneric(opts Options) *Generic {
	g := &Generic{}
	if opts.IdempotencyHeader != "" {
		g.idem = Idempotency{Header: opts.IdempotencyHeader, Retention: 24 * time.Hour}
	}
	return g
}

// Name implements Profile.
func (g *Generic) Name() string { return "generic" }

// Idempotency implements Profile.
func (g *Generic) Idempotency() Idempotency { return g.idem }

// Defaults implements Profile. Nothing is documented for an unknown
// provider: a modest concurrency and no rate budget.
func (g *Generic) Defaults() Defaults { return Defaults{MaxConcurrent: 4} }

// Classify implements Profile.
func (g *Generic) Classify(ex Exchange) Outcome {
	if ex.Response == nil {
		return ClassifyTransport(ex)
	}
	resp := ex.Response
	h := resp.Header
	o := Outcome{Status: resp.StatusCode}

	draftBudget, draftHint := ReadIETFRateLimit(h, ex.Now)
	xBudget, resetHint := ReadBudget(h, genericXHeaders(), ex.Now)
	o.Budget = draftBudget
	if o.Budget == nil {
		o.Budget = xBudget
	}

	o.Class, o.Reason = classifyStatus(ex)
	if resp.StatusCode == 409 && ex.IdempotencyKeySent {
		o.Class, o.Reason = ClassTransient, "idempotency-key-in-use"
	}
	var notes []string
	switch o.Class {
	case ClassRateLimited:
		ra := retryAfterHint(h, ex.Now)
		o.Hint = ChooseHint(ra, resetHint, draftHint)
		notes = hintNotes(ra, resetHint, draftHint)
	case ClassTransient:
		ra := retryAfterHint(h, ex.Now)
		o.Hint = ra
		notes = hintNotes(ra)
	}
	o.Detail = describe(resp, ex.Body, notes...)
	return o
}
