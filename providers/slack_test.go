package providers_test

import (
	"testing"
	"time"

	"pacer/providers"
)

func TestSlackClassify(t *testing.T) {
	p := providers.NewSlack()
	okFalse := func(code string) string { return `{"ok":false,"error":"` + code + `"}` }
	tests := []signalCase{
		{name: "OK", ex: exchange{method: "POST", status: 200, body: `{"ok":true,"channel":"C1","ts":"1503435956.000247"}`},
			want: want{class: providers.ClassSuccess}},
		{name: "OKWithWarning", ex: exchange{status: 200, body: `{"ok":true,"warning":"superfluous_charset","response_metadata":{"warnings":["superfluous_charset"]}}`},
			want: want{class: providers.ClassSuccess}},
		{name: "NotJSON", ex: exchange{status: 200, body: `file bytes`}, want: want{class: providers.ClassSuccess}},
		// providers.md §4 RL: HTTP 429 + Retry-After (integer s), body ok:false ratelimited.
		{name: "429", ex: exchange{method: "POST", status: 429, header: header("Retry-After", "30"), body: okFalse("ratelimited")},
			want: want{class: providers.ClassRateLimited, reason: "rate-limit", hintSrc: "retry-after", hintAt: now.Add(30 * time.Second)}},
		{name: "200Ratelimited", ex: exchange{method: "POST", status: 200, body: okFalse("ratelimited")},
			want: want{class: providers.ClassRateLimited, reason: "rate-limit"}},
		// providers.md §4 Body errors: HTTP 200 ok:false, AUTH codes.
		{name: "InvalidAuth", ex: exchange{status: 200, body: okFalse("invalid_auth")}, want: want{class: providers.ClassAuthRevoked, reason: "invalid-auth"}},
		{name: "NotAuthed", ex: exchange{method: "POST", status: 200, body: okFalse("not_authed")}, want: want{class: providers.ClassAuthRevoked, reason: "not-authed"}},
		{name: "AccountInactive", ex: exchange{status: 200, body: okFalse("account_inactive")}, want: want{class: providers.ClassAuthRevoked, reason: "account-inactive"}},
		{name: "TokenRevoked", ex: exchange{method: "POST", status: 200, body: okFalse("token_revoked")}, want: want{class: providers.ClassAuthRevoked, reason: "token-revoked"}},
		{name: "TokenExpired", ex: exchange{status: 200, body: okFalse("token_expired")}, want: want{class: providers.ClassAuthRevoked, reason: "token-expired"}},
		{name: "InvalidAuthCutOff", ex: exchange{status: 200, body: `{"ok":false,"error":"invalid_auth","warning":"missing_char`},
			want: want{class: providers.ClassAuthRevoked, reason: "invalid-auth"}},
		// providers.md §4 Body errors: scope codes are permanent.
		{name: "MissingScope", ex: exchange{method: "POST", status: 200, body: `{"ok":false,"error":"missing_scope","needed":"chat:write","provided":"channels:read"}`},
			want: want{class: providers.ClassPermanent, reason: "missing-scope"}},
		{name: "NoPermission", ex: exchange{method: "POST", status: 200, body: okFalse("no_permission")}, want: want{class: providers.ClassPermanent, reason: "no-permission"}},
		// providers.md §4 UNK: internal_error / fatal_error may have partly succeeded.
		{name: "InternalErrorWrite", ex: exchange{method: "POST", status: 200, body: okFalse("internal_error")},
			want: want{class: providers.ClassUnknownOutcome, reason: "internal-error"}},
		{name: "FatalErrorWrite", ex: exchange{method: "POST", status: 200, body: okFalse("fatal_error")},
			want: want{class: providers.ClassUnknownOutcome, reason: "fatal-error"}},
		{name: "InternalErrorRead", ex: exchange{status: 200, body: okFalse("internal_error")},
			want: want{class: providers.ClassTransient, reason: "internal-error"}},
		// providers.md §4 TR.
		{name: "ServiceUnavailable", ex: exchange{method: "POST", status: 200, body: okFalse("service_unavailable")},
			want: want{class: providers.ClassTransient, reason: "service-unavailable"}},
		{name: "RequestTimeout", ex: exchange{method: "POST", status: 200, body: okFalse("request_timeout")},
			want: want{class: providers.ClassTransient, reason: "request-timeout"}},
		// providers.md §4 PERM: invalid_arguments, channel_not_found, ….
		{name: "ChannelNotFound", ex: exchange{method: "POST", status: 200, body: okFalse("channel_not_found")},
			want: want{class: providers.ClassPermanent, reason: "slack-error", detail: "slack error channel_not_found"}},
		{name: "InvalidArguments", ex: exchange{method: "POST", status: 200, body: okFalse("invalid_arguments")},
			want: want{class: providers.ClassPermanent, reason: "slack-error"}},
		// Standard statuses around the body signals.
		{name: "503", ex: exchange{method: "POST", status: 503, header: header("Retry-After", "5")},
			want: want{class: providers.ClassTransient, reason: "unavailable", hintSrc: "retry-after", hintAt: now.Add(5 * time.Second)}},
		{name: "500Write", ex: exchange{method: "POST", status: 500}, want: want{class: providers.ClassUnknownOutcome, reason: "server-error"}},
		{name: "502Read", ex: exchange{status: 502}, want: want{class: providers.ClassTransient, reason: "server-error"}},
		{name: "404", ex: exchange{status: 404}, want: want{class: providers.ClassPermanent, reason: "not-found"}},
	}
	runSignals(t, p, tests)
}

func TestSlackProfile(t *testing.T) {
	p, err := providers.Lookup("slack", providers.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// providers.md §4 Idempotency: none (verify).
	if p.Idempotency().Applies("POST") {
		t.Errorf("Applies(POST) = true, want false")
	}
	// providers.md §4 Scope: Tier 3 50+/min.
	if got, want := p.Defaults(), (providers.Defaults{MaxConcurrent: 4, Requests: 50, Per: time.Minute}); got != want {
		t.Errorf("defaults: got %+v, want %+v", got, want)
	}
}
