package pgstore

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"pacer/scheduler"
)

// eligibleBudget is one budget of a scope whose requests may leave now,
// with what its scope and the budget allow (see the SQLite store's
// db/claim.go, whose admission this is).
type eligibleBudget struct {
	scheduler.AdmissionBudget
	resetAt int64 // when the learned budget resets; meaningful only with HasBudget
	readyAt int64 // the budget's ready time as the claim read it
}

// claimScopeSpread is how many more scopes than its limit a claim tries
// to lock, so that claimers of several processes that find the same
// scopes locked spread over others.
const claimScopeSpread = 2

// ClaimDue leases up to p.Limit due operations in one transaction (see
// scheduler.Store), admitting as the SQLite store does (round robin over
// scopes, oldest due first, caps, rate slots, learned budgets). What
// several processes need: the claim first locks the rows of the scopes it
// may admit from (FOR NO KEY UPDATE SKIP LOCKED: a scope another claim
// holds is left to it), then, in a later statement that sees every claim
// committed before it got the locks, counts their running operations,
// rate slots and budgets, and takes the operations (FOR UPDATE SKIP
// LOCKED, as a manual action may hold one). A commit is durable before
// ClaimDue returns when p.Durable holds for a claim (synchronous_commit on
// for that transaction, whatever the server's setting).
func (s *Store) ClaimDue(ctx context.Context, p scheduler.ClaimParams) ([]scheduler.Claim, error) {
	if p.Limit <= 0 {
		return nil, nil
	}
	_, claims, err := s.tick(ctx, nil, p)
	if err != nil {
		return nil, fmt.Errorf("claim due operations: %w", err)
	}
	return claims, nil
}

// CompleteAndClaim applies cs as Complete does, then claims as ClaimDue
// does, in one transaction (see scheduler.Store).
func (s *Store) CompleteAndClaim(ctx context.Context, cs []scheduler.Completion, p scheduler.ClaimParams) ([]bool, []scheduler.Claim, error) {
	applied, claims, err := s.tick(ctx, cs, p)
	if err != nil {
		return nil, nil, fmt.Errorf("complete and claim: %w", err)
	}
	return applied, claims, nil
}

