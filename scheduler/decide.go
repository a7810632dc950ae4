package scheduler

import (
	"fmt"
	"math"
	"time"

	"pacer/providers"
)

// Random returns a uniform number in [0, 1). The engine passes a locked
// source; tests pass a fixed value.
type Random func() float64

// uncertainMargin keeps a resend of an uncertain mutation clear of the end
// of the provider's idempotency retention.
const uncertainMargin = time.Minute

// Decide is the retry policy: what happens to op after an attempt whose
// outcome is out, at now. op is the operation as claimed (its Attempt and
// BudgetAttempts already count this attempt). idem is the scope profile's
// idempotency. Decide is pure: the same inputs give the same Decision.
func (p Policy) Decide(op Operation, idem providers.Idempotency, out providers.Outcome, now time.Time, rnd Random) Decision {
	var d Decision
	if b := out.Budget; b != nil {
		d.Scope.Budget, d.Scope.Resource, d.Scope.ResourceKnown = b, b.Resource, true
	}
	// A spent budget also pauses the requests spending it: the store keeps
	// the lower remaining figure only while answers name the same reset,
	// and a later answer with another reset (a relative reset, or a stale
	// answer of a request in flight when the budget ran out) replaces the
	// figures; it must not reopen the budget before this reset. A pause is
	// never shortened by a later answer.
	if b := out.Budget; b != nil && b.Remaining <= 0 && b.ResetAt.After(now) {
		d.Scope.BudgetPauseUntil, d.Scope.BudgetPauseReason = b.ResetAt, "budget spent: remaining 0 until reset"
	}
	class := out.Class
	switch {
	case class == providers.ClassUnknownOutcome && op.Kind == KindRead:
		class = providers.ClassTransient // a read has no effect to doubt
	case class == providers.ClassTransient && out.Ambiguous && op.Kind == KindMutation:
		// Safe to resend with the key, but the effect is in doubt all the
		// same: invariant 4 (the key's retention) and §11 apply.
		class = providers.ClassUnknownOutcome
	}
	switch class {
	case providers.ClassSuccess:
		d.State, d.Reason = StateSucceeded, "provider accepted the request"
	case providers.ClassPermanent:
		d.State, d.FailureReason = StateFailed, FailurePermanent
		d.Reason = "provider rejected the request; sending it again will not help"
	case providers.ClassAuthRevoked:
		d.State, d.HoldReason = StateHeld, HoldAuthRevoked
		d.Scope.Hold = HoldAuthRevoked
		d.Reason = "credentials refused: operation and scope held until credentials are replaced or the scope is resumed"
	case providers.ClassRateLimited:
		p.decideRateLimited(&d, op, out, now, rnd)
	case providers.ClassUnknownOutcome:
		p.decideUncertain(&d, op, idem, out, now, rnd)
	default: // transient, and anything unexpected
		p.decideTransient(&d, op, out, now, rnd, "transient failure")
	}
	d.MaybeApplied = class == providers.ClassUnknownOutcome
	d.Uncounted = class == providers.ClassRateLimited
	p.neverFailMaybeApplied(&d, op)
	d.NextAttemptAt = d.NextAttemptAt.Truncate(time.Millisecond)
	p.boundLearned(&d.Scope, now)
	return d
}

// neverFailMaybeApplied applies design §11 "Once a mutation may have
// applied, it never ends failed": a decision to fail an operation one of
// whose attempts (this one included) had an uncertain outcome becomes a
// hold for a person (unknownOutcome), whatever the cause of the failure
// (retry budget, deadline, a hint past it, a permanent answer). failed
// would tell a client that the effect did not happen.
func (p Policy) neverFailMaybeApplied(d *Decision, op Operation) {
	if d.State != StateFailed || !(op.MaybeApplied || d.MaybeApplied) {
		return
	}
	which := "an earlier attempt"
	if d.MaybeApplied {
		which = "this attempt"
	}
	d.State, d.HoldReason, d.FailureReason = StateHeld, HoldUnknownOutcome, ""
	d.NextAttemptAt = time.Time{}
	d.Reason = fmt.Sprintf("outcome unknown: %s may have applied, so it is held instead of failed (%s); a person must check the provider and resolve it", which, d.Reason)
}

// Expire decides for an operation whose deadline passed while it waited
// (scheduled or waitingForBudget, however long its scope held it back)
// at now: its retry budget is exhausted, so it fails, unless it is a
// mutation that may have applied, which is held (design §11).
func (p Policy) Expire(op Operation, now time.Time) Decision {
	var d Decision
	p.exhausted(&d, fmt.Sprintf("the deadline %s passed while it waited (%s, attempt %d); checked at %s",
		op.Deadline.Format(time.RFC3339), op.State, op.Attempt, now.UTC().Format(time.RFC3339)))
	p.neverFailMaybeApplied(&d, op)
	return d
}

