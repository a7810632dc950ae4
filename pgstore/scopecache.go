package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"pacer/internal/scopecache"
	"pacer/internal/stored"
	"pacer/scheduler"
)

// scopeConfigVersions is migration 4 (see migrations): scopes.config_version
// changes, by trigger, with every update of a column a claim hands to the
// worker as configuration (name, provider, base URL, credentials,
// profile, idempotency header, limits); the admission state (hold,
// pauses, rate slot, budgets, updated_at) leaves it alone. Versions come
// from one database-wide sequence, so a version is never given to two
// configurations. A claim reuses the scope it opened before while the
// version is the same (internal/scopecache), as on SQLite.
const scopeConfigVersions = `
CREATE SEQUENCE scope_config_versions AS BIGINT;
ALTER TABLE scopes ADD COLUMN config_version BIGINT NOT NULL DEFAULT nextval('scope_config_versions');

CREATE FUNCTION scopes_config_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.config_version := nextval('scope_config_versions');
    RETURN NEW;
END
$$;

CREATE TRIGGER scopes_config_version BEFORE UPDATE ON scopes FOR EACH ROW
WHEN ((OLD.name, OLD.provider, OLD.base_url, OLD.credentials, OLD.credential_type, OLD.idempotency_header,
       OLD.profile_spec, OLD.max_concurrent, OLD.rate_requests, OLD.rate_per_ms, OLD.limit_group, OLD.budget_reserve,
       OLD.created_at)
    IS DISTINCT FROM
      (NEW.name, NEW.provider, NEW.base_url, NEW.credentials, NEW.credential_type, NEW.idempotency_header,
       NEW.profile_spec, NEW.max_concurrent, NEW.rate_requests, NEW.rate_per_ms, NEW.limit_group, NEW.budget_reserve,
       NEW.created_at))
EXECUTE FUNCTION scopes_config_version();
`

// claimScopes reads the scopes with row IDs ids as a claim hands them out,
// by row ID: their admission state and in-flight counts as tx sees them
// (one statement for all), and their configuration with the credentials'
// values, from the cache while the row's config_version is the one
// cached, else read, opened and cached (one more statement for all that
// were not).
func (s *Store) claimScopes(ctx context.Context, tx pgx.Tx, ids []int64) (map[int64]scheduler.Scope, error) {
	rows, err := tx.Query(ctx, `SELECT s.id, s.config_version, `+scopeStateColumns+scopeFrom+`WHERE s.id = ANY($1)`, ids)
	if err != nil {
		return nil, fmt.Errorf("read the claimed scopes: %w", err)
	}
	out := make(map[int64]scheduler.Scope, len(ids))
	var missed []int64
	for rows.Next() {
		var (
			sc          scheduler.Scope
			st          scopeState
			id, version int64
		)
		if err := rows.Scan(append([]any{&id, &version}, st.dest(&sc)...)...); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read the claimed scopes: %w", err)
		}
		e, ok := s.scopes.Get(id, version)
		if !ok {
			missed = append(missed, id)
			continue
		}
		sc.ScopeConfig, sc.CreatedAt = e.Config, e.CreatedAt
		st.apply(&sc)
		out[id] = sc
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the claimed scopes: %w", err)
	}
	if len(missed) > 0 {
		if err := s.openScopes(ctx, tx, missed, out); err != nil {
			return nil, err
		}
	}
	for _, id := range ids {
		if _, ok := out[id]; !ok {
			return nil, fmt.Errorf("scope row %d: %w", id, scheduler.ErrNotFound)
		}
	}
	return out, nil
}

// openScopes reads the scopes ids whole, opens their credentials, caches
// their configuration and adds them to out.
func (s *Store) openScopes(ctx context.Context, tx pgx.Tx, ids []int64, out map[int64]scheduler.Scope) error {
	rows, err := tx.Query(ctx, `SELECT `+scopeColumns+`, s.config_version, s.credentials`+scopeFrom+`WHERE s.id = ANY($1)`, ids)
	if err != nil {
		return fmt.Errorf("read the claimed scopes' configuration: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			version int64
			blob    []byte
		)
		sr, err := scanScopeWith(rows, &version, &blob)
		if err != nil {
			return fmt.Errorf("read the claimed scopes' configuration: %w", err)
		}
		c, err := stored.OpenCredentials(s.aead, sr.Name, blob)
		if err != nil {
			return err
		}
		if s.credentialsOpened != nil {
			s.credentialsOpened(sr.Name)
		}
		sc := sr.Scope
		sc.Credentials = c
		s.scopes.Put(scopecache.Entry{ID: sr.id, Version: version, Config: sc.ScopeConfig, CreatedAt: sc.CreatedAt})
		out[sr.id] = sc
	}
	return rows.Err()
}
