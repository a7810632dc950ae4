package pgstore

// The admission rule in PostgreSQL's dialect (the SQLite store's
// db/admission.go says it in SQLite's; the contract suite keeps the two
// agreeing): when a scope's requests may next leave, and what that means
// for the operations it holds back. The fragments read scopes s and
// budgets b (the operation's budget for the operation fragments, the
// default budget for the scope ones; b may be NULL, a LEFT JOIN that
// found no row, and then keeps nothing back) and, for the operation ones,
// operations o. GREATEST ignores NULLs where SQLite's MAX returns NULL;
// each fragment is written so both give the same value.

// budgetGateAt is the end of what budget b keeps back: its own pause and,
// while it is spent down to the scope's reserve, the provider's reset.
const budgetGateAt = `COALESCE(GREATEST(b.paused_until,
	COALESCE(CASE WHEN b.remaining <= s.budget_reserve THEN b.reset_at END, 0)), 0)`

// budgetSlotAt is budget b's next pacing slot: 0 without one.
const budgetSlotAt = `COALESCE(b.next_slot_at, 0)`

// scopePausedUntil is the end of the scope's pause as a person sees it:
// its own pause and its default budget's gate, whichever is later.
const scopePausedUntil = `GREATEST(s.paused_until, ` + budgetGateAt + `)`

// readyAt is the earliest time at which a request spending budget b may
// leave, a hold and the scope's concurrency aside.
const readyAt = `GREATEST(s.paused_until, s.next_slot_at, ` + budgetGateAt + `, ` + budgetSlotAt + `)`

// scopeRunning is the scope's in-flight count, from its leased rows.
const scopeRunning = `(SELECT COUNT(*) FROM operations r WHERE r.scope_id = s.id AND r.state = 'running')`

// dueStates are the states whose rows wait for their next_attempt_at.
const dueStates = `('scheduled', 'waitingForBudget')`

// defaultBudgetJoin joins each scope s to its default budget b.
const defaultBudgetJoin = ` LEFT JOIN scope_budgets b ON b.scope_id = s.id AND b.resource = '' `

// operationBudgetJoin joins each operation o to the budget b it spends.
const operationBudgetJoin = ` LEFT JOIN scope_budgets b ON b.scope_id = o.scope_id AND b.resource = o.resource `

// admissionCTE is the common table admission: one row per budget whose
// requests may leave at or before the bound $1 (its scope not held, its
// ready time reached, a free concurrency slot in its scope, due work
// spending it), of the scopes $2 names (all when $2 is NULL), with the
// columns ClaimDue needs and admits_at, the later of its earliest due
// operation and its ready time.
const admissionCTE = `
	admission AS MATERIALIZED (
		SELECT id, resource, free, rate_requests, rate_per_ms, next_slot_at, budget_slot_at,
			budget, reset_at, due, ready_at, GREATEST(due, ready_at) AS admits_at
		FROM (
			SELECT s.id, b.resource, s.max_concurrent - ` + scopeRunning + ` AS free,
				s.rate_requests, s.rate_per_ms, s.next_slot_at, b.next_slot_at AS budget_slot_at,
				b.remaining - s.budget_reserve AS budget, b.reset_at,
				` + readyAt + ` AS ready_at,
				(SELECT o.next_attempt_at FROM operations o
				 WHERE o.scope_id = s.id AND o.resource = b.resource AND o.state IN ` + dueStates + `
				 ORDER BY o.next_attempt_at LIMIT 1) AS due
			FROM scope_budgets b JOIN scopes s ON s.id = b.scope_id
			WHERE s.hold_reason IS NULL AND ` + readyAt + ` <= $1
				AND ($2::bigint[] IS NULL OR s.id = ANY($2::bigint[]))
		) a
		WHERE due IS NOT NULL AND free > 0
	)`

// opHeldBackByScope is true for a due operation whose ready time lies
// after its own next attempt time.
const opHeldBackByScope = `(o.state IN ` + dueStates + ` AND ` + readyAt + ` > o.next_attempt_at)`

// opState is the state an operation reports: a due operation held back by
// its scope or budget waits for budget, whatever its stored state.
const opState = `CASE WHEN ` + opHeldBackByScope + ` THEN 'waitingForBudget' ELSE o.state END`

// opNextAttemptAt is the next attempt time an operation reports: for a due
// operation the later of its own time and its ready time.
const opNextAttemptAt = `CASE WHEN o.state IN ` + dueStates + ` THEN ` + opDueAt + ` ELSE o.next_attempt_at END`

// opDueAt is when a due operation may leave.
const opDueAt = `GREATEST(o.next_attempt_at, ` + readyAt + `)`

// opBlockedBy names what beyond time keeps a due operation back: its
// scope's hold; NULL for none.
const opBlockedBy = `CASE WHEN o.state IN ` + dueStates + ` AND s.hold_reason IS NOT NULL THEN 'scopeHeld' END`
