package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"pacer/internal/stored"
	"pacer/scheduler"
)

// scopeTokens is migration 5 (see migrations): the token of each scope
// whose grant renews itself (design §13), as on SQLite (db/migrate.go
// version 13). The lease is what makes one refresh per scope run at a
// time across every process: it is taken by an upsert whose conflict
// locks the row, so two processes never both hold it.
const scopeTokens = `
CREATE TABLE scope_tokens (
    scope_id       BIGINT PRIMARY KEY REFERENCES scopes (id) ON DELETE CASCADE,
    -- AES-256-GCM sealed JSON of the token (package stored).
    sealed         BYTEA,
    expires_at     BIGINT NOT NULL DEFAULT 0,
    refreshed_at   BIGINT NOT NULL DEFAULT 0,
    refresh_result TEXT   NOT NULL DEFAULT '',
    lease_holder   TEXT,
    lease_until    BIGINT NOT NULL DEFAULT 0
);

CREATE INDEX scope_tokens_expires ON scope_tokens (expires_at) WHERE expires_at > 0;
`

// LoadToken returns the scope's token state, its token opened (see
// scheduler.Store).
func (s *Store) LoadToken(ctx context.Context, scope string) (scheduler.TokenState, error) {
	var st scheduler.TokenState
	err := s.read(ctx, func(tx pgx.Tx) error {
		var err error
		st, err = s.readToken(ctx, tx, scope)
		return err
	})
	if err != nil {
		return scheduler.TokenState{}, fmt.Errorf("load token of %s: %w", scope, err)
	}
	return st, nil
}

// readToken reads the scope's token state; the zero state when it has
// none, ErrNotFound for an unknown scope.
func (s *Store) readToken(ctx context.Context, tx pgx.Tx, scope string) (scheduler.TokenState, error) {
	var (
		st                        scheduler.TokenState
		sealed                    []byte
		holder, result            *string
		expires, refreshed, until *int64
	)
	err := tx.QueryRow(ctx, `SELECT t.sealed, t.expires_at, t.refreshed_at, t.refresh_result, t.lease_holder, t.lease_until
		FROM scopes s LEFT JOIN scope_tokens t ON t.scope_id = s.id WHERE s.name = $1`, scope).
		Scan(&sealed, &expires, &refreshed, &result, &holder, &until)
	if errors.Is(err, pgx.ErrNoRows) {
		return st, scheduler.ErrNotFound
	} else if err != nil {
		return st, err
	}
	num := func(p *int64) int64 {
		if p == nil {
			return 0
		}
		return *p
	}
	st.ExpiresAt, st.RefreshedAt, st.RefreshResult = fromMillis(num(expires)), fromMillis(num(refreshed)), deref(result)
	st.LeaseHolder, st.LeaseUntil = deref(holder), fromMillis(num(until))
	if sealed != nil {
		t, err := stored.OpenToken(s.aead, scope, sealed)
		if err != nil {
			return st, err
		}
		st.Token = &t
	}
	return st, nil
}

// LeaseTokenRefresh takes the scope's refresh lease for holder unless
// another's is live at now (see scheduler.Store): the upsert's conflict
// locks the token row, so of two processes at once one takes it.
func (s *Store) LeaseTokenRefresh(ctx context.Context, scope, holder string, now, until time.Time) (scheduler.TokenState, bool, error) {
	var st scheduler.TokenState
	err := s.write(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `
			INSERT INTO scope_tokens (scope_id, lease_holder, lease_until) SELECT id, $1, $2 FROM scopes WHERE name = $3
			ON CONFLICT (scope_id) DO UPDATE SET lease_holder = excluded.lease_holder, lease_until = excluded.lease_until
			WHERE scope_tokens.lease_holder IS NULL OR scope_tokens.lease_until <= $4`,
			holder, millis(until), scope, millis(now))
		if err != nil {
			return err
		}
		st, err = s.readToken(ctx, tx, scope)
		return err
	})
	if err != nil {
		return scheduler.TokenState{}, false, fmt.Errorf("lease token refresh of %s: %w", scope, err)
	}
	return st, st.LeaseHolder == holder, nil
}

// FinishTokenRefresh records the refresh holder made under its lease and
// releases it (see scheduler.Store).
func (s *Store) FinishTokenRefresh(ctx context.Context, scope, holder string, r scheduler.TokenRefresh) (bool, error) {
	cols, err := stored.TokenFinish(r, func(t scheduler.Token) ([]byte, error) { return stored.SealToken(s.aead, scope, t) })
	if err != nil {
		return false, fmt.Errorf("finish token refresh of %s: %w", scope, err)
	}
	set := ""
	var args []any
	for i, c := range cols {
		set += c.Column + " = $" + strconv.Itoa(i+1) + ", "
		args = append(args, c.Value)
	}
	n := len(args)
	var done bool
	err = s.write(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE scope_tokens SET `+set+`lease_holder = NULL, lease_until = 0
			WHERE lease_holder = $`+strconv.Itoa(n+1)+` AND scope_id = (SELECT id FROM scopes WHERE name = $`+strconv.Itoa(n+2)+`)`,
			append(args, holder, scope)...)
		done = err == nil && tag.RowsAffected() == 1
		return err
	})
	if err != nil {
		return false, fmt.Errorf("finish token refresh of %s: %w", scope, err)
	}
	return done, nil
}

// tokenStatus reads the shown token status of the scopes with row IDs
// ids, by ID (none for a scope without a token row).
func tokenStatus(ctx context.Context, tx pgx.Tx, ids []int64) (map[int64]scheduler.TokenStatus, error) {
	out := map[int64]scheduler.TokenStatus{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := tx.Query(ctx, `SELECT scope_id, expires_at, refreshed_at, refresh_result FROM scope_tokens WHERE scope_id = ANY($1)`, ids)
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
