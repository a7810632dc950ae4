package providers_test

import (
	"testing"
	"time"

	"pacer/providers"
)

func TestGoogleClassify(t *testing.T) {
	p := providers.NewGoogle()
	modern := func(code int, status, reason, quotaLimit, retryDelay string) string {
		details := `{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"` + reason + `","domain":"googleapis.com","metadata":{"service":"sheets.googleapis.com","consumer":"projects/123","quota_limit":"` + quotaLimit + `","quota_metric":"sheets.googleapis.com/read_requests"}}`
		if retryDelay != "" {
			details += `,{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"` + retryDelay + `"}`
		}
		return `{"error":{"code":` + itoa(code) + `,"message":"…","status":"` + status + `","details":[` + details + `]}}`
	}
	legacy := func(code int, reason string) string {
		return `{"error":{"errors":[{"domain":"usageLimits","reason":"` + reason + `","message":"…"}],"code":` + itoa(code) + `,"message":"…"}}`
	}
	simple := func(code int, status string) string {
		return `{"error":{"code":` + itoa(code) + `,"message":"…","status":"` + status + `"}}`
	}
	tests := []signalCase{
		// providers.md §8 Modern: RESOURCE_EXHAUSTED with RetryInfo.retryDelay (Duration); project quota ⇒ all accounts.
		{name: "429ResourceExhaustedRetryInfo", ex: exchange{method: "POST", status: 429, body: modern(429, "RESOURCE_EXHAUSTED", "RATE_LIMIT_EXCEEDED", "WriteRequestsPerMinutePerProject", "30s")},
			want: want{class: providers.ClassRateLimited, reason: "resource-exhausted", shared: true, hintSrc: "body error.details[].retryDelay", hintAt: now.Add(30 * time.Second), detail: "quota WriteRequestsPerMinutePerProject"}},
		{name: "429RetryInfoFraction", ex: exchange{status: 429, body: modern(429, "RESOURCE_EXHAUSTED", "RATE_LIMIT_EXCEEDED", "ReadRequestsPerMinutePerProject", "1.5s")},
			want: want{class: providers.ClassRateLimited, reason: "resource-exhausted", shared: true, hintSrc: "body error.details[].retryDelay", hintAt: now.Add(1500 * time.Millisecond)}},
		{name: "429RetryAfterOverRetryInfo", ex: exchange{status: 429, header: header("Retry-After", "5"), body: modern(429, "RESOURCE_EXHAUSTED", "RATE_LIMIT_EXCEEDED", "ReadRequestsPerMinutePerProject", "30s")},
			want: want{class: providers.ClassRateLimited, reason: "resource-exhausted", shared: true, hintSrc: "retry-after", hintAt: now.Add(5 * time.Second)}},
		{name: "429RetryInfoNegative", ex: exchange{status: 429, body: modern(429, "RESOURCE_EXHAUSTED", "RATE_LIMIT_EXCEEDED", "ReadRequestsPerMinutePerProject", "-3s")},
			want: want{class: providers.ClassRateLimited, reason: "resource-exhausted", shared: true, hintSrc: "body error.details[].retryDelay", note: "negative"}},
		// providers.md §8 Scope: per-user-per-project quota ⇒ that account (verify).
		{name: "429PerUserQuota", ex: exchange{status: 429, body: modern(429, "RESOURCE_EXHAUSTED", "RATE_LIMIT_EXCEEDED", "ReadRequestsPerMinutePerUser", "20s")},
			want: want{class: providers.ClassRateLimited, reason: "user-quota", hintSrc: "body error.details[].retryDelay", hintAt: now.Add(20 * time.Second)}},
		// providers.md §8 Legacy: 403 usageLimits reasons.
		{name: "403UserRateLimitExceeded", ex: exchange{method: "POST", status: 403, body: legacy(403, "userRateLimitExceeded")},
			want: want{class: providers.ClassRateLimited, reason: "user-rate-limit"}},
		{name: "403RateLimitExceeded", ex: exchange{status: 403, body: legacy(403, "rateLimitExceeded")},
			want: want{class: providers.ClassRateLimited, reason: "project-rate-limit", shared: true}},
		{name: "429RateLimitExceededDrive", ex: exchange{status: 429, header: header("Retry-After", "2"), body: legacy(429, "rateLimitExceeded")},
			want: want{class: providers.ClassRateLimited, reason: "project-rate-limit", shared: true, hintSrc: "retry-after", hintAt: now.Add(2 * time.Second)}},
		{name: "403DailyLimitExceeded", ex: exchange{method: "POST", status: 403, body: legacy(403, "dailyLimitExceeded")},
			want: want{class: providers.ClassRateLimited, reason: "daily-limit", shared: true, hintSrc: "google-daily-reset", hintAt: time.Date(2026, 9, 11, 8, 0, 0, 0, time.UTC)}},
		{name: "403SharingRateLimitExceeded", ex: exchange{method: "POST", status: 403, body: legacy(403, "sharingRateLimitExceeded")},
			want: want{class: providers.ClassRateLimited, reason: "sharing-rate-limit"}},
		// providers.md §8 Legacy: storageQuotaExceeded is not TR; permission 403s.
		{name: "403StorageQuota", ex: exchange{method: "POST", status: 403, body: legacy(403, "storageQuotaExceeded")},
			want: want{class: providers.ClassPermanent, reason: "storage-quota"}},
		{name: "403InsufficientFilePermissions", ex: exchange{method: "PATCH", status: 403, body: `{"error":{"errors":[{"domain":"global","reason":"insufficientFilePermissions","message":"…"}],"code":403}}`},
			want: want{class: providers.ClassPermanent, reason: "insufficientfilepermissions"}},
		{name: "403AppNotAuthorizedToFile", ex: exchange{status: 403, body: `{"error":{"errors":[{"domain":"global","reason":"appNotAuthorizedToFile"}],"code":403}}`},
			want: want{class: providers.ClassPermanent, reason: "appnotauthorizedtofile"}},
		{name: "403PermissionDenied", ex: exchange{status: 403, body: simple(403, "PERMISSION_DENIED")},
			want: want{class: providers.ClassPermanent, reason: "permission-denied"}},
		{name: "429Plain", ex: exchange{status: 429}, want: want{class: providers.ClassRateLimited, reason: "rate-limit"}},
		// providers.md §8 AUTH / PERM.
		{name: "401", ex: exchange{status: 401, body: simple(401, "UNAUTHENTICATED")}, want: want{class: providers.ClassAuthRevoked, reason: "unauthenticated"}},
		{name: "400InvalidArgument", ex: exchange{method: "POST", status: 400, body: simple(400, "INVALID_ARGUMENT")}, want: want{class: providers.ClassPermanent, reason: "invalid-argument"}},
		{name: "400FailedPrecondition", ex: exchange{method: "POST", status: 400, body: simple(400, "FAILED_PRECONDITION")}, want: want{class: providers.ClassPermanent, reason: "failed-precondition"}},
		{name: "404", ex: exchange{status: 404, body: simple(404, "NOT_FOUND")}, want: want{class: providers.ClassPermanent, reason: "not-found"}},
		{name: "409AlreadyExists", ex: exchange{method: "POST", status: 409, body: simple(409, "ALREADY_EXISTS")}, want: want{class: providers.ClassPermanent, reason: "already-exists"}},
		// providers.md §8: ABORTED is retryable.
		{name: "409Aborted", ex: exchange{method: "POST", status: 409, body: simple(409, "ABORTED")}, want: want{class: providers.ClassTransient, reason: "aborted"}},
		// providers.md §8 TR / UNK.
		{name: "503Unavailable", ex: exchange{method: "POST", status: 503, body: modern(503, "UNAVAILABLE", "BACKEND_UNAVAILABLE", "", "4s")},
			want: want{class: providers.ClassTransient, reason: "unavailable", hintSrc: "body error.details[].retryDelay", hintAt: now.Add(4 * time.Second)}},
		{name: "504DeadlineExceededWrite", ex: exchange{method: "POST", status: 504, body: simple(504, "DEADLINE_EXCEEDED")},
			want: want{class: providers.ClassUnknownOutcome, reason: "deadline-exceeded"}},
		{name: "504DeadlineExceededRead", ex: exchange{status: 504, body: simple(504, "DEADLINE_EXCEEDED")},
			want: want{class: providers.ClassTransient, reason: "deadline-exceeded"}},
		{name: "500Write", ex: exchange{method: "POST", status: 500, body: simple(500, "INTERNAL")}, want: want{class: providers.ClassUnknownOutcome, reason: "server-error"}},
		{name: "502Read", ex: exchange{status: 502}, want: want{class: providers.ClassTransient, reason: "server-error"}},
	}
	runSignals(t, p, tests)
}

func TestGoogleProfile(t *testing.T) {
	p, _ := providers.Lookup("google", providers.Options{})
	// providers.md §8 Idempotency: per-API requestId fields, no header.
	if p.Idempotency().Applies("POST") {
		t.Errorf("Applies(POST) = true")
	}
	d := p.Describe()
	if len(d.SharedLimits) == 0 {
		t.Errorf("google describes no shared limits")
	}
}
