package providers_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"pacer/providers"
)

func TestGenericClassify(t *testing.T) {
	g := providers.NewGeneric(providers.Options{IdempotencyHeader: "Idempotency-Key"})
	date := httpDate(now)
	tests := []signalCase{
		// RFC 9110: 2xx succeeds.
		{name: "OK", ex: exchange{status: 200, body: `{"ok":true}`},
			want: want{class: providers.ClassSuccess, detail: "HTTP 200 OK"}},
		{name: "Created", ex: exchange{method: "POST", key: true, status: 201},
			want: want{class: providers.ClassSuccess}},
		// providers.md §0: budget spent on a success is still a success;
		// the scheduler pauses the scope from Budget.
		{name: "SuccessBudgetSpent", ex: exchange{status: 200, header: header("RateLimit-Policy", `"default";q=100;w=10`, "RateLimit", `"default";r=0;t=30`)},
			want: want{class: providers.ClassSuccess, budget: &providers.Budget{Remaining: 0, Limit: 100, ResetAt: now.Add(30 * time.Second)}}},
		{name: "SuccessOldFormBudget", ex: exchange{status: 200, header: header("RateLimit-Limit", "100", "RateLimit-Remaining", "42", "RateLimit-Reset", "7")},
			want: want{class: providers.ClassSuccess, budget: &providers.Budget{Remaining: 42, Limit: 100, ResetAt: now.Add(7 * time.Second)}}},
		{name: "SuccessXRateLimitBudget", ex: exchange{status: 200, header: header("Date", date, "X-RateLimit-Limit", "60", "X-RateLimit-Remaining", "59", "X-RateLimit-Reset", "1789092060")},
			want: want{class: providers.ClassSuccess, budget: &providers.Budget{Remaining: 59, Limit: 60, ResetAt: now.Add(time.Minute)}}},
		// RFC 6585 §4 + RFC 9110 §10.2.3: 429 with Retry-After.
		{name: "429RetryAfterSeconds", ex: exchange{status: 429, header: header("Retry-After", "57")},
			want: want{class: providers.ClassRateLimited, reason: "rate-limit", hintSrc: "retry-after", hintAt: now.Add(57 * time.Second)}},
		{name: "429RetryAfterDateSkew", ex: exchange{status: 429, header: header("Date", httpDate(now.Add(-10*time.Minute)), "Retry-After", httpDate(now.Add(-9*time.Minute)))},
			want: want{class: providers.ClassRateLimited, hintSrc: "retry-after", hintAt: now.Add(time.Minute)}},
		{name: "429NoHint", ex: exchange{status: 429},
			want: want{class: providers.ClassRateLimited}},
		// providers.md §0 precedence: Retry-After > provider reset > draft t.
		{name: "429RetryAfterOverResets", ex: exchange{status: 429, header: header("Date", date, "Retry-After", "5", "X-RateLimit-Reset", "1789092060", "RateLimit", `"d";r=0;t=30`)},
			want: want{class: providers.ClassRateLimited, hintSrc: "retry-after", hintAt: now.Add(5 * time.Second), budget: &providers.Budget{Remaining: 0, ResetAt: now.Add(30 * time.Second)}}},
		{name: "429ResetOverDraft", ex: exchange{status: 429, header: header("Date", date, "X-RateLimit-Reset", "1789092060", "RateLimit", `"d";r=0;t=30`)},
			want: want{class: providers.ClassRateLimited, hintSrc: "x-ratelimit-reset", hintAt: now.Add(time.Minute), budget: &providers.Budget{Remaining: 0, ResetAt: now.Add(30 * time.Second)}}},
		{name: "429DraftT", ex: exchange{status: 429, header: header("RateLimit", `"d";r=0;t=30`)},
			want: want{class: providers.ClassRateLimited, hintSrc: "ratelimit", hintAt: now.Add(30 * time.Second), budget: &providers.Budget{Remaining: 0, ResetAt: now.Add(30 * time.Second)}}},
		{name: "429GarbageRetryAfterFallsBack", ex: exchange{status: 429, header: header("Retry-After", "soon", "RateLimit-Remaining", "0", "RateLimit-Reset", "20")},
			want: want{class: providers.ClassRateLimited, hintSrc: "ratelimit-reset", hintAt: now.Add(20 * time.Second), budget: &providers.Budget{Remaining: 0, ResetAt: now.Add(20 * time.Second)}, detail: `retry-after "soon" ignored`}},
		{name: "429NegativeRetryAfter", ex: exchange{status: 429, header: header("Retry-After", "-30")},
			want: want{class: providers.ClassRateLimited, hintSrc: "retry-after", note: "negative", detail: "negative"}},
		{name: "429PastRetryAfter", ex: exchange{status: 429, header: header("Date", date, "Retry-After", "Sun, 06 Nov 1994 08:49:37 GMT")},
			want: want{class: providers.ClassRateLimited, hintSrc: "retry-after", note: "not in the future"}},
		// providers.md §0 RateLimit draft problem types: a quota refusal had no effect.
		{name: "403ProblemQuotaExceeded", ex: exchange{method: "POST", status: 403, header: header("Content-Type", "application/problem+json", "Retry-After", "40"),
			body: `{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Request cannot be satisfied as assigned quota has been exceeded","status":403,"violated-policies":["daily"]}`},
			want: want{class: providers.ClassRateLimited, reason: "quota-exceeded", hintSrc: "retry-after", hintAt: now.Add(40 * time.Second)}},
		{name: "503ProblemReducedCapacity", ex: exchange{method: "POST", status: 503, header: header("Content-Type", "application/problem+json"),
			body: `{"type":"https://iana.org/assignments/http-problem-types#temporary-reduced-capacity","title":"Temporary reduced capacity","status":503}`},
			want: want{class: providers.ClassRateLimited, reason: "reduced-capacity"}},
		{name: "400ProblemAbnormalUsage", ex: exchange{status: 400, header: header("Content-Type", "application/problem+json", "RateLimit", `"day";r=0;t=600`),
			body: `{"type":"https://iana.org/assignments/http-problem-types#abnormal-usage-detected","title":"Abnormal usage detected","status":400}`},
			want: want{class: providers.ClassRateLimited, reason: "abnormal-usage", hintSrc: "ratelimit", hintAt: now.Add(10 * time.Minute), budget: &providers.Budget{Remaining: 0, ResetAt: now.Add(10 * time.Minute)}}},
		// RFC 9457: any other problem document is read by its status.
		{name: "422ProblemOther", ex: exchange{method: "POST", status: 422, header: header("Content-Type", "application/problem+json"), body: `{"type":"https://example.com/probs/out-of-credit","title":"You do not have enough credit.","status":422}`},
			want: want{class: providers.ClassPermanent, reason: "validation", detail: "out-of-credit"}},
		// RFC 9110 §15.6.4: 503 was not processed, so transient for every kind.
		{name: "503ReadRetryAfter", ex: exchange{status: 503, header: header("Retry-After", "120")},
			want: want{class: providers.ClassTransient, reason: "unavailable", hintSrc: "retry-after", hintAt: now.Add(2 * time.Minute)}},
		{name: "503Mutation", ex: exchange{method: "POST", status: 503, header: header("Retry-After", "120")},
			want: want{class: providers.ClassTransient, hintSrc: "retry-after", hintAt: now.Add(2 * time.Minute)}},
		// design §3 invariant 4: other 5xx are ambiguous for mutations.
		{name: "500Read", ex: exchange{status: 500},
			want: want{class: providers.ClassTransient, reason: "server-error"}},
		{name: "500Mutation", ex: exchange{method: "POST", status: 500},
			want: want{class: providers.ClassUnknownOutcome, reason: "server-error"}},
		{name: "500MutationKeySent", ex: exchange{method: "POST", key: true, status: 500},
			want: want{class: providers.ClassTransient}},
		{name: "502Mutation", ex: exchange{method: "PATCH", status: 502},
			want: want{class: providers.ClassUnknownOutcome}},
		{name: "504MutationKeySent", ex: exchange{method: "DELETE", key: true, status: 504},
			want: want{class: providers.ClassTransient}},
		{name: "504ReadRetryAfterKept", ex: exchange{status: 504, header: header("Retry-After", "3")},
			want: want{class: providers.ClassTransient, hintSrc: "retry-after", hintAt: now.Add(3 * time.Second)}},
		// Permanent rejections.
		{name: "400", ex: exchange{method: "POST", status: 400}, want: want{class: providers.ClassPermanent, reason: "bad-request"}},
		{name: "404", ex: exchange{status: 404}, want: want{class: providers.ClassPermanent, reason: "not-found"}},
		{name: "409", ex: exchange{method: "PUT", status: 409}, want: want{class: providers.ClassPermanent, reason: "conflict"}},
		// providers.md §0 idempotency draft: 409 = original still in flight, retry unchanged.
		{name: "409KeySent", ex: exchange{method: "POST", key: true, status: 409}, want: want{class: providers.ClassTransient, reason: "idempotency-key-in-use"}},
		{name: "410", ex: exchange{status: 410}, want: want{class: providers.ClassPermanent, reason: "gone"}},
		{name: "422", ex: exchange{method: "POST", key: true, status: 422}, want: want{class: providers.ClassPermanent, reason: "validation"}},
		{name: "403", ex: exchange{status: 403}, want: want{class: providers.ClassPermanent, reason: "permission"}},
		{name: "413", ex: exchange{method: "POST", status: 413}, want: want{class: providers.ClassPermanent, reason: "too-large"}},
		{name: "414", ex: exchange{status: 414}, want: want{class: providers.ClassPermanent, reason: "uri-too-long"}},
		{name: "415", ex: exchange{method: "POST", status: 415}, want: want{class: providers.ClassPermanent, reason: "unsupported-media-type"}},
		{name: "418", ex: exchange{status: 418}, want: want{class: providers.ClassPermanent, reason: "client-error"}},
		{name: "408", ex: exchange{method: "POST", status: 408}, want: want{class: providers.ClassTransient, reason: "request-timeout"}},
		{name: "401", ex: exchange{status: 401}, want: want{class: providers.ClassAuthRevoked}},
		{name: "401Mutation", ex: exchange{method: "POST", status: 401}, want: want{class: providers.ClassAuthRevoked}},
		// A redirect pacer did not follow.
		{name: "303Mutation", ex: exchange{method: "POST", status: 303}, want: want{class: providers.ClassUnknownOutcome, reason: "unexpected-status"}},
		{name: "302Read", ex: exchange{status: 302}, want: want{class: providers.ClassPermanent, reason: "unexpected-status"}},
		{name: "OddStatus", ex: exchange{status: 799}, want: want{class: providers.ClassPermanent}},
		// design §3 invariant 8: diagnostics are bounded.
		{name: "DetailBounded", ex: exchange{status: 500, body: strings.Repeat("x\x00é", 5000)},
			want: want{class: providers.ClassTransient, detail: "HTTP 500 Internal Server Error; body: x é"}},
	}
	runSignals(t, g, tests)
}

