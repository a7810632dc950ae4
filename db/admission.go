package db

// The admission rule, written once (design §5, §11): when a scope may next
// send, and what that means for the operations it holds back. ClaimDue,
// NextWake, the scope and operation read paths and the listing filters all
// compose these fragments; none of them restates a part of the rule. The
// fragments read scopes s (and, for the operation ones, operations o).

// scopePausedUntil is the end of the scope's pause, as Unix milliseconds:
// its own pause (a rate limit, possibly its group's) or, when its learned
// budget is spent down to the reserve, the provider's reset, whichever is
// later. A reserve without a known reset keeps nothing back (there is no
// end to wait for). It may lie in the past; it ignores a hold.
const scopePausedUntil = `MAX(s.paused_until,
	COALESCE(CASE WHEN s.budget_remaining <= s.budget_reserve THEN s.budget_reset_at END, 0))`

// scopeReadyAt is the earliest time, as Unix milliseconds, at which the
// scope may send its next request, a hold and its concurrency aside: the
// end of its pause and its next rate slot (configured spacing, or the
// pacing of its learned budget). It may lie in the past.
const scopeReadyAt = `MAX(` + scopePausedUntil + `, s.next_slot_at)`

// scopeRunning is the scope's in-flight count, from its leased rows.
const scopeRunning = `(SELECT COUNT(*) FROM operations r WHERE r.scope_id = s.id AND r.state = 'running')`

// dueStates are the states whose rows wait for their next_attempt_at.
const dueStates = `('scheduled', 'waitingForBudget')`

// admissionCTE is the common table admission (one row per scope that may
// send at or before the bound ?1: not held, its ready time reached, a free
// concurrency slot, due work) with the columns ClaimDue needs and admits_at,
// the time from which a claim admits something of the scope: the later of
// its earliest due operation and its ready time. ClaimDue admits the rows
// with admits_at <= now; NextWake waits for the least admits_at. The bound
// only spares the due look-ups of scopes that cannot take part.
const admissionCTE = `
	admission AS MATERIALIZED (
		SELECT id, free, rate_requests, rate_per_ms, next_slot_at, budget, reset_at, due, ready_at,
			MAX(due, ready_at) AS admits_at
		FROM (
			SELECT s.id, s.max_concurrent - ` + scopeRunning + ` AS free,
				s.rate_requests, s.rate_per_ms, s.next_slot_at,
				s.budget_remaining - s.budget_reserve AS budget, s.budget_reset_at AS reset_at,
				` + scopeReadyAt + ` AS ready_at,
				(SELECT o.next_attempt_at FROM operations o
				 WHERE o.scope_id = s.id AND o.state IN ` + dueStates + `
				 ORDER BY o.next_attempt_at LIMIT 1) AS due
			FROM scopes s
			WHERE s.hold_reason IS NULL AND ` + scopeReadyAt + ` <= ?1
		)
		WHERE due IS NOT NULL AND free > 0
	)`

// opHeldBackByScope is true for a due operation whose scope's ready time
// lies after its own next attempt time: its scope (a pause, a spent
// budget, a rate slot) holds it back.
const opHeldBackByScope = `(o.state IN ` + dueStates + ` AND ` + scopeReadyAt + ` > o.next_attempt_at)`

// opState is the state an operation reports: a due operation held back by
// its scope waits for budget, whatever its stored state; every other
// operation is as stored. Computed at read time, so a paused scope's
// backlog is never rewritten.
const opState = `CASE WHEN ` + opHeldBackByScope + ` THEN 'waitingForBudget' ELSE o.state END`

// opNextAttemptAt is the next attempt time an operation reports: for a due
// operation the later of its own time and its scope's ready time (the
// moment its scope admits it, opDueAt); as stored otherwise.
const opNextAttemptAt = `CASE WHEN o.state IN ` + dueStates + ` THEN ` + opDueAt + ` ELSE o.next_attempt_at END`

// opDueAt is when a due operation may leave: the later of its own time and
// its scope's ready time (scopeReadyAt).
const opDueAt = `MAX(o.next_attempt_at, ` + scopeReadyAt + `)`

// opDueAtBound is opDueAt with the scope's ready time bound as ?1 (read
// once per scope by the claim) instead of read from s.
const opDueAtBound = `MAX(o.next_attempt_at, ?1)`

// opBlockedBy names what beyond time keeps a due operation back: its
// scope's hold (scheduler.BlockedByScopeHeld); NULL for none.
const opBlockedBy = `CASE WHEN o.state IN ` + dueStates + ` AND s.hold_reason IS NOT NULL THEN 'scopeHeld' END`
