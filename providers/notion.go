package providers

import (
	"strings"
	"time"
)

// Notion is the profile for the Notion API (providers.md §12).
//
// 429 rate_limited is rateLimited with Retry-After (integer seconds): a
// connection's 60-s budget (Retry-After ≤ 60 s) or the workspace's shared
// limit (may exceed 60 s); additional_data.rate_limit_reason, when sent,
// goes into the Detail. 529 service_overload also carries Retry-After and
// is rateLimited: nothing was done and the whole workspace should slow
// down. The workspace is the scope's, so no limit pauses other scopes. 401
// is authRevoked; 403 restricted_resource, 404 object_not_found (also a
// page not shared with the integration) and 400 validation_error,
// invalid_json, invalid_request(_url), missing_version are permanent; 409
// row_limit_exceeded is permanent (issue 12; not in Notion's status-codes
// table (verify)), any other 409 (conflict_error) transient. 503 is transient; other 5xx an unknown
// outcome for a mutation (no idempotency keys).
type Notion struct{ *table }

var _ Profile = (*Notion)(nil)

// NewNotion returns the Notion profile.
func NewNotion() *Notion {
	codeReason := func(fallback string) func(r *reading) string {
		return func(r *reading) string {
			if c := r.fields().first("code"); c != "" {
				return strings.ReplaceAll(Cut(c, 64), "_", "-")
			}
			return fallback
		}
	}
	t := table{
		name: "notion", title: "Notion API", ref: "providers.md §12",
		diag: func(r *reading) []string {
			if why := r.fields().first("additional_data.rate_limit_reason"); why != "" {
				return []string{"rate limit reason " + Cut(why, 64)}
			}
			return nil
		},
		idemNote: "none",
		// About three requests per second per integration (older docs);
		// current docs describe a 60-s budget per connection.
		defaults:     Defaults{MaxConcurrent: 3, Requests: 3, Per: time.Second},
		defaultsNote: "3/s per integration (older docs; current ones budget per connection over 60 s)",
	}
	rules := []rule{
		{Signal: Signal{Status: "429", Class: ClassRateLimited, Reason: "rate-limited", Note: "rate_limited: the connection's 60-s budget or the workspace's shared limit"}},
		{Signal: Signal{Status: "529", Class: ClassRateLimited, Reason: "service-overload", Note: "service_overload with Retry-After: nothing was done"}},
		{Signal: Signal{Status: "401", Class: ClassAuthRevoked, Reason: "unauthorized", Note: "an OAuth refresh answering invalid_grant means revoked"}},
		{Signal: Signal{Status: "403", Class: ClassPermanent, Reason: "restricted-resource"}},
		{Signal: Signal{Status: "404", Class: ClassPermanent, Reason: "object-not-found", Note: "also a page not shared with the integration"}},
		{Signal: Signal{Status: "400", Class: ClassPermanent, Reason: "validation-error | invalid-json | invalid-request-url | invalid-request | missing-version | bad-request"},
			reasonOf: codeReason("bad-request")},
		{
			Signal: Signal{Status: "409", When: "code row_limit_exceeded", Class: ClassPermanent, Reason: "row-limit-exceeded",
				Note: "the database holds all the rows it may: resending adds none", Verify: true},
			match: func(r *reading) bool {
				return r.mentions("row_limit_exceeded") && r.fields().has("code", "row_limit_exceeded")
			},
		},
		{Signal: Signal{Status: "409", Class: ClassTransient, Reason: "conflict-error", Note: "conflict_error, a conflicting concurrent edit: retryable"}},
		{Signal: Signal{Status: "503", Class: ClassTransient, Reason: "unavailable"}},
		noKeysServerError("5xx", "server-error", "Notion honours no idempotency keys; a 5xx may come after the write landed"),
	}
	return &Notion{newTable(t, rules)}
}