// tick completes cs, then claims up to p.Limit (none when it is 0), in one
// transaction.
func (s *Store) tick(ctx context.Context, cs []scheduler.Completion, p scheduler.ClaimParams) ([]bool, []scheduler.Claim, error) {
	if p.Limit > 0 && p.LeaseFor < time.Millisecond {
		return nil, nil, fmt.Errorf("lease duration %s is too short", p.LeaseFor)
	}
	if len(cs) == 0 && p.Limit <= 0 {
		return nil, nil, nil
	}
	var (
		applied []bool
		claims  []scheduler.Claim
	)
	err := s.writeHot(ctx, func(tx pgx.Tx) error {
		var err error
		if applied, err = completeAll(ctx, tx, cs); err != nil {
			return err
		}
		claims = nil
		if p.Limit > 0 {
			if claims, err = s.claimDue(ctx, tx, p); err != nil {
				return err
			}
			if p.Durable != nil && slices.ContainsFunc(claims, p.Durable) {
				if _, err := tx.Exec(ctx, `SET LOCAL synchronous_commit TO on`); err != nil {
					return err
				}
			}
			if s.claimCommitting != nil {
				var sync, plans string
				if err := tx.QueryRow(ctx, `SELECT current_setting('synchronous_commit'), current_setting('plan_cache_mode')`).
					Scan(&sync, &plans); err != nil {
					return err
				}
				s.claimCommitting(claims, sync, plans)
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	if len(cs) == 0 {
		applied = nil
	}
	return applied, claims, nil
}

func (s *Store) claimDue(ctx context.Context, tx pgx.Tx, p scheduler.ClaimParams) ([]scheduler.Claim, error) {
	now, node, ok, err := s.claimGuard(ctx, tx, millis(p.Now))
	if err != nil || !ok {
		return nil, err
	}
	leaseExpires := now + p.LeaseFor.Milliseconds()
	locked, err := lockAdmissibleScopes(ctx, tx, now, p.Limit*claimScopeSpread)
	if err != nil || len(locked) == 0 {
		return nil, err
	}
	eligible, err := findEligibleBudgets(ctx, tx, now, p.Limit, locked)
	if err != nil {
		return nil, err
	}
	// Each budget's oldest due operations, as many as it may take; then
	// scheduler.Admit's choice among them.
	budgets := make([]scheduler.AdmissionBudget, len(eligible))
	for i := range eligible {
		b := &eligible[i]
		if b.HasBudget {
			if b.PacedMS, err = budgetPacing(ctx, tx, b, now); err != nil {
				return nil, err
			}
		}
		budgets[i] = b.AdmissionBudget
	}
	due, err := findDueOperations(ctx, tx, eligible, budgets, now, p.Limit)
	if err != nil {
		return nil, err
	}
	picked := scheduler.Admit(budgets, due, p.Limit)
	rowIDs := make([]int64, len(picked))
	eligibleAt := make(map[int64]int64, len(picked))
	for i, d := range picked {
		rowIDs[i] = d.ID
		eligibleAt[d.ID] = d.Eligible
	}
	ops, err := claimOperations(ctx, tx, rowIDs, now, leaseExpires, node)
	if err != nil {
		return nil, err
	}
	for i, r := range ops {
		ops[i].NextAttemptAt = fromMillis(eligibleAt[r.id])
	}
	slots, spent := scheduler.Admitted(budgets, picked, now)
	if err := spendSlots(ctx, tx, slots, spent); err != nil {
		return nil, err
	}
	return s.withScopes(ctx, tx, ops)
}

// claimGuard begins a claim of this node: it returns the claim's now, the
// earlier of the caller's now and the database's clock (so a node whose
// clock runs ahead never claims early), the node's id, and whether the
// node may claim at all: its dedicated session holds its lock (a node
// that lost it claims nothing until it has it again) and its registration
// outlasts the longest request it may send (claimReserve). The claim holds
// the node's guard lock shared until it commits, so a recovery deciding
// the node is dead (deadNodes) waits for it, and a claim after that one
// finds the lock free.
func (s *Store) claimGuard(ctx context.Context, tx pgx.Tx, now int64) (int64, int32, bool, error) {
	id := int32(s.node.id.Load())
	if !s.node.held.Load() || id == 0 {
		return 0, 0, false, nil
	}
	b := &pgx.Batch{}
	b.Queue(`SELECT pg_advisory_xact_lock_shared($1, $2)`, guardLockClass, id)
	b.Queue(`SELECT NOT pg_try_advisory_xact_lock($1, $2),
		COALESCE((SELECT expires_at FROM nodes WHERE id = $2) - `+dbNowMS+` >= $3, false),
		LEAST($4::bigint, `+dbNowMS+`)`, nodeLockClass, id, s.claimReserve().Milliseconds(), now)
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return 0, 0, false, fmt.Errorf("take the node's guard: %w", err)
	}
	var held, fresh bool
	if err := br.QueryRow().Scan(&held, &fresh, &now); err != nil {
		return 0, 0, false, fmt.Errorf("check the node's lock: %w", err)
	}
	return now, id, held && fresh, nil
}

// lockAdmissibleScopes locks, in row ID order, up to limit of the scopes
// that may admit something at now as this statement's snapshot sees them,
// skipping those another transaction holds, and returns their IDs.
func lockAdmissibleScopes(ctx context.Context, tx pgx.Tx, now int64, limit int) ([]int64, error) {
	rows, err := tx.Query(ctx, `
		WITH `+admissionCTE+`,
		candidates AS (
			SELECT id, MIN(due) AS due FROM admission WHERE admits_at <= $1
			GROUP BY id ORDER BY MIN(due), id LIMIT $3
		)
		SELECT s.id FROM scopes s WHERE s.id IN (SELECT id FROM candidates)
		ORDER BY s.id
		FOR NO KEY UPDATE OF s SKIP LOCKED`, now, nil, limit)
	if err != nil {
		return nil, fmt.Errorf("lock the scopes to admit from: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

// findEligibleBudgets returns up to limit budgets of the scopes scopeIDs
// whose requests may leave at now and have due work, the one with the
// oldest due work first: the rows of the admission table whose admits_at
// has come.
func findEligibleBudgets(ctx context.Context, tx pgx.Tx, now int64, limit int, scopeIDs []int64) ([]eligibleBudget, error) {
	rows, err := tx.Query(ctx, `
		WITH `+admissionCTE+`
		SELECT id, resource, free, rate_requests, rate_per_ms, next_slot_at, COALESCE(budget_slot_at, 0), budget,
			CASE WHEN reset_at > $1 THEN reset_at END, ready_at
		FROM admission
		WHERE admits_at <= $1
		ORDER BY due, id, resource COLLATE "C"
		LIMIT $3`, now, scopeIDs, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []eligibleBudget
	for rows.Next() {
		var (
			b                                eligibleBudget
			requests, perMS, budget, resetAt *int64
		)
		if err := rows.Scan(&b.Scope, &b.Resource, &b.Free, &requests, &perMS, &b.NextSlotAt, &b.BudgetSlotAt, &budget, &resetAt, &b.readyAt); err != nil {
			return nil, err
		}
		if budget != nil && resetAt != nil {
			b.HasBudget, b.Budget, b.resetAt = true, *budget, *resetAt
		}
		if requests != nil {
			b.SlotMS = scheduler.RateSpacingMS(*requests, *perMS)
		}
		out = append(out, b)
	}
	return out, rows.Err()
}

// budgetPacing returns the spacing that spreads b's learned budget over
// the time left until its reset (scheduler.BudgetPacingMS), counting the
// work due before the reset up to budget+1 rows.
func budgetPacing(ctx context.Context, tx pgx.Tx, b *eligibleBudget, now int64) (int64, error) {
	var due int64
	err := tx.QueryRow(ctx, `
		SELECT COUNT(*) FROM (
			SELECT 1 FROM operations
			WHERE scope_id = $1 AND resource = $2 AND state IN `+dueStates+` AND next_attempt_at <= $3
			LIMIT $4) d`, b.Scope, b.Resource, b.resetAt, b.Budget+1).Scan(&due)
	if err != nil {
		return 0, fmt.Errorf("count work due before the budget reset: %w", err)
	}
	return scheduler.BudgetPacingMS(due, b.Budget, b.resetAt, now), nil
}

// findDueOperations locks and returns, for each budget of eligible (its
// AdmissionBudget in budgets), up to as many operations due at now that
// spend it as it may take of limit, oldest due first, skipping rows
// another transaction holds (a manual action), in one statement: each
// with the index of its budget.
func findDueOperations(ctx context.Context, tx pgx.Tx, eligible []eligibleBudget, budgets []scheduler.AdmissionBudget, now int64, limit int) ([]scheduler.DueOperation, error) {
	var (
		index     []int32
		scopeIDs  []int64
		resources []string
		ready     []int64
		take      []int32
	)
	for i, b := range eligible {
		if n := budgets[i].Take(limit); n > 0 {
			index, scopeIDs, resources = append(index, int32(i)), append(scopeIDs, b.Scope), append(resources, b.Resource)
			ready, take = append(ready, b.readyAt), append(take, int32(n))
		}
	}
	if len(index) == 0 {
		return nil, nil
	}
	rows, err := tx.Query(ctx, `
		SELECT e.k, d.id, d.next_attempt_at, GREATEST(d.next_attempt_at, e.ready_at)
		FROM unnest($1::int[], $2::bigint[], $3::text[], $4::bigint[], $5::int[]) AS e (k, scope_id, resource, ready_at, n)
		CROSS JOIN LATERAL (
			SELECT o.id, o.next_attempt_at FROM operations o
			WHERE o.scope_id = e.scope_id AND o.resource = e.resource AND o.state IN `+dueStates+` AND o.next_attempt_at <= $6
			ORDER BY o.next_attempt_at, o.id
			LIMIT e.n
			FOR UPDATE OF o SKIP LOCKED) d
		ORDER BY e.k, d.next_attempt_at, d.id`, index, scopeIDs, resources, ready, take, now)
	if err != nil {
		return nil, fmt.Errorf("lock the due operations: %w", err)
	}
	defer rows.Close()
	var ops []scheduler.DueOperation
	for rows.Next() {
		var (
			d scheduler.DueOperation
			k int32
		)
		if err := rows.Scan(&k, &d.ID, &d.NextAttemptAt, &d.Eligible); err != nil {
			return nil, fmt.Errorf("lock the due operations: %w", err)
		}
		d.Budget = int(k)
		ops = append(ops, d)
	}
	return ops, rows.Err()
}

// spendSlots records what a claim took of its scopes' rate slots and
// budgets: two statements over arrays, each only when it has rows.
func spendSlots(ctx context.Context, tx pgx.Tx, slots []scheduler.RateSlot, spent []scheduler.BudgetSpent) error {
	if len(slots) > 0 {
		ids, at := make([]int64, len(slots)), make([]int64, len(slots))
		for i, sl := range slots {
			ids[i], at[i] = sl.Scope, sl.NextSlotAt
		}
		if _, err := tx.Exec(ctx, `UPDATE scopes s SET next_slot_at = u.at
			FROM unnest($1::bigint[], $2::bigint[]) AS u (id, at) WHERE s.id = u.id`, ids, at); err != nil {
			return fmt.Errorf("take the rate slots: %w", err)
		}
	}
	if len(spent) > 0 {
		var (
			ids, n, at []int64
			resources  []string
		)
		for _, b := range spent {
			ids, resources, n, at = append(ids, b.Scope), append(resources, b.Resource), append(n, b.Spent), append(at, b.NextSlotAt)
		}
		if _, err := tx.Exec(ctx, `UPDATE scope_budgets b SET remaining = b.remaining - u.n, next_slot_at = u.at
			FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::bigint[]) AS u (scope_id, resource, n, at)
			WHERE b.scope_id = u.scope_id AND b.resource = u.resource`, ids, resources, n, at); err != nil {
			return fmt.Errorf("spend the budgets: %w", err)
		}
	}
	return nil
}

// claimedColumns is operationColumns as claimOperations reads them back:
// from the operations row alone, with empty placeholders for the scope's
// name and provider (withScopes fills them in) and no blocked-by.
const claimedColumns = `o.id, o.scope_id, o.operation_id, '', '', o.kind, o.method, o.path,
	o.headers, o.body, o.content_type, o.request_identity, o.state, o.attempt, o.budget_attempts,
	o.next_attempt_at, o.hold_reason, o.failure_reason, o.last_outcome, o.created_at, o.updated_at,
	o.deadline, o.max_attempts, o.max_elapsed_ms, o.result, o.lease_token, o.lease_expires_at,
	o.first_sent_at, o.content_hash, o.maybe_applied, NULL::text, o.released_from_state, o.released_from_reason`

// claimOperations leases the locked due operations rowIDs to node and
// writes their attempt intents, in one statement, returning them in the
// order of rowIDs.
func claimOperations(ctx context.Context, tx pgx.Tx, rowIDs []int64, now, leaseExpires int64, node int32) ([]opRow, error) {
	if len(rowIDs) == 0 {
		return nil, nil
	}
	rows, err := tx.Query(ctx, `
		WITH u AS (
			UPDATE operations o SET state = 'running', lease_token = o.lease_token + 1, lease_expires_at = $1,
				attempt = o.attempt + 1, budget_attempts = o.budget_attempts + 1,
				first_sent_at = COALESCE(o.first_sent_at, $2), updated_at = $2,
				released_from_state = NULL, released_from_reason = NULL, lease_node = $4
			FROM unnest($3::bigint[]) AS c (id)
			WHERE o.id = c.id AND o.state IN `+dueStates+`
			RETURNING `+claimedColumns+`
		),
		intents AS (
			INSERT INTO attempts (operation_id, number, lease_token, started_at)
			SELECT id, attempt, lease_token, $2 FROM u
		)
		SELECT * FROM u`, leaseExpires, now, rowIDs, node)
	if err != nil {
		return nil, fmt.Errorf("lease the due operations: %w", err)
	}
	byID := make(map[int64]opRow, len(rowIDs))
	for rows.Next() {
		r, err := scanOperation(rows)
		if err != nil {
			rows.Close()
			return nil, err
		}
		byID[r.id] = r
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	ops := make([]opRow, len(rowIDs))
	for i, id := range rowIDs {
		r, ok := byID[id]
		if !ok {
			return nil, fmt.Errorf("operation row %d is no longer due", id) // cannot happen: locked by this transaction
		}
		ops[i] = r
	}
	return ops, nil
}

// withScopes pairs operations with their scopes (claimScopes).
func (s *Store) withScopes(ctx context.Context, tx pgx.Tx, ops []opRow) ([]scheduler.Claim, error) {
	if len(ops) == 0 {
		return nil, nil
	}
	var ids []int64
	seen := map[int64]bool{}
	for _, r := range ops {
		if !seen[r.scopeID] {
			seen[r.scopeID] = true
			ids = append(ids, r.scopeID)
		}
	}
	scopes, err := s.claimScopes(ctx, tx, ids)
	if err != nil {
		return nil, err
	}
	claims := make([]scheduler.Claim, 0, len(ops))
	for _, r := range ops {
		sc := scopes[r.scopeID]
		r.Operation.Scope, r.Operation.Provider = sc.Name, sc.Provider
		claims = append(claims, scheduler.Claim{Operation: r.Operation, Scope: sc})
	}
	return claims, nil
}

// ListRunning returns running operations whose lease expires at or before
// expiredBy (all of them when expiredBy is zero), with their scopes and
// their credentials' values, oldest lease first, at most limit (no bound
// when limit <= 0). A lease counts as expired only once it has by the
// database's clock too: a node whose clock runs ahead never takes a lease
// early.
func (s *Store) ListRunning(ctx context.Context, expiredBy time.Time, limit int) ([]scheduler.Claim, error) {
	var claims []scheduler.Claim
	err := s.read(ctx, func(tx pgx.Tx) error {
		var q query
		q.where("o.state = 'running'")
		if !expiredBy.IsZero() { // by the earlier of the caller's and the database's clock
			q.where("o.lease_expires_at <= LEAST(" + q.arg(millis(expiredBy)) + "::bigint, " + dbNowMS + ")")
		}
		sql := `SELECT ` + operationColumns + operationFrom + q.whereClause() + ` ORDER BY o.lease_expires_at, o.id`
		if limit > 0 {
			sql += ` LIMIT ` + q.arg(limit)
		}
		rows, err := tx.Query(ctx, sql, q.args...)
		if err != nil {
			return err
		}
		var ops []opRow
		for rows.Next() {
			r, err := scanOperation(rows)
			if err != nil {
				rows.Close()
				return err
			}
			ops = append(ops, r)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		claims, err = s.withScopes(ctx, tx, ops)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list running operations: %w", err)
	}
	return claims, nil
}

// NextWake returns the earliest time at which a claim could admit
// something or a lease expires (see scheduler.Store): the least admits_at
// of the admission table, the rule ClaimDue admits by, and the earliest
// lease expiry. While the node has lost its session it claims nothing and
// says nothing waits: regaining its lock wakes the loop (OnWake).
func (s *Store) NextWake(ctx context.Context) (time.Time, bool, error) {
	if !s.node.held.Load() {
		return time.Time{}, false, nil // nothing to claim until the lock is back, which wakes the loop (OnWake)
	}
	var at *int64
	err := s.read(ctx, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, `
			WITH `+admissionCTE+`
			SELECT MIN(wake) FROM (
				SELECT MIN(admits_at) AS wake FROM admission
				UNION ALL
				SELECT MIN(lease_expires_at) FROM operations WHERE state = 'running'
			) w`, int64(math.MaxInt64), nil).Scan(&at)
	})
	if err != nil {
		return time.Time{}, false, fmt.Errorf("next wake: %w", err)
	}
	if at == nil {
		return time.Time{}, false, nil
	}
	return time.UnixMilli(*at).UTC(), true, nil
}
