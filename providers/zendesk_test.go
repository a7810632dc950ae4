package providers_test

import (
	"testing"
	"time"

	"pacer/providers"
)

func TestZendeskClassify(t *testing.T) {
	p := providers.NewZendesk()
	tests := []signalCase{
		// providers.md §10 RL: X-Rate-Limit, X-Rate-Limit-Remaining (per minute).
		{name: "OKAccountBudget", ex: exchange{status: 200, header: header("X-Rate-Limit", "700", "X-Rate-Limit-Remaining", "699")},
			want: want{class: providers.ClassSuccess, budget: &providers.Budget{Remaining: 699, Limit: 700}}},
		// providers.md §10 RL: list endpoints add ratelimit-limit/-remaining/-reset (delta s); the most constrained wins.
		{name: "OKListBudget", ex: exchange{status: 200, header: header("X-Rate-Limit", "700", "X-Rate-Limit-Remaining", "699", "ratelimit-limit", "100", "ratelimit-remaining", "9", "ratelimit-reset", "42")},
			want: want{class: providers.ClassSuccess, budget: &providers.Budget{Remaining: 9, Limit: 100, ResetAt: now.Add(42 * time.Second)}}},
		// providers.md §10 RL: zendesk-ratelimit-tickets-index: total=…; remaining=…; resets=….
		{name: "OKTicketsIndexBudget", ex: exchange{status: 200, header: header("zendesk-ratelimit-tickets-index", "total=100; remaining=3; resets=20")},
			want: want{class: providers.ClassSuccess, budget: &providers.Budget{Remaining: 3, Limit: 100, ResetAt: now.Add(20 * time.Second)}}},
		// providers.md §10 RL: 429 + Retry-After s.
		{name: "429RetryAfter", ex: exchange{method: "POST", status: 429, header: header("Retry-After", "60", "X-Rate-Limit", "700", "X-Rate-Limit-Remaining", "0")},
			want: want{class: providers.ClassRateLimited, reason: "rate-limit", hintSrc: "retry-after", hintAt: now.Add(time.Minute), budget: &providers.Budget{Remaining: 0, Limit: 700}}},
		// providers.md §10 Scope: text/plain 429s without a usable Retry-After.
		{name: "429TextPlainListReset", ex: exchange{status: 429, header: header("Content-Type", "text/plain", "Retry-After", "soon", "ratelimit-remaining", "0", "ratelimit-reset", "15"), body: "Rate limit for ticket updates exceeded, please wait before updating this ticket again"},
			want: want{class: providers.ClassRateLimited, reason: "rate-limit", hintSrc: "ratelimit-reset", hintAt: now.Add(15 * time.Second), budget: &providers.Budget{Remaining: 0, ResetAt: now.Add(15 * time.Second)}, detail: `retry-after "soon" ignored`}},
		{name: "429TicketsIndexResets", ex: exchange{status: 429, header: header("zendesk-ratelimit-tickets-index", "total=100; remaining=0; resets=20")},
			want: want{class: providers.ClassRateLimited, reason: "rate-limit", hintSrc: "zendesk-ratelimit-tickets-index", hintAt: now.Add(20 * time.Second), budget: &providers.Budget{Remaining: 0, Limit: 100, ResetAt: now.Add(20 * time.Second)}}},
		{name: "429Bare", ex: exchange{method: "PUT", status: 429, header: header("Content-Type", "text/plain")}, want: want{class: providers.ClassRateLimited, reason: "rate-limit"}},
		// providers.md §10 AUTH / PERM.
		{name: "401", ex: exchange{status: 401, body: `{"error":"Couldn't authenticate you"}`}, want: want{class: providers.ClassAuthRevoked, reason: "unauthorized"}},
		{name: "403", ex: exchange{method: "PUT", status: 403, body: `{"error":"Forbidden","description":"You do not have access to this page."}`}, want: want{class: providers.ClassPermanent, reason: "permission"}},
		{name: "422RecordInvalid", ex: exchange{method: "POST", status: 422, body: `{"error":"RecordInvalid","description":"Record validation errors","details":{"requester":[{"description":"Requester: Name is too short"}]}}`},
			want: want{class: providers.ClassPermanent, reason: "record-invalid"}},
		{name: "400", ex: exchange{method: "POST", status: 400}, want: want{class: providers.ClassPermanent, reason: "bad-request"}},
		// providers.md §10 Idempotency: x-idempotency-lookup hit/miss is noted.
		{name: "201IdempotencyHit", ex: exchange{method: "POST", status: 201, header: header("x-idempotency-lookup", "hit")},
			want: want{class: providers.ClassSuccess, detail: "x-idempotency-lookup hit"}},
		{name: "503", ex: exchange{method: "POST", status: 503}, want: want{class: providers.ClassTransient, reason: "unavailable"}},
		{name: "500Write", ex: exchange{method: "POST", status: 500}, want: want{class: providers.ClassUnknownOutcome, reason: "server-error"}},
	}
	runSignals(t, p, tests)
}

func TestZendeskProfile(t *testing.T) {
	p, _ := providers.Lookup("zendesk", providers.Options{})
	// providers.md §10 Idempotency: ticket create only, so not relied upon.
	if p.Idempotency().Applies("POST") {
		t.Errorf("Applies(POST) = true: uncertain writes to other endpoints would be resent")
	}
	if d := p.Describe(); !contains(d.Idempotency.Note, "Idempotency-Key") {
		t.Errorf("idempotency note %q does not describe Zendesk's key", d.Idempotency.Note)
	}
}
