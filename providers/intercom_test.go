package providers_test

import (
	"testing"
	"time"

	"pacer/providers"
)

func TestIntercomClassify(t *testing.T) {
	p := providers.NewIntercom()
	date := httpDate(now)
	icErr := func(code string) string {
		return `{"type":"error.list","request_id":"r1","errors":[{"code":"` + code + `","message":"…"}]}`
	}
	budget := func(remaining string) []string {
		return []string{"Date", date, "X-RateLimit-Limit", "1666", "X-RateLimit-Remaining", remaining, "X-RateLimit-Reset", "1789092010"}
	}
	tests := []signalCase{
		{name: "OKBudget", ex: exchange{status: 200, header: header(budget("1600")...)},
			want: want{class: providers.ClassSuccess, budget: &providers.Budget{Remaining: 1600, Limit: 1666, ResetAt: now.Add(10 * time.Second)}}},
		// providers.md §13 RL: 429 rate_limit_exceeded; X-RateLimit-Reset epoch s.
		{name: "429", ex: exchange{method: "POST", status: 429, header: header(budget("0")...), body: icErr("rate_limit_exceeded")},
			want: want{class: providers.ClassRateLimited, reason: "rate-limit-exceeded", hintSrc: "x-ratelimit-reset", hintAt: now.Add(10 * time.Second), budget: &providers.Budget{Remaining: 0, Limit: 1666, ResetAt: now.Add(10 * time.Second)}}},
		// providers.md §13 AUTH: 401 token_* codes.
		{name: "401TokenRevoked", ex: exchange{status: 401, body: icErr("token_revoked")}, want: want{class: providers.ClassAuthRevoked, reason: "token-revoked"}},
		{name: "401TokenExpired", ex: exchange{status: 401, body: icErr("token_expired")}, want: want{class: providers.ClassAuthRevoked, reason: "token-expired"}},
		{name: "401Unauthorized", ex: exchange{method: "POST", status: 401, body: icErr("unauthorized")}, want: want{class: providers.ClassAuthRevoked, reason: "unauthorized"}},
		{name: "401MissingAuthorization", ex: exchange{status: 401, body: icErr("missing_authorization")}, want: want{class: providers.ClassAuthRevoked, reason: "missing-authorization"}},
		// providers.md §13 PERM.
		{name: "403PlanRestricted", ex: exchange{method: "POST", status: 403, body: icErr("api_plan_restricted")}, want: want{class: providers.ClassPermanent, reason: "api-plan-restricted"}},
		{name: "403ActionForbidden", ex: exchange{method: "POST", status: 403, body: icErr("action_forbidden")}, want: want{class: providers.ClassPermanent, reason: "action-forbidden"}},
		{name: "400ParameterInvalid", ex: exchange{method: "POST", status: 400, body: icErr("parameter_invalid")}, want: want{class: providers.ClassPermanent, reason: "parameter-invalid"}},
		{name: "404NotFound", ex: exchange{status: 404, body: icErr("not_found")}, want: want{class: providers.ClassPermanent, reason: "not-found"}},
		{name: "422DataInvalid", ex: exchange{method: "PUT", status: 422, body: icErr("data_invalid")}, want: want{class: providers.ClassPermanent, reason: "data-invalid"}},
		// providers.md §13 TR: server_error, service_unavailable, request_timeout (writes: see the profile's comment).
		{name: "RequestTimeoutWrite", ex: exchange{method: "POST", status: 408, body: icErr("request_timeout")}, want: want{class: providers.ClassUnknownOutcome, reason: "request-timeout"}},
		{name: "RequestTimeoutRead", ex: exchange{status: 504, body: icErr("request_timeout")}, want: want{class: providers.ClassTransient, reason: "request-timeout"}},
		{name: "503ServiceUnavailable", ex: exchange{method: "POST", status: 503, body: icErr("service_unavailable")}, want: want{class: providers.ClassTransient, reason: "service-unavailable"}},
		{name: "500ServerErrorWrite", ex: exchange{method: "POST", status: 500, body: icErr("server_error")}, want: want{class: providers.ClassUnknownOutcome, reason: "server-error"}},
		{name: "500ServerErrorRead", ex: exchange{status: 500, body: icErr("server_error")}, want: want{class: providers.ClassTransient, reason: "server-error"}},
	}
	runSignals(t, p, tests)
}

func TestIntercomProfile(t *testing.T) {
	p, _ := providers.Lookup("intercom", providers.Options{})
	// providers.md §13: 10,000/min per app in 10-s windows; no idempotency.
	if got, want := p.Defaults(), (providers.Defaults{MaxConcurrent: 10, Requests: 1666, Per: 10 * time.Second}); got != want {
		t.Errorf("defaults: got %+v, want %+v", got, want)
	}
	if p.Idempotency().Applies("POST") {
		t.Errorf("Applies(POST) = true")
	}
}
