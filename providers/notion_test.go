package providers_test

import (
	"testing"
	"time"

	"pacer/providers"
)

func TestNotionClassify(t *testing.T) {
	p := providers.NewNotion()
	notionErr := func(status int, code string) string {
		return `{"object":"error","status":` + itoa(status) + `,"code":"` + code + `","message":"…","request_id":"r1"}`
	}
	tests := []signalCase{
		{name: "OK", ex: exchange{method: "PATCH", status: 200, body: `{"object":"page","id":"p1"}`}, want: want{class: providers.ClassSuccess}},
		// providers.md §12 RL: 429 rate_limited + Retry-After integer s (connection budget ≤60 s).
		{name: "429Connection", ex: exchange{method: "POST", status: 429, header: header("Retry-After", "1"), body: notionErr(429, "rate_limited")},
			want: want{class: providers.ClassRateLimited, reason: "rate-limited", hintSrc: "retry-after", hintAt: now.Add(time.Second)}},
		// providers.md §12 RL: the workspace's shared limit may exceed 60 s; additional_data.rate_limit_reason.
		{name: "429Workspace", ex: exchange{status: 429, header: header("Retry-After", "120"), body: `{"object":"error","status":429,"code":"rate_limited","message":"…","additional_data":{"rate_limit_reason":"workspace_limit"}}`},
			want: want{class: providers.ClassRateLimited, reason: "rate-limited", hintSrc: "retry-after", hintAt: now.Add(2 * time.Minute), detail: "rate limit reason workspace_limit"}},
		// providers.md §12 RL: 529 service_overload also has Retry-After.
		{name: "529Overload", ex: exchange{method: "POST", status: 529, header: header("Retry-After", "30"), body: notionErr(529, "service_overload")},
			want: want{class: providers.ClassRateLimited, reason: "service-overload", hintSrc: "retry-after", hintAt: now.Add(30 * time.Second)}},
		// providers.md §12 AUTH / PERM.
		{name: "401", ex: exchange{status: 401, body: notionErr(401, "unauthorized")}, want: want{class: providers.ClassAuthRevoked, reason: "unauthorized"}},
		{name: "403Restricted", ex: exchange{method: "PATCH", status: 403, body: notionErr(403, "restricted_resource")}, want: want{class: providers.ClassPermanent, reason: "restricted-resource"}},
		{name: "404NotShared", ex: exchange{status: 404, body: notionErr(404, "object_not_found")}, want: want{class: providers.ClassPermanent, reason: "object-not-found"}},
		{name: "400Validation", ex: exchange{method: "POST", status: 400, body: notionErr(400, "validation_error")}, want: want{class: providers.ClassPermanent, reason: "validation-error"}},
		{name: "400InvalidJSON", ex: exchange{method: "POST", status: 400, body: notionErr(400, "invalid_json")}, want: want{class: providers.ClassPermanent, reason: "invalid-json"}},
		{name: "400MissingVersion", ex: exchange{status: 400, body: notionErr(400, "missing_version")}, want: want{class: providers.ClassPermanent, reason: "missing-version"}},
		// providers.md §12 TR: 409 conflict_error, 5xx.
		{name: "409Conflict", ex: exchange{method: "PATCH", status: 409, body: notionErr(409, "conflict_error")}, want: want{class: providers.ClassTransient, reason: "conflict-error"}},
		// Issue 12 (the SDK-driven review): 409 row_limit_exceeded is permanent, not a conflict to retry.
		{name: "409RowLimitExceeded", ex: exchange{method: "POST", status: 409, body: notionErr(409, "row_limit_exceeded")}, want: want{class: providers.ClassPermanent, reason: "row-limit-exceeded"}},
		{name: "503", ex: exchange{method: "POST", status: 503, body: notionErr(503, "service_unavailable")}, want: want{class: providers.ClassTransient, reason: "unavailable"}},
		{name: "500Write", ex: exchange{method: "POST", status: 500, body: notionErr(500, "internal_server_error")}, want: want{class: providers.ClassUnknownOutcome, reason: "server-error"}},
		{name: "504Read", ex: exchange{status: 504, body: notionErr(504, "gateway_timeout")}, want: want{class: providers.ClassTransient, reason: "server-error"}},
	}
	runSignals(t, p, tests)
}

func TestNotionProfile(t *testing.T) {
	p, _ := providers.Lookup("notion", providers.Options{})
	// providers.md §12: no idempotency; ~3 requests/s per integration (older docs).
	if p.Idempotency().Applies("POST") {
		t.Errorf("Applies(POST) = true")
	}
	if got, want := p.Defaults(), (providers.Defaults{MaxConcurrent: 3, Requests: 3, Per: time.Second}); got != want {
		t.Errorf("defaults: got %+v, want %+v", got, want)
	}
}
