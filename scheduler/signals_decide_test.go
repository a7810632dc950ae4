package scheduler_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"pacer/providers"
	"pacer/scheduler"
)

// providerAnswer is a real profile's classification of one answer arriving
// at t0.
func providerAnswer(t *testing.T, profile, method string, status int, header map[string]string, body string) providers.Outcome {
	t.Helper()
	p, err := providers.Lookup(profile, providers.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	for k, v := range header {
		h.Set(k, v)
	}
	resp := &http.Response{StatusCode: status, Status: http.StatusText(status), Header: h, Body: io.NopCloser(strings.NewReader(body))}
	return p.Classify(providers.Exchange{Method: method, Mutation: method != http.MethodGet, Response: resp, Body: []byte(body), Now: t0})
}

// TestDecideProviderSignals follows body-level and documented signals
// (design §12) from a real profile's classification to the decision: what
// pauses, how long, and whether the whole group pauses.
func TestDecideProviderSignals(t *testing.T) {
	p := scheduler.DefaultPolicy()
	date := t0.Format(http.TimeFormat)
	tests := []struct {
		name, profile, method string
		status                int
		header                map[string]string
		body                  string
		pause                 time.Duration // the scope's pause, from t0
		budget                bool          // the pause is the answer's budget's alone (design §12)
		shared                bool
	}{
		// developer.atlassian.com/cloud/jira/platform/rate-limiting: the reset is the request time plus
		// Retry-After, to the minute: the scope pauses for Retry-After (2 s), not to the end of the minute.
		{name: "JiraRetryAfterOverMinuteReset", profile: "jira", method: "POST", status: 429,
			header: map[string]string{"Date": date, "Retry-After": "2", "X-RateLimit-Limit": "100", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "2026-09-11T02:00Z"},
			pause:  max(2*time.Second, p.MinHint), budget: true},
		// GitHub docs, "Rate limits and query limits for the GraphQL API": a spent primary limit is a 200
		// with errors[].type RATE_LIMITED; the scope pauses until x-ratelimit-reset.
		{name: "GitHubGraphQL200", profile: "github", method: "POST", status: 200,
			header: map[string]string{"Date": date, "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1789092900"},
			body:   `{"errors":[{"type":"RATE_LIMITED","message":"API rate limit exceeded for user ID 1."}]}`,
			pause:  15 * time.Minute, budget: true},
		// Google Calendar "Handle API errors": rateLimitExceeded is per calendar or per user: this scope only.
		{name: "GoogleCalendarRateLimitExceeded", profile: "google", method: "POST", status: 403,
			body:  `{"error":{"errors":[{"domain":"usageLimits","reason":"rateLimitExceeded","message":"Rate Limit Exceeded"}],"code":403,"message":"Rate Limit Exceeded"}}`,
			pause: p.RateLimitDelay},
		// Same page: dailyLimitExceeded is the project's Courtesy API limit: every scope of the group.
		{name: "GoogleDailyLimitExceeded", profile: "google", method: "POST", status: 403,
			body:  `{"error":{"errors":[{"domain":"usageLimits","reason":"dailyLimitExceeded","message":"Daily Limit Exceeded"}],"code":403,"message":"Daily Limit Exceeded"}}`,
			pause: 6 * time.Hour, shared: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := providerAnswer(t, tc.profile, tc.method, tc.status, tc.header, tc.body)
			kind := scheduler.KindRead
			if tc.method != http.MethodGet {
				kind = scheduler.KindMutation
			}
			d := p.Decide(testOp(kind, tc.method, 1), providers.Idempotency{}, out, t0, half)
			if d.State != scheduler.StateWaitingForBudget {
				t.Fatalf("state %s (%s), want waitingForBudget; outcome %+v", d.State, d.Reason, out)
			}
			paused, other, reason := d.Scope.PauseUntil, d.Scope.BudgetPauseUntil, d.Scope.PauseReason
			if tc.budget {
				paused, other, reason = other, paused, d.Scope.BudgetPauseReason
			}
			if got := paused.Sub(t0); got != tc.pause || !other.IsZero() {
				t.Errorf("paused for %s (the other pause %v), want %s, budget alone %v (%s)", got, other, tc.pause, tc.budget, reason)
			}
			if d.Scope.Shared != tc.shared {
				t.Errorf("shared %v, want %v", d.Scope.Shared, tc.shared)
			}
		})
	}
}
