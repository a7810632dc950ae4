package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"pacer/internal/scopecache"
	"pacer/scheduler"
)

// claimScopeState reads the configuration version and the admission
// state of the scope with row ID ?1 (see scopeByID for the CAST).
const claimScopeState = `SELECT s.config_version, ` + scopeStateColumns + scopeFrom + scopeByID

// claimScope reads the scope with row ID id as a claim hands it out: its
// admission state and in-flight count as tx sees them, and its
// configuration with the credentials' values, from the cache while the
// row's config_version is the one cached, else read and opened
// (withSecrets) and cached.
func (db *DB) claimScope(ctx context.Context, tx *sql.Tx, id int64) (scheduler.Scope, error) {
	var (
		s       scheduler.Scope
		st      scopeState
		version int64
	)
	err := tx.QueryRowContext(ctx, claimScopeState, id).Scan(append([]any{&version}, st.dest(&s)...)...)
	if errors.Is(err, sql.ErrNoRows) {
		return scheduler.Scope{}, fmt.Errorf("scope row %d: %w", id, scheduler.ErrNotFound)
	} else if err != nil {
		return scheduler.Scope{}, err
	}
	if cs, ok := db.scopes.Get(id, version); ok {
		s.ScopeConfig, s.CreatedAt = cs.Config, cs.CreatedAt
		st.apply(&s)
		return s, nil
	}
	sr, err := db.findScopeByID(ctx, tx, id)
	if err != nil {
		return scheduler.Scope{}, err
	}
	if s, err = db.withSecrets(sr); err != nil {
		return scheduler.Scope{}, err
	}
	db.scopes.Put(scopecache.Entry{ID: id, Version: sr.version, Config: s.ScopeConfig, CreatedAt: s.CreatedAt})
	return s, nil
}
