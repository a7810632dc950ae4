package scheduler

import (
	"fmt"
	"time"
)

// Policy is the server's retry policy: defaults for every operation, maxima
// that clamp what clients ask for, and the timing rules of design §6.
type Policy struct {
	// DefaultMaxAttempts applies when an operation sets none.
	DefaultMaxAttempts int
	// MaxAttemptsLimit clamps an operation's maxAttempts.
	MaxAttemptsLimit int
	// DefaultMaxElapsed applies when an operation sets none.
	DefaultMaxElapsed time.Duration
	// MaxElapsedLimit clamps an operation's maxElapsed.
	MaxElapsedLimit time.Duration
	// BackoffBase and BackoffMax shape the exponential backoff with full
	// jitter after transient failures: attempt n waits a uniform random time
	// in [0, min(BackoffMax, BackoffBase·2^(n-1))], never less than MinHint.
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// RateLimitDelay is the wait after a rate limit without a usable hint.
	RateLimitDelay time.Duration
	// MinHint is the shortest wait honoured; shorter hints are raised to it.
	MinHint time.Duration
	// MaxHint is the longest wait honoured; longer hints are clamped to it
	// (or end the operation when they lie beyond its deadline).
	MaxHint time.Duration
	// Spread is the largest random delay added to a rate-limit wait so many
	// operations waiting on one reset do not all leave at its second.
	Spread time.Duration
}

// Default policy values.
const (
	DefaultMaxAttempts    = 10
	DefaultMaxAttemptsCap = 100
	DefaultMaxElapsed     = 24 * time.Hour
	DefaultMaxElapsedCap  = 30 * 24 * time.Hour
	DefaultBackoffBase    = time.Second
	DefaultBackoffMax     = 10 * time.Minute
	DefaultRateLimitDelay = time.Minute
	DefaultMinHint        = time.Second
	DefaultMaxHint        = 6 * time.Hour
	DefaultSpread         = 2 * time.Second
)

// DefaultPolicy returns the documented defaults.
func DefaultPolicy() Policy {
	return Policy{
		DefaultMaxAttempts: DefaultMaxAttempts,
		MaxAttemptsLimit:   DefaultMaxAttemptsCap,
		DefaultMaxElapsed:  DefaultMaxElapsed,
		MaxElapsedLimit:    DefaultMaxElapsedCap,
		BackoffBase:        DefaultBackoffBase,
		BackoffMax:         DefaultBackoffMax,
		RateLimitDelay:     DefaultRateLimitDelay,
		MinHint:            DefaultMinHint,
		MaxHint:            DefaultMaxHint,
		Spread:             DefaultSpread,
	}
}

// Validate reports a policy that could loop or never retry.
func (p Policy) Validate() error {
	switch {
	case p.DefaultMaxAttempts < 1 || p.MaxAttemptsLimit < p.DefaultMaxAttempts:
		return fmt.Errorf("policy: need 1 <= default max attempts (%d) <= limit (%d)", p.DefaultMaxAttempts, p.MaxAttemptsLimit)
	case p.DefaultMaxElapsed <= 0 || p.MaxElapsedLimit < p.DefaultMaxElapsed:
		return fmt.Errorf("policy: need 0 < default max elapsed (%s) <= limit (%s)", p.DefaultMaxElapsed, p.MaxElapsedLimit)
	case p.BackoffBase <= 0 || p.BackoffMax < p.BackoffBase:
		return fmt.Errorf("policy: need 0 < backoff base (%s) <= backoff max (%s)", p.BackoffBase, p.BackoffMax)
	case p.MinHint <= 0 || p.MaxHint < p.MinHint:
		return fmt.Errorf("policy: need 0 < min hint (%s) <= max hint (%s)", p.MinHint, p.MaxHint)
	case p.RateLimitDelay < p.MinHint || p.RateLimitDelay > p.MaxHint:
		return fmt.Errorf("policy: rate-limit delay (%s) must lie within the hint bounds", p.RateLimitDelay)
	case p.Spread < 0:
		return fmt.Errorf("policy: spread must not be negative")
	}
	return nil
}

// ClampRetry applies the defaults and maxima to a client's retry request
// (zero fields mean "default").
func (p Policy) ClampRetry(maxAttempts int, maxElapsed time.Duration) Retry {
	r := Retry{MaxAttempts: maxAttempts, MaxElapsed: maxElapsed}
	if r.MaxAttempts <= 0 {
		r.MaxAttempts = p.DefaultMaxAttempts
	}
	r.MaxAttempts = min(r.MaxAttempts, p.MaxAttemptsLimit)
	if r.MaxElapsed <= 0 {
		r.MaxElapsed = p.DefaultMaxElapsed
	}
	r.MaxElapsed = min(r.MaxElapsed, p.MaxElapsedLimit)
	return r
}