func TestGenericDetailBody(t *testing.T) {
	g := providers.NewGeneric(providers.Options{})
	o := g.Classify(exchange{status: 400, body: strings.Repeat("a", 600)}.build())
	if got, want := strings.Count(o.Detail, "a"), 512+1; got > want {
		t.Errorf("detail quotes %d bytes of body, want at most 512", got)
	}
	if !strings.HasSuffix(o.Detail, "…") {
		t.Errorf("detail %q does not mark the cut", o.Detail)
	}
}

func TestClassifyTransport(t *testing.T) {
	_, byName := fuzzProfiles(t)
	var profiles []providers.Profile
	for _, p := range byName {
		profiles = append(profiles, p)
	}
	tests := []struct {
		name     string
		mutation bool
		written  bool
		err      error
		class    providers.Class
		reason   string
	}{
		// design §3 invariant 4: a request that provably never left is transient.
		{name: "NotSentMutation", mutation: true, err: syscall.ECONNREFUSED, class: providers.ClassTransient, reason: "not-sent"},
		{name: "WrittenRead", err: syscall.ECONNRESET, written: true, class: providers.ClassTransient, reason: "no-response"},
		{name: "WrittenMutation", mutation: true, written: true, err: syscall.ECONNRESET, class: providers.ClassUnknownOutcome, reason: "no-response"},
		{name: "TimeoutMutation", mutation: true, written: true, err: context.DeadlineExceeded, class: providers.ClassUnknownOutcome, reason: "timeout"},
		{name: "NilError", written: true, class: providers.ClassTransient, reason: "no-response"},
		{name: "LongError", err: errors.New(strings.Repeat("e", 5000)), class: providers.ClassTransient, reason: "not-sent"},
	}
	for _, p := range profiles {
		for _, tt := range tests {
			t.Run(p.Name()+"/"+tt.name, func(t *testing.T) { // every profile, custom ones too
				ex := providers.Exchange{Method: http.MethodPost, Mutation: tt.mutation, Written: tt.written, Err: tt.err, Now: now}
				o := p.Classify(ex)
				if o.Class != tt.class || o.Reason != tt.reason {
					t.Errorf("got %q/%q, want %q/%q", o.Class, o.Reason, tt.class, tt.reason)
				}
				checkOutcome(t, o, now)
			})
		}
	}
}

