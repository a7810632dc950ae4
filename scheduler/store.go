package scheduler

import (
	"context"
	"log/slog"
	"time"

	"pacer/providers"
)

// SystemActor is the actor of the audit entries the store writes itself:
// what a provider's answer did to a scope on its own (a hold, a pause of a
// scope that was not paused), beside the staff's and the API's actions.
const SystemActor = "pacer"

// Store keeps operations, attempts, scopes and the audit trail durable.
// Package db implements it on SQLite. Every method is one transaction:
// either all of its writes commit or none do. Times are passed in by the
// caller (the scheduler's clock); the store never reads a clock itself.
// Its errors name what failed and on what ("release op-1: …"): callers
// return them without a prefix of their own.
//
// Credentials are secret: only the claims (ClaimDue's, and ListRunning's
// and ListOrphaned's, which recovery sends again) carry their values, as their requests are
// sent with them. Every other scope a Store returns (PutScope, GetScope,
// ListScopes, ResumeScope) carries only the credentials' Type.
type Store interface {
	// PutScope creates or replaces the scope cfg.Name. Credentials are
	// stored encrypted. Replacing the credentials of a scope held with
	// HoldAuthRevoked lifts the hold. A pause in place and the last budget
	// figures survive a replace. created is true when the scope is new.
	PutScope(ctx context.Context, cfg ScopeConfig, act Action) (s Scope, created bool, err error)
	// GetScope returns the scope, with its credentials' Type only, and its
	// in-flight count, or ErrNotFound.
	GetScope(ctx context.Context, name string) (Scope, error)
	// ListScopes returns every scope, by name, with its credentials' Type
	// only.
	ListScopes(ctx context.Context) ([]Scope, error)
	// ResumeScope lifts every wait of the scope at once (design §11): its
	// hold, its pause, its learned budget's wait for the provider's reset
	// (the figures are forgotten until the next answer) and its rate slot,
	// and records act. It returns ErrNotFound for an unknown scope.
	ResumeScope(ctx context.Context, name string, act Action) (Scope, error)
	// PauseScope pauses the scope by a person's hand until until (design
	// §14): nothing of it is sent before then. A pause in place that ends
	// later (a provider's) is kept, never shortened; the pause reason says
	// it is a person's, with act's reason. It records act ("pause") and
	// returns ErrNotFound for an unknown scope. ResumeScope lifts it.
	PauseScope(ctx context.Context, name string, until time.Time, act Action) (Scope, error)

	// LoadToken returns the token state of the scope's renewing grant
	// (design §13), its token opened: the zero TokenState when it has
	// none; ErrNotFound for an unknown scope.
	LoadToken(ctx context.Context, scope string) (TokenState, error)
	// LeaseTokenRefresh takes the scope's token refresh lease for holder
	// until `until`, in one transaction, unless another holder's lease is
	// live at now; on a store several processes share, atomically across
	// them, so one refresh per scope runs at a time. It returns the token
	// state as it is then (a token another process stored while this one
	// waited) and whether holder now holds the lease. ErrNotFound for an
	// unknown scope.
	LeaseTokenRefresh(ctx context.Context, scope, holder string, now, until time.Time) (TokenState, bool, error)
	// FinishTokenRefresh records r, the end of the refresh holder made
	// under its lease, and releases the lease: r.Token sealed (when not
	// nil) with its expiry, and r.Result (when not empty) at r.At. It
	// changes nothing and returns false when holder no longer holds the
	// lease: it expired and another took it, or PutScope replaced the
	// scope's credentials, which forgets their token and its lease.
	FinishTokenRefresh(ctx context.Context, scope, holder string, r TokenRefresh) (bool, error)

	// Enqueue stores ops in one transaction, each with its own result:
	// created; existing (same ID and ContentHash: nothing written); or
	// rejected with ErrConflict (same ID, other content), ErrUnknownScope
	// or ErrIdentityInUse (wrapped, naming the other operation): when the
	// scope's provider is sent the request identity as an idempotency key
	// (ScopeIdempotency applies to the method), another operation of the
	// scope with the same RequestIdentity that is unfinished or was last
	// updated less than the key's retention before now holds it, since the
	// provider would answer with that one's stored result. A rejected item
	// writes nothing; the others still commit. now is the
	// creation time; each operation's deadline is NotBefore+Retry.MaxElapsed.
	Enqueue(ctx context.Context, ops []NewOperation, now time.Time) ([]EnqueueResult, error)
	// GetOperation returns the operation or ErrNotFound.
	GetOperation(ctx context.Context, id string) (Operation, error)
	// ListOperations returns one page, newest first (by creation, then ID).
	ListOperations(ctx context.Context, f OperationFilter) (OperationPage, error)
	// FindOperations returns the operations whose ID starts with prefix,
	// in ID order, at most limit (design §14: find an operation by its
	// ID), reading only the IDs that match.
	FindOperations(ctx context.Context, prefix string, limit int) ([]Operation, error)
	// ListAttempts returns the operation's attempts, oldest first, or
	// ErrNotFound when the operation does not exist.
	ListAttempts(ctx context.Context, id string) ([]Attempt, error)
	// ListAudit returns the audit entries of an operation (oldest first).
	ListAudit(ctx context.Context, operationID string) ([]AuditEntry, error)
	// ListScopeAudit returns the audit entries of a scope's own actions
	// (putScope, resume, releaseHeld), oldest first; none for an unknown
	// scope.
	ListScopeAudit(ctx context.Context, scope string) ([]AuditEntry, error)
	// CountOperations counts the operations ListOperations would list for
	// f over every page (f.Limit and f.Cursor are ignored).
	CountOperations(ctx context.Context, f OperationFilter) (int, error)
	// ReleaseHeldInScope releases every held operation of the scope at
	// `at`, in one transaction, as ReleaseOperation does for each (same
	// request identity, fresh retry budget, an audit entry each), and
	// records one scope audit entry ("releaseHeld") for act. It returns how
	// many it released; ErrNotFound for an unknown scope.
	ReleaseHeldInScope(ctx context.Context, scope string, at time.Time, act Action) (int, error)

	// ReleaseOperation moves an operation that CanRelease (held or failed)
	// to scheduled at `at`, with the same request identity and a fresh
	// retry budget (BudgetAttempts 0, Deadline at+Retry.MaxElapsed), clears
	// its hold and failure reasons (MaybeApplied stays) and records act
	// ("release"). A *TransitionError (ActRelease) for other states,
	// ErrNotFound for unknown IDs.
	ReleaseOperation(ctx context.Context, id string, at time.Time, act Action) (Operation, error)
	// ReleaseUnapplied releases, as ReleaseOperation does, an operation
	// that CanResolve (held for unknownOutcome) which a person found the
	// provider did not apply, so that it is sent again; the check and the
	// release are one transaction. A *TransitionError (ActResolve)
	// otherwise.
	ReleaseUnapplied(ctx context.Context, id string, at time.Time, act Action) (Operation, error)
	// ActOnOperations applies a (ActRelease at `at`, or ActCancel) to each
	// of the operations ids in one transaction, each audited as the single
	// action is; an operation whose state no longer allows it, or that no
	// longer exists, is skipped. It returns how many it changed.
	ActOnOperations(ctx context.Context, a ManualAction, ids []string, at time.Time, act Action) (int, error)
	// UnreleaseOperation undoes a release not sent yet (Operation.
	// CanUnrelease): the operation goes back to the state and reason it
	// was released from, and act ("unrelease") is recorded. The claim
	// clears what an operation was released from, so a release that was
	// sent cannot be undone.
	UnreleaseOperation(ctx context.Context, id string, act Action) (Operation, error)
	// ResolveOperation ends an operation that CanResolve (held for
	// unknownOutcome) as succeeded or as failed (FailureResolvedFailed),
	// clears MaybeApplied (a person settled it) and records act
	// ("resolve"). A *TransitionError (ActResolve) otherwise.
	ResolveOperation(ctx context.Context, id string, succeeded bool, act Action) (Operation, error)
	// CancelOperation cancels an operation that CanCancel and records act
	// ("cancel"); a *TransitionError (ActCancel) otherwise.
	CancelOperation(ctx context.Context, id string, act Action) (Operation, error)

	// ClaimDue leases up to p.Limit due operations in one immediate
	// transaction. It admits an operation only when its NextAttemptAt <=
	// p.Now, its scope is not held, the scope's ready time (the end of its
	// pause, of its learned budget's wait while spent to the reserve, and
	// its rate slot) has come, and the scope's running count is under
	// MaxConcurrent; NextWake waits by the same rule. A claimed operation's
	// NextAttemptAt is the moment it became eligible (its own time, or its
	// scope's ready time when later), so lateness counts from there. It takes operations fairly across scopes
	// (round robin, oldest due first). Each claim sets state running, bumps
	// LeaseToken, sets LeaseExpiresAt = p.Now+p.LeaseFor, increments Attempt
	// and BudgetAttempts, sets FirstSentAt if zero, and writes the attempt's
	// intent row, all before returning. Each claim's Scope carries the
	// credentials' values its request is sent with. The transaction is durable (on
	// disk) before ClaimDue returns when p.Durable holds for any claim;
	// when it cannot be made so, ClaimDue fails and none of the batch may
	// be sent, though the claims may stay committed (their leases expire
	// and are recovered as lost ones).
	ClaimDue(ctx context.Context, p ClaimParams) ([]Claim, error)
	// Complete applies completions in one transaction. Each is fenced: it
	// applies only when the operation is still running with the
	// completion's LeaseToken. A fenced-out completion changes no operation
	// or scope; its attempt row is marked stale. An applied one sets
	// MaybeApplied when its Decision says so (never unsets it) and gives
	// back the claim's BudgetAttempts count when its Decision is Uncounted.
	// applied[i] reports whether cs[i] took effect.
	Complete(ctx context.Context, cs []Completion) (applied []bool, err error)
	// CompleteAndClaim is Complete followed by ClaimDue in one transaction:
	// the engine's tick. The claim sees the completions' effects (their
	// slots are free again, the pauses and budgets they recorded hold), so
	// a finished worker's slot goes to a new claim in the same commit. A
	// failure rolls back both halves, except the durability failure of
	// ClaimDue: the transaction committed but could not be made durable,
	// and it returns applied with the error and no claims (none may be
	// sent; their leases expire and are recovered).
	CompleteAndClaim(ctx context.Context, cs []Completion, p ClaimParams) (applied []bool, claims []Claim, err error)
	// ListRunning returns running operations whose lease expires at or
	// before expiredBy (all running operations when expiredBy is zero),
	// with their scopes and credentials' values as ClaimDue gives them,
	// oldest lease first, at most limit.
	ListRunning(ctx context.Context, expiredBy time.Time, limit int) ([]Claim, error)
	// ListOrphaned returns running operations whose lease no live process
	// holds, as far as the store can tell, with their scopes and
	// credentials' values as ClaimDue gives them, oldest lease first, at
	// most limit: the leases recovery may take now (Engine.Recover at
	// start, and whenever the store's OnWake says there may be some). A
	// store one process owns under a lock (SQLite) returns every running
	// operation, its caller's own included: the caller skips those its
	// live workers hold. A store shared by several processes (PostgreSQL)
	// returns only the leases of processes known gone (design §10), never
	// a live one's.
	ListOrphaned(ctx context.Context, limit int) ([]Claim, error)
	// ExpireOverdue is one bounded batch, in one transaction, of design §11
	// "Deadlines end work even when it never ran": up to p.Limit operations
	// waiting (scheduled or waitingForBudget) whose Deadline is before
	// p.Before, earliest deadline first, whatever holds them back (their
	// own time, a paused or held scope), move to the state p.Decide gives
	// each (held or failed, with its reason; nothing else is accepted),
	// with no next attempt, updated at p.Now. Nothing is written when no
	// operation is overdue. ExpireResult.Next is the earliest deadline of
	// the operations still waiting (zero when none).
	ExpireOverdue(ctx context.Context, p ExpireParams) (ExpireResult, error)
	// NextWake returns the earliest time at which a claim could admit
	// something or a lease expires: the earliest, over the scopes that are
	// not held and have a free concurrency slot, of each one's earliest due
	// time (no earlier than its ready time, by the rule ClaimDue admits
	// by), and the earliest lease expiry. A claim at the time returned
	// admits something unless a lease expires then; it lies in the past
	// only when a claim now admits something. ok is false when nothing is
	// waiting.
	NextWake(ctx context.Context) (at time.Time, ok bool, err error)

	// PruneFinished is one bounded retention batch, in one short
	// transaction: it removes up to p.Limit operations that succeeded or
	// were canceled before p.Before (oldest first), with their attempts and
	// audit entries, and up to p.Limit of the oldest change-feed entries
	// recorded before p.Before. Held, failed and unfinished operations are
	// never removed. PruneResult.More says whether a batch was full, so
	// more may be left. On a database several processes share, one of them
	// (elected by the store) prunes; the others' calls remove nothing.
	PruneFinished(ctx context.Context, p PruneParams) (PruneResult, error)
	// CountByState counts operations by state and scopes by status at now,
	// for metrics; states and statuses with none are absent.
	CountByState(ctx context.Context, now time.Time) (Counts, error)

	// ListChanges returns up to f.Limit changes with Seq > f.After (of
	// f.Scope only, when set), in Seq order, and the Next to read after
	// (ChangeBatch). A read of one scope examines at most MaxChangeScan
	// changes in Seq order, whichever scope they belong to; its Next is
	// the last Seq it examined (More when it stopped at a bound), also when
	// none of them was the scope's. Seq is assigned at commit, is never
	// reused, and a change with a higher Seq never becomes visible before
	// one with a lower Seq: a reader that resumes after the Next it was
	// given misses nothing the store still holds. When f.After cannot
	// continue (CheckFeedCursor, judged in the same read as the page) it
	// returns the *FeedGapError instead.
	ListChanges(ctx context.Context, f ChangeFilter) (ChangeBatch, error)

	// OnCommit adds fn to the functions the store calls after each write
	// transaction it commits, once a read can see the commit (none is
	// called for a transaction rolled back). New links the change feed's
	// Notifier this way, so every writer's changes wake long-polls. fn is
	// called on the writing goroutine: it must return at once and must not
	// call the store.
	OnCommit(fn func())
	// OnWake adds fn to the functions the store calls when something this
	// process did not commit may call for the claim loop: another process
	// made work due (an enqueue, a release, a resume), the store may claim
	// again after it could not, or leases of a process gone may be
	// recovered (ListOrphaned). fn is called on one of the store's own
	// goroutines: it must return at once and must not call the store. A
	// store only one process writes (SQLite) never calls it.
	OnWake(fn func())
}

