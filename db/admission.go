package db

// The admission rule, written once (design §5, §11, §12): when a scope's
// requests may next leave, and what that means for the operations it holds
// back. ClaimDue, NextWake, the scope and operation read paths and the
// listing filters all compose these fragments; none of them restates a part
// of the rule.
//
// A scope keeps one learned budget per resource its provider names
// (scope_budgets; resource '' is the default budget). An operation spends
// the budget of its resource (operations.resource), so admission is per
// budget: the scope's own gate (its pause, its configured rate slot) and
// the budget's gate (its pause, its reset while spent down to the
// reserve, its pacing slot). The fragments read scopes s and budgets b
// (the operation's budget for the operation fragments, the default budget
// for the scope ones; b may be NULL, a LEFT JOIN that found no row, and
// then keeps nothing back) and, for the operation ones, operations o.

// budgetGateAt is the end of what budget b keeps back, as Unix
// milliseconds: its own pause (a limit of its resource) and, while it is
// spent down to the scope's reserve, the provider's reset, whichever is
// later. A reserve without a known reset keeps nothing back (there is no
// end to wait for). It may lie in the past.
const budgetGateAt = `COALESCE(MAX(b.paused_until,
	COALESCE(CASE WHEN b.remaining <= s.budget_reserve THEN b.reset_at END, 0)), 0)`

// budgetSlotAt is budget b's next pacing slot: 0 without one.
const budgetSlotAt = `COALESCE(b.next_slot_at, 0)`

// scopePausedUntil is the end of the scope's pause as a person sees it, as
// Unix milliseconds: its own pause (a rate limit, possibly its group's,
// or a person's) and its default budget's gate (budgetGateAt, with b the
// default budget), whichever is later. A named resource's budget pauses
// only its own requests, not the scope. It may lie in the past; it
// ignores a hold.
const scopePausedUntil = `MAX(s.paused_until, ` + budgetGateAt + `)`

// readyAt is the earliest time, as Unix milliseconds, at which a request
// spending budget b may leave, a hold and the scope's concurrency aside:
// the end of the scope's pause, the scope's next rate slot (its configured
// spacing), the end of the budget's gate and its next pacing slot. It may
// lie in the past.
const readyAt = `MAX(s.paused_until, s.next_slot_at, ` + budgetGateAt + `, ` + budgetSlotAt + `)`

// scopeRunning is the scope's in-flight count, from its leased rows.
const scopeRunning = `(SELECT COUNT(*) FROM operations r WHERE r.scope_id = s.id AND r.state = 'running')`

// dueStates are the states whose rows wait for their next_attempt_at.
const dueStates = `('scheduled', 'waitingForBudget')`

// defaultBudgetJoin joins each scope s to its default budget b.
const defaultBudgetJoin = ` LEFT JOIN scope_budgets b ON b.scope_id = s.id AND b.resource = '' `

// operationBudgetJoin joins each operation o to the budget b it spends.
const operationBudgetJoin = ` LEFT JOIN scope_budgets b ON b.scope_id = o.scope_id AND b.resource = o.resource `

// admissionCTE is the common table admission: one row per budget whose
// requests may leave at or before the bound ?1 (its scope not held, its
// ready time reached, a free concurrency slot in its scope, due work
// spending it) with the columns ClaimDue needs and admits_at, the time from
// which a claim admits something of it: the later of its earliest due
// operation and its ready time. ClaimDue admits the rows with admits_at <=
// now; NextWake waits for the least admits_at. The bound only spares the
// due look-ups of budgets that cannot take part. Every scope has its
// default budget's row, so every operation's budget is enumerated.
const admissionCTE = `
	admission AS MATERIALIZED (
		SELECT id, resource, free, rate_requests, rate_per_ms, next_slot_at, budget_slot_at,
			budget, reset_at, due, ready_at, MAX(due, ready_at) AS admits_at
		FROM (
			SELECT s.id, b.resource, s.max_concurrent - ` + scopeRunning + ` AS free,
				s.rate_requests, s.rate_per_ms, s.next_slot_at, b.next_slot_at AS budget_slot_at,
				b.remaining - s.budget_reserve AS budget, b.reset_at,
				` + readyAt + ` AS ready_at,
				(SELECT o.next_attempt_at FROM operations o
				 WHERE o.scope_id = s.id AND o.resource = b.resource AND o.state IN ` + dueStates + `
				 ORDER BY o.next_attempt_at LIMIT 1) AS due
			FROM scope_budgets b JOIN scopes s ON s.id = b.scope_id
			WHERE s.hold_reason IS NULL AND ` + readyAt + ` <= ?1
		)
		WHERE due IS NOT NULL AND free > 0
	)`

// opHeldBackByScope is true for a due operation whose ready time (its
// scope's and its budget's, readyAt) lies after its own next attempt
// time: its scope or its budget (a pause, a spent budget, a rate slot)
// holds it back.
const opHeldBackByScope = `(o.state IN ` + dueStates + ` AND ` + readyAt + ` > o.next_attempt_at)`

// opState is the state an operation reports: a due operation held back by
// its scope or budget waits for budget, whatever its stored state; every
// other operation is as stored. Computed at read time, so a paused scope's
// backlog is never rewritten.
const opState = `CASE WHEN ` + opHeldBackByScope + ` THEN 'waitingForBudget' ELSE o.state END`

// opNextAttemptAt is the next attempt time an operation reports: for a due
// operation the later of its own time and its ready time (the moment its
// scope admits it, opDueAt); as stored otherwise.
const opNextAttemptAt = `CASE WHEN o.state IN ` + dueStates + ` THEN ` + opDueAt + ` ELSE o.next_attempt_at END`

// opDueAt is when a due operation may leave: the later of its own time and
// its ready time (readyAt).
const opDueAt = `MAX(o.next_attempt_at, ` + readyAt + `)`

// opDueAtBound is opDueAt with the ready time bound as ?1 (read once per
// budget by the claim) instead of read from s and b.
const opDueAtBound = `MAX(o.next_attempt_at, ?1)`

// opBlockedBy names what beyond time keeps a due operation back: its
// scope's hold (scheduler.BlockedByScopeHeld); NULL for none.
const opBlockedBy = `CASE WHEN o.state IN ` + dueStates + ` AND s.hold_reason IS NOT NULL THEN 'scopeHeld' END`
