package providers_test

import (
	"reflect"
	"testing"
	"time"

	"pacer/providers"
)

func TestStripeClassify(t *testing.T) {
	p := providers.NewStripe()
	stripeErr := func(typ, code string) string {
		return `{"error":{"code":"` + code + `","doc_url":"https://stripe.com/docs/error-codes/` + code + `","message":"…","type":"` + typ + `"}}`
	}
	tests := []signalCase{
		{name: "OK", ex: exchange{method: "POST", key: true, status: 200, header: header("Request-Id", "req_123")},
			want: want{class: providers.ClassSuccess, detail: "request-id req_123"}},
		// providers.md §2 Idempotency: replays carry Idempotent-Replayed: true.
		{name: "Replayed", ex: exchange{method: "POST", key: true, status: 200, header: header("Idempotent-Replayed", "true")},
			want: want{class: providers.ClassSuccess, detail: "idempotent replay"}},
		// providers.md §2 RL: 429 with no documented hint → backoff.
		{name: "429NoHint", ex: exchange{method: "POST", key: true, status: 429, header: header("Stripe-Rate-Limited-Reason", "endpoint-rate"), body: stripeErr("invalid_request_error", "rate_limit")},
			want: want{class: providers.ClassRateLimited, reason: "rate-limit", detail: "rate limited: endpoint-rate"}},
		{name: "429RetryAfter", ex: exchange{status: 429, header: header("Retry-After", "2")},
			want: want{class: providers.ClassRateLimited, hintSrc: "retry-after", hintAt: now.Add(2 * time.Second)}},
		// providers.md §2 RL: 429 + lock_timeout = object lock contention → TR.
		{name: "429LockTimeout", ex: exchange{method: "POST", key: true, status: 429, body: stripeErr("invalid_request_error", "lock_timeout")},
			want: want{class: providers.ClassTransient, reason: "lock-timeout"}},
		{name: "429LockTimeoutTruncatedBody", ex: exchange{method: "POST", key: true, status: 429, body: `{"error":{"code":"lock_timeout","doc_url":"https://stri`},
			want: want{class: providers.ClassTransient, reason: "lock-timeout"}},
		// providers.md §2 Stripe-Should-Retry.
		{name: "ShouldRetryTrue", ex: exchange{method: "POST", key: true, status: 400, header: header("Stripe-Should-Retry", "true")},
			want: want{class: providers.ClassTransient, reason: "should-retry"}},
		{name: "ShouldRetryTrue500", ex: exchange{method: "POST", key: true, status: 500, header: header("Stripe-Should-Retry", "true")},
			want: want{class: providers.ClassTransient, reason: "should-retry"}},
		{name: "ShouldRetryFalse409", ex: exchange{method: "POST", key: true, status: 409, header: header("Stripe-Should-Retry", "false"), body: stripeErr("idempotency_error", "idempotency_key_in_use")},
			want: want{class: providers.ClassPermanent, reason: "idempotency-error"}},
		{name: "ShouldRetryFalse400", ex: exchange{method: "POST", key: true, status: 400, header: header("Stripe-Should-Retry", "false"), body: stripeErr("invalid_request_error", "parameter_missing")},
			want: want{class: providers.ClassPermanent, reason: "invalid-request"}},
		{name: "ShouldRetryFalse500Mutation", ex: exchange{method: "POST", key: true, status: 500, header: header("Stripe-Should-Retry", "false")},
			want: want{class: providers.ClassUnknownOutcome, reason: "should-not-retry", keyBound: true}},
		{name: "ShouldRetryFalse503Read", ex: exchange{status: 503, header: header("Stripe-Should-Retry", "false")},
			want: want{class: providers.ClassPermanent}},
		// providers.md §2 Idempotency: concurrent same key → 409 idempotency_key_in_use → retry same key.
		{name: "409KeyInUse", ex: exchange{method: "POST", key: true, status: 409, body: stripeErr("idempotency_error", "idempotency_key_in_use")},
			want: want{class: providers.ClassTransient, reason: "idempotency-key-in-use"}},
		// providers.md §2: stripe-go retries 409 when the header is absent.
		{name: "409Other", ex: exchange{method: "POST", key: true, status: 409, body: stripeErr("invalid_request_error", "resource_already_exists")},
			want: want{class: providers.ClassTransient, reason: "conflict"}},
		// providers.md §2 Idempotency: reuse with different params → idempotency_error.
		{name: "IdempotencyError", ex: exchange{method: "POST", key: true, status: 400, body: stripeErr("idempotency_error", "")},
			want: want{class: providers.ClassPermanent, reason: "idempotency-error"}},
		// providers.md §2 AUTH / PERM.
		{name: "400", ex: exchange{method: "POST", key: true, status: 400, body: stripeErr("invalid_request_error", "parameter_invalid_integer")},
			want: want{class: providers.ClassPermanent, reason: "invalid-request", detail: "invalid_request_error/parameter_invalid_integer"}},
		{name: "402CardDeclined", ex: exchange{method: "POST", key: true, status: 402, body: `{"error":{"code":"card_declined","decline_code":"insufficient_funds","message":"Your card has insufficient funds.","payment_method":{"id":"pm_1","type":"card"},"type":"card_error"}}`},
			want: want{class: providers.ClassPermanent, reason: "card-declined"}},
		{name: "402CardDeclinedTruncated", ex: exchange{method: "POST", key: true, status: 402, body: `{"error":{"code":"card_declined","payment_method":{"id":"pm_1","type":"card"},"type":"card_error","mess`},
			want: want{class: providers.ClassPermanent, reason: "card-declined"}},
		{name: "404", ex: exchange{status: 404, body: stripeErr("invalid_request_error", "resource_missing")},
			want: want{class: providers.ClassPermanent, reason: "not-found"}},
		{name: "404NoBody", ex: exchange{status: 404}, want: want{class: providers.ClassPermanent, reason: "not-found"}},
		{name: "401", ex: exchange{status: 401, body: stripeErr("invalid_request_error", "")}, want: want{class: providers.ClassAuthRevoked, reason: "unauthorized"}},
		{name: "401Expired", ex: exchange{method: "POST", key: true, status: 401, body: stripeErr("invalid_request_error", "api_key_expired")},
			want: want{class: providers.ClassAuthRevoked, reason: "api-key-expired"}},
		{name: "403Restricted", ex: exchange{status: 403, body: `{"error":{"message":"The provided key does not have the required permissions","type":"invalid_request_error"}}`},
			want: want{class: providers.ClassPermanent, reason: "permission"}},
		// providers.md §2 UNK: 500 is indeterminate; a replay returns the same 500.
		{name: "500MutationKeySent", ex: exchange{method: "POST", key: true, status: 500, body: stripeErr("api_error", "")},
			want: want{class: providers.ClassUnknownOutcome, reason: "indeterminate", keyBound: true, detail: "indeterminate"}},
		{name: "500DeleteNoKey", ex: exchange{method: "DELETE", status: 500},
			want: want{class: providers.ClassUnknownOutcome, reason: "indeterminate"}},
		{name: "500Read", ex: exchange{status: 500}, want: want{class: providers.ClassTransient}},
		{name: "502MutationKeySent", ex: exchange{method: "POST", key: true, status: 502}, want: want{class: providers.ClassTransient}},
		{name: "503MutationKeySentRetryAfter", ex: exchange{method: "POST", key: true, status: 503, header: header("Retry-After", "4")},
			want: want{class: providers.ClassTransient, hintSrc: "retry-after", hintAt: now.Add(4 * time.Second)}},
		{name: "504DeleteNoKey", ex: exchange{method: "DELETE", status: 504}, want: want{class: providers.ClassUnknownOutcome}},
		{name: "502Read", ex: exchange{status: 502}, want: want{class: providers.ClassTransient}},
		{name: "NonJSONBody", ex: exchange{method: "POST", key: true, status: 400, body: `<html>bad gateway</html>`},
			want: want{class: providers.ClassPermanent, reason: "invalid-request"}},
		{name: "OddTypes", ex: exchange{method: "POST", key: true, status: 402, body: `{"error":{"code":42,"type":"card_error"}}`},
			want: want{class: providers.ClassPermanent, reason: "card-declined"}},
	}
	runSignals(t, p, tests)
}