// boundLearned clamps every wait an answer teaches the scope to the
// longest honoured hint (design §11: no answer freezes a scope beyond the
// policy's bounds): the pause, and the learned budget's reset, which the
// store waits for while the budget is spent to the reserve and paces the
// budget's rate slots by, and the budget's own pause. It is the one place these waits are bounded.
func (p Policy) boundLearned(e *ScopeEffect, now time.Time) {
	latest := now.Add(p.MaxHint)
	e.PauseUntil = minTime(e.PauseUntil, latest)
	e.BudgetPauseUntil = minTime(e.BudgetPauseUntil, latest)
	if b := e.Budget; b != nil && b.ResetAt.After(latest) {
		bounded := *b
		bounded.ResetAt = latest
		e.Budget = &bounded
	}
}

// decideRateLimited waits for the provider's hint (or the default delay),
// bounded by MinHint and MaxHint, spread by jitter; the scope pauses too.
func (p Policy) decideRateLimited(d *Decision, op Operation, out providers.Outcome, now time.Time, rnd Random) {
	if h := out.Hint; h.Usable() && h.At.After(op.Deadline) {
		p.exhausted(d, fmt.Sprintf("%s %q asks to wait until after the deadline %s", h.Source, h.Raw, op.Deadline.Format(time.RFC3339)))
		return
	}
	wait, why := p.honouredWait(out.Hint, now, p.RateLimitDelay)
	until := now.Add(wait)
	if until.After(op.Deadline) {
		p.exhausted(d, fmt.Sprintf("rate limited until %s, after the deadline %s", until.Format(time.RFC3339), op.Deadline.Format(time.RFC3339)))
		return
	}
	switch {
	case out.Shared:
		d.Scope.PauseUntil, d.Scope.Shared = until, true
		d.Scope.PauseReason = "rate limited: " + why + " (a limit shared by every scope of the group)"
	case out.Budget != nil && out.Budget.Remaining <= 0:
		// The limit of one budget, spent (a named resource's or the
		// default one): the scope's other budgets go on. Any other limit
		// (GitHub's secondary limits, whatever resource the answer
		// names) is the scope's.
		d.Scope.BudgetPauseUntil = maxTime(d.Scope.BudgetPauseUntil, until)
		d.Scope.BudgetPauseReason = "rate limited: " + why
	default:
		d.Scope.PauseUntil, d.Scope.PauseReason = until, "rate limited: "+why
	}
	next := until.Add(jitter(p.Spread, rnd))
	if next.After(op.Deadline) {
		next = until
	}
	d.State, d.NextAttemptAt = StateWaitingForBudget, next
	d.Reason = "rate limited: " + why
}

// decideTransient backs off exponentially with full jitter, never before
// a usable hint, within the attempts and elapsed budget.
func (p Policy) decideTransient(d *Decision, op Operation, out providers.Outcome, now time.Time, rnd Random, what string) {
	if op.BudgetAttempts >= op.Retry.MaxAttempts {
		p.exhausted(d, fmt.Sprintf("%s after %d of %d attempts", what, op.BudgetAttempts, op.Retry.MaxAttempts))
		return
	}
	wait := p.Backoff(op.BudgetAttempts, rnd)
	why := fmt.Sprintf("%s; backoff %s", what, wait.Round(time.Millisecond))
	if h := out.Hint; h.Usable() {
		if h.At.After(op.Deadline) {
			p.exhausted(d, fmt.Sprintf("%s; %s %q asks to wait until after the deadline %s", what, h.Source, h.Raw, op.Deadline.Format(time.RFC3339)))
			return
		}
		if hw, hwhy := p.honouredWait(out.Hint, now, 0); hw > wait {
			wait, why = hw, what+"; "+hwhy
		}
	}
	next := now.Add(wait)
	if next.After(op.Deadline) {
		p.exhausted(d, fmt.Sprintf("%s; next attempt %s would be after the deadline %s", what, next.Format(time.RFC3339), op.Deadline.Format(time.RFC3339)))
		return
	}
	d.State, d.NextAttemptAt, d.Reason = StateScheduled, next, why
}

// decideUncertain applies invariant 4: an uncertain mutation is resent only
// with the same idempotency key, inside the provider's retention window,
// and only when the provider did not bind this very answer to the key.
// Otherwise it is held for a person.
func (p Policy) decideUncertain(d *Decision, op Operation, idem providers.Idempotency, out providers.Outcome, now time.Time, rnd Random) {
	hold := func(why string) {
		d.State, d.HoldReason = StateHeld, HoldUnknownOutcome
		d.NextAttemptAt = time.Time{}
		d.Reason = "outcome unknown: " + why + "; a person must check the provider and resolve it"
	}
	switch {
	case !idem.Applies(op.Request.Method):
		hold("the provider honours no idempotency key for " + op.Request.Method)
		return
	case out.KeyBound:
		hold("the provider stored this answer under the idempotency key, so resending cannot settle it")
		return
	}
	p.decideTransient(d, op, out, now, rnd, "uncertain outcome, resend with the same idempotency key")
	if d.State == StateFailed {
		return // the budget is spent: Decide holds it (neverFailMaybeApplied)
	}
	keyExpires := op.FirstSentAt.Add(idem.Retention - uncertainMargin)
	if op.FirstSentAt.IsZero() || d.NextAttemptAt.After(keyExpires) {
		hold(fmt.Sprintf("the idempotency key (first sent %s) would be past the provider's %s retention", op.FirstSentAt.Format(time.RFC3339), idem.Retention))
	}
}

