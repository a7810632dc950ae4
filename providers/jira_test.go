package providers_test

import (
	"testing"
	"time"

	"pacer/providers"
)

func TestJiraClassify(t *testing.T) {
	p := providers.NewJira()
	date := httpDate(now)
	behind := httpDate(now.Add(-10 * time.Minute)) // Jira's clock 10 min behind ours
	limited := func(reason string, extra ...string) []string {
		return append([]string{"Date", date, "Retry-After", "30", "RateLimit-Reason", reason}, extra...)
	}
	tests := []signalCase{
		// providers.md §9 RL: X-RateLimit-NearLimit when <20% remains.
		{name: "OKNearLimit", ex: exchange{status: 200, header: header("Date", date, "X-RateLimit-Limit", "100", "X-RateLimit-Remaining", "15", "X-RateLimit-NearLimit", "true", "X-RateLimit-Reset", "2026-09-11T02:15Z")},
			want: want{class: providers.ClassSuccess, budget: &providers.Budget{Remaining: 15, Limit: 100, ResetAt: now.Add(16 * time.Minute)}, detail: "near limit"}},
		// providers.md §9 Scope: global ⇒ all accounts.
		{name: "429GlobalQuota", ex: exchange{method: "POST", status: 429, header: header(limited("jira-quota-global-based")...)},
			want: want{class: providers.ClassRateLimited, reason: "global-quota", shared: true, hintSrc: "retry-after", hintAt: now.Add(30 * time.Second), detail: "ratelimit-reason jira-quota-global-based"}},
		{name: "429TenantQuota", ex: exchange{status: 429, header: header(limited("jira-quota-tenant-based")...)},
			want: want{class: providers.ClassRateLimited, reason: "tenant-quota", hintSrc: "retry-after", hintAt: now.Add(30 * time.Second)}},
		{name: "429Burst", ex: exchange{method: "PUT", status: 429, header: header(limited("jira-burst-based")...)},
			want: want{class: providers.ClassRateLimited, reason: "burst", hintSrc: "retry-after", hintAt: now.Add(30 * time.Second)}},
		{name: "429PerIssueOnWrite", ex: exchange{method: "PUT", status: 429, header: header(limited("jira-per-issue-on-write")...)},
			want: want{class: providers.ClassRateLimited, reason: "per-issue-write", hintSrc: "retry-after", hintAt: now.Add(30 * time.Second)}},
		// providers.md §9 RL: X-RateLimit-Reset is ISO 8601 with minute precision: the end of the minute.
		{name: "429ISOResetMinute", ex: exchange{status: 429, header: header("Date", date, "RateLimit-Reason", "jira-quota-tenant-based", "X-RateLimit-Limit", "100", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "2026-09-11T02:05Z")},
			want: want{class: providers.ClassRateLimited, reason: "tenant-quota", hintSrc: "x-ratelimit-reset", hintAt: now.Add(6 * time.Minute), note: "minute precision", budget: &providers.Budget{Remaining: 0, Limit: 100, ResetAt: now.Add(6 * time.Minute)}}},
		// developer.atlassian.com/cloud/jira/platform/rate-limiting: X-RateLimit-Reset is "calculated as the
		// request timestamp plus the Retry-After period", in yyyy-MM-ddTHH:mmZ; Retry-After ranks first
		// (providers.md §0). 02:00:00 + 2 s is written 02:00Z: the hint and the budget's reset (what a
		// spent budget pauses the scope until) are +2 s, not the end of the minute (+60 s).
		{name: "429RetryAfterOverMinuteReset", ex: exchange{method: "POST", status: 429, header: header("Date", date, "Retry-After", "2", "X-RateLimit-Limit", "100", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "2026-09-11T02:00Z")},
			want: want{class: providers.ClassRateLimited, reason: "rate-limit", hintSrc: "retry-after", hintAt: now.Add(2 * time.Second), budget: &providers.Budget{Remaining: 0, Limit: 100, ResetAt: now.Add(2 * time.Second)}}},
		{name: "200RetryAfterlessReset", ex: exchange{status: 200, header: header("Date", date, "X-RateLimit-Limit", "100", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "2026-09-11T02:00Z")},
			want: want{class: providers.ClassSuccess, budget: &providers.Budget{Remaining: 0, Limit: 100, ResetAt: now.Add(time.Minute)}}},
		{name: "429BadRetryAfterKeepsReset", ex: exchange{status: 429, header: header("Date", date, "Retry-After", "soon", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "2026-09-11T02:00Z")},
			want: want{class: providers.ClassRateLimited, reason: "rate-limit", hintSrc: "x-ratelimit-reset", hintAt: now.Add(time.Minute), note: "minute precision", budget: &providers.Budget{Remaining: 0, ResetAt: now.Add(time.Minute)}}},
		// design §6 skew: converted through Date.
		{name: "429ISOResetSkew", ex: exchange{status: 429, header: header("Date", behind, "X-RateLimit-Reset", "2026-09-11T01:55Z")},
			want: want{class: providers.ClassRateLimited, reason: "rate-limit", hintSrc: "x-ratelimit-reset", hintAt: now.Add(6 * time.Minute)}},
		{name: "429ISOSeconds", ex: exchange{status: 429, header: header("Date", date, "X-RateLimit-Reset", "2026-09-11T02:00:45Z")},
			want: want{class: providers.ClassRateLimited, reason: "rate-limit", hintSrc: "x-ratelimit-reset", hintAt: now.Add(45 * time.Second)}},
		// providers.md §9 Pitfalls: gateway 429 without Retry-After or reason, reset already past.
		{name: "429GatewayPastReset", ex: exchange{status: 429, header: header("Date", date, "X-RateLimit-Reset", "2026-09-11T01:30Z")},
			want: want{class: providers.ClassRateLimited, reason: "rate-limit", hintSrc: "x-ratelimit-reset", note: "not in the future", detail: "not in the future"}},
		{name: "429GatewayBare", ex: exchange{method: "POST", status: 429}, want: want{class: providers.ClassRateLimited, reason: "rate-limit"}},
		// providers.md §0: Jira emits Beta-RateLimit(-Policy) in the new syntax.
		{name: "429BetaRateLimit", ex: exchange{status: 429, header: header("Beta-RateLimit-Policy", `"burst";q=100;w=1`, "Beta-RateLimit", `"burst";r=0;t=12`)},
			want: want{class: providers.ClassRateLimited, reason: "rate-limit", hintSrc: "beta-ratelimit", hintAt: now.Add(12 * time.Second), budget: &providers.Budget{Remaining: 0, Limit: 100, ResetAt: now.Add(12 * time.Second)}}},
		// providers.md §9 RL: Retry-After on some 503s.
		{name: "503RetryAfter", ex: exchange{method: "POST", status: 503, header: header("Retry-After", "20")},
			want: want{class: providers.ClassTransient, reason: "unavailable", hintSrc: "retry-after", hintAt: now.Add(20 * time.Second)}},
		// providers.md §9 AUTH / PERM.
		{name: "401", ex: exchange{status: 401}, want: want{class: providers.ClassAuthRevoked, reason: "unauthorized"}},
		{name: "403", ex: exchange{method: "POST", status: 403, body: `{"errorMessages":["You do not have permission to create issues in this project."],"errors":{}}`},
			want: want{class: providers.ClassPermanent, reason: "no-permission"}},
		{name: "404", ex: exchange{status: 404, body: `{"errorMessages":["Issue does not exist or you do not have permission to see it."],"errors":{}}`},
			want: want{class: providers.ClassPermanent, reason: "no-permission"}},
		{name: "400", ex: exchange{method: "POST", status: 400, body: `{"errorMessages":[],"errors":{"summary":"You must specify a summary of the issue."}}`},
			want: want{class: providers.ClassPermanent, reason: "bad-request"}},
		{name: "409TransitionRace", ex: exchange{method: "POST", status: 409}, want: want{class: providers.ClassTransient, reason: "conflict"}},
		{name: "500Write", ex: exchange{method: "POST", status: 500}, want: want{class: providers.ClassUnknownOutcome, reason: "server-error"}},
	}
	runSignals(t, p, tests)
}

func TestJiraProfile(t *testing.T) {
	p, _ := providers.Lookup("jira", providers.Options{})
	// providers.md §9 Idempotency: none.
	if p.Idempotency().Applies("POST") {
		t.Errorf("Applies(POST) = true")
	}
}
