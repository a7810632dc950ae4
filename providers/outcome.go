// Package providers knows each provider's documented signals. A Profile turns
// one HTTP exchange (a response or a transport error) into an Outcome: its
// class, the provider's timing hint, the budget figures it carried and a
// bounded diagnostic. The package does no I/O and keeps no state; every rule
// is a pure function of the exchange and the time it arrived.
package providers

import (
	"net/http"
	"time"
)

// Class is what a provider's answer means for the operation that caused it.
type Class string

// The outcome classes. Each one gets its own action in the scheduler.
const (
	// ClassSuccess: the provider did what was asked.
	ClassSuccess Class = "success"
	// ClassRateLimited: the provider refused because a budget is spent; the
	// request had no effect and may be sent again once the hint allows.
	ClassRateLimited Class = "rateLimited"
	// ClassTransient: the request had no effect (or is safe to repeat) and
	// may succeed later.
	ClassTransient Class = "transient"
	// ClassPermanent: the provider rejected the request itself; sending it
	// again will not help.
	ClassPermanent Class = "permanent"
	// ClassAuthRevoked: the scope's credentials are missing, invalid or
	// revoked; nothing of that scope should be sent until a person acts.
	ClassAuthRevoked Class = "authRevoked"
	// ClassUnknownOutcome: a mutation may have reached the provider, and its
	// effect is unknown.
	ClassUnknownOutcome Class = "unknownOutcome"
)

// Valid reports whether c is one of the defined classes.
func (c Class) Valid() bool {
	switch c {
	case ClassSuccess, ClassRateLimited, ClassTransient, ClassPermanent, ClassAuthRevoked, ClassUnknownOutcome:
		return true
	}
	return false
}

// Exchange is one attempt as a profile sees it.
type Exchange struct {
	// Method is the request's HTTP method.
	Method string
	// Mutation is true when the operation is not safe to repeat.
	Mutation bool
	// IdempotencyKeySent is true when the request carried the profile's
	// idempotency header.
	IdempotencyKeySent bool
	// Response is the provider's answer; nil when the exchange ended with a
	// transport error.
	Response *http.Response
	// Body is the response body, already read by the caller up to a bound.
	Body []byte
	// Err is the transport error when Response is nil.
	Err error
	// Written is true when the request may have reached the provider: some
	// or all of it was written to the connection before the error.
	Written bool
	// Now is when the response or the error arrived, on the scheduler's clock.
	Now time.Time
}

// Hint is a provider's statement of when to try again.
type Hint struct {
	// Source names the header or body field the hint came from, in lower
	// case ("retry-after", "x-ratelimit-reset", "ratelimit"). Empty when the
	// response carried no hint.
	Source string `json:"source,omitempty"`
	// Raw is the value as received, bounded in length.
	Raw string `json:"raw,omitempty"`
	// At is the eligible time on the scheduler's clock, already corrected for
	// the provider's clock skew. Zero when the value was unusable.
	At time.Time `json:"at,omitzero"`
	// Note says why a value was ignored or adjusted; empty when used as is.
	Note string `json:"note,omitempty"`
}

// Usable reports whether the hint names a time to wait for.
func (h Hint) Usable() bool { return !h.At.IsZero() }

// Budget holds the budget figures a response carried.
type Budget struct {
	// Remaining is how many requests are left in the current window.
	Remaining int64 `json:"remaining"`
	// Limit is the size of the window's budget; 0 when not stated.
	Limit int64 `json:"limit,omitempty"`
	// ResetAt is when the budget refills, on the scheduler's clock; zero
	// when not stated.
	ResetAt time.Time `json:"resetAt,omitzero"`
	// Resource names which of the provider's budgets the figures count
	// when it keeps several (GitHub's x-ratelimit-resource: search,
	// graphql, …; Shopify's GraphQL cost bucket; an IETF partition key),
	// at most MaxResource bytes; empty for the profile's default budget.
	Resource string `json:"resource,omitempty"`
}

