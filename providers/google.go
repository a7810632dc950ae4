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
// formats. A limit pauses only its scope unless the answer names a project
// or daily quota (design §12): one account's limit must not pause every
// account of the project.
//
// Modern (AIP-193): `{"error": {"code": 429, "status": "RESOURCE_EXHAUSTED",
// "details": [ErrorInfo, RetryInfo, QuotaFailure]}}`. RESOURCE_EXHAUSTED is
// rateLimited and waits for Retry-After, else RetryInfo.retryDelay (a
// Duration string such as "1.5s"). It is Shared (every scope of the group
// pauses) only when ErrorInfo metadata quota_limit names a per-project or
// per-day quota ("WriteRequestsPerMinutePerProject",
// "defaultPerDayPerProject"); a per-user quota ("…PerUser…") or one that
// names no scope pauses only the scope. ErrorInfo reason
// RESOURCE_AVAILABILITY (AIP-193's example: a zone without capacity) is
// transient, not a quota.
//
// Legacy (Drive, Gmail, Calendar): `error.errors[].reason` with domain
// usageLimits, at 403 (or 429). userRateLimitExceeded and rateLimitExceeded
// ("the maximum request rate per calendar or per authenticated user",
// Calendar's "Handle API errors") are the account's; quotaExceeded
// ("Calendar usage limits exceeded") is a temporary limit on the user,
// waiting the policy's default delay; dailyLimitExceeded ("the Courtesy API
// limit for your project") is Shared; sharingRateLimitExceeded is the
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
	quota := func(scope googleQuotaScope) func(r *reading) bool {
		return func(r *reading) bool { return googleQuota(r) == scope }
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
			"Quotas belong to the Cloud project (pacer's app) and per user per project: a limit pauses every scope of the group only when the answer names a project or daily quota (dailyLimitExceeded, ErrorInfo quota_limit …PerProject… or …PerDay…); any other only the scope.",
		},
	}
	daily := []hinter{retryAfter(), retryInfo, dailyHint("google-daily-reset", GoogleDailyResetHourUTC, "daily quota; resets at midnight Pacific (verify)")}
	rules := []rule{
		{
			Signal: Signal{Status: "403,429", When: "error.errors[].reason dailyLimitExceeded", Class: ClassRateLimited, Reason: "daily-limit", Shared: true,
				Note: "the Courtesy API limit of the project: every account, until midnight Pacific (verify)"},
			match: legacy("dailyLimitExceeded"),
			hints: daily,
		},
		{
			Signal: Signal{Status: "403,429", When: "ErrorInfo metadata quota_limit names a per-day quota, not a per-user one (…PerDay…)", Class: ClassRateLimited, Reason: "daily-quota", Shared: true,
				Note: "the project's daily quota: every account"},
			match: quota(googleQuotaDaily),
			hints: daily,
		},
		{
			Signal: Signal{Status: "403,429", When: "ErrorInfo metadata quota_limit names a per-project quota, not a per-user one (…PerProject…)", Class: ClassRateLimited, Reason: "project-quota", Shared: true,
				Note: "the project's quota (RATE_LIMIT_EXCEEDED on WriteRequestsPerMinutePerProject, …): every account"},
			match: quota(googleQuotaProject),
		},
		{
			Signal: Signal{Status: "403,429", When: "error.errors[].reason userRateLimitExceeded", Class: ClassRateLimited, Reason: "user-rate-limit", Note: "per user per project: this account only"},
			match:  legacy("userRateLimitExceeded"),
		},
		{
			Signal: Signal{Status: "403,429", When: "error.errors[].reason rateLimitExceeded", Class: ClassRateLimited, Reason: "rate-limit-exceeded",
				Note: "the maximum request rate per calendar or per user (Calendar), per user (Drive): this account only"},
			match: legacy("rateLimitExceeded"),
		},
		{
			Signal: Signal{Status: "403,429", When: "error.errors[].reason quotaExceeded", Class: ClassRateLimited, Reason: "usage-limits",
				Note: "usage limits exceeded (Calendar's abuse protection): a temporary limit on this account, the policy's default wait"},
			match: legacy("quotaExceeded"),
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
			Signal: Signal{Status: "429", When: "error.status RESOURCE_EXHAUSTED with ErrorInfo reason RESOURCE_AVAILABILITY", Class: ClassTransient, Reason: "resource-availability",
				Note: "AIP-193: the zone has no capacity now; not a quota, so this operation backs off and nothing else pauses"},
			match: func(r *reading) bool {
				return status("RESOURCE_EXHAUSTED")(r) && r.fields().has("error.details[].reason", "RESOURCE_AVAILABILITY")
			},
			hints: []hinter{retryAfter(), retryInfo},
		},
		{
			Signal: Signal{Status: "429", When: "error.status RESOURCE_EXHAUSTED with a per-user quota (ErrorInfo metadata quota_limit …PerUser…)", Class: ClassRateLimited, Reason: "user-quota",
				Note: "per user per project: this account only"},
			match: func(r *reading) bool { return status("RESOURCE_EXHAUSTED")(r) && googleQuota(r) == googleQuotaUser },
		},
		{
			Signal: Signal{Status: "429", When: "error.status RESOURCE_EXHAUSTED", Class: ClassRateLimited, Reason: "resource-exhausted",
				Note: "a quota that names no project or daily scope: this account only"},
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

// googleQuotaScope is whose quota an answer's ErrorInfo names.
type googleQuotaScope int

const (
	googleQuotaUnnamed googleQuotaScope = iota
	googleQuotaUser
	googleQuotaProject
	googleQuotaDaily
)

// googleQuota reads whose quota ErrorInfo metadata quota_limit names
// (AIP-193; recorded: "ReadRequestsPerMinutePerUser",
// "WriteRequestsPerMinutePerProject"). A per-user limit wins: a
// "…PerDayPerUser" quota is the account's.
func googleQuota(r *reading) googleQuotaScope {
	if !r.mentions("quota_limit") {
		return googleQuotaUnnamed
	}
	scope := googleQuotaUnnamed
	for _, v := range r.fields().get("error.details[].metadata.quota_limit") {
		v = strings.ToLower(v)
		switch {
		case strings.Contains(v, "peruser"):
			return googleQuotaUser
		case strings.Contains(v, "perday"):
			scope = googleQuotaDaily
		case strings.Contains(v, "perproject") && scope == googleQuotaUnnamed:
			scope = googleQuotaProject
		}
	}
	return scope
}
