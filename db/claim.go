package db

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"

	"pacer/scheduler"
)

// eligibleBudget is one budget of a scope whose requests may leave now,
// with what its scope and the budget allow.
type eligibleBudget struct {
	scheduler.AdmissionBudget
	// resetAt is when the learned budget resets; meaningful only when
	// HasBudget.
	resetAt int64
	// readyAt is the budget's ready time (readyAt) as the claim read it.
	readyAt int64
}

// ClaimDue leases up to p.Limit due operations in one immediate
// transaction (see scheduler.Store).
//
// Admission (admissionCTE, the rule NextWake waits by): a scope takes part
// only when it is not held, its ready time has come (scopeReadyAt: its
// pause, its learned budget while spent to the reserve, its rate slot) and
// it has due work and a free concurrency slot; the backlog of other scopes
// is never read. In-flight counts come from running rows, not
// counters. Scopes are served round robin, the one with the oldest due
// work first, one operation per scope per round, each scope's oldest due
// operations first.
//
// Configured rate (RateLimit{Requests, Per}): sends are spaced evenly, at
// least ceil(Per/Requests) apart, so at most Requests leave in any window
// of length Per. A claim admits at most one operation of such a scope, then
// moves its next slot to max(slot, now) + spacing; idle time does not
// accumulate into a burst.
//
// Each claimed operation becomes running with LeaseToken+1, LeaseExpiresAt
// = p.Now+p.LeaseFor, Attempt+1, BudgetAttempts+1 and FirstSentAt set if
// zero; its attempt intent row is written in the same transaction. The
// claims are returned in admission order with their scopes (decrypted
// credentials, InFlight counting the new claims), each operation's
// NextAttemptAt the moment it became eligible (opNextAttemptAt).
//
// Durability: the claim commits under synchronous=NORMAL. When p.Durable
// holds for a claim it took, ClaimDue then syncs the WAL (syncWAL) before
// it returns, one sync for the whole batch; when that fails, ClaimDue
// returns the error and no claim, though the claim is committed: nothing
// is sent, and the leases expire and are recovered as any other.
func (db *DB) ClaimDue(ctx context.Context, p scheduler.ClaimParams) ([]scheduler.Claim, error) {
	if p.Limit <= 0 {
		return nil, nil
	}
	_, claims, err := db.tick(ctx, nil, p)
	if err != nil {
		return nil, fmt.Errorf("claim due operations: %w", err)
	}
	return claims, nil
}

// CompleteAndClaim applies cs as Complete does, then claims as ClaimDue
// does, in one immediate transaction (see scheduler.Store): the engine's
// tick, one commit for the finished workers and the claims that take
// their slots.
func (db *DB) CompleteAndClaim(ctx context.Context, cs []scheduler.Completion, p scheduler.ClaimParams) ([]bool, []scheduler.Claim, error) {
	applied, claims, err := db.tick(ctx, cs, p)
	if err != nil {
		return applied, nil, fmt.Errorf("complete and claim: %w", err)
	}
	return applied, claims, nil
}