// MaxResource bounds Budget.Resource.
const MaxResource = 64

// Outcome is a profile's reading of one exchange.
type Outcome struct {
	// Class is always one of the defined classes.
	Class Class
	// Status is the HTTP status; 0 for transport errors.
	Status int
	// Hint is the timing hint chosen by the profile's precedence rules.
	Hint Hint
	// Budget is nil when the response carried no budget figures. Its
	// Resource names which of the provider's budgets they count.
	Budget *Budget
	// Shared is true when the limit signalled is shared by every scope of
	// the provider (an app-wide or project-wide limit), not this scope's own.
	Shared bool
	// KeyBound is true, for ClassUnknownOutcome, when the provider stored
	// this answer under the idempotency key: resending the same key replays
	// it, so a resend cannot settle the doubt.
	KeyBound bool
	// Ambiguous is true when the answer leaves a mutation's effect in
	// doubt: its signal is an unknown outcome, even where the class is
	// transient because the request carried an idempotency key that makes
	// a resend safe (an ambiguous 5xx). The effect may have happened all
	// the same, and the scheduler records that (design §11).
	Ambiguous bool
	// Reason is a short machine-readable cause ("secondary-rate-limit",
	// "permission", "validation", "connection-reset"); may be empty.
	Reason string
	// Detail is a human diagnostic of at most MaxDetail bytes, quoting the
	// exchange as given. The caller redacts credentials from the exchange
	// before classifying it (pacer's engine does, in every spelling), so
	// that no cut made here can keep part of a secret.
	Detail string
}

// MaxDetail bounds Outcome.Detail.
const MaxDetail = 2048

// Idempotency describes how a provider deduplicates repeated requests.
type Idempotency struct {
	// Header is the request header that carries the key; empty when the
	// provider honours none.
	Header string
	// Retention is how long the provider remembers a key; a resend after
	// that runs anew. Zero means keys are not honoured.
	Retention time.Duration
	// Methods lists the methods the key applies to; empty means every
	// mutation.
	Methods []string
}

// Applies reports whether a request with method carries a key that the
// provider honours.
func (i Idempotency) Applies(method string) bool {
	if i.Header == "" || i.Retention <= 0 {
		return false
	}
	if len(i.Methods) == 0 {
		return true
	}
	for _, m := range i.Methods {
		if m == method {
			return true
		}
	}
	return false
}

// Defaults are a provider's documented limits, used when a scope sets none.
type Defaults struct {
	// MaxConcurrent is how many requests of one scope may be in flight.
	MaxConcurrent int
	// Requests and Per describe a documented rate budget; zero when none.
	Requests int
	Per      time.Duration
}

// Profile classifies exchanges with one provider. Implementations are pure:
// no I/O, no clock of their own (Exchange.Now is the time), safe for
// concurrent use.
//
// Classify must always return a valid Class. A hint it returns is either
// unusable (zero At, with a Note saying why) or strictly after ex.Now;
// negative, non-numeric, overflowing or past values are never usable. Times
// in provider headers are converted through the response's Date header when
// present, so provider clock skew does not shift the result.
type Profile interface {
	// Name is the profile's identifier as used in a scope's "provider".
	Name() string
	// Classify reads one exchange.
	Classify(ex Exchange) Outcome
	// Idempotency says whether and how the provider deduplicates requests.
	Idempotency() Idempotency
	// Defaults are the provider's documented limits.
	Defaults() Defaults
	// Describe says what the profile recognises, from the rules Classify
	// uses.
	Describe() Description
}

// Options are the per-scope settings that shape a profile.
type Options struct {
	// IdempotencyHeader tells the generic profile that the provider honours
	// idempotency keys in this header. Ignored by profiles that know their
	// provider's own header.
	IdempotencyHeader string
	// Spec is the declarative profile of a "custom" scope; ignored by the
	// built-in profiles.
	Spec *Spec
}
