package scheduler

import (
	"time"

	"pacer/providers"
)

// Observer receives the engine's measurements, for metrics. The engine
// calls it from its loop and from its workers at once, so an
// implementation must be safe for concurrent use, and fast: it runs on the
// claim path. Labels an implementation derives from the arguments stay
// bounded: the provider is a profile name, never a scope or an operation.
// Package metrics implements it for Prometheus; NopObserver ignores
// everything.
type Observer interface {
	// ObserveClaim records one successful claim transaction (a tick that
	// claims: the completions it commits are part of it): how long it
	// took on the scheduler's clock and how many operations it leased.
	ObserveClaim(took time.Duration, claimed int)
	// ObserveDispatch records one claimed operation about to be sent:
	// lateness is the claim time minus the time the operation became
	// eligible (the claimed NextAttemptAt: its own time, or its scope's
	// ready time when later, so a pause is not lateness), never negative.
	ObserveDispatch(provider string, lateness time.Duration)
	// ObserveAttempt records one finished attempt: the class of the
	// provider's answer and how long the request took.
	ObserveAttempt(provider string, class providers.Class, took time.Duration)
	// ObserveInFlight records requests being sent starting (delta 1) and
	// ending (delta -1): their sum is Engine.InFlight.
	ObserveInFlight(delta int)
	// ObserveTokenRefresh records one refresh of a renewing grant's token
	// (design §13) that asked the token endpoint: result is "ok",
	// "revoked" (refused for good) or "backoff" (429, 5xx, no answer).
	ObserveTokenRefresh(provider, result string)
}

// NopObserver is an Observer that records nothing: the engine's default.
type NopObserver struct{}

var _ Observer = NopObserver{}

// ObserveClaim implements Observer.
func (NopObserver) ObserveClaim(time.Duration, int) {}

// ObserveDispatch implements Observer.
func (NopObserver) ObserveDispatch(string, time.Duration) {}

// ObserveAttempt implements Observer.
func (NopObserver) ObserveAttempt(string, providers.Class, time.Duration) {}

// ObserveInFlight implements Observer.
func (NopObserver) ObserveInFlight(int) {}

// ObserveTokenRefresh implements Observer.
func (NopObserver) ObserveTokenRefresh(string, string) {}
