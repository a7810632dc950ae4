package providers

import (
	"time"
)

// HubSpot waits without a usable header.
const (
	// HubSpotBurstWait is one rolling window (X-HubSpot-RateLimit-Interval-
	// Milliseconds is usually 10000).
	HubSpotBurstWait = 10 * time.Second
	// HubSpotLockedWait is the least wait after 423 Locked (providers.md §5:
	// "wait ≥2 s").
	HubSpotLockedWait = 2 * time.Second
	// HubSpotDailyResetHourUTC is the hour (UTC) a DAILY limit is taken to
	// have reset: the daily quota resets at midnight in the account's time
	// zone, which pacer cannot see, and 12:00 UTC is midnight in the last
	// time zone (UTC−12) to reach it, so the wait is never short. The
	// policy's maximum hint bounds it.
	HubSpotDailyResetHourUTC = 12
)

// HubSpot is the profile for the HubSpot APIs (providers.md §5).
//
// 429 bodies say errorType RATE_LIMIT and which policy tripped: DAILY waits
// for the daily reset (HubSpotDailyResetHourUTC, unless a Retry-After says
// otherwise); TEN_SECONDLY_ROLLING and SECONDLY wait one window
// (X-HubSpot-RateLimit-Interval-Milliseconds, else HubSpotBurstWait).
// Retry-After on 429 is not documented but honoured first. 423 Locked
// (heavy sync) and 477 Migration in Progress (Retry-After, up to ~24 h)
// are rateLimited: the portal, not the request, is busy. 502 and 504
// (processing limits) are an unknown outcome for a mutation; 503 and
// Cloudflare's 521–523 are transient; 524 (the origin took the request and
// did not answer in time) is an unknown outcome for a mutation, although
// providers.md lists it as transient, because the write may have landed
// (invariant 4). 401 is authRevoked: pacer does not refresh tokens, so a
// refused token needs a person (HubSpot warns a 401 alone is no refresh
// signal; refresh by expires_in). 207 is success with per-item statuses.
//
// No limit is shared by other scopes: the burst limit is per app × portal,
// and the daily quota is per portal (shared by that portal's private apps,
// which pacer does not see as other scopes), so a limit pauses only its
// portal's scope.
type HubSpot struct{ *table }

var _ Profile = (*HubSpot)(nil)

// NewHubSpot returns the HubSpot profile.
func NewHubSpot() *HubSpot {
	policy := func(names ...string) func(r *reading) bool {
		return func(r *reading) bool { return r.fields().has("policyName", names...) }
	}
	interval := fromHeader("X-Hubspot-Ratelimit-Interval-Milliseconds", ResetDeltaMillis)
	burstDefault := fixedHint{name: "hubspot-burst-default", wait: HubSpotBurstWait, note: "no usable interval header; one 10-s window"}
	t := table{
		name: "hubspot", title: "HubSpot APIs", ref: "providers.md §5",
		budgets: []budgetReader{
			headerBudget{names: BudgetHeaders{Limit: "X-Hubspot-Ratelimit-Max", Remaining: "X-Hubspot-Ratelimit-Remaining", Reset: "X-Hubspot-Ratelimit-Interval-Milliseconds", ResetForm: ResetDeltaMillis},
				note: "burst (rolling) window; refills within one interval"},
			headerBudget{names: BudgetHeaders{Limit: "X-Hubspot-Ratelimit-Secondly", Remaining: "X-Hubspot-Ratelimit-Secondly-Remaining"}, note: "older per-second headers"},
			headerBudget{names: BudgetHeaders{Limit: "X-Hubspot-Ratelimit-Daily", Remaining: "X-Hubspot-Ratelimit-Daily-Remaining"}, note: "daily quota; absent for OAuth apps"},
		},
		idemNote: "none: use upserts; batch objectWriteTraceId gives per-item status",
		// Private apps on Free/Starter: 100 requests per 10 s (OAuth apps
		// 110, Professional/Enterprise 190) (verify).
		defaults:     Defaults{MaxConcurrent: 4, Requests: 100, Per: 10 * time.Second},
		defaultsNote: "100 per 10 s: the burst limit of private apps on Free/Starter (OAuth apps 110, Pro/Enterprise 190) (verify)",
		notes: []string{
			"No limit pauses other scopes: the burst limit is per app × portal, the daily quota per portal.",
			"Rate-limit headers may be missing entirely; daily ones are absent for OAuth apps.",
		},
	}
	rules := []rule{
		{
			Signal: Signal{Status: "429", When: "policyName DAILY", Class: ClassRateLimited, Reason: "daily-limit",
				Note: "resets at midnight in the account's time zone, unknown to pacer: waits until 12:00 UTC (midnight at UTC−12) so it is never early"},
			match: policy("DAILY"),
			hints: []hinter{retryAfter(), dailyHint("hubspot-daily-reset", HubSpotDailyResetHourUTC, "daily quota; account time zone unknown")},
		},
		{
			Signal: Signal{Status: "429", When: "policyName TEN_SECONDLY_ROLLING or SECONDLY", Class: ClassRateLimited, Reason: "burst-limit"},
			match:  policy("TEN_SECONDLY_ROLLING", "SECONDLY"),
			hints:  []hinter{retryAfter(), interval, burstDefault},
		},
		{
			Signal: Signal{Status: "429", When: "no known policyName", Class: ClassRateLimited, Reason: "rate-limit"},
			hints:  []hinter{retryAfter(), interval, burstDefault},
		},
		{
			Signal: Signal{Status: "423", Class: ClassRateLimited, Reason: "locked", Note: "portal locked by a heavy sync: wait at least 2 s"},
			hints:  []hinter{retryAfter(), fixedHint{name: "hubspot-locked-default", wait: HubSpotLockedWait, note: "locked; HubSpot asks to wait at least 2 s"}},
		},
		{
			Signal: Signal{Status: "477", Class: ClassRateLimited, Reason: "migration-in-progress", Note: "Retry-After seconds, up to ~24 h"},
		},
		{Signal: Signal{Status: "401", Class: ClassAuthRevoked, Reason: "unauthorized",
			Note: "INVALID_AUTHENTICATION / EXPIRED_AUTHENTICATION; pacer does not refresh tokens, a person replaces them"}},
		{Signal: Signal{Status: "403", Class: ClassPermanent, Reason: "missing-scope"}},
		{Signal: Signal{Status: "409", Class: ClassPermanent, Reason: "conflict", Note: "e.g. the object already exists: after a resend the first write may have landed"}},
		{Signal: Signal{Status: "400", Class: ClassPermanent, Reason: "validation", Note: "category VALIDATION_ERROR with errors[]"}},
		{Signal: Signal{Status: "207", Class: ClassSuccess, Note: "batch multi-status: per-item results are in the body"}},
		{
			Signal: Signal{Status: "502,504", Class: ClassUnknownOutcome, ReadClass: ClassTransient, Reason: "processing-limit",
				Note: "processing limits: the request may have been processed"},
		},
		{Signal: Signal{Status: "503,521,522,523", Class: ClassTransient, Reason: "unavailable"}},
		{
			Signal: Signal{Status: "524", Class: ClassUnknownOutcome, ReadClass: ClassTransient, Reason: "origin-timeout",
				Note: "providers.md says transient; Cloudflare 524 means the origin took the request and did not answer, so a write may have landed", Verify: true},
		},
	}
	return &HubSpot{newTable(t, rules)}
}