func TestStripeProfile(t *testing.T) {
	p, err := providers.Lookup("stripe", providers.Options{IdempotencyHeader: "X-Other"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p.Name(), "stripe"; got != want {
		t.Errorf("name: got %q, want %q", got, want)
	}
	// providers.md §2 Idempotency: Idempotency-Key on any POST, no effect on GET/DELETE, 24 h.
	idem := p.Idempotency()
	if got, want := idem.Header, "Idempotency-Key"; got != want {
		t.Errorf("header: got %q, want %q", got, want)
	}
	if got, want := idem.Retention, 24*time.Hour; got != want {
		t.Errorf("retention: got %v, want %v", got, want)
	}
	for m, want := range map[string]bool{"POST": true, "GET": false, "DELETE": false, "PUT": false, "PATCH": false} {
		if got := idem.Applies(m); got != want {
			t.Errorf("Applies(%q): got %v, want %v", m, got, want)
		}
	}
	// providers.md §2 RL: sandbox and default per-endpoint 25/s.
	if got, want := p.Defaults(), (providers.Defaults{MaxConcurrent: 10, Requests: 25, Per: time.Second}); got != want {
		t.Errorf("defaults: got %+v, want %+v", got, want)
	}
}

func TestLookup(t *testing.T) {
	want := []string{"generic", "github", "google", "hubspot", "intercom", "jira", "msgraph", "notion", "salesforce", "sendgrid", "shopify", "slack", "stripe", "twilio", "x", "zendesk"}
	if got := providers.Names(); !reflect.DeepEqual(got, want) {
		t.Errorf("names: got %v, want %v", got, want)
	}
	if _, err := providers.Lookup("nope", providers.Options{}); err == nil {
		t.Errorf("unknown provider: got no error")
	}
}