// EnqueueResult is the fate of one enqueued operation.
type EnqueueResult struct {
	Operation Operation
	// Created is true for a new operation, false for an existing one with
	// the same content.
	Created bool
	// Err is ErrConflict, ErrUnknownScope or ErrIdentityInUse (wrapped)
	// when rejected.
	Err error
}

// OperationFilter selects operations for ListOperations.
type OperationFilter struct {
	State State  // empty for any
	Scope string // empty for any
	// Reason matches the hold or failure reason; empty for any.
	Reason string
	// States, when not empty, selects operations in any of these states
	// (and State too, when set). Invalid states are a *ValidationError.
	States []State
	// CreatedAfter and UpdatedAfter select times at or after them,
	// CreatedBefore and UpdatedBefore times strictly before them (so
	// adjacent ranges tile); zero for no bound.
	CreatedAfter, CreatedBefore time.Time
	UpdatedAfter, UpdatedBefore time.Time
	// Limit bounds the page (1..1000).
	Limit int
	// Cursor is the opaque value of a previous page's Next; empty for the
	// first page.
	Cursor string
}

// OperationPage is one page of operations.
type OperationPage struct {
	Operations []Operation
	// Next is the cursor of the following page; empty on the last page.
	Next string
}

// ClaimParams bound one claim.
type ClaimParams struct {
	Now      time.Time
	Limit    int
	LeaseFor time.Duration
	// Durable reports whether a claim must be on disk (fsync'd) before its
	// request is sent: a mutation the provider cannot deduplicate, whose
	// claim lost to a power cut would make it look unsent. When it is true
	// for any claim of the batch, ClaimDue commits that transaction
	// durably (one sync for the batch); otherwise the commit may reach the
	// disk later, as any other. nil means no claim needs it.
	Durable func(Claim) bool
}

