package providers_test

import (
	"testing"
	"time"

	"pacer/providers"
)

func TestSendGridClassify(t *testing.T) {
	p := providers.NewSendGrid()
	date := httpDate(now)
	budget := func(remaining string) []string {
		return []string{"Date", date, "X-RateLimit-Limit", "600", "X-RateLimit-Remaining", remaining, "X-RateLimit-Reset", "1789092060"}
	}
	tests := []signalCase{
		// providers.md §15: mail/send 202 = queued only.
		{name: "202Queued", ex: exchange{method: "POST", status: 202, header: header(budget("599")...)},
			want: want{class: providers.ClassSuccess, budget: &providers.Budget{Remaining: 599, Limit: 600, ResetAt: now.Add(time.Minute)}}},
		// providers.md §15 RL: 429 errors[{message:"too many requests"}], X-RateLimit-Reset epoch s.
		{name: "429", ex: exchange{method: "POST", status: 429, header: header(budget("0")...), body: `{"errors":[{"field":null,"message":"too many requests"}]}`},
			want: want{class: providers.ClassRateLimited, reason: "rate-limit", hintSrc: "x-ratelimit-reset", hintAt: now.Add(time.Minute), budget: &providers.Budget{Remaining: 0, Limit: 600, ResetAt: now.Add(time.Minute)}}},
		// providers.md §15 AUTH / PERM.
		{name: "401", ex: exchange{status: 401, body: `{"errors":[{"field":null,"message":"authorization required"}]}`}, want: want{class: providers.ClassAuthRevoked, reason: "unauthorized"}},
		{name: "403MissingScope", ex: exchange{method: "POST", status: 403, body: `{"errors":[{"field":null,"message":"access forbidden"}]}`}, want: want{class: providers.ClassPermanent, reason: "missing-scope"}},
		// SendGrid v3 API error docs (twilio.com/docs/sendgrid/api-reference/how-to-use-the-sendgrid-v3-api/errors):
		// 403 "Too many bad requests. Temporary block" is a temporary block, by its body, not a missing scope.
		{name: "403TemporaryBlock", ex: exchange{method: "POST", status: 403, header: header(budget("0")...), body: `{"errors":[{"field":null,"message":"Too many bad requests. Temporary block."}]}`},
			want: want{class: providers.ClassRateLimited, reason: "temporary-block", hintSrc: "x-ratelimit-reset", hintAt: now.Add(time.Minute), budget: &providers.Budget{Remaining: 0, Limit: 600, ResetAt: now.Add(time.Minute)}}},
		{name: "403TemporaryBlockNoHint", ex: exchange{method: "POST", status: 403, body: `{"errors":[{"message":"Too many bad requests. Temporary block"}]}`},
			want: want{class: providers.ClassRateLimited, reason: "temporary-block"}},
		{name: "400", ex: exchange{method: "POST", status: 400, body: `{"errors":[{"field":"from.email","message":"The from email does not contain a valid address."}]}`},
			want: want{class: providers.ClassPermanent, reason: "bad-request"}},
		// providers.md §15: no idempotency ⇒ a retried send after a 5xx may duplicate (UNK).
		{name: "503", ex: exchange{method: "POST", status: 503}, want: want{class: providers.ClassTransient, reason: "unavailable"}},
		{name: "500Send", ex: exchange{method: "POST", status: 500}, want: want{class: providers.ClassUnknownOutcome, reason: "server-error", detail: "may mail twice"}},
	}
	runSignals(t, p, tests)
}

func TestSendGridProfile(t *testing.T) {
	p, _ := providers.Lookup("sendgrid", providers.Options{})
	if p.Idempotency().Applies("POST") {
		t.Errorf("Applies(POST) = true")
	}
}