func TestGenericIdempotency(t *testing.T) {
	// design §7: without idempotencyHeader a generic provider is assumed not to honour keys.
	none := providers.NewGeneric(providers.Options{})
	for _, m := range []string{"POST", "PUT", "PATCH", "DELETE", "GET"} {
		if none.Idempotency().Applies(m) {
			t.Errorf("without a header, Applies(%q) = true", m)
		}
	}
	g := providers.NewGeneric(providers.Options{IdempotencyHeader: "Idempotency-Key"})
	idem := g.Idempotency()
	if got, want := idem.Header, "Idempotency-Key"; got != want {
		t.Errorf("header: got %q, want %q", got, want)
	}
	if got, want := idem.Retention, 24*time.Hour; got != want {
		t.Errorf("retention: got %v, want %v", got, want)
	}
	for _, m := range []string{"POST", "PUT", "PATCH", "DELETE"} {
		if !idem.Applies(m) {
			t.Errorf("Applies(%q) = false, want true for every mutation", m)
		}
	}
	if got, want := g.Name(), "generic"; got != want {
		t.Errorf("name: got %q, want %q", got, want)
	}
	if got := g.Defaults(); got.MaxConcurrent != 4 || got.Requests != 0 {
		t.Errorf("defaults: got %+v", got)
	}
}

