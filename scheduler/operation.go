package scheduler

import (
	"time"

	"pacer/providers"
)

// Request is the HTTP request an operation sends, relative to its scope's
// base URL. It is the same on every attempt.
type Request struct {
	// Method is an upper-case HTTP method.
	Method string `json:"method"`
	// Path starts with "/" and may carry a query string.
	Path string `json:"path"`
	// Headers are extra request headers; never credentials or hop-by-hop
	// headers.
	Headers map[string]string `json:"headers,omitempty"`
	// Body is the raw body sent; empty for none.
	Body []byte `json:"body,omitempty"`
	// ContentType is the body's media type ("application/json" for a JSON
	// body); empty without a body.
	ContentType string `json:"contentType,omitempty"`
}

// Retry is an operation's own retry budget, already clamped by the server.
type Retry struct {
	// MaxAttempts bounds the attempts of one budget (a release starts a new
	// one) that ended in a transient failure or a retried uncertain outcome;
	// rate-limited answers do not count (design §11), MaxElapsed bounds them.
	MaxAttempts int `json:"maxAttempts"`
	// MaxElapsed bounds the time from the budget's start to the deadline.
	MaxElapsed time.Duration `json:"maxElapsed"`
}

// NewOperation is a validated, normalized operation to enqueue.
type NewOperation struct {
	ID              string
	Scope           string
	Kind            Kind
	Request         Request
	RequestIdentity string
	// NotBefore is the first eligible time (enqueue time when not given).
	NotBefore time.Time
	Retry     Retry
	// ContentHash fingerprints everything the client sent, so a repeated
	// enqueue can be told apart from a conflicting one.
	ContentHash string
}

// OutcomeSummary is what an operation shows of its latest attempt.
type OutcomeSummary struct {
	Class  providers.Class `json:"class"`
	Status int             `json:"status,omitempty"`
	At     time.Time       `json:"at"`
	Hint   *providers.Hint `json:"hint,omitempty"`
	Reason string          `json:"reason,omitempty"`
	Detail string          `json:"detail,omitempty"`
	// Response is the provider's whole answer to the latest attempt of an
	// operation that did not succeed (a success's is its Result): status,
	// headers and body, redacted and bounded by the result limit. Nil
	// without an answer (a transport error). It is stored apart from the
	// summary and read with one operation, not with listings or claims.
	Response *Result `json:"-"`
}

// Result is one answer of the provider (a success's, or the last answer of
// an operation that did not succeed), redacted and bounded in size.
type Result struct {
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers"`
	// Body is the response body, cut to the configured bound.
	Body []byte `json:"body,omitempty"`
	// Truncated is true when Body was cut.
	Truncated bool `json:"truncated,omitempty"`
}

// Operation is one business command and everything pacer knows of it.
type Operation struct {
	ID              string
	Scope           string
	Provider        string
	Kind            Kind
	Request         Request
	RequestIdentity string
	State           State
	// Attempt counts every attempt ever started, across releases.
	Attempt int
	// BudgetAttempts counts the attempts of the current retry budget that
	// count toward Retry.MaxAttempts: the claim counts each attempt it
	// starts, and a rate-limited completion gives its count back.
	BudgetAttempts int
	// NextAttemptAt is, for a due operation, the moment it may go: its own
	// time, or its scope's ready time (pause, budget reset, rate slot) when
	// that is later, in which case State reads StateWaitingForBudget.
	NextAttemptAt time.Time
	// BlockedBy names what beyond time keeps a due operation back (its
	// scope's hold); empty for nothing.
	BlockedBy     BlockedBy
	HoldReason    HoldReason
	FailureReason FailureReason
	LastOutcome   *OutcomeSummary
	CreatedAt     time.Time
	UpdatedAt     time.Time
	// Deadline ends the current retry budget (its start + Retry.MaxElapsed).
	Deadline time.Time
	Retry    Retry
	Result   *Result
	// LeaseToken is bumped by every claim; completions are fenced on it.
	LeaseToken int64
	// LeaseExpiresAt is set while running.
	LeaseExpiresAt time.Time
	// FirstSentAt is when the request identity was first sent; the
	// provider's idempotency retention counts from it. Zero before.
	FirstSentAt time.Time
	ContentHash string
	// MaybeApplied is true once an attempt of this mutation ended with an
	// uncertain outcome (an unknownOutcome answer, an ambiguous one resent
	// with the idempotency key, or a lease lost in flight): the effect may
	// have happened, so the operation never ends failed on its own (design
	// §11); only a confirmed success, a person's resolve or a cancel ends
	// it. It survives a release; a resolve clears it.
	MaybeApplied bool
	// ReleasedFrom is, for an operation a person released that has not
	// been sent since, what it was released from; nil otherwise. While it
	// is set, the release can be changed (released again at another time)
	// or undone (design §14).
	ReleasedFrom *ReleasedFrom
}

