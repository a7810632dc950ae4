package providers

// Zendesk is the profile for the Zendesk Support API (providers.md §10).
//
// 429 is rateLimited with Retry-After (seconds); some 429s are text/plain
// and some lack a usable Retry-After, so the list endpoints' ratelimit-reset
// (delta seconds) and zendesk-ratelimit-tickets-index resets= follow. The
// budget is the most constrained of X-Rate-Limit/-Remaining (per minute,
// the account's plan), ratelimit-limit/-remaining/-reset and the tickets
// index header; endpoint limits can trip while the account's headers show
// headroom. Limits are the account's (the scope's). 422 RecordInvalid and
// 400 are permanent, 401 authRevoked, 403 permanent.
//
// Idempotency: Zendesk honours Idempotency-Key on ticket create only (kept
// about 2 h, x-idempotency-lookup hit/miss) (verify). pacer's idempotency
// applies by method, not endpoint, and taking every POST as keyed would
// resend uncertain writes to endpoints that ignore the key, so the profile
// declares none: uncertain writes are held.
type Zendesk struct{ *table }

var _ Profile = (*Zendesk)(nil)

// NewZendesk returns the Zendesk profile.
func NewZendesk() *Zendesk {
	ticketsIndex := func(r *reading) map[string]string { return keyValues(r.header("Zendesk-Ratelimit-Tickets-Index")) }
	t := table{
		name: "zendesk", title: "Zendesk Support API", ref: "providers.md §10",
		rateHints: []hinter{
			retryAfter(),
			fromHeader("Ratelimit-Reset", ResetDeltaSeconds),
			funcHint{
				desc: HintSource{Source: "zendesk-ratelimit-tickets-index", Format: "resets= in delta-seconds"},
				fn: func(r *reading) Hint {
					v, ok := ticketsIndex(r)["resets"]
					if !ok {
						return Hint{}
					}
					return ParseReset(ResetDeltaSeconds, "zendesk-ratelimit-tickets-index", v, r.date, r.now)
				},
			},
		},
		budgets: []budgetReader{
			headerBudget{names: BudgetHeaders{Limit: "X-Rate-Limit", Remaining: "X-Rate-Limit-Remaining"}, note: "the account's per-minute limit"},
			ietfBudget{field: "Ratelimit", policy: "Ratelimit-Policy", old: true},
			funcBudget{
				desc: BudgetSource{Remaining: "zendesk-ratelimit-tickets-index", Limit: "zendesk-ratelimit-tickets-index", Reset: "zendesk-ratelimit-tickets-index", ResetFormat: ResetDeltaSeconds.String(), Note: "total=…; remaining=…; resets=… of the tickets index"},
				fn: func(r *reading) *Budget {
					kv := ticketsIndex(r)
					remaining, ok := count(kv["remaining"])
					if !ok {
						return nil
					}
					b := &Budget{Remaining: remaining}
					b.Limit, _ = count(kv["total"])
					if h := ParseReset(ResetDeltaSeconds, "resets", kv["resets"], "", r.now); h.Usable() {
						b.ResetAt = h.At
					}
					return b
				},
			},
		},
		diag: func(r *reading) []string {
			if v := r.header("X-Idempotency-Lookup"); v != "" {
				return []string{"x-idempotency-lookup " + Cut(v, 16)}
			}
			return nil
		},
		idemNote:     "Idempotency-Key is honoured on ticket create only (kept ~2 h; x-idempotency-lookup hit/miss) (verify); pacer applies keys by method, so it declares none and holds uncertain writes",
		defaults:     Defaults{MaxConcurrent: 4},
		defaultsNote: "the per-minute limit depends on the plan: learned from X-Rate-Limit",
	}
	rules := []rule{
		{Signal: Signal{Status: "429", Class: ClassRateLimited, Reason: "rate-limit", Note: "some are text/plain; some lack a usable Retry-After"}},
		{Signal: Signal{Status: "422", Class: ClassPermanent, Reason: "record-invalid", Note: "RecordInvalid with details"}},
		{Signal: Signal{Status: "503", Class: ClassTransient, Reason: "unavailable"}},
		noKeysServerError("5xx", "server-error", "pacer sends Zendesk no idempotency key; a 5xx may come after the write landed"),
	}
	return &Zendesk{newTable(t, rules)}
}
