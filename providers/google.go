package providers

import (
	"strings"
)

// GoogleDailyResetHourUTC is the hour (UTC) a Google daily quota is taken
// to have reset: Google's daily quotas reset at midnight Pacific time
// (verify), which is 08:00 UTC in winter and 07:00 in summer; 08:00 is
// never early.
const GoogleDailyResetHourUTC = 8

// Google is the profile for Google APIs (providers.md §8), in both error
// formats.
//
// Modern (AIP-193): `{"error": {"code": 429, "status": "RESOURCE_EXHAUSTED",
// "details": [ErrorInfo, RetryInfo, QuotaFailure]}}`. RESOURCE_EXHAUSTED is
// rateLimited and waits for Retry-After, else RetryInfo.retryDelay (a
// Duration string such as "1.5s"). Its quota is the Cloud project's, shared
// by every account (Shared), unless ErrorInfo names a per-user quota
// (metadata quota_limit …PerUser…) (verify).
//
// Legacy (Drive, Gmail, Calendar): `error.errors[].reason` with domain
// usageLimits, at 403 (or 429): userRateLimitExceeded is that account's
// limit; rateLimitExceeded (project) and dailyLimitExceeded are Shared —
// they pause every scope of the group; sharingRateLimitExceeded is the
// account's. storageQuotaExceeded is permanent, not a rate limit, as are the
// permission 403s (insufficientFilePermissions, appNotAuthorizedToFile,
// domainPolicy, forbidden).
//
// 401 (UNAUTHENTICATED, authError) is authRevoked. 400 (INVALID_ARGUMENT,
// FAILED_PRECONDITION), 404 and 409 ALREADY_EXISTS are permanent; 409
// ABORTED is transient. 503 UNAVAILABLE is transient; 504
// DEADLINE_EXCEEDED and other 5xx are an unknown outcome for a mutation:
// Google's requestId deduplication is a per-API body or query field pacer
// does not set.
type Google struct{ *table }

var _ Profile = (*Google)(nil)

