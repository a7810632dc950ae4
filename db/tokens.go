package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"pacer/internal/stored"
	"pacer/scheduler"
)

// tokenColumns are what readToken scans of scope_tokens t.
const tokenColumns = `t.sealed, t.expires_at, t.refreshed_at, t.refresh_result, t.lease_holder, t.lease_until`

// LoadToken returns the scope's token state, its token opened (see
// scheduler.Store).
func (db *DB) LoadToken(ctx context.Context, scope string) (scheduler.TokenState, error) {
	tx, err := db.beginRead(ctx)
	if err != nil {
		return scheduler.TokenState{}, fmt.Errorf("load token of %s: %w", scope, err)
	}
	defer tx.Rollback()
	st, err := db.readToken(ctx, tx, scope)
	if err != nil {
		return scheduler.TokenState{}, fmt.Errorf("load token of %s: %w", scope, err)
	}
	return st, nil
}

// readToken reads the scope's token state; the zero state when it has
// none, ErrNotFound for an unknown scope.
func (db *DB) readToken(ctx context.Context, tx *sql.Tx, scope string) (scheduler.TokenState, error) {
	var (
		st                        scheduler.TokenState
		sealed                    []byte
		holder                    sql.NullString
		expires, refreshed, until sql.NullInt64
		result                    sql.NullString
	)
	err := tx.QueryRowContext(ctx, `SELECT `+tokenColumns+` FROM scopes s LEFT JOIN scope_tokens t ON t.scope_id = s.id WHERE s.name = ?`, scope).
		Scan(&sealed, &expires, &refreshed, &result, &holder, &until)
	if errors.Is(err, sql.ErrNoRows) {
		return st, scheduler.ErrNotFound
	} else if err != nil {
		return st, err
	}
	st.ExpiresAt, st.RefreshedAt, st.RefreshResult = fromMillis(expires.Int64), fromMillis(refreshed.Int64), result.String
	st.LeaseHolder, st.LeaseUntil = holder.String, fromMillis(until.Int64)
	if sealed != nil {
		t, err := stored.OpenToken(db.aead, scope, sealed)
		if err != nil {
			return st, err
		}
		st.Token = &t
	}
	return st, nil
}

// LeaseTokenRefresh takes the scope's refresh lease for holder unless
// another's is live at now (see scheduler.Store). The one writer makes
// it atomic.
func (db *DB) LeaseTokenRefresh(ctx context.Context, scope, holder string, now, until time.Time) (scheduler.TokenState, bool, error) {
	tx, err := db.beginWrite(ctx)
	if err != nil {
		return scheduler.TokenState{}, false, fmt.Errorf("lease token refresh of %s: %w", scope, err)
	}
	defer tx.Rollback()
	_, err = tx.ExecContext(ctx, `
		INSERT INTO scope_tokens (scope_id, lease_holder, lease_until) SELECT id, ?1, ?2 FROM scopes WHERE name = ?3
		ON CONFLICT (scope_id) DO UPDATE SET lease_holder = excluded.lease_holder, lease_until = excluded.lease_until
		WHERE scope_tokens.lease_holder IS NULL OR scope_tokens.lease_until <= ?4`,
		holder, millis(until), scope, millis(now))
	if err != nil {
		return scheduler.TokenState{}, false, fmt.Errorf("lease token refresh of %s: %w", scope, err)
	}
	st, err := db.readToken(ctx, tx, scope)
	if err != nil {
		return scheduler.TokenState{}, false, fmt.Errorf("lease token refresh of %s: %w", scope, err)
	}
	if err := tx.Commit(); err != nil {
		return scheduler.TokenState{}, false, fmt.Errorf("lease token refresh of %s: %w", scope, err)
	}
	return st, st.LeaseHolder == holder, nil
}

// FinishTokenRefresh records the refresh holder made under its lease and
// releases it (see scheduler.Store).
func (db *DB) FinishTokenRefresh(ctx context.Context, scope, holder string, r scheduler.TokenRefresh) (bool, error) {
	set, args, err := tokenFinish(r, func(t scheduler.Token) ([]byte, error) { return stored.SealToken(db.aead, scope, t) })
	if err != nil {
		return false, fmt.Errorf("finish token refresh of %s: %w", scope, err)
	}
	tx, err := db.beginWrite(ctx)
	if err != nil {
		return false, fmt.Errorf("finish token refresh of %s: %w", scope, err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `UPDATE scope_tokens SET `+set+`lease_holder = NULL, lease_until = 0
		WHERE lease_holder = ? AND scope_id = (SELECT id FROM scopes WHERE name = ?)`, append(args, holder, scope)...)
	if err != nil {
		return false, fmt.Errorf("finish token refresh of %s: %w", scope, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("finish token refresh of %s: %w", scope, err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("finish token refresh of %s: %w", scope, err)
	}
	return n == 1, nil
}

// tokenFinish is the SET list (each item followed by ", ", with ?
// placeholders) and its arguments that record r, its token sealed with
// seal: shared by both stores' FinishTokenRefresh through
// stored.TokenFinish's rule.
func tokenFinish(r scheduler.TokenRefresh, seal func(scheduler.Token) ([]byte, error)) (string, []any, error) {
	f, err := stored.TokenFinish(r, seal)
	if err != nil {
		return "", nil, err
	}
	set := ""
	var args []any
	for _, c := range f {
		set += c.Column + " = ?, "
		args = append(args, c.Value)
	}
	return set, args, nil
}

// tokenStatus reads the shown token status of the scopes with row IDs
// ids, by ID (none for a scope without a token row).
func tokenStatus(ctx context.Context, tx *sql.Tx, ids []int64) (map[int64]scheduler.TokenStatus, error) {
	out := map[int64]scheduler.TokenStatus{}
	if len(ids) == 0 {
		return out, nil
	}
	q := `SELECT scope_id, expires_at, refreshed_at, refresh_result FROM scope_tokens`
	var args []any
	if len(ids) == 1 {
		q += ` WHERE scope_id = ?`
		args = append(args, ids[0])
	}
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("read token status: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id                 int64
			expires, refreshed int64
			result             string
		)
		if err := rows.Scan(&id, &expires, &refreshed, &result); err != nil {
			return nil, fmt.Errorf("read token status: %w", err)
		}
		out[id] = scheduler.TokenStatus{ExpiresAt: fromMillis(expires), RefreshedAt: fromMillis(refreshed), RefreshResult: result}
	}
	return out, rows.Err()
}
