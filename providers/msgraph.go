package providers

import (
	"strings"
)

// MSGraph is the profile for Microsoft Graph (providers.md §7).
//
// 429 (activityLimitReached, throttledRequest) is rateLimited with
// Retry-After seconds; without one the policy's default delay applies
// (Graph asks for exponential backoff). When x-ms-throttle-scope says
// "Application/…" the limit is the app's across every tenant, so the
// outcome is Shared and every scope of the group pauses; "Tenant_Application"
// and "Tenant" limits pause only the scope. 509 (bandwidth) is rateLimited.
// 503 serviceNotAvailable is transient and may carry Retry-After; 504 and
// other 5xx are an unknown outcome for a mutation (Graph honours no
// idempotency keys). 401 and 403 insufficient_claims (Conditional Access)
// are authRevoked; other 403s (accessDenied) permanent, as are 400, 404,
// 409 (nameAlreadyExists), 412, 413, 422 and 507 (storage quota). 423
// Locked is transient. x-ms-throttle-limit-percentage (0.8–1.8) warns of a
// limit ahead; the Detail notes it.
type MSGraph struct{ *table }

var _ Profile = (*MSGraph)(nil)

// NewMSGraph returns the Microsoft Graph profile.
func NewMSGraph() *MSGraph {
	appScope := func(r *reading) bool {
		return strings.HasPrefix(strings.ToLower(strings.TrimSpace(r.header("X-Ms-Throttle-Scope"))), "application/")
	}
	t := table{
		name: "msgraph", title: "Microsoft Graph", ref: "providers.md §7",
		diag: func(r *reading) []string {
			var notes []string
			if s := r.header("X-Ms-Throttle-Scope"); s != "" {
				notes = append(notes, "throttle scope "+Cut(s, 128))
			}
			if p := r.header("X-Ms-Throttle-Limit-Percentage"); p != "" {
				notes = append(notes, "throttle limit percentage "+Cut(p, 16)+" (near a limit)")
			}
			if id := r.header("Request-Id"); id != "" {
				notes = append(notes, "request-id "+Cut(id, 64))
			}
			return notes
		},
		idemNote:     "none in general; an event's transactionId dedupes retried creates (verify)",
		defaults:     Defaults{MaxConcurrent: 4},
		defaultsNote: "limits are per service (Outlook: 4 concurrent requests per mailbox); none is general",
		notes: []string{
			"Usage keeps accruing while throttled: honour Retry-After on every repeat. Writes can be throttled while reads pass.",
		},
	}
	rules := []rule{
		{
			Signal: Signal{Status: "429", When: "x-ms-throttle-scope Application/…", Class: ClassRateLimited, Reason: "app-throttled", Shared: true,
				Note: "the app's limit across every tenant: every scope of the group pauses"},
			match: appScope,
		},
		{Signal: Signal{Status: "429", Class: ClassRateLimited, Reason: "throttled", Note: "activityLimitReached / throttledRequest; per app × tenant or per tenant"}},
		{Signal: Signal{Status: "509", Class: ClassRateLimited, Reason: "bandwidth-limit"}},
		{Signal: Signal{Status: "503", Class: ClassTransient, Reason: "unavailable", Note: "serviceNotAvailable; may carry Retry-After"}},
		{
			Signal: Signal{Status: "401,403", When: "insufficient_claims (Conditional Access)", Class: ClassAuthRevoked, Reason: "insufficient-claims"},
			match: func(r *reading) bool {
				return strings.Contains(r.header("Www-Authenticate"), "insufficient_claims") || r.fields().has("error.code", "insufficient_claims")
			},
		},
		{Signal: Signal{Status: "401", Class: ClassAuthRevoked, Reason: "unauthorized", Note: "InvalidAuthenticationToken; an Entra refresh answering invalid_grant (AADSTS…) means revoked"}},
		{Signal: Signal{Status: "403", Class: ClassPermanent, Reason: "access-denied"}},
		{Signal: Signal{Status: "507", Class: ClassPermanent, Reason: "storage-quota", Note: "insufficient storage quota: a person must free space"}},
		noKeysServerError("5xx", "server-error", "Graph honours no idempotency keys; a 5xx may come after the write landed"),
	}
	return &MSGraph{newTable(t, rules)}
}