// NewGoogle returns the Google profile.
func NewGoogle() *Google {
	legacy := func(reasons ...string) func(r *reading) bool {
		return func(r *reading) bool { return r.fields().has("error.errors[].reason", reasons...) }
	}
	status := func(values ...string) func(r *reading) bool {
		return func(r *reading) bool { return r.fields().has("error.status", values...) }
	}
	perUser := func(r *reading) bool {
		for _, v := range r.fields().get("error.details[].metadata.quota_limit") {
			if strings.Contains(strings.ToLower(v), "peruser") {
				return true
			}
		}
		return false
	}
	retryInfo := bodyTimeHint("error.details[].retryDelay", ResetDuration, "google.rpc.RetryInfo; wait at least this, then back off")
	lowerReason := func(path, fallback string) func(r *reading) string {
		return func(r *reading) string {
			if v := r.fields().first(path); v != "" {
				return strings.ReplaceAll(strings.ToLower(Cut(v, 64)), "_", "-")
			}
			return fallback
		}
	}
	t := table{
		name: "google", title: "Google APIs (AIP-193 and legacy Drive/Gmail/Calendar errors)", ref: "providers.md §8",
		rateHints: []hinter{retryAfter(), retryInfo},
		diag: func(r *reading) []string {
			f := r.fields()
			var notes []string
			if reason := f.first("error.details[].reason"); reason != "" {
				notes = append(notes, "reason "+Cut(reason, 64))
			}
			if q := f.first("error.details[].metadata.quota_limit"); q != "" {
				notes = append(notes, "quota "+Cut(q, 128))
			}
			return notes
		},
		idemNote:     "no header: some Cloud APIs take a requestId body or query field; none in Drive or Gmail",
		defaults:     Defaults{MaxConcurrent: 4},
		defaultsNote: "quotas are per API and per project: none is general",
		notes: []string{
			"Quotas belong to the Cloud project (pacer's app) and per user per project: project and daily quotas pause every scope of the group, per-user ones only the scope.",
		},
	}
	rules := []rule{
		{
			Signal: Signal{Status: "403,429", When: "error.errors[].reason userRateLimitExceeded", Class: ClassRateLimited, Reason: "user-rate-limit", Note: "per user per project: this account only"},
			match:  legacy("userRateLimitExceeded"),
		},
		{
			Signal: Signal{Status: "403,429", When: "error.errors[].reason rateLimitExceeded", Class: ClassRateLimited, Reason: "project-rate-limit", Shared: true,
				Note: "the project's rate: every account"},
			match: legacy("rateLimitExceeded"),
		},
		{
			Signal: Signal{Status: "403,429", When: "error.errors[].reason dailyLimitExceeded", Class: ClassRateLimited, Reason: "daily-limit", Shared: true,
				Note: "the project's daily quota: every account, until midnight Pacific (verify)"},
			match: legacy("dailyLimitExceeded"),
			hints: []hinter{retryAfter(), retryInfo, dailyHint("google-daily-reset", GoogleDailyResetHourUTC, "daily quota; resets at midnight Pacific (verify)")},
		},
		{
			Signal: Signal{Status: "403,429", When: "error.errors[].reason sharingRateLimitExceeded", Class: ClassRateLimited, Reason: "sharing-rate-limit"},
			match:  legacy("sharingRateLimitExceeded"),
		},
		{
			Signal: Signal{Status: "403", When: "error.errors[].reason storageQuotaExceeded", Class: ClassPermanent, Reason: "storage-quota", Note: "not a rate limit: a person must free space"},
			match:  legacy("storageQuotaExceeded"),
		},
		{
			Signal: Signal{Status: "429", When: "error.status RESOURCE_EXHAUSTED with a per-user quota (ErrorInfo metadata quota_limit …PerUser…)", Class: ClassRateLimited, Reason: "user-quota", Verify: true},
			match:  func(r *reading) bool { return status("RESOURCE_EXHAUSTED")(r) && perUser(r) },
		},
		{
			Signal: Signal{Status: "429", When: "error.status RESOURCE_EXHAUSTED", Class: ClassRateLimited, Reason: "resource-exhausted", Shared: true,
				Note: "the project's quota: every account"},
			match: status("RESOURCE_EXHAUSTED"),
		},
		{Signal: Signal{Status: "429", Class: ClassRateLimited, Reason: "rate-limit", Note: "Drive also answers plain 429s"}},
		{Signal: Signal{Status: "401", Class: ClassAuthRevoked, Reason: "unauthenticated", Note: "UNAUTHENTICATED / authError; a refresh answering invalid_grant means revoked or expired"}},
		{Signal: Signal{Status: "403", Class: ClassPermanent, Reason: "insufficientfilepermissions | appnotauthorizedtofile | domainpolicy | forbidden | permission-denied | permission"},
			reasonOf: func(r *reading) string {
				if v := r.fields().first("error.errors[].reason"); v != "" {
					return strings.ToLower(Cut(v, 64))
				}
				return lowerReason("error.status", "permission")(r)
			}},
		{
			Signal: Signal{Status: "409", When: "error.status ABORTED", Class: ClassTransient, Reason: "aborted", Note: "concurrency conflict: retryable"},
			match:  status("ABORTED"),
		},
		{Signal: Signal{Status: "409", Class: ClassPermanent, Reason: "already-exists | conflict"}, reasonOf: lowerReason("error.status", "conflict")},
		{Signal: Signal{Status: "400", Class: ClassPermanent, Reason: "invalid-argument | failed-precondition | bad-request"}, reasonOf: lowerReason("error.status", "bad-request")},
		{Signal: Signal{Status: "503", Class: ClassTransient, Reason: "unavailable"}, hints: []hinter{retryAfter(), retryInfo}},
		{
			Signal: Signal{Status: "504", Class: ClassUnknownOutcome, ReadClass: ClassTransient, Reason: "deadline-exceeded",
				Note: "DEADLINE_EXCEEDED: the write may have landed"},
		},
		noKeysServerError("5xx", "server-error", "Google honours no idempotency header; a 5xx may come after the write landed"),
	}
	return &Google{newTable(t, rules)}
}
