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
	// Horizon is how far ahead of now a time from outside (an operation's
	// notBefore, a release's at) may lie; zero means DefaultHorizon. See
	// CheckTime.
	Horizon time.Duration
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
	DefaultHorizon        = 365 * 24 * time.Hour
	// MinMaxElapsed is the shortest retry budget an operation may ask for:
	// budgets are stored in whole milliseconds.
	MinMaxElapsed = time.Millisecond
)

// The absolute bounds of every time pacer accepts from outside (design
// §11 "Times are bounded"): nothing before the Unix epoch, nothing after
// the last millisecond of year 9999 (the last an RFC 3339 time can say).
var (
	EarliestTime = time.Unix(0, 0).UTC()
	LatestTime   = time.Date(9999, 12, 31, 23, 59, 59, 999_000_000, time.UTC)
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
		Horizon:            DefaultHorizon,
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
	case p.Horizon < 0:
		return fmt.Errorf("policy: horizon must not be negative")
	}
	return nil
}

// horizon is Horizon, or DefaultHorizon when it is zero.
func (p Policy) horizon() time.Duration {
	if p.Horizon > 0 {
		return p.Horizon
	}
	return DefaultHorizon
}

// Latest is the latest time from outside the policy accepts at now: the
// horizon ahead, and never after LatestTime.
func (p Policy) Latest(now time.Time) time.Time {
	latest := now.Add(p.horizon())
	if latest.After(LatestTime) {
		return LatestTime
	}
	return latest
}

// CheckTime is the one rule for a time given from outside (design §11
// "Times are bounded"): it must lie between EarliestTime and LatestTime
// and at most the policy's horizon after now. The message names the
// bound broken, for a 422 problem's field error or a page's message; it
// is empty when t is acceptable. A time in the past (after EarliestTime)
// is acceptable: callers read it as "now".
func (p Policy) CheckTime(t, now time.Time) string {
	latest := p.Latest(now)
	switch {
	case t.Before(EarliestTime):
		return "must not be before " + EarliestTime.Format(time.RFC3339)
	case t.After(latest):
		return fmt.Sprintf("must not be later than %s (%s ahead of now)", latest.Format(time.RFC3339), formatHorizon(p.horizon()))
	}
	return ""
}

// CheckMaxElapsed is the one rule for a retry budget given from outside:
// at least MinMaxElapsed. Longer budgets than MaxElapsedLimit are not an
// error: ClampRetry shortens them to the limit. The message is empty when
// d is acceptable; zero (asking for the default) is.
func (p Policy) CheckMaxElapsed(d time.Duration) string {
	if d < 0 || (d > 0 && d < MinMaxElapsed) {
		return fmt.Sprintf("must be at least %s (longer than %s is shortened to %s)", MinMaxElapsed, formatHorizon(p.MaxElapsedLimit), formatHorizon(p.MaxElapsedLimit))
	}
	return ""
}

// ClampTime brings a stored time into [EarliestTime, LatestTime], so a
// value written before the bounds held (or by hand) can still be shown.
// The zero time stays zero.
func ClampTime(t time.Time) time.Time {
	switch {
	case t.IsZero():
		return t
	case t.Before(EarliestTime):
		return EarliestTime
	case t.After(LatestTime):
		return LatestTime
	}
	return t
}

// formatHorizon writes a duration in days when it is whole days.
func formatHorizon(d time.Duration) string {
	if d >= 24*time.Hour && d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%d days", d/(24*time.Hour))
	}
	return d.String()
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
