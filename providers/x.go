package providers

import (
	"strings"
)

// X is the profile for the X API v2 (providers.md §11).
//
// 429 is rateLimited. Which limit tripped decides the wait and who pauses:
// x-app-limit-24hour-remaining 0 is the app's 24-hour cap, shared by every
// account (Shared), waiting for x-app-limit-24hour-reset;
// x-user-limit-24hour-remaining 0 is the user's 24-hour cap; otherwise the
// endpoint's window (mostly 15 minutes), waiting for x-rate-limit-reset.
// Resets are epoch seconds, converted through Date. The budget is the most
// constrained of the three. 401 is authRevoked; 403 permanent — a 403 for
// duplicate content after a resend may mean the first write landed
// (verify); 400 permanent. Other 5xx than 503 are an unknown outcome for a
// mutation: X honours no idempotency keys. App-only bearer tokens draw on
// the app's limits, which pacer cannot tell from a response.
type X struct{ *table }

var _ Profile = (*X)(nil)

// NewX returns the X profile.
func NewX() *X {
	spent := func(header string) func(r *reading) bool {
		return func(r *reading) bool {
			n, ok := count(r.header(header))
			return ok && n == 0
		}
	}
	budget := func(prefix, note string) budgetReader {
		return headerBudget{names: BudgetHeaders{Limit: prefix + "-Limit", Remaining: prefix + "-Remaining", Reset: prefix + "-Reset", ResetForm: ResetEpochSeconds}, note: note}
	}
	t := table{
		name: "x", title: "X API v2", ref: "providers.md §11",
		rateHints: []hinter{retryAfter(), fromHeader("X-Rate-Limit-Reset", ResetEpochSeconds)},
		budgets: []budgetReader{
			budget("X-Rate-Limit", "the endpoint's window, mostly 15 min"),
			budget("X-User-Limit-24hour", "the user's 24-h cap on some writes"),
			budget("X-App-Limit-24hour", "the app's 24-h cap on some writes: shared by every account"),
		},
		idemNote:     "none",
		defaults:     Defaults{MaxConcurrent: 4},
		defaultsNote: "limits are per endpoint and per plan: learned from the headers",
	}
	rules := []rule{
		{
			Signal: Signal{Status: "429", When: "x-app-limit-24hour-remaining is 0", Class: ClassRateLimited, Reason: "app-24h-limit", Shared: true,
				Note: "the app's 24-h cap: every scope of the group pauses"},
			match: spent("X-App-Limit-24hour-Remaining"),
			hints: []hinter{retryAfter(), fromHeader("X-App-Limit-24hour-Reset", ResetEpochSeconds)},
		},
		{
			Signal: Signal{Status: "429", When: "x-user-limit-24hour-remaining is 0", Class: ClassRateLimited, Reason: "user-24h-limit"},
			match:  spent("X-User-Limit-24hour-Remaining"),
			hints:  []hinter{retryAfter(), fromHeader("X-User-Limit-24hour-Reset", ResetEpochSeconds)},
		},
		{Signal: Signal{Status: "429", Class: ClassRateLimited, Reason: "rate-limit", Note: "the endpoint's window per user × app (or app-only)"}},
		{
			Signal: Signal{Status: "403", When: "duplicate content", Class: ClassPermanent, Reason: "duplicate-content",
				Note: "after a resend, the first write may have landed", Verify: true},
			match: func(r *reading) bool {
				return strings.Contains(strings.ToLower(r.fields().first("detail")), "duplicate content")
			},
			diag: func(r *reading) []string {
				if r.ex.Mutation {
					return []string{"duplicate content: if this write was sent before, the first one may have landed"}
				}
				return nil
			},
		},
		{Signal: Signal{Status: "403", Class: ClassPermanent, Reason: "forbidden"}},
		{Signal: Signal{Status: "503", Class: ClassTransient, Reason: "unavailable"}},
		noKeysServerError("5xx", "server-error", "X honours no idempotency keys; a 5xx may come after the write landed"),
	}
	return &X{newTable(t, rules)}
}
