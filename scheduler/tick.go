package scheduler

import (
	"context"
	"time"
)

// The engine's tick: the finished workers' completions and the next claim,
// committed in one transaction (Store.CompleteAndClaim), the finished
// workers' slots handed to the new claims.
const (
	// GatherWait bounds how long a finished attempt waits for others
	// before the loop commits it (with a claim for the slots that are
	// free): the price of one commit is shared by the attempts gathered.
	GatherWait = 2 * time.Millisecond
	// maxCommitTries bounds the ticks a finished attempt takes part in
	// that fail; then it is left to lease recovery (its lease expires).
	maxCommitTries = 4
)

// finishedAttempt is one worker's sent attempt, decided, waiting for a
// tick to commit it. Its worker's slot stays taken until then: the outcome
// is committed before the slot is reused.
type finishedAttempt struct {
	claim Claim
	comp  Completion
	took  time.Duration
	// failures counts the ticks carrying it that failed.
	failures int
}

// finish queues a worker's decided attempt for the next tick and tells the
// loop.
func (e *Engine) finish(f finishedAttempt) {
	e.finishedMu.Lock()
	e.finished = append(e.finished, f)
	e.finishedMu.Unlock()
	select {
	case e.finishedSignal <- struct{}{}:
	default:
	}
}

// pendingAttempts counts the finished attempts no tick has committed yet.
func (e *Engine) pendingAttempts() int {
	e.finishedMu.Lock()
	defer e.finishedMu.Unlock()
	return len(e.finished)
}

// gatherShare is how many finished attempts make the loop commit at once,
// without waiting GatherWait for more: a third of the workers.
func (e *Engine) gatherShare() int { return max(1, e.cfg.Workers/3) }

// tick commits the finished attempts and, when claim holds, claims as many
// due operations as there are free slots, theirs included, in one store
// transaction; then it starts the claims. It returns the number claimed and
// whether the claim was cut short by the free slots. A failed tick keeps
// its attempts for the next one, except those that have failed
// maxCommitTries times or whose lease has expired: they are left to lease
// recovery. The next tick after a failure commits without claiming, so a
// claim that keeps failing never keeps completions from being recorded.
func (e *Engine) tick(ctx context.Context, claim bool) (claimed int, full bool, err error) {
	e.tickMu.Lock()
	defer e.tickMu.Unlock()
	e.finishedMu.Lock()
	batch := e.finished
	e.finished = nil
	e.finishedMu.Unlock()

	now := e.clock.Now().UTC()
	var p ClaimParams
	free := 0
	if claim && !(e.tickFailed && len(batch) > 0) {
		free = cap(e.slots) - len(e.slots) + len(batch)
		p = ClaimParams{Now: now, Limit: free, LeaseFor: e.cfg.LeaseDuration, Durable: e.durableClaim}
	}
	if len(batch) == 0 && free == 0 {
		return 0, false, nil
	}
	cs := make([]Completion, len(batch))
	for i, f := range batch {
		cs[i] = f.comp
	}
	start := e.clock.Now()
	applied, claims, err := e.store.CompleteAndClaim(ctx, cs, p)
	e.tickFailed = err != nil
	switch {
	case err == nil || applied != nil:
		e.settle(batch, applied)
	default:
		e.keepForRetry(batch, now, err)
	}
	if err != nil {
		return 0, false, err
	}
	if free > 0 {
		e.cfg.Observer.ObserveClaim(e.clock.Now().Sub(start), len(claims))
	}
	for _, c := range claims {
		if due := c.Operation.NextAttemptAt; !due.IsZero() {
			e.cfg.Observer.ObserveDispatch(c.Scope.Provider, max(now.Sub(due), 0))
		}
		e.slots <- struct{}{}
		e.inFlight.Add(1)
		e.cfg.Observer.ObserveInFlight(1)
		e.sending.Add(1)
		e.settled.Add(1)
		e.holdLease(c.Operation)
		go e.work(c)
	}
	return len(claims), free > 0 && len(claims) == free, nil
}

// settle logs the committed attempts and frees their slots.
func (e *Engine) settle(batch []finishedAttempt, applied []bool) {
	for i, f := range batch {
		op, out, d := f.claim.Operation, f.comp.Outcome, f.comp.Decision
		log := e.log.With("operation", op.ID, "scope", f.claim.Scope.Name, "attempt", op.Attempt, "class", out.Class, "status", out.Status, "took", f.took)
		if applied[i] {
			log.Debug("attempt recorded", "state", d.State, "next", d.NextAttemptAt, "decision", d.Reason)
		} else {
			log.Warn("stale completion discarded: the lease was lost before the attempt finished", "leaseToken", op.LeaseToken)
		}
		e.release(op)
	}
}

// keepForRetry puts the attempts of a failed tick back for the next one,
// or gives up on those that failed too often or whose lease has expired.
func (e *Engine) keepForRetry(batch []finishedAttempt, now time.Time, err error) {
	var keep []finishedAttempt
	for _, f := range batch {
		f.failures++
		if f.failures < maxCommitTries && now.Before(f.claim.Operation.LeaseExpiresAt) {
			keep = append(keep, f)
			continue
		}
		op := f.claim.Operation
		e.log.Error("record attempt failed; the lease will expire and be recovered", "operation", op.ID, "scope", f.claim.Scope.Name, "attempt", op.Attempt, "err", err)
		e.release(op)
	}
	e.finishedMu.Lock()
	e.finished = append(keep, e.finished...)
	e.finishedMu.Unlock()
}

// release frees the slot of a worker whose attempt is settled.
func (e *Engine) release(op Operation) {
	e.dropLease(op)
	<-e.slots
	e.settled.Done()
}

// flush commits every finished attempt without claiming, retrying a
// failing store with a growing wait until each is committed or given up.
func (e *Engine) flush() {
	for failures := 0; e.pendingAttempts() > 0; {
		if _, _, err := e.tick(context.Background(), false); err != nil {
			failures++
			e.clock.Sleep(time.Duration(failures) * 250 * time.Millisecond)
		}
	}
}

// Wait blocks until every started attempt has been sent and committed (or
// given up to lease recovery): it commits what Run's loop has not.
func (e *Engine) Wait() {
	e.sending.Wait()
	e.flush()
	e.settled.Wait()
	e.tokens.wait() // the token refreshes started ahead of expiry
}