// ReleasedFrom is the state a released operation was in before its
// release: held or failed, with the reason.
type ReleasedFrom struct {
	State         State
	HoldReason    HoldReason
	FailureReason FailureReason
}

// Reason is its hold or failure reason.
func (r ReleasedFrom) Reason() string { return string(r.HoldReason) + string(r.FailureReason) }

// Describe names it as Operation.DescribeState does: "held (unknownOutcome)".
func (r ReleasedFrom) Describe() string { return describeState(r.State, r.Reason()) }

// ReleaseOrigin is what a release of o records it was released from: its
// own state and reason, or, when o's pending release is being changed,
// the origin that release already carries.
func (o Operation) ReleaseOrigin() ReleasedFrom {
	if o.CanUnrelease() {
		return *o.ReleasedFrom
	}
	return ReleasedFrom{State: o.State, HoldReason: o.HoldReason, FailureReason: o.FailureReason}
}

// Decision is what happens to an operation after an attempt: its next state
// and time, and what the scope learns. Made by the Policy, applied by the
// Store in one transaction fenced on the lease token.
type Decision struct {
	State         State
	NextAttemptAt time.Time // for Due states
	HoldReason    HoldReason
	FailureReason FailureReason
	// Reason explains the decision in words ("retry-after 57s honoured").
	Reason string
	Result *Result
	// MaybeApplied is true when this attempt may have applied its mutation
	// (an unknown outcome, or an ambiguous answer resent with the key): the
	// completion records it on the operation (Operation.MaybeApplied),
	// where it stays.
	MaybeApplied bool
	// Uncounted is true when this attempt does not count toward the retry
	// budget's MaxAttempts (a rate-limited answer): the completion gives
	// back the count the claim took.
	Uncounted bool
	// Scope holds what the scope learns from this attempt.
	Scope ScopeEffect
}

// ScopeEffect is what one attempt changes on its scope.
type ScopeEffect struct {
	// PauseUntil, when not zero, pauses the whole scope (never shortening
	// a pause already in place).
	PauseUntil  time.Time
	PauseReason string
	// Shared extends the pause to every scope of the scope's group: the
	// provider reported an app-wide limit.
	Shared bool
	// Hold, when set, holds the whole scope until a person acts.
	Hold HoldReason
	// Resource is the resource whose budget the answer spoke of ('' for
	// the profile's default budget), and ResourceKnown whether it spoke of
	// one at all (budget figures or a resource name): the store then
	// learns that requests of the operation's route spend that budget
	// (design §12).
	Resource      string
	ResourceKnown bool
	// Budget, when not nil, replaces the last figures of Resource's
	// budget.
	Budget *providers.Budget
	// BudgetPauseUntil, when not zero, pauses the requests spending
	// Resource's budget, and only those (never shortening a pause already
	// in place): its figures are spent, or the limit is the resource's.
	BudgetPauseUntil  time.Time
	BudgetPauseReason string
}

// Attempt is one send of an operation: written as an intent at claim time,
// completed after the provider answered.
type Attempt struct {
	OperationID string
	Number      int
	LeaseToken  int64
	StartedAt   time.Time
	// FinishedAt is zero while the attempt is in flight.
	FinishedAt time.Time
	Class      providers.Class
	Status     int
	Hint       *providers.Hint
	Reason     string
	Detail     string
	// Response is the provider's answer to this attempt when it did not
	// succeed, its body bounded by AttemptAnswerLimit; nil for a success
	// (the operation's Result has it) and without an answer.
	Response *Result
	// Decision is the state and time decided after this attempt, and why.
	DecidedState State
	DecidedAt    time.Time
	Decision     string
	// Stale is true when the attempt's completion came after its lease was
	// lost and was discarded.
	Stale bool
}

// Duration is how long the attempt took; zero while in flight.
func (a Attempt) Duration() time.Duration {
	if a.FinishedAt.IsZero() {
		return 0
	}
	return a.FinishedAt.Sub(a.StartedAt)
}

// Action is a person's manual act: who, when and why.
type Action struct {
	Actor  string
	At     time.Time
	Reason string
}

// AuditEntry records one manual action on an operation or a scope.
type AuditEntry struct {
	ID          int64
	OperationID string // empty for scope actions
	Scope       string
	Action      string // "release", "resolve", "cancel", "resume", "putScope"
	Actor       string
	Reason      string
	At          time.Time
	// Detail describes the change ("held → scheduled at …").
	Detail string
}
