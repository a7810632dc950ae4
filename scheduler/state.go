// Package scheduler is pacer's domain: operations, scopes, attempts, their
// states and transitions, the retry policy, and the engine that claims due
// operations, sends them and records what the provider said. It defines the
// Store it needs; package db implements it.
package scheduler

// State is an operation's place in its life cycle (design §2).
type State string

// The operation states.
const (
	// StateScheduled: eligible at NextAttemptAt. Set by enqueue, by a
	// transient failure (with backoff) and by a person's release.
	StateScheduled State = "scheduled"
	// StateWaitingForBudget: delayed by a rate limit or by the scope's
	// budget; eligible at NextAttemptAt. Set by a completion.
	StateWaitingForBudget State = "waitingForBudget"
	// StateRunning: leased by a worker. Set only by a claim; left only by a
	// completion fenced on the lease token, or by lease recovery.
	StateRunning State = "running"
	// StateHeld: will not run until a person acts; HoldReason says why.
	StateHeld State = "held"
	// StateSucceeded is terminal: the provider did it (or a person said so).
	StateSucceeded State = "succeeded"
	// StateFailed is terminal unless a person releases it; FailureReason
	// says why.
	StateFailed State = "failed"
	// StateCanceled is terminal: a person canceled it.
	StateCanceled State = "canceled"
)

// AllStates lists every state, in life-cycle order.
var AllStates = []State{StateScheduled, StateWaitingForBudget, StateRunning, StateHeld, StateSucceeded, StateFailed, StateCanceled}

// Valid reports whether s is a defined state.
func (s State) Valid() bool {
	for _, v := range AllStates {
		if v == s {
			return true
		}
	}
	return false
}

// Due reports whether operations in s wait for their NextAttemptAt.
func (s State) Due() bool { return s == StateScheduled || s == StateWaitingForBudget }

// Terminal reports whether s ends the operation's life (failed may still be
// released by a person).
func (s State) Terminal() bool {
	return s == StateSucceeded || s == StateFailed || s == StateCanceled
}

// Kind says whether an operation is safe to repeat.
type Kind string

// The operation kinds.
const (
	// KindRead is safe to repeat.
	KindRead Kind = "read"
	// KindMutation may change the provider's state; repeating an uncertain
	// mutation is governed by invariant 4.
	KindMutation Kind = "mutation"
)

// HoldReason says why an operation or a scope is held.
type HoldReason string

// The hold reasons.
const (
	// HoldUnknownOutcome: a mutation may have been applied and cannot be
	// safely resent; a person checks the provider and resolves it.
	HoldUnknownOutcome HoldReason = "unknownOutcome"
	// HoldAuthRevoked: the scope's credentials were refused.
	HoldAuthRevoked HoldReason = "authRevoked"
)

// FailureReason says why an operation failed.
type FailureReason string

// The failure reasons.
const (
	// FailurePermanent: the provider rejected the request itself.
	FailurePermanent FailureReason = "permanent"
	// FailureRetryBudgetExhausted: attempts or elapsed time ran out, or the
	// provider's hint lies beyond the operation's deadline.
	FailureRetryBudgetExhausted FailureReason = "retryBudgetExhausted"
	// FailureResolvedFailed: a person checked the provider and found the
	// uncertain mutation was not applied, and chose to end it.
	FailureResolvedFailed FailureReason = "resolvedFailed"
)

// ScopeStatus is a scope's admission state.
type ScopeStatus string

// The scope statuses.
const (
	// ScopeOpen: operations of the scope are admitted.
	ScopeOpen ScopeStatus = "open"
	// ScopePaused: nothing of the scope is sent before PausedUntil.
	ScopePaused ScopeStatus = "paused"
	// ScopeHeld: nothing of the scope is sent until a person acts.
	ScopeHeld ScopeStatus = "held"
)

// BlockedBy names what, beyond its next attempt time, keeps a due
// operation from being sent.
type BlockedBy string

// The blockers.
const (
	// BlockedByScopeHeld: the operation's scope is held; nothing of it is
	// sent until a person resumes the scope or replaces its credentials.
	BlockedByScopeHeld BlockedBy = "scopeHeld"
)