// tick completes cs, then claims up to p.Limit (none when it is 0), in one
// transaction on the writer's connection, pinned so that the durable
// claim's sync runs on it too. When the commit succeeded but the sync
// failed, it returns applied with the error.
func (db *DB) tick(ctx context.Context, cs []scheduler.Completion, p scheduler.ClaimParams) ([]bool, []scheduler.Claim, error) {
	if p.Limit > 0 && p.LeaseFor < time.Millisecond {
		return nil, nil, fmt.Errorf("lease duration %s is too short", p.LeaseFor)
	}
	if len(cs) == 0 && p.Limit <= 0 {
		return nil, nil, nil
	}
	conn, err := db.write.Conn(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer conn.Close()
	ctx = uncancellable(ctx) // see beginWrite
	applied, claims, err := db.tickOnce(ctx, conn, cs, p)
	if err != nil {
		return nil, nil, err
	}
	if p.Durable != nil && slices.ContainsFunc(claims, p.Durable) {
		if err := db.syncWAL(ctx, conn); err != nil {
			return applied, nil, fmt.Errorf("sync the claim to disk: %w", err)
		}
	}
	return applied, claims, nil
}

// tickOnce runs tick's transaction on conn.
func (db *DB) tickOnce(ctx context.Context, conn *sql.Conn, cs []scheduler.Completion, p scheduler.ClaimParams) ([]bool, []scheduler.Claim, error) {
	tx, err := conn.BeginTx(ctx, nil) // immediate: see connect
	if err != nil {
		return nil, nil, err
	}
	defer tx.Rollback()
	applied, err := completeAttempts(ctx, tx, cs)
	if err != nil {
		return nil, nil, err
	}
	var claims []scheduler.Claim
	if p.Limit > 0 {
		if claims, err = db.claimDue(ctx, tx, p); err != nil {
			return nil, nil, err
		}
		if db.claimCommitting != nil {
			sync, err := synchronous(ctx, tx)
			if err != nil {
				return nil, nil, err
			}
			db.claimCommitting(claims, sync)
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, nil, err
	}
	if len(cs) == 0 {
		applied = nil
	}
	return applied, claims, nil
}

// syncWAL makes every transaction committed on conn so far durable: it
// commits one small write (a write_probe row written and removed) with
// synchronous=FULL, then restores synchronous=NORMAL. In WAL mode a FULL
// commit syncs the WAL file, which holds the frames of the earlier
// commits too (or, once checkpointed, the synced database file does).
// SQLite refuses to change the setting inside a transaction, hence a
// transaction of its own rather than the claim's.
func (db *DB) syncWAL(ctx context.Context, conn *sql.Conn) (err error) {
	if _, err := conn.ExecContext(ctx, `PRAGMA synchronous = FULL`); err != nil {
		return err
	}
	defer func() {
		if _, err := conn.ExecContext(context.Background(), `PRAGMA synchronous = NORMAL`); err != nil {
			// A writer left on FULL is slower, not wrong; drop it anyway.
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
	}()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	// The row makes the commit write WAL frames, without which it would
	// sync nothing.
	if _, err := tx.ExecContext(ctx, `INSERT INTO write_probe (id, pad) VALUES (1, x'')
		ON CONFLICT (id) DO UPDATE SET pad = excluded.pad`); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM write_probe`); err != nil {
		return err
	}
	if db.walSyncing != nil {
		sync, err := synchronous(ctx, tx)
		if err != nil {
			return err
		}
		if err := db.walSyncing(sync); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// synchronous returns the connection's PRAGMA synchronous (1 NORMAL, 2
// FULL), for the test hooks.
func synchronous(ctx context.Context, tx *sql.Tx) (int, error) {
	var sync int
	err := tx.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&sync)
	return sync, err
}

func (db *DB) claimDue(ctx context.Context, tx *sql.Tx, p scheduler.ClaimParams) ([]scheduler.Claim, error) {
	now := millis(p.Now)
	eligible, err := findEligibleBudgets(ctx, tx, now, p.Limit)
	if err != nil {
		return nil, err
	}
	// Each budget's oldest due operations, as many as it may take; then
	// scheduler.Admit's choice among them.
	budgets := make([]scheduler.AdmissionBudget, len(eligible))
	var due []scheduler.DueOperation
	for i := range eligible {
		b := &eligible[i]
		if b.HasBudget {
			if b.PacedMS, err = budgetPacing(ctx, tx, b, now); err != nil {
				return nil, err
			}
		}
		budgets[i] = b.AdmissionBudget
		ds, err := findDueOperations(ctx, tx, b.Scope, b.Resource, b.readyAt, now, b.Take(p.Limit))
		if err != nil {
			return nil, err
		}
		for j := range ds {
			ds[j].Budget = i
		}
		due = append(due, ds...)
	}
	picked := scheduler.Admit(budgets, due, p.Limit)
	rowIDs := make([]int64, len(picked))
	eligibleAt := make(map[int64]int64, len(picked))
	for i, d := range picked {
		rowIDs[i] = d.ID
		eligibleAt[d.ID] = d.Eligible
	}
	ops, err := claimOperations(ctx, tx, rowIDs, now, millis(p.Now.Add(p.LeaseFor)))
	if err != nil {
		return nil, err
	}
	for i, r := range ops {
		// What the operation waited for, its own time or its scope's:
		// dispatch lateness counts from there.
		ops[i].NextAttemptAt = fromMillis(eligibleAt[r.id])
	}
	slots, spent := scheduler.Admitted(budgets, picked, now)
	for _, s := range slots {
		if _, err := tx.ExecContext(ctx, `UPDATE scopes SET next_slot_at = ? WHERE id = ?`, s.NextSlotAt, s.Scope); err != nil {
			return nil, err
		}
	}
	for _, b := range spent {
		if _, err := tx.ExecContext(ctx, `UPDATE scope_budgets SET remaining = remaining - ?, next_slot_at = ?
			WHERE scope_id = ? AND resource = ?`, b.Spent, b.NextSlotAt, b.Scope, b.Resource); err != nil {
			return nil, err
		}
	}
	return db.withScopes(ctx, tx, ops)
}

// findEligibleBudgets returns up to limit budgets whose requests may leave
// at now and have due work, the one with the oldest due work first: the
// rows of the admission table (admissionCTE, the one rule NextWake waits
// by) whose admits_at has come.
func findEligibleBudgets(ctx context.Context, tx *sql.Tx, now int64, limit int) ([]eligibleBudget, error) {
	rows, err := tx.QueryContext(ctx, `
		WITH `+admissionCTE+`
		SELECT id, resource, free, rate_requests, rate_per_ms, next_slot_at, COALESCE(budget_slot_at, 0), budget,
			CASE WHEN reset_at > ?1 THEN reset_at END, ready_at
		FROM admission
		WHERE admits_at <= ?1
		ORDER BY due, id, resource
		LIMIT CAST(?2 AS INTEGER)`, now, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []eligibleBudget
	for rows.Next() {
		var (
			b                                eligibleBudget
			requests, perMS, budget, resetAt sql.NullInt64
		)
		if err := rows.Scan(&b.Scope, &b.Resource, &b.Free, &requests, &perMS, &b.NextSlotAt, &b.BudgetSlotAt, &budget, &resetAt, &b.readyAt); err != nil {
			return nil, err
		}
		if budget.Valid && resetAt.Valid {
			b.HasBudget, b.Budget, b.resetAt = true, budget.Int64, resetAt.Int64
		}
		if requests.Valid {
			b.SlotMS = scheduler.RateSpacingMS(requests.Int64, perMS.Int64)
		}
		out = append(out, b)
	}
	return out, rows.Err()
}

// budgetPacing returns the spacing that spreads b's learned budget over
// the time left until its reset (scheduler.BudgetPacingMS), counting the
// work due before the reset up to budget+1 rows.
func budgetPacing(ctx context.Context, tx *sql.Tx, b *eligibleBudget, now int64) (int64, error) {
	var due int64
	err := tx.QueryRowContext(ctx, `
		SELECT COUNT(*) FROM (
			SELECT 1 FROM operations
			WHERE scope_id = ? AND resource = ? AND state IN ('scheduled', 'waitingForBudget') AND next_attempt_at <= ?
			LIMIT ?)`, b.Scope, b.Resource, b.resetAt, b.Budget+1).Scan(&due)
	if err != nil {
		return 0, fmt.Errorf("count work due before the budget reset: %w", err)
	}
	return scheduler.BudgetPacingMS(due, b.Budget, b.resetAt, now), nil
}

// findDueOperations returns up to n operations due at now that spend a
// scope's budget of resource, oldest due first, from the due partial
// index. The scope ID is bound through a CAST (as the limit is): a bare
// parameter compared with a column of partial indexes makes SQLite
// re-prepare the statement whenever its value changes, and a claim asks
// for a different scope each time. readyAt is the budget's ready time, read once by
// findEligibleBudgets: each operation's eligible time is opDueAt with it
// bound, so the scope and budget rows are not joined per row.
func findDueOperations(ctx context.Context, tx *sql.Tx, scopeID int64, resource string, readyAt, now int64, n int) ([]scheduler.DueOperation, error) {
	rows, err := tx.QueryContext(ctx, `
		SELECT o.id, o.next_attempt_at, `+opDueAtBound+`
		FROM operations o
		WHERE o.scope_id = CAST(?2 AS INTEGER) AND o.resource = ?3 AND o.state IN `+dueStates+` AND o.next_attempt_at <= ?4
		ORDER BY o.next_attempt_at, o.id
		LIMIT CAST(?5 AS INTEGER)`, readyAt, scopeID, resource, now, n)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ops []scheduler.DueOperation
	for rows.Next() {
		var d scheduler.DueOperation
		if err := rows.Scan(&d.ID, &d.NextAttemptAt, &d.Eligible); err != nil {
			return nil, err
		}
		ops = append(ops, d)
	}
	return ops, rows.Err()
}

// claimOperations leases the due operations with the given row IDs and
// writes their attempt intents: one UPDATE, one SELECT of the leased rows
// and one INSERT for the whole batch (an UPDATE … RETURNING costs SQLite
// an ephemeral table per statement: several times the UPDATE's own cost). The operations are returned in the order of rowIDs,
// without their scope's name and provider (withScopes fills them in).
func claimOperations(ctx context.Context, tx *sql.Tx, rowIDs []int64, now, leaseExpires int64) ([]opRow, error) {
	if len(rowIDs) == 0 {
		return nil, nil
	}
	ids, err := json.Marshal(rowIDs)
	if err != nil {
		return nil, err
	}
	res, err := tx.ExecContext(ctx, claimUpdate, leaseExpires, now, string(ids))
	if err != nil {
		return nil, err
	}
	if n, err := res.RowsAffected(); err != nil {
		return nil, err
	} else if n != int64(len(rowIDs)) {
		return nil, fmt.Errorf("leased %d of %d due operation rows", n, len(rowIDs)) // cannot happen: one writer
	}
	rows, err := tx.QueryContext(ctx, `SELECT `+claimedColumns+claimedFrom+`WHERE o.id IN (SELECT value FROM json_each(?))`, string(ids))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	byID := make(map[int64]opRow, len(rowIDs))
	for rows.Next() {
		r, err := scanOperation(rows)
		if err != nil {
			return nil, err
		}
		byID[r.id] = r
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows.Close()
	ops := make([]opRow, len(rowIDs))
	for i, id := range rowIDs {
		r, ok := byID[id]
		if !ok {
			return nil, fmt.Errorf("operation row %d is no longer due", id) // cannot happen: one writer
		}
		ops[i] = r
	}
	_, err = tx.ExecContext(ctx, `
		INSERT INTO attempts (operation_id, number, lease_token, started_at)
		SELECT id, attempt, lease_token, ?1 FROM operations WHERE id IN (SELECT value FROM json_each(?2))`,
		now, string(ids))
	if err != nil {
		return nil, fmt.Errorf("record attempt intents: %w", err)
	}
	return ops, nil
}

// claimUpdate leases the rows whose IDs are in the JSON array ?3 (lease
// expiry ?1, now ?2). The unary + on state keeps SQLite from choosing the
// state index, which would scan every scheduled row, over the row IDs.
const claimUpdate = `
	UPDATE operations SET state = 'running', lease_token = lease_token + 1, lease_expires_at = ?1,
		attempt = attempt + 1, budget_attempts = budget_attempts + 1,
		first_sent_at = COALESCE(first_sent_at, ?2), updated_at = ?2,
		released_from_state = NULL, released_from_reason = NULL
	WHERE id IN (SELECT value FROM json_each(?3)) AND +state IN ('scheduled', 'waitingForBudget')`

// claimedColumns is operationColumns as claimOperations reads them back:
// from the operation's rows alone (claimedFrom), with empty placeholders
// for the scope's name and provider (withScopes fills them in) and no
// blocked-by (a claimed operation is running). claimDue sets NextAttemptAt
// to the time the operation became eligible.
const claimedColumns = `o.id, o.scope_id, o.operation_id, '', '', r.kind, r.method, r.path,
	r.headers, r.body, r.content_type, r.request_identity, o.state, o.attempt, o.budget_attempts,
	o.next_attempt_at, o.hold_reason, o.failure_reason, o.created_at, o.updated_at,
	o.deadline, r.max_attempts, r.max_elapsed_ms, o.lease_token, o.lease_expires_at,
	o.first_sent_at, r.content_hash, o.maybe_applied, NULL, NULL, NULL, ` + answeredColumns

// claimedFrom is the FROM clause that goes with claimedColumns.
const claimedFrom = ` FROM operations o ` + operationJoins

// withScopes pairs operations with their scopes, reading each scope once:
// the claims' scopes, the only ones the store returns with their
// credentials' values (claimScope: opened once per configuration
// version).
func (db *DB) withScopes(ctx context.Context, tx *sql.Tx, ops []opRow) ([]scheduler.Claim, error) {
	scopes := map[int64]scheduler.Scope{}
	claims := make([]scheduler.Claim, 0, len(ops))
	for _, r := range ops {
		s, ok := scopes[r.scopeID]
		if !ok {
			var err error
			if s, err = db.claimScope(ctx, tx, r.scopeID); err != nil {
				return nil, err
			}
			scopes[r.scopeID] = s
		}
		r.Operation.Scope, r.Operation.Provider = s.Name, s.Provider
		claims = append(claims, scheduler.Claim{Operation: r.Operation, Scope: s})
	}
	return claims, nil
}

// ListRunning returns running operations whose lease expires at or before
// expiredBy (all of them when expiredBy is zero), with their scopes and
// their credentials' values, as ClaimDue's claims, oldest lease first, at
// most limit (no bound when limit <= 0).
func (db *DB) ListRunning(ctx context.Context, expiredBy time.Time, limit int) ([]scheduler.Claim, error) {
	tx, err := db.beginRead(ctx)
	if err != nil {
		return nil, fmt.Errorf("list running operations: %w", err)
	}
	defer tx.Rollback()
	claims, err := db.listRunning(ctx, tx, expiredBy, limit)
	if err != nil {
		return nil, fmt.Errorf("list running operations: %w", err)
	}
	return claims, nil
}

func (db *DB) listRunning(ctx context.Context, tx *sql.Tx, expiredBy time.Time, limit int) ([]scheduler.Claim, error) {
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	query := `SELECT ` + operationColumns + `
		FROM operations o INDEXED BY operations_running JOIN scopes s ON s.id = o.scope_id ` + operationJoins + operationBudgetJoin + `
		WHERE o.state = 'running'`
	args := []any{}
	if !expiredBy.IsZero() {
		query += ` AND o.lease_expires_at <= ?`
		args = append(args, millis(expiredBy))
	}
	query += ` ORDER BY o.lease_expires_at, o.id LIMIT ?`
	args = append(args, limit)
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ops []opRow
	for rows.Next() {
		r, err := scanOperation(rows)
		if err != nil {
			return nil, err
		}
		ops = append(ops, r)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows.Close()
	return db.withScopes(ctx, tx, ops)
}

// NextWake returns the earliest time at which a claim could admit something
// or a lease expires (see scheduler.Store): the least admits_at of the
// admission table (admissionCTE, the rule ClaimDue admits by: not held, a
// free concurrency slot, due work, no earlier than its pause, its budget's
// reset when spent to the reserve, and its rate slot), and the earliest
// lease expiry. A scope whose slots are all taken is left out: it frees up
// through a completion (which wakes the engine) or a lease expiry
// (counted). The time is in the past only when a claim at now admits
// something. ok is false when nothing is waiting. It reads one index entry
// per scope, never a scope's whole backlog.
func (db *DB) NextWake(ctx context.Context) (time.Time, bool, error) {
	tx, err := db.beginRead(ctx)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("next wake: %w", err)
	}
	defer tx.Rollback()
	var at sql.NullInt64
	err = tx.QueryRowContext(ctx, `
		WITH `+admissionCTE+`
		SELECT MIN(wake) FROM (
			SELECT MIN(admits_at) AS wake FROM admission
			UNION ALL
			SELECT MIN(lease_expires_at) FROM operations INDEXED BY operations_running
			WHERE state = 'running'
		)`, math.MaxInt64).Scan(&at)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("next wake: %w", err)
	}
	if !at.Valid {
		return time.Time{}, false, nil
	}
	return time.UnixMilli(at.Int64).UTC(), true, nil
}
