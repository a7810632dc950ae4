package providers

// Jira is the profile for Atlassian Jira Cloud (providers.md §9).
//
// 429 is rateLimited. The wait is Retry-After (seconds), else
// X-RateLimit-Reset — ISO 8601 with minute precision (`2026-09-11T02:15Z`),
// converted through Date and taken as the end of its minute — else the
// Beta-RateLimit field's t. Atlassian computes that reset as the request
// time plus Retry-After, so with Retry-After the budget's reset is
// Retry-After's time too: a spent budget pauses the scope no longer than
// Retry-After asks. RateLimit-Reason says whose limit it is:
// jira-quota-global-based is the app's across every site (Shared: every
// scope of the group pauses); jira-quota-tenant-based (hourly points),
// jira-burst-based (site × endpoint × method; reportedly shared by all apps
// on the site (verify)) and jira-per-issue-on-write (one issue) pause only
// the scope. Gateway 429s without Retry-After or reason, and resets already
// past, have been seen: they get the policy's default delay. 503 is
// transient (and may carry Retry-After). 401 is authRevoked; 403 and 404
// permanent (no permission); 400 permanent; 409 (a transition racing
// another) transient. Other 5xx are an unknown outcome for a mutation.
type Jira struct{ *table }

var _ Profile = (*Jira)(nil)

// NewJira returns the Jira Cloud profile.
func NewJira() *Jira {
	reason := func(v string) func(r *reading) bool {
		return func(r *reading) bool { return headerIs(r.h, "Ratelimit-Reason", v) }
	}
	xBudget := headerBudget{names: BudgetHeaders{Limit: "X-Ratelimit-Limit", Remaining: "X-Ratelimit-Remaining", Reset: "X-Ratelimit-Reset", ResetForm: ResetISO8601}}
	xSource := xBudget.source()
	xSource.Note = "reset: Retry-After when sent (Atlassian: X-RateLimit-Reset is the request time plus Retry-After, to the minute); else x-ratelimit-reset in ISO 8601, minute precision, the end of the minute taken"
	t := table{
		name: "jira", title: "Atlassian Jira Cloud", ref: "providers.md §9",
		rateHints: []hinter{retryAfter(), fromHeader("X-Ratelimit-Reset", ResetISO8601), ietfHint{field: "Beta-Ratelimit", policy: "Beta-Ratelimit-Policy"}},
		budgets: []budgetReader{
			funcBudget{desc: xSource, fn: func(r *reading) *Budget { return jiraBudget(xBudget, r) }},
			ietfBudget{field: "Beta-Ratelimit", policy: "Beta-Ratelimit-Policy"},
		},
		diag: func(r *reading) []string {
			var notes []string
			if why := r.header("Ratelimit-Reason"); why != "" {
				notes = append(notes, "ratelimit-reason "+Cut(why, 64))
			}
			if headerIs(r.h, "X-Ratelimit-Nearlimit", "true") {
				notes = append(notes, "near limit: under 20% of a budget left")
			}
			return notes
		},
		idemNote:     "none",
		defaults:     Defaults{MaxConcurrent: 4},
		defaultsNote: "points-based quotas (enforced from 2026-03-02 for Forge, Connect and 3LO apps) and per-endpoint bursts: learned from the headers",
		notes: []string{
			"Early retries get an equal or longer Retry-After.",
		},
	}
	rules := []rule{
		{
			Signal: Signal{Status: "429", When: "RateLimit-Reason jira-quota-global-based", Class: ClassRateLimited, Reason: "global-quota", Shared: true,
				Note: "the app's quota across every site: every scope of the group pauses"},
			match: reason("jira-quota-global-based"),
		},
		{
			Signal: Signal{Status: "429", When: "RateLimit-Reason jira-quota-tenant-based", Class: ClassRateLimited, Reason: "tenant-quota", Note: "the site's hourly points"},
			match:  reason("jira-quota-tenant-based"),
		},
		{
			Signal: Signal{Status: "429", When: "RateLimit-Reason jira-burst-based", Class: ClassRateLimited, Reason: "burst",
				Note: "site × endpoint × method per second; reportedly shared by all apps on the site", Verify: true},
			match: reason("jira-burst-based"),
		},
		{
			Signal: Signal{Status: "429", When: "RateLimit-Reason jira-per-issue-on-write", Class: ClassRateLimited, Reason: "per-issue-write",
				Note: "one issue's write limit; pacer pauses the whole scope, which is safe but broader than needed"},
			match: reason("jira-per-issue-on-write"),
		},
		{Signal: Signal{Status: "429", Class: ClassRateLimited, Reason: "rate-limit", Note: "gateway 429s may lack Retry-After and reason"}},
		{Signal: Signal{Status: "503", Class: ClassTransient, Reason: "unavailable", Note: "may carry Retry-After"}},
		{Signal: Signal{Status: "401", Class: ClassAuthRevoked, Reason: "unauthorized", Note: "3LO refresh answering invalid_grant (rotating tokens) means revoked"}},
		{Signal: Signal{Status: "403,404", Class: ClassPermanent, Reason: "no-permission", Note: "Jira answers 403 or 404 for no permission"}},
		{Signal: Signal{Status: "409", Class: ClassTransient, Reason: "conflict", Note: "a transition racing another; the conflicting request did not apply"}},
		noKeysServerError("5xx", "server-error", "Jira honours no idempotency keys; a 5xx may come after the write landed"),
	}
	return &Jira{newTable(t, rules)}
}

// jiraBudget reads the X-RateLimit budget, whose reset is Retry-After's time
// when Retry-After is usable: Atlassian computes X-RateLimit-Reset as "the
// request timestamp plus the Retry-After period" and writes it to the
// minute, so the end of that minute could pause the scope up to 59 s past
// what Retry-After asks (providers.md §0: Retry-After ranks first).
func jiraBudget(x headerBudget, r *reading) *Budget {
	b := x.read(r)
	if b == nil {
		return nil
	}
	if h := retryAfter().hint(r); h.Usable() {
		b.ResetAt = h.At
	}
	return b
}
