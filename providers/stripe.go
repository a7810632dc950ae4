package providers

import (
	"encoding/json"
	"errors"
	"strings"
	"time"
)

// Stripe is the profile for the Stripe API (providers.md §2).
//
// Stripe documents no Retry-After, remaining or reset headers: a 429 is
// rateLimited with no hint (unless a Retry-After shows up), except a 429
// with error code lock_timeout, which is object-lock contention and
// transient. Stripe-Should-Retry decides when present (as stripe-go does):
// "true" is transient (resend with the same key); "false" is permanent,
// except a 5xx on a mutation, which is an unknown outcome that a resend
// cannot settle (KeyBound). Without the header: 409 (idempotency_key_in_use
// or another conflict) is transient; an idempotency_error is permanent; 400,
// 402 (card_error: Reason "card-declined"), 403 ("permission") and 404 are
// permanent; 401 is authRevoked. A 500 on a mutation is "indeterminate":
// Stripe saved it under the idempotency key and replays it, so it is an
// unknown outcome with KeyBound set when the key was sent. Other 5xx are
// transient when the key was sent or the request is a read, else an
// unknown outcome.
type Stripe struct{}

var _ Profile = (*Stripe)(nil)

// NewStripe returns the Stripe profile.
func NewStripe() *Stripe { return &Stripe{} }

// Name implements Profile.
func (s *Stripe) Name() string { return "stripe" }

// Idempotency implements Profile: Idempotency-Key on POST requests, kept at
// least 24 hours.
func (s *Stripe) Idempotency() Idempotency {
	return Idempotency{Header: "Idempotency-Key", Retention: 24 * time.Hour, Methods: []string{"POST"}}
}

// Defaults implements Profile: 25 requests per second, Stripe's sandbox
// limit and default per-endpoint limit (live mode allows 100 per second
// across endpoints; a scope may raise it), and 10 requests in flight.
func (s *Stripe) Defaults() Defaults {
	return Defaults{MaxConcurrent: 10, Requests: 25, Per: time.Second}
}

// Classify implements Profile.
func (s *Stripe) Classify(ex Exchange) Outcome {
	if ex.Response == nil {
		return ClassifyTransport(ex)
	}
	resp := ex.Response
	h, st := resp.Header, resp.StatusCode
	o := Outcome{Status: st}
	e := parseStripeError(ex.Body)
	should := strings.ToLower(strings.TrimSpace(h.Get("Stripe-Should-Retry")))
	var notes []string
	if id := h.Get("Request-Id"); id != "" {
		notes = append(notes, "request-id "+cut(id, 64))
	}
	if strings.EqualFold(strings.TrimSpace(h.Get("Idempotent-Replayed")), "true") {
		notes = append(notes, "idempotent replay of an earlier answer")
	}
	if e.Type != "" || e.Code != "" {
		notes = append(notes, "error "+cut(e.Type, 64)+"/"+cut(e.Code, 64))
	}
	if should != "" {
		notes = append(notes, "stripe-should-retry "+cut(should, 16))
	}

	switch {
	case st >= 200 && st < 300:
		o.Class = ClassSuccess
	case st == 401:
		o.Class, o.Reason = ClassAuthRevoked, "unauthorized"
		if e.Code == "api_key_expired" {
			o.Reason = "api-key-expired"
		}
	case st == 429 && e.Code == "lock_timeout":
		o.Class, o.Reason = ClassTransient, "lock-timeout"
	case st == 429:
		o.Class, o.Reason = ClassRateLimited, "rate-limit"
		if why := h.Get("Stripe-Rate-Limited-Reason"); why != "" {
			notes = append(notes, "rate limited: "+cut(why, 64))
		}
		ra := retryAfterHint(h, ex.Now)
		o.Hint = ra
		notes = append(notes, hintNotes(ra)...)
	case should == "true":
		o.Class, o.Reason = ClassTransient, "should-retry"
	case should == "false" && st >= 500 && ex.Mutation:
		o.Class, o.Reason, o.KeyBound = ClassUnknownOutcome, "should-not-retry", true
		notes = append(notes, "Stripe says a resend would have no further effect; reconcile with Stripe")
	case should == "false":
		o.Class, o.Reason = ClassPermanent, stripeReason(ex, e)
	case st == 409 || e.Code == "idempotency_key_in_use":
		o.Class, o.Reason = ClassTransient, "conflict"
		if e.Code == "idempotency_key_in_use" {
			o.Reason = "idempotency-key-in-use"
		}
	case e.Type == "idempotency_error":
		o.Class, o.Reason = ClassPermanent, "idempotency-error"
	case st == 500 && ex.Mutation:
		o.Class, o.Reason, o.KeyBound = ClassUnknownOutcome, "indeterminate", ex.IdempotencyKeySent
		notes = append(notes, "Stripe's 500 is indeterminate and replayed under the same key; reconcile with Stripe")
	case st >= 500 && st < 600:
		o.Class, o.Reason = serverError(ex, false)
	default:
		o.Class, o.Reason = classifyStatus(ex)
		if o.Class == ClassPermanent {
			o.Reason = stripeReason(ex, e)
		}
	}
	if o.Class == ClassTransient {
		ra := retryAfterHint(h, ex.Now)
		o.Hint = ra
		notes = append(notes, hintNotes(ra)...)
	}
	o.Detail = describe(resp, ex.Body, notes...)
	return o
}

// stripeReason names the cause of a permanent Stripe rejection.
func stripeReason(ex Exchange, e stripeError) string {
	switch {
	case e.Type == "idempotency_error":
		return "idempotency-error"
	case e.Type == "card_error":
		return "card-declined"
	case ex.Response.StatusCode == 403:
		return "permission"
	case ex.Response.StatusCode == 404:
		return "not-found"
	case ex.Response.StatusCode == 400 || e.Type == "invalid_request_error":
		return "invalid-request"
	}
	if _, reason := classifyStatus(ex); reason != "" {
		return reason
	}
	return "rejected"
}

// stripeError is the error object of a Stripe error body:
// `{"error": {"type": …, "code": …, "message": …}}`.
type stripeError struct {
	Type    string `json:"type"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// parseStripeError reads body tolerantly: fields of an unexpected type are
// skipped, and a body that is not JSON is scanned for the same fields.
func parseStripeError(body []byte) stripeError {
	var doc struct {
		Error stripeError `json:"error"`
	}
	var typeErr *json.UnmarshalTypeError
	err := json.Unmarshal(body, &doc)
	if err == nil || errors.As(err, &typeErr) {
		return doc.Error
	}
	return stripeError{
		Type: jsonStringField(body, "type", func(v string) bool { return strings.HasSuffix(v, "_error") }),
		Code: jsonStringField(body, "code", nil),
	}
}
