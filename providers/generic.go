package providers

import (
	"time"
)

// Generic is the profile for providers pacer has no specific knowledge of.
// It follows the HTTP standards only (RFC 9110 Retry-After, RFC 6585 429, the
// IETF RateLimit fields). PLACEHOLDER: timing and budget parsing to come.
type Generic struct {
	idem Idempotency
}

// NewGeneric returns the generic profile. With opts.IdempotencyHeader set,
// the provider is taken to honour keys in that header for 24 hours.
func NewGeneric(opts Options) *Generic {
	g := &Generic{}
	if opts.IdempotencyHeader != "" {
		g.idem = Idempotency{Header: opts.IdempotencyHeader, Retention: 24 * time.Hour}
	}
	return g
}

// Name implements Profile.
func (g *Generic) Name() string { return "generic" }

// Idempotency implements Profile.
func (g *Generic) Idempotency() Idempotency { return g.idem }

// Defaults implements Profile.
func (g *Generic) Defaults() Defaults { return Defaults{MaxConcurrent: 4} }

// Classify implements Profile.
func (g *Generic) Classify(ex Exchange) Outcome {
	if ex.Response == nil {
		return ClassifyTransport(ex)
	}
	st := ex.Response.StatusCode
	o := Outcome{Status: st}
	switch {
	case st >= 200 && st < 300:
		o.Class = ClassSuccess
	case st == 429:
		o.Class = ClassRateLimited
	case st == 401:
		o.Class = ClassAuthRevoked
	case st >= 500:
		o.Class = ClassTransient
		if ex.Mutation && !ex.IdempotencyKeySent {
			o.Class = ClassUnknownOutcome
		}
	default:
		o.Class = ClassPermanent
	}
	return o
}

// NewGitHub returns the GitHub profile. PLACEHOLDER.
func NewGitHub() Profile { return &Generic{} }

// NewStripe returns the Stripe profile. PLACEHOLDER.
func NewStripe() Profile { return &Generic{} }