// NotSent decides for an attempt its worker did not send because an answer
// read after the claim paused the scope (the worker's note of it holds
// sends back until `until`): nothing left, so the operation waits (for
// until, and behind the scope's pause once it is committed) and the
// attempt does not count toward its retry budget.
func (p Policy) NotSent(op Operation, until time.Time) (providers.Outcome, Decision) {
	return p.notSent(op, until, "not sent: an answer read after its claim paused the scope; it waits for the pause")
}

// notSent decides for an attempt its worker did not send, for why, as
// NotSent does: the operation waits until until, the attempt uncounted.
func (p Policy) notSent(op Operation, until time.Time, why string) (providers.Outcome, Decision) {
	out := providers.Outcome{Class: providers.ClassRateLimited, Reason: "not sent", Detail: why}
	d := Decision{State: StateWaitingForBudget, NextAttemptAt: until, Uncounted: true, Reason: why}
	if until.After(op.Deadline) {
		p.exhausted(&d, "the scope's pause ends after the deadline")
	}
	p.neverFailMaybeApplied(&d, op)
	return out, d
}

// Recover decides for an operation whose lease was lost: its process died
// or its lease expired. A read is rescheduled at once; a mutation may have
// been sent, so it follows invariant 4 as an uncertain outcome.
func (p Policy) Recover(op Operation, idem providers.Idempotency, now time.Time, why string) (providers.Outcome, Decision) {
	out := providers.Outcome{Class: providers.ClassTransient, Reason: "interrupted", Detail: why}
	if op.Kind == KindMutation {
		out.Class = providers.ClassUnknownOutcome
		d := p.Decide(op, idem, out, now, func() float64 { return 0 })
		if d.State == StateScheduled {
			d.NextAttemptAt = now.Truncate(time.Millisecond)
		}
		return out, d
	}
	d := Decision{State: StateScheduled, NextAttemptAt: now.Truncate(time.Millisecond), Reason: "interrupted (" + why + "); read rescheduled at once"}
	if now.After(op.Deadline) {
		p.exhausted(&d, "interrupted after the deadline")
	}
	p.neverFailMaybeApplied(&d, op)
	return out, d
}

func (p Policy) exhausted(d *Decision, why string) {
	d.State, d.FailureReason = StateFailed, FailureRetryBudgetExhausted
	d.NextAttemptAt = time.Time{}
	d.Reason = "retry budget exhausted: " + why
}

// Backoff is the full-jitter exponential backoff before attempt n+1 after
// n attempts: uniform in [MinHint, min(BackoffMax, BackoffBase·2^(n-1))].
func (p Policy) Backoff(n int, rnd Random) time.Duration {
	ceiling := float64(p.BackoffMax)
	if n >= 1 && n < 63 {
		ceiling = math.Min(ceiling, float64(p.BackoffBase)*math.Exp2(float64(n-1)))
	}
	wait := time.Duration(rnd() * ceiling)
	return max(wait, p.MinHint)
}

// honouredWait turns a hint into a wait within [MinHint, MaxHint]; with an
// unusable hint it is fallback (0 means MinHint). It says what it did.
func (p Policy) honouredWait(h providers.Hint, now time.Time, fallback time.Duration) (time.Duration, string) {
	if !h.Usable() {
		why := fmt.Sprintf("no usable hint, default wait %s", max(fallback, p.MinHint))
		if h.Source != "" {
			why = fmt.Sprintf("%s %q unusable (%s), default wait %s", h.Source, h.Raw, h.Note, max(fallback, p.MinHint))
		}
		return max(fallback, p.MinHint), why
	}
	wait := h.At.Sub(now)
	why := fmt.Sprintf("%s %q honoured (%s)", h.Source, h.Raw, wait.Round(time.Millisecond))
	switch {
	case wait < p.MinHint:
		wait, why = p.MinHint, fmt.Sprintf("%s %q raised to the minimum %s", h.Source, h.Raw, p.MinHint)
	case wait > p.MaxHint:
		wait, why = p.MaxHint, fmt.Sprintf("%s %q clamped to the maximum %s", h.Source, h.Raw, p.MaxHint)
	}
	return wait, why
}

func jitter(spread time.Duration, rnd Random) time.Duration {
	if spread <= 0 {
		return 0
	}
	return time.Duration(rnd() * float64(spread))
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
