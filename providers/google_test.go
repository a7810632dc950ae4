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
	calendarRateLimit := func(code int) string {
		return `{"error":{"errors":[{"domain":"usageLimits","reason":"rateLimitExceeded","message":"Rate Limit Exceeded"}],"code":` + itoa(code) + `,"message":"Rate Limit Exceeded"}}`
	}
	const aip193Example = `{"error":{"code":429,"message":"The zone 'us-east1-a' does not have enough resources available to fulfill the request. Try a different zone, or try again later.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"RESOURCE_AVAILABILITY","domain":"compute.googleapis.com","metadata":{"zone":"us-east1-a","vmType":"e2-medium","attachment":"local-ssd=3,nvidia-t4=2","zonesWithCapacity":"us-central1-f,us-central1-c"}},{"@type":"type.googleapis.com/google.rpc.Help","links":[{"description":"Additional information on this error","url":"https://cloud.google.com/compute/docs/resource-error"}]}]}}`
	simple := func(code int, status string) string {
		return `{"error":{"code":` + itoa(code) + `,"message":"…","status":"` + status + `"}}`
	}
	tests := []signalCase{
		// providers.md §8 Modern: RESOURCE_EXHAUSTED with RetryInfo.retryDelay (Duration). ErrorInfo
		// metadata quota_limit names a per-project quota, as in a Cloud KMS answer quoted in a Terraform log
		// ("RATE_LIMIT_EXCEEDED", quota_limit "WriteRequestsPerMinutePerProject", consumer projects/…):
		// the project's quota ⇒ every account (design §12).
		{name: "429ProjectQuotaRetryInfo", ex: exchange{method: "POST", status: 429, body: modern(429, "RESOURCE_EXHAUSTED", "RATE_LIMIT_EXCEEDED", "WriteRequestsPerMinutePerProject", "30s")},
			want: want{class: providers.ClassRateLimited, reason: "project-quota", shared: true, hintSrc: "body error.details[].retryDelay", hintAt: now.Add(30 * time.Second), detail: "quota WriteRequestsPerMinutePerProject"}},
		{name: "429RetryInfoFraction", ex: exchange{status: 429, body: modern(429, "RESOURCE_EXHAUSTED", "RATE_LIMIT_EXCEEDED", "ReadRequestsPerMinutePerProject", "1.5s")},
			want: want{class: providers.ClassRateLimited, reason: "project-quota", shared: true, hintSrc: "body error.details[].retryDelay", hintAt: now.Add(1500 * time.Millisecond)}},
		{name: "429RetryAfterOverRetryInfo", ex: exchange{status: 429, header: header("Retry-After", "5"), body: modern(429, "RESOURCE_EXHAUSTED", "RATE_LIMIT_EXCEEDED", "ReadRequestsPerMinutePerProject", "30s")},
			want: want{class: providers.ClassRateLimited, reason: "project-quota", shared: true, hintSrc: "retry-after", hintAt: now.Add(5 * time.Second)}},
		{name: "429RetryInfoNegative", ex: exchange{status: 429, body: modern(429, "RESOURCE_EXHAUSTED", "RATE_LIMIT_EXCEEDED", "ReadRequestsPerMinutePerProject", "-3s")},
			want: want{class: providers.ClassRateLimited, reason: "project-quota", shared: true, hintSrc: "body error.details[].retryDelay", note: "negative"}},
		// A per-day project quota ⇒ every account, until the daily reset.
		{name: "429DailyProjectQuota", ex: exchange{status: 429, body: modern(429, "RESOURCE_EXHAUSTED", "RATE_LIMIT_EXCEEDED", "defaultPerDayPerProject", "")},
			want: want{class: providers.ClassRateLimited, reason: "daily-quota", shared: true, hintSrc: "google-daily-reset", hintAt: time.Date(2026, 9, 11, 8, 0, 0, 0, time.UTC)}},
		// A recorded Sheets answer (an R Google client's test snapshot, "Client error: (429) RESOURCE_EXHAUSTED"): RATE_LIMIT_EXCEEDED, quota_limit
		// ReadRequestsPerMinutePerUser, consumer projects/… ⇒ that account only, though the consumer is a project.
		{name: "429PerUserQuota", ex: exchange{status: 429, body: modern(429, "RESOURCE_EXHAUSTED", "RATE_LIMIT_EXCEEDED", "ReadRequestsPerMinutePerUser", "20s")},
			want: want{class: providers.ClassRateLimited, reason: "user-quota", hintSrc: "body error.details[].retryDelay", hintAt: now.Add(20 * time.Second)}},
		{name: "429PerDayPerUserQuota", ex: exchange{status: 429, body: modern(429, "RESOURCE_EXHAUSTED", "RATE_LIMIT_EXCEEDED", "QueriesPerDayPerUser", "")},
			want: want{class: providers.ClassRateLimited, reason: "user-quota"}},
		// design §12: a RESOURCE_EXHAUSTED that names no project or daily quota pauses this scope only.
		{name: "429ResourceExhaustedUnnamed", ex: exchange{status: 429, body: `{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}`},
			want: want{class: providers.ClassRateLimited, reason: "resource-exhausted"}},
		// AIP-193 (aip-dev/google.aip.dev aip/general/0193.md), its JSON example: 429 RESOURCE_EXHAUSTED,
		// ErrorInfo reason RESOURCE_AVAILABILITY, "The zone 'us-east1-a' does not have enough resources
		// available" ⇒ transient capacity, this scope only.
		{name: "429ResourceAvailability", ex: exchange{method: "POST", status: 429, body: aip193Example},
			want: want{class: providers.ClassTransient, reason: "resource-availability"}},
		{name: "429ResourceAvailabilityRetryInfo", ex: exchange{method: "POST", status: 429, body: modern(429, "RESOURCE_EXHAUSTED", "RESOURCE_AVAILABILITY", "", "10s")},
			want: want{class: providers.ClassTransient, reason: "resource-availability", hintSrc: "body error.details[].retryDelay", hintAt: now.Add(10 * time.Second)}},
		// Google Calendar "Handle API errors" (developers.google.com/workspace/calendar/api/guides/errors):
		// 403 userRateLimitExceeded "User Rate Limit Exceeded" (the per-user limit).
		{name: "403UserRateLimitExceeded", ex: exchange{method: "POST", status: 403, body: legacy(403, "userRateLimitExceeded")},
			want: want{class: providers.ClassRateLimited, reason: "user-rate-limit"}},
		// Same page: 403 and 429 rateLimitExceeded, "the user has reached Google Calendar API's maximum
		// request rate per calendar or per authenticated user" ⇒ this scope only, not every account.
		{name: "403RateLimitExceededCalendar", ex: exchange{status: 403, body: calendarRateLimit(403)},
			want: want{class: providers.ClassRateLimited, reason: "rate-limit-exceeded"}},
		{name: "429RateLimitExceededCalendar", ex: exchange{status: 429, header: header("Retry-After", "2"), body: calendarRateLimit(429)},
			want: want{class: providers.ClassRateLimited, reason: "rate-limit-exceeded", hintSrc: "retry-after", hintAt: now.Add(2 * time.Second)}},
		// The legacy reason with a per-project ErrorInfo beside it (newer Google answers carry both) ⇒ shared.
		{name: "429RateLimitExceededProjectQuota", ex: exchange{status: 429, body: `{"error":{"code":429,"message":"Quota exceeded","errors":[{"domain":"usageLimits","reason":"rateLimitExceeded"}],"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"RATE_LIMIT_EXCEEDED","domain":"googleapis.com","metadata":{"quota_limit":"WriteRequestsPerMinutePerProject","consumer":"projects/1"}}]}}`},
			want: want{class: providers.ClassRateLimited, reason: "project-quota", shared: true, detail: "quota WriteRequestsPerMinutePerProject"}},
		// Same page: 403 quotaExceeded "Calendar usage limits exceeded." ⇒ rate limited with the default wait, not permanent.
		{name: "403QuotaExceededCalendar", ex: exchange{method: "POST", status: 403, body: `{"error":{"errors":[{"domain":"usageLimits","message":"Calendar usage limits exceeded.","reason":"quotaExceeded"}],"code":403,"message":"Calendar usage limits exceeded."}}`},
			want: want{class: providers.ClassRateLimited, reason: "usage-limits"}},
		// Same page: 403 dailyLimitExceeded, "the Courtesy API limit for your project" ⇒ every account.
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
