package providers_test

import (
	"testing"
	"time"

	"pacer/providers"
)

func TestHubSpotClassify(t *testing.T) {
	p := providers.NewHubSpot()
	limited := func(policy string) string {
		return `{"status":"error","message":"You have reached your ` + policy + ` limit.","errorType":"RATE_LIMIT","correlationId":"c1","policyName":"` + policy + `","groupName":"publicapi:private-app:1"}`
	}
	burst := func(remaining string) []string {
		return []string{"X-HubSpot-RateLimit-Interval-Milliseconds", "10000", "X-HubSpot-RateLimit-Max", "100", "X-HubSpot-RateLimit-Remaining", remaining}
	}
	tests := []signalCase{
		// providers.md §5 RL headers on success: the most constrained budget wins.
		{name: "OKBurstBudget", ex: exchange{status: 200, header: header(burst("99")...)},
			want: want{class: providers.ClassSuccess, budget: &providers.Budget{Remaining: 99, Limit: 100, ResetAt: now.Add(10 * time.Second)}}},
		{name: "OKDailySpent", ex: exchange{status: 200, header: header(append(burst("50"), "X-HubSpot-RateLimit-Daily", "250000", "X-HubSpot-RateLimit-Daily-Remaining", "0")...)},
			want: want{class: providers.ClassSuccess, budget: &providers.Budget{Remaining: 0, Limit: 250000}}},
		{name: "OKOlderSecondly", ex: exchange{status: 200, header: header("X-HubSpot-RateLimit-Secondly", "10", "X-HubSpot-RateLimit-Secondly-Remaining", "3")},
			want: want{class: providers.ClassSuccess, budget: &providers.Budget{Remaining: 3, Limit: 10}}},
		// providers.md §5 RL: policyName DAILY resets at midnight in the account's time zone.
		{name: "429Daily", ex: exchange{method: "POST", status: 429, body: limited("DAILY")},
			want: want{class: providers.ClassRateLimited, reason: "daily-limit", hintSrc: "hubspot-daily-reset", hintAt: time.Date(2026, 9, 11, 12, 0, 0, 0, time.UTC)}},
		{name: "429DailyRetryAfterWins", ex: exchange{status: 429, header: header("Retry-After", "600"), body: limited("DAILY")},
			want: want{class: providers.ClassRateLimited, reason: "daily-limit", hintSrc: "retry-after", hintAt: now.Add(10 * time.Minute)}},
		// providers.md §5 RL: TEN_SECONDLY_ROLLING → Interval-Milliseconds.
		{name: "429TenSecondly", ex: exchange{method: "POST", status: 429, header: header(burst("0")...), body: limited("TEN_SECONDLY_ROLLING")},
			want: want{class: providers.ClassRateLimited, reason: "burst-limit", hintSrc: "x-hubspot-ratelimit-interval-milliseconds", hintAt: now.Add(10 * time.Second), budget: &providers.Budget{Remaining: 0, Limit: 100, ResetAt: now.Add(10 * time.Second)}}},
		{name: "429SecondlyNoHeaders", ex: exchange{status: 429, body: limited("SECONDLY")},
			want: want{class: providers.ClassRateLimited, reason: "burst-limit", hintSrc: "hubspot-burst-default", hintAt: now.Add(10 * time.Second)}},
		{name: "429NoPolicy", ex: exchange{status: 429, header: header("Retry-After", "3"), body: `{"status":"error","message":"Too many requests"}`},
			want: want{class: providers.ClassRateLimited, reason: "rate-limit", hintSrc: "retry-after", hintAt: now.Add(3 * time.Second)}},
		// providers.md §5 Other: 423 Locked on heavy sync → wait ≥2 s.
		{name: "423Locked", ex: exchange{method: "POST", status: 423},
			want: want{class: providers.ClassRateLimited, reason: "locked", hintSrc: "hubspot-locked-default", hintAt: now.Add(2 * time.Second)}},
		// providers.md §5 Other: 477 Migration in Progress + Retry-After s.
		{name: "477Migration", ex: exchange{method: "POST", status: 477, header: header("Retry-After", "3600")},
			want: want{class: providers.ClassRateLimited, reason: "migration-in-progress", hintSrc: "retry-after", hintAt: now.Add(time.Hour)}},
		// providers.md §5 Other: 502/504 processing limits: UNK for writes.
		{name: "502Write", ex: exchange{method: "POST", status: 502}, want: want{class: providers.ClassUnknownOutcome, reason: "processing-limit"}},
		{name: "504Read", ex: exchange{status: 504}, want: want{class: providers.ClassTransient, reason: "processing-limit"}},
		// providers.md §5 Other: 503, 521–524 TR (524: see the profile's comment).
		{name: "503", ex: exchange{method: "POST", status: 503}, want: want{class: providers.ClassTransient, reason: "unavailable"}},
		{name: "521", ex: exchange{method: "POST", status: 521}, want: want{class: providers.ClassTransient, reason: "unavailable"}},
		{name: "524Write", ex: exchange{method: "POST", status: 524}, want: want{class: providers.ClassUnknownOutcome, reason: "origin-timeout"}},
		{name: "524Read", ex: exchange{status: 524}, want: want{class: providers.ClassTransient, reason: "origin-timeout"}},
		{name: "500Write", ex: exchange{method: "PATCH", status: 500}, want: want{class: providers.ClassUnknownOutcome, reason: "server-error"}},
		// providers.md §5 AUTH.
		{name: "401", ex: exchange{status: 401, body: `{"status":"error","message":"Authentication credentials not found.","category":"INVALID_AUTHENTICATION"}`},
			want: want{class: providers.ClassAuthRevoked, reason: "unauthorized"}},
		{name: "403MissingScope", ex: exchange{method: "POST", status: 403, body: `{"status":"error","message":"This app hasn't been granted all required scopes","category":"MISSING_SCOPES"}`},
			want: want{class: providers.ClassPermanent, reason: "missing-scope"}},
		// providers.md §5 Other / PERM.
		{name: "409Conflict", ex: exchange{method: "POST", status: 409, body: `{"status":"error","message":"Contact already exists","category":"CONFLICT"}`},
			want: want{class: providers.ClassPermanent, reason: "conflict"}},
		{name: "400Validation", ex: exchange{method: "POST", status: 400, body: `{"status":"error","category":"VALIDATION_ERROR","errors":[{"message":"Property values were not valid"}]}`},
			want: want{class: providers.ClassPermanent, reason: "validation"}},
		{name: "414", ex: exchange{status: 414}, want: want{class: providers.ClassPermanent, reason: "uri-too-long"}},
		{name: "207MultiStatus", ex: exchange{method: "POST", status: 207, body: `{"status":"COMPLETE","results":[],"errors":[{"status":"error"}]}`},
			want: want{class: providers.ClassSuccess}},
	}
	runSignals(t, p, tests)
}

func TestHubSpotProfile(t *testing.T) {
	p, _ := providers.Lookup("hubspot", providers.Options{})
	// providers.md §5 Idempotency: none.
	if p.Idempotency().Applies("POST") {
		t.Errorf("Applies(POST) = true")
	}
	if got, want := p.Defaults(), (providers.Defaults{MaxConcurrent: 4, Requests: 100, Per: 10 * time.Second}); got != want {
		t.Errorf("defaults: got %+v, want %+v", got, want)
	}
	// The daily reset is never before 12:00 UTC, whatever the hour.
	at := providers.NewHubSpot().Classify(exchange{status: 429, body: `{"policyName":"DAILY"}`}.build()).Hint.At
	if at.UTC().Hour() != 12 || !at.After(now) || at.Sub(now) > 24*time.Hour {
		t.Errorf("daily reset at %v", at)
	}
}