// Ambiguous marks an answer that leaves a mutation's effect in doubt, also
// where the idempotency key makes a resend safe (and the class transient):
// the scheduler must remember that the effect may have happened.
func TestAmbiguous(t *testing.T) {
	generic := providers.NewGeneric(providers.Options{IdempotencyHeader: "Idempotency-Key"})
	stripe := providers.NewStripe()
	tests := []struct {
		name      string
		p         providers.Profile
		ex        exchange
		class     providers.Class
		ambiguous bool
	}{
		{"GenericKeyed502", generic, exchange{method: "POST", key: true, status: 502}, providers.ClassTransient, true},
		{"GenericUnkeyed502", generic, exchange{method: "POST", status: 502}, providers.ClassUnknownOutcome, true},
		{"GenericRead502", generic, exchange{status: 502}, providers.ClassTransient, false},
		{"Generic503", generic, exchange{method: "POST", key: true, status: 503}, providers.ClassTransient, false},
		{"Generic409InFlight", generic, exchange{method: "POST", key: true, status: 409}, providers.ClassTransient, false},
		{"StripeKeyed502", stripe, exchange{method: "POST", key: true, status: 502}, providers.ClassTransient, true},
		{"StripeKeyInUse", stripe, exchange{method: "POST", key: true, status: 409, body: `{"error":{"type":"invalid_request_error","code":"idempotency_key_in_use"}}`}, providers.ClassTransient, false},
		{"StripeRateLimited", stripe, exchange{method: "POST", key: true, status: 429}, providers.ClassRateLimited, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.p.Classify(tt.ex.build())
			if o.Class != tt.class || o.Ambiguous != tt.ambiguous {
				t.Fatalf("class %s ambiguous %v, want %s %v", o.Class, o.Ambiguous, tt.class, tt.ambiguous)
			}
		})
	}
}
