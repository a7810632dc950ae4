package providers

import (
	"strings"
	"time"
)

// Slack is the profile for the Slack Web API (providers.md §4).
//
// Most failures are HTTP 200 with `{"ok": false, "error": code}`: the
// profile reads the body of every 2xx. Rate limits are 429 with Retry-After
// (integer seconds) and `"error": "ratelimited"`. Auth codes (not_authed,
// invalid_auth, account_inactive, token_revoked, token_expired) are
// authRevoked; missing_scope and no_permission permanent; internal_error
// and fatal_error — Slack says part of the operation may have succeeded —
// are an unknown outcome for a mutation (transient for a read);
// service_unavailable and request_timeout transient; any other code
// permanent. Limits are per method × workspace × app: a limit pauses only
// its scope. Slack honours no idempotency keys (verify).
type Slack struct{ *table }

var _ Profile = (*Slack)(nil)

// slackAuthCodes are the ok:false codes meaning the token is gone.
func slackAuthCodes() []string {
	return []string{"not_authed", "invalid_auth", "account_inactive", "token_revoked", "token_expired"}
}

// NewSlack returns the Slack profile.
func NewSlack() *Slack {
	okFalse := func(codes ...string) func(r *reading) bool {
		return func(r *reading) bool {
			if !r.mentions("false") {
				return false
			}
			f := r.fields()
			return f.has("ok", "false") && (codes == nil || f.has("error", codes...))
		}
	}
	code := func(r *reading) string { return strings.ReplaceAll(Cut(r.fields().first("error"), 64), "_", "-") }
	reasons := func(codes ...string) string { return strings.ReplaceAll(strings.Join(codes, " | "), "_", "-") }
	t := table{
		name: "slack", title: "Slack Web API", ref: "providers.md §4",
		idemNote: "none (verify): a resent write may post twice",
		// Tier 3 (50+ per minute) is where most write methods sit; Tier 1
		// and 2 methods answer 429 with Retry-After sooner.
		defaults:     Defaults{MaxConcurrent: 4, Requests: 50, Per: time.Minute},
		defaultsNote: "50/min: Tier 3, where most methods sit (Tier 1 1+/min … Tier 4 100+/min, per method); chat.postMessage ≈1/s per channel",
		notes: []string{
			"Limits are per method × workspace × app: no limit pauses other scopes.",
			"conversations.history/replies are much stricter for non-Marketplace apps since 2025-05-29.",
		},
	}
	rules := []rule{
		{Signal: Signal{Status: "429", Class: ClassRateLimited, Reason: "rate-limit", Note: `body {"ok":false,"error":"ratelimited"}; Retry-After in integer seconds`}},
		{
			Signal: Signal{Status: "2xx", When: `ok:false, error ratelimited`, Class: ClassRateLimited, Reason: "rate-limit", Verify: true},
			match:  okFalse("ratelimited", "rate_limited"),
		},
		{
			Signal:   Signal{Status: "2xx", When: "ok:false, error " + strings.Join(slackAuthCodes(), ", "), Class: ClassAuthRevoked, Reason: reasons(slackAuthCodes()...)},
			match:    okFalse(slackAuthCodes()...),
			reasonOf: code,
		},
		{
			Signal:   Signal{Status: "2xx", When: "ok:false, error missing_scope, no_permission", Class: ClassPermanent, Reason: reasons("missing_scope", "no_permission")},
			match:    okFalse("missing_scope", "no_permission"),
			reasonOf: code,
		},
		{
			Signal: Signal{Status: "2xx", When: "ok:false, error internal_error, fatal_error", Class: ClassUnknownOutcome, ReadClass: ClassTransient, Reason: reasons("internal_error", "fatal_error"),
				Note: "Slack says part of the operation may have succeeded"},
			match:    okFalse("internal_error", "fatal_error"),
			reasonOf: code,
		},
		{
			Signal:   Signal{Status: "2xx", When: "ok:false, error service_unavailable, request_timeout", Class: ClassTransient, Reason: reasons("service_unavailable", "request_timeout")},
			match:    okFalse("service_unavailable", "request_timeout"),
			reasonOf: code,
		},
		{
			Signal: Signal{Status: "2xx", When: "ok:false, any other error (invalid_arguments, channel_not_found, …)", Class: ClassPermanent, Reason: "slack-error"},
			match:  okFalse(),
			diag:   func(r *reading) []string { return []string{"slack error " + Cut(r.fields().first("error"), 64)} },
		},
		{Signal: Signal{Status: "503", Class: ClassTransient, Reason: "unavailable"}},
		noKeysServerError("5xx", "server-error", "Slack honours no idempotency keys; a 5xx may come after the write landed"),
	}
	return &Slack{newTable(t, rules)}
}