// Claim is one leased operation with its scope.
type Claim struct {
	Operation Operation
	Scope     Scope
}

// LogValue implements slog.LogValuer: the operation's identity and the
// scope with its credentials redacted.
func (c Claim) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("operation", c.Operation.ID), slog.String("state", string(c.Operation.State)),
		slog.Int("attempt", c.Operation.Attempt), slog.Any("scope", c.Scope),
	)
}

// Completion is the fenced result of one attempt.
type Completion struct {
	OperationID string
	LeaseToken  int64
	// Attempt is the attempt number completed.
	Attempt    int
	FinishedAt time.Time
	Outcome    providers.Outcome
	Decision   Decision
	// Response is the answer an operation that did not succeed keeps as
	// its LastOutcome.Response, and AttemptResponse the attempt's bounded
	// copy of it (see keptAnswers); both nil for a success or without an
	// answer, and the operation's last response is then cleared.
	Response, AttemptResponse *Result
}

// completion is the fenced completion of op's current attempt (its lease
// token and attempt number), finished at `at` with out and d.
func (op Operation) completion(at time.Time, out providers.Outcome, d Decision) Completion {
	return Completion{OperationID: op.ID, LeaseToken: op.LeaseToken, Attempt: op.Attempt, FinishedAt: at, Outcome: out, Decision: d}
}

