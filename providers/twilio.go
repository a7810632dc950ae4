package providers

// Twilio is the profile for the Twilio REST API (providers.md §14).
//
// 429 with code 20429 means the account's concurrent request limit was
// exceeded; Twilio documents such requests as never processed and safe to
// retry, even a POST, so it is rateLimited (never an unknown outcome),
// waiting for Retry-After when the newer APIs send one.
// Twilio-Concurrent-Requests goes into the Detail. Every other 429 is
// rateLimited too. The limit is the account's, which is the scope's. 401
// (code 20003) is authRevoked; 400 (21xxx codes) and 404 (20404)
// permanent. 503 is transient; other 5xx an unknown outcome for a mutation:
// the classic API honours no idempotency keys, and the Idempotency-Key seen
// on some newer endpoints (error 17534) is not documented enough to rely on
// (verify).
type Twilio struct{ *table }

var _ Profile = (*Twilio)(nil)

// NewTwilio returns the Twilio profile.
func NewTwilio() *Twilio {
	t := table{
		name: "twilio", title: "Twilio REST API", ref: "providers.md §14",
		diag: func(r *reading) []string {
			var notes []string
			if c := r.fields().first("code"); c != "" {
				notes = append(notes, "twilio code "+Cut(c, 16))
			}
			if n := r.header("Twilio-Concurrent-Requests"); n != "" {
				notes = append(notes, "concurrent requests "+Cut(n, 16))
			}
			return notes
		},
		idemNote:     "none on the classic API; error 17534 shows Idempotency-Key on some newer endpoints (verify); I-Twilio-Idempotency-Token is sent to your webhooks",
		defaults:     Defaults{MaxConcurrent: 4},
		defaultsNote: "the account's concurrency limit is not published per account: learned from 20429s",
	}
	rules := []rule{
		{
			Signal: Signal{Status: "429", When: "code 20429", Class: ClassRateLimited, Reason: "concurrency-limit",
				Note: "never processed: safe to retry, even a POST"},
			match: func(r *reading) bool { return r.fields().has("code", "20429") },
		},
		{Signal: Signal{Status: "429", Class: ClassRateLimited, Reason: "rate-limit"}},
		{Signal: Signal{Status: "401", Class: ClassAuthRevoked, Reason: "unauthorized", Note: "code 20003"}},
		{Signal: Signal{Status: "400", Class: ClassPermanent, Reason: "bad-request", Note: "21xxx codes"}},
		{Signal: Signal{Status: "404", Class: ClassPermanent, Reason: "not-found", Note: "code 20404"}},
		{Signal: Signal{Status: "503", Class: ClassTransient, Reason: "unavailable"}},
		noKeysServerError("5xx", "server-error", "Twilio honours no idempotency keys; a 5xx on a POST may come after the write landed"),
	}
	return &Twilio{newTable(t, rules)}
}
