package providers_test

import (
	"testing"
	"time"

	"pacer/providers"
)

func TestTwilioClassify(t *testing.T) {
	p := providers.NewTwilio()
	twErr := func(status int, code string) string {
		return `{"code":` + code + `,"message":"…","more_info":"https://www.twilio.com/docs/errors/` + code + `","status":` + itoa(status) + `}`
	}
	tests := []signalCase{
		{name: "201", ex: exchange{method: "POST", status: 201, body: `{"sid":"SM1","status":"queued"}`}, want: want{class: providers.ClassSuccess}},
		// providers.md §14 RL: 20429 is never processed, safe to retry even for POST ⇒ RL, not UNK.
		{name: "20429Post", ex: exchange{method: "POST", status: 429, header: header("Twilio-Concurrent-Requests", "101"), body: twErr(429, "20429")},
			want: want{class: providers.ClassRateLimited, reason: "concurrency-limit", detail: "concurrent requests 101"}},
		{name: "20429RetryAfter", ex: exchange{method: "POST", status: 429, header: header("Retry-After", "1"), body: twErr(429, "20429")},
			want: want{class: providers.ClassRateLimited, reason: "concurrency-limit", hintSrc: "retry-after", hintAt: now.Add(time.Second), detail: "twilio code 20429"}},
		{name: "20429CutOff", ex: exchange{method: "POST", status: 429, body: `{"code": 20429, "message": "Too many requests", "more_in`},
			want: want{class: providers.ClassRateLimited, reason: "concurrency-limit"}},
		{name: "429Other", ex: exchange{method: "POST", status: 429}, want: want{class: providers.ClassRateLimited, reason: "rate-limit"}},
		// providers.md §14 AUTH / PERM.
		{name: "401", ex: exchange{status: 401, body: twErr(401, "20003")}, want: want{class: providers.ClassAuthRevoked, reason: "unauthorized"}},
		{name: "400", ex: exchange{method: "POST", status: 400, body: twErr(400, "21211")}, want: want{class: providers.ClassPermanent, reason: "bad-request", detail: "twilio code 21211"}},
		{name: "404", ex: exchange{status: 404, body: twErr(404, "20404")}, want: want{class: providers.ClassPermanent, reason: "not-found"}},
		// providers.md §16: 5xx POST UNK.
		{name: "503", ex: exchange{method: "POST", status: 503}, want: want{class: providers.ClassTransient, reason: "unavailable"}},
		{name: "500Post", ex: exchange{method: "POST", status: 500}, want: want{class: providers.ClassUnknownOutcome, reason: "server-error"}},
		{name: "500Get", ex: exchange{status: 500}, want: want{class: providers.ClassTransient, reason: "server-error"}},
	}
	runSignals(t, p, tests)
}

func TestTwilioProfile(t *testing.T) {
	p, _ := providers.Lookup("twilio", providers.Options{})
	// providers.md §14 Idempotency: not on the classic API.
	if p.Idempotency().Applies("POST") {
		t.Errorf("Applies(POST) = true")
	}
}
