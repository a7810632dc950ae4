package providers

import (
	"strings"
	"time"
)

// Stripe is the profile for the Stripe API (providers.md §2).
//
// Stripe documents no Retry-After, remaining or reset headers: a 429 is
// rateLimited with no hint (unless a Retry-After shows up), except a 429
// with error code lock_timeout, which is object-lock contention and
// transient. Stripe-Should-Retry decides when present (as stripe-go does):
// "true" is transient (resend with the same key); "false" is permanent,
// except a 5xx on a mutation, which is an unknown outcome that a resend
// cannot settle (KeyBound). Without the header: 409 (idempotency_key_in_use
// or another conflict) is transient; an idempotency_error is permanent; 400,
// 402 (card_error: Reason "card-declined"), 403 ("permission") and 404 are
// permanent; 401 is authRevoked. A 500 on a mutation is "indeterminate":
// Stripe saved it under the idempotency key and replays it, so it is an
// unknown outcome with KeyBound set when the key was sent. Other 5xx are
// transient when the key was sent or the request is a read, else an
// unknown outcome. Limits are per account (live and test apart): none is
// shared by other scopes.
type Stripe struct{ *table }

var _ Profile = (*Stripe)(nil)

// NewStripe returns the Stripe profile.
func NewStripe() *Stripe {
	code := func(r *reading) string { return r.fields().first("error.code") }
	should := func(r *reading) string { return strings.ToLower(strings.TrimSpace(r.header("Stripe-Should-Retry"))) }
	t := table{
		name: "stripe", title: "Stripe API", ref: "providers.md §2",
		diag: func(r *reading) []string {
			var notes []string
			if id := r.header("Request-Id"); id != "" {
				notes = append(notes, "request-id "+Cut(id, 64))
			}
			if headerIs(r.h, "Idempotent-Replayed", "true") {
				notes = append(notes, "idempotent replay of an earlier answer")
			}
			if typ, c := stripeType(r), code(r); typ != "" || c != "" {
				notes = append(notes, "error "+Cut(typ, 64)+"/"+Cut(c, 64))
			}
			if s := should(r); s != "" {
				notes = append(notes, "stripe-should-retry "+Cut(s, 16))
			}
			return notes
		},
		// Idempotency-Key on POST requests, kept at least 24 hours.
		idem:     Idempotency{Header: "Idempotency-Key", Retention: 24 * time.Hour, Methods: []string{"POST"}},
		idemNote: "on any POST (≤255 characters); status and body (even a 500) are saved once the endpoint ran and replayed with Idempotent-Replayed: true; keys may be pruned after 24 h. 429s, most validation 400s and 401s are not saved",
		// 25 requests per second, Stripe's sandbox limit and default
		// per-endpoint limit (live mode allows 100 per second across
		// endpoints; a scope may raise it), and 10 requests in flight.
		defaults:     Defaults{MaxConcurrent: 10, Requests: 25, Per: time.Second},
		defaultsNote: "25/s: the sandbox limit and default per-endpoint limit (live mode: 100/s); 10 in flight",
		notes: []string{
			"Limits are per account, live and test mode apart; which bucket Connect Stripe-Account calls hit is not documented (verify).",
		},
	}
	rules := []rule{
		{Signal: Signal{Status: "2xx", Class: ClassSuccess, Note: "whatever Stripe-Should-Retry says"}},
		{
			Signal: Signal{Status: "401", When: "error.code api_key_expired", Class: ClassAuthRevoked, Reason: "api-key-expired"},
			match:  func(r *reading) bool { return code(r) == "api_key_expired" },
		},
		{Signal: Signal{Status: "401", Class: ClassAuthRevoked, Reason: "unauthorized"}},
		{
			Signal: Signal{Status: "429", When: "error.code lock_timeout", Class: ClassTransient, Reason: "lock-timeout",
				Note: "object lock contention, not a rate limit; Stripe's SDKs retry only these 429s"},
			match: func(r *reading) bool { return code(r) == "lock_timeout" },
		},
		{
			Signal: Signal{Status: "429", Class: ClassRateLimited, Reason: "rate-limit",
				Note: "rate or concurrency limiter; no hint headers are documented, so the policy's default delay applies. Stripe-Rate-Limited-Reason (global-rate, endpoint-rate, global-concurrency, endpoint-concurrency, resource-specific) is noted (verify)"},
			diag: func(r *reading) []string {
				if why := r.header("Stripe-Rate-Limited-Reason"); why != "" {
					return []string{"rate limited: " + Cut(why, 64)}
				}
				return nil
			},
		},
		{
			Signal: Signal{Status: "any", When: "Stripe-Should-Retry: true", Class: ClassTransient, Reason: "should-retry"},
			match:  func(r *reading) bool { return should(r) == "true" },
		},
		{
			Signal: Signal{Status: "5xx", When: "Stripe-Should-Retry: false", Class: ClassUnknownOutcome, ReadClass: ClassPermanent, Reason: "should-not-retry", KeyBound: true,
				Note: "Stripe says a resend would have no further effect; reconcile with Stripe"},
			match: func(r *reading) bool { return should(r) == "false" },
			diag: func(r *reading) []string {
				if r.ex.Mutation {
					return []string{"Stripe says a resend would have no further effect; reconcile with Stripe"}
				}
				return nil
			},
		},
		{
			Signal:   Signal{Status: "any", When: "Stripe-Should-Retry: false", Class: ClassPermanent, Reason: "idempotency-error | card-declined | permission | not-found | invalid-request"},
			match:    func(r *reading) bool { return should(r) == "false" },
			reasonOf: stripeReason,
		},
		{
			Signal: Signal{Status: "any", When: "error.code idempotency_key_in_use", Class: ClassTransient, Reason: "idempotency-key-in-use",
				Note: "a request with this key is in flight; retry with the same key"},
			match: func(r *reading) bool { return code(r) == "idempotency_key_in_use" },
		},
		{Signal: Signal{Status: "409", Class: ClassTransient, Reason: "conflict", Note: "stripe-go retries 409 when Stripe-Should-Retry is absent"}},
		{
			Signal: Signal{Status: "any", When: "error.type idempotency_error", Class: ClassPermanent, Reason: "idempotency-error",
				Note: "key reused with other parameters or endpoint; status not pinned in the docs, commonly 400 (verify)"},
			match: func(r *reading) bool { return stripeType(r) == "idempotency_error" },
		},
		{
			Signal: Signal{Status: "500", Class: ClassUnknownOutcome, ReadClass: ClassTransient, Reason: "indeterminate", KeyBound: true,
				Note: "Stripe's 500 is indeterminate: saved under the key and replayed, Stripe may roll forward or back and send webhooks; reconcile, never change the key"},
			diag: func(r *reading) []string {
				if r.ex.Mutation {
					return []string{"Stripe's 500 is indeterminate and replayed under the same key; reconcile with Stripe"}
				}
				return nil
			},
		},
		serverErrorRule("5xx", "", "server-error"),
		{
			Signal: Signal{Status: "400,402,403,404", Class: ClassPermanent, Reason: "invalid-request | card-declined | permission | not-found",
				Note: "by error type and status: 402 card_error is a valid request with a business failure; 403 a restricted key lacking permission"},
			reasonOf: stripeReason,
		},
	}
	return &Stripe{newTable(t, rules)}
}

// stripeType is error.type of a Stripe error body. A body cut off by the
// caller's bound is scanned, where a nested "type" (a payment method's) can
// come first: only a value ending in "_error" is taken.
func stripeType(r *reading) string {
	for _, v := range r.fields().get("error.type") {
		if strings.HasSuffix(v, "_error") {
			return v
		}
	}
	return ""
}

// stripeReason names the cause of a permanent Stripe rejection.
func stripeReason(r *reading) string {
	typ := stripeType(r)
	switch {
	case typ == "idempotency_error":
		return "idempotency-error"
	case typ == "card_error":
		return "card-declined"
	case r.st == 403:
		return "permission"
	case r.st == 404:
		return "not-found"
	case r.st == 400 || typ == "invalid_request_error":
		return "invalid-request"
	}
	if reason := standardReason(r.st); reason != "" {
		return reason
	}
	return "rejected"
}