// ExpireParams bound one batch of Store.ExpireOverdue.
type ExpireParams struct {
	// Now is when the batch runs: the expired operations' update time.
	Now time.Time
	// Before is the cut-off: operations whose deadline is strictly before
	// it are overdue.
	Before time.Time
	// Limit bounds the operations expired by one batch (at least 1).
	Limit int
	// Decide gives an overdue operation's end (Policy.Expire).
	Decide func(Operation) Decision
}

// ExpireResult is what one batch of Store.ExpireOverdue did.
type ExpireResult struct {
	// Expired counts the operations ended.
	Expired int
	// More is true when the batch was full: more may be overdue.
	More bool
	// Next is the earliest deadline among the operations still waiting;
	// zero when none waits.
	Next time.Time
}

// PruneParams bound one retention batch (Store.PruneFinished).
type PruneParams struct {
	// Before is the cut-off: operations finished, and changes recorded,
	// strictly before it are removed.
	Before time.Time
	// Limit bounds the operations, and separately the changes, removed by
	// one batch (at least 1).
	Limit int
}

// PruneResult counts the rows one retention batch removed.
type PruneResult struct {
	Operations int
	Attempts   int
	Audit      int
	Changes    int
	// More is true when the operations or the changes filled the batch's
	// limit: another batch may find more to remove.
	More bool
}

// Add sums two results; More is true when either's is.
func (r PruneResult) Add(o PruneResult) PruneResult {
	return PruneResult{
		Operations: r.Operations + o.Operations, Attempts: r.Attempts + o.Attempts,
		Audit: r.Audit + o.Audit, Changes: r.Changes + o.Changes, More: r.More || o.More,
	}
}

// Counts are the operations by state and the scopes by status at one time.
type Counts struct {
	Operations map[State]int
	Scopes     map[ScopeStatus]int
	// TokensExpiring counts the scopes whose renewing grant's token
	// expires within TokenExpiringWithin of now (expired ones included).
	TokensExpiring int
}

// TokenExpiringWithin is the horizon of Counts.TokensExpiring.
const TokenExpiringWithin = 5 * time.Minute
