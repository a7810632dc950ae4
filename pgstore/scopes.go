package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"pacer/internal/stored"
	"pacer/providers"
	"pacer/scheduler"
)

// scopeColumns are the columns scanScope reads, in order, for scopes s and
// their default budget b (scopeFrom).
const scopeColumns = `s.id, s.name, s.provider, s.base_url, s.credential_type, s.idempotency_header,
	s.max_concurrent, s.rate_requests, s.rate_per_ms, s.limit_group, s.budget_reserve, s.profile_spec,
	s.created_at, ` + scopeStateColumns

// scopeStateColumns are a scope's admission state (scopeState).
const scopeStateColumns = `s.hold_reason, s.paused_until, s.pause_reason,
	b.remaining, b."limit", b.reset_at, COALESCE(b.paused_until, 0), COALESCE(b.pause_reason, ''), s.updated_at,
	` + scopePausedUntil + `, ` + scopeRunning

// scopeFrom is the FROM clause that goes with scopeColumns.
const scopeFrom = ` FROM scopes s ` + defaultBudgetJoin

// scopeRow is a scope as stored, with its row ID. Its Scope's Credentials
// carry only their type.
type scopeRow struct {
	id int64
	scheduler.Scope
}

// scanScope reads scopeColumns.
func scanScope(row pgx.Row) (scopeRow, error) { return scanScopeWith(row) }

// scanScopeWith reads scopeColumns, then the columns after them into
// extra.
func scanScopeWith(row pgx.Row, extra ...any) (scopeRow, error) {
	var (
		sr                      scopeRow
		rateRequests, ratePerMS *int64
		profileSpec             *string
		credType                string
		createdAt               int64
		st                      scopeState
	)
	s := &sr.Scope
	err := row.Scan(append([]any{&sr.id, &s.Name, &s.Provider, &s.BaseURL, &credType, &s.IdempotencyHeader,
		&s.MaxConcurrent, &rateRequests, &ratePerMS, &s.Group, &s.BudgetReserve, &profileSpec,
		&createdAt}, append(st.dest(s), extra...)...)...)
	if err != nil {
		return scopeRow{}, err
	}
	if s.Profile, err = stored.DecodeProfileSpec(sqlString(profileSpec)); err != nil {
		return scopeRow{}, fmt.Errorf("scope %s: %w", s.Name, err)
	}
	if rateRequests != nil {
		s.RateLimit = &scheduler.RateLimit{Requests: int(*rateRequests), Per: time.Duration(*ratePerMS) * time.Millisecond}
	}
	s.CreatedAt = fromMillis(createdAt)
	s.Credentials = scheduler.Credentials{Type: scheduler.CredentialType(credType)}
	st.apply(s)
	return sr, nil
}

// scopeState is a scope's admission state as scopeStateColumns give it.
type scopeState struct {
	hold                                      *string
	pausedUntil, budgetPausedUntil, pauseEnds int64
	updatedAt                                 int64
	budgetRemaining, budgetLimit, budgetReset *int64
}

// dest returns the scan destinations of scopeStateColumns, in order.
func (st *scopeState) dest(s *scheduler.Scope) []any {
	return []any{&st.hold, &st.pausedUntil, &s.PauseReason,
		&st.budgetRemaining, &st.budgetLimit, &st.budgetReset, &st.budgetPausedUntil, &s.BudgetPauseReason, &st.updatedAt,
		&st.pauseEnds, &s.InFlight}
}

// apply sets s's admission state from the scanned row.
func (st *scopeState) apply(s *scheduler.Scope) {
	s.HoldReason = scheduler.HoldReason(deref(st.hold))
	s.PausedUntil = fromMillis(st.pausedUntil)
	s.PauseEnds = fromMillis(st.pauseEnds)
	s.BudgetPausedUntil = fromMillis(st.budgetPausedUntil)
	s.Budget = nil
	if st.budgetRemaining != nil {
		var limit int64
		if st.budgetLimit != nil {
			limit = *st.budgetLimit
		}
		s.Budget = &providers.Budget{Remaining: *st.budgetRemaining, Limit: limit, ResetAt: fromNullMillis(st.budgetReset)}
	}
	s.UpdatedAt = fromMillis(st.updatedAt)
}

// PutScope creates or replaces the scope cfg.Name (see scheduler.Store),
// as the SQLite store does: the credentials sealed (package stored), a
// replace keeping the pause, hold and budget figures except that new
// credentials lift an authRevoked hold, and an audit entry ("putScope")
// that never mentions the credentials' values. The scope row is read FOR
// UPDATE, so two replaces of one scope do not interleave.
func (s *Store) PutScope(ctx context.Context, cfg scheduler.ScopeConfig, act scheduler.Action) (scheduler.Scope, bool, error) {
	var (
		out     scopeRow
		created bool
	)
	err := s.write(ctx, func(tx pgx.Tx) error {
		var err error
		if created, err = s.putScope(ctx, tx, cfg, act); err != nil {
			return err
		}
		out, err = findScopeByName(ctx, tx, cfg.Name)
		return err
	})
	if err != nil {
		return scheduler.Scope{}, false, fmt.Errorf("put scope %s: %w", cfg.Name, err)
	}
	s.announce() // a replace may admit more
	return out.Scope, created, nil
}

func (s *Store) putScope(ctx context.Context, tx pgx.Tx, cfg scheduler.ScopeConfig, act scheduler.Action) (created bool, err error) {
	if err := cfg.CheckLimits(); err != nil {
		return false, err
	}
	sealed, err := stored.SealCredentials(s.aead, cfg.Name, cfg.Credentials)
	if err != nil {
		return false, err
	}
	spec, err := stored.EncodeProfileSpec(cfg.Profile)
	if err != nil {
		return false, err
	}
	var rateRequests, ratePerMS *int64
	if rl := cfg.RateLimit; rl != nil {
		n, per := int64(rl.Requests), rl.Per.Milliseconds()
		rateRequests, ratePerMS = &n, &per
	}
	// A new scope: inserted with its default budget, unless another
	// transaction inserts the same name first (then it is replaced below).
	var id int64
	err = tx.QueryRow(ctx, `
		INSERT INTO scopes (name, provider, base_url, credentials, credential_type, idempotency_header, max_concurrent,
			rate_requests, rate_per_ms, limit_group, budget_reserve, profile_spec, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $13)
		ON CONFLICT (name) DO NOTHING RETURNING id`,
		cfg.Name, cfg.Provider, cfg.BaseURL, sealed, string(cfg.Credentials.Type), cfg.IdempotencyHeader, cfg.MaxConcurrent,
		rateRequests, ratePerMS, cfg.LimitGroup(), cfg.BudgetReserve, pgString(spec), millis(act.At)).Scan(&id)
	switch {
	case err == nil:
		if _, err := tx.Exec(ctx, `INSERT INTO scope_budgets (scope_id, resource) VALUES ($1, '')`, id); err != nil {
			return false, fmt.Errorf("record the default budget: %w", err)
		}
		detail := fmt.Sprintf("created: provider %s, %s", cfg.Provider, cfg.Describe())
		return true, insertAudit(ctx, tx, auditRow{scope: cfg.Name, action: "putScope", act: act, detail: detail})
	case !errors.Is(err, pgx.ErrNoRows):
		return false, err
	}

	var (
		oldSealed []byte
		oldHold   *string
	)
	err = tx.QueryRow(ctx, `SELECT id, credentials, hold_reason FROM scopes WHERE name = $1 FOR UPDATE`, cfg.Name).
		Scan(&id, &oldSealed, &oldHold)
	if err != nil {
		return false, err
	}
	// An old blob that no longer opens (another key) counts as changed.
	oldSecrets, openErr := stored.OpenCredentials(s.aead, cfg.Name, oldSealed)
	credsChanged := openErr != nil || oldSecrets != cfg.Credentials
	hold := oldHold
	var notes []string
	if credsChanged {
		notes = append(notes, "credentials replaced")
		if oldHold != nil && scheduler.HoldReason(*oldHold) == scheduler.HoldAuthRevoked {
			hold = nil
			notes = append(notes, "authRevoked hold lifted")
		}
	}
	// Without a configured rate there is no slot to wait for.
	_, err = tx.Exec(ctx, `
		UPDATE scopes SET provider = $1, base_url = $2, credentials = $3, credential_type = $4, idempotency_header = $5,
			max_concurrent = $6, rate_requests = $7, rate_per_ms = $8, hold_reason = $9,
			next_slot_at = CASE WHEN $8::bigint IS NULL THEN 0 ELSE next_slot_at END,
			limit_group = $10, budget_reserve = $11, profile_spec = $12, updated_at = $13
		WHERE id = $14`,
		cfg.Provider, cfg.BaseURL, sealed, string(cfg.Credentials.Type), cfg.IdempotencyHeader,
		cfg.MaxConcurrent, rateRequests, ratePerMS, hold,
		cfg.LimitGroup(), cfg.BudgetReserve, pgString(spec), millis(act.At), id)
	if err != nil {
		return false, err
	}
	if credsChanged { // the token of the old grant, and any refresh of it, are void
		if _, err := tx.Exec(ctx, `DELETE FROM scope_tokens WHERE scope_id = $1`, id); err != nil {
			return false, err
		}
	}
	detail := fmt.Sprintf("replaced: provider %s, %s", cfg.Provider, cfg.Describe())
	if len(notes) > 0 {
		detail += "; " + strings.Join(notes, "; ")
	}
	return false, insertAudit(ctx, tx, auditRow{scope: cfg.Name, action: "putScope", act: act, detail: detail})
}

// GetScope returns the scope, with its credentials' type but not their
// values, and its in-flight count, or ErrNotFound.
func (s *Store) GetScope(ctx context.Context, name string) (scheduler.Scope, error) {
	var sr scopeRow
	err := s.read(ctx, func(tx pgx.Tx) error {
		var err error
		sr, err = findScopeByName(ctx, tx, name)
		return err
	})
	if err != nil {
		return scheduler.Scope{}, fmt.Errorf("get scope %s: %w", name, err)
	}
	return sr.Scope, nil
}

// ListScopes returns every scope by name, with its credentials' type but
// not their values, and in-flight counts.
func (s *Store) ListScopes(ctx context.Context) ([]scheduler.Scope, error) {
	var out []scheduler.Scope
	err := s.read(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT `+scopeColumns+scopeFrom+`ORDER BY s.name COLLATE "C"`)
		if err != nil {
			return err
		}
		var ids []int64
		for rows.Next() {
			sr, err := scanScope(rows)
			if err != nil {
				rows.Close()
				return err
			}
			out, ids = append(out, sr.Scope), append(ids, sr.id)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		named, err := namedBudgets(ctx, tx, ids)
		if err != nil {
			return err
		}
		tokens, err := tokenStatus(ctx, tx, ids)
		if err != nil {
			return err
		}
		for i := range out {
			out[i].Resources = named[ids[i]]
			out[i].Token = tokens[ids[i]]
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list scopes: %w", err)
	}
	return out, nil
}

// ResumeScope lifts every wait of the scope at once and records act
// ("resume"), as the SQLite store does; the scope row is read FOR UPDATE.
func (s *Store) ResumeScope(ctx context.Context, name string, act scheduler.Action) (scheduler.Scope, error) {
	var sr scopeRow
	err := s.write(ctx, func(tx pgx.Tx) error {
		var err error
		sr, err = resumeScope(ctx, tx, name, act)
		return err
	})
	if err != nil {
		return scheduler.Scope{}, fmt.Errorf("resume scope %s: %w", name, err)
	}
	s.announce()
	return sr.Scope, nil
}

func resumeScope(ctx context.Context, tx pgx.Tx, name string, act scheduler.Action) (scopeRow, error) {
	var scopeID int64
	if err := tx.QueryRow(ctx, `SELECT id FROM scopes WHERE name = $1 FOR UPDATE`, name).Scan(&scopeID); errors.Is(err, pgx.ErrNoRows) {
		return scopeRow{}, scheduler.ErrNotFound
	} else if err != nil {
		return scopeRow{}, err
	}
	var (
		hold                          *string
		pausedUntil, pauseEnds, ready int64
	)
	err := tx.QueryRow(ctx, `SELECT s.hold_reason, s.paused_until, `+scopePausedUntil+`, `+readyAt+
		scopeFrom+`WHERE s.id = $1`, scopeID).Scan(&hold, &pausedUntil, &pauseEnds, &ready)
	if err != nil {
		return scopeRow{}, err
	}
	now := millis(act.At)
	var was []string
	if hold != nil {
		was = append(was, "held ("+*hold+")")
	}
	switch {
	case pausedUntil > now && pausedUntil == pauseEnds:
		was = append(was, "paused until "+fromMillis(pausedUntil).Format(time.RFC3339))
	case pauseEnds > now:
		was = append(was, "budget spent until "+fromMillis(pauseEnds).Format(time.RFC3339))
	case ready > now:
		was = append(was, "next rate slot at "+fromMillis(ready).Format(time.RFC3339))
	}
	named, err := namedBudgets(ctx, tx, []int64{scopeID})
	if err != nil {
		return scopeRow{}, err
	}
	for _, r := range named[scopeID] {
		if r.PauseEnds.After(act.At) {
			was = append(was, "budget "+r.Resource+" spent until "+r.PauseEnds.UTC().Format(time.RFC3339))
		}
	}
	if len(was) == 0 {
		was = append(was, "open")
	}
	if _, err := tx.Exec(ctx, `
		UPDATE scopes SET hold_reason = NULL, paused_until = 0, pause_reason = '', next_slot_at = 0, updated_at = $1
		WHERE id = $2`, now, scopeID); err != nil {
		return scopeRow{}, err
	}
	// Every learned budget is forgotten until the provider's next answer;
	// the routes learned stay (they are knowledge, not waits).
	if _, err := tx.Exec(ctx, `
		UPDATE scope_budgets SET remaining = NULL, "limit" = NULL, reset_at = NULL,
			paused_until = 0, pause_reason = '', next_slot_at = 0
		WHERE scope_id = $1`, scopeID); err != nil {
		return scopeRow{}, err
	}
	detail := strings.Join(was, ", ") + " → open"
	if err := insertAudit(ctx, tx, auditRow{scope: name, action: "resume", act: act, detail: detail}); err != nil {
		return scopeRow{}, err
	}
	return findScopeByName(ctx, tx, name)
}

// PauseScope pauses the scope by hand until until and records act
// ("pause"), as the SQLite store does; the scope row is read FOR UPDATE.
func (s *Store) PauseScope(ctx context.Context, name string, until time.Time, act scheduler.Action) (scheduler.Scope, error) {
	var sr scopeRow
	err := s.write(ctx, func(tx pgx.Tx) error {
		var pausedUntil int64
		err := tx.QueryRow(ctx, `SELECT paused_until FROM scopes WHERE name = $1 FOR UPDATE`, name).Scan(&pausedUntil)
		if errors.Is(err, pgx.ErrNoRows) {
			return scheduler.ErrNotFound
		} else if err != nil {
			return err
		}
		detail := "paused until " + until.UTC().Format(time.RFC3339)
		if pausedUntil >= millis(until) {
			detail = "already paused until " + fromMillis(pausedUntil).Format(time.RFC3339) + ", which is kept (asked until " + until.UTC().Format(time.RFC3339) + ")"
		} else if _, err := tx.Exec(ctx, `UPDATE scopes SET paused_until = $1, pause_reason = $2, updated_at = $3 WHERE name = $4`,
			millis(until), "paused by "+act.Actor+": "+act.Reason, millis(act.At), name); err != nil {
			return err
		}
		if err := insertAudit(ctx, tx, auditRow{scope: name, action: "pause", act: act, detail: detail}); err != nil {
			return err
		}
		sr, err = findScopeByName(ctx, tx, name)
		return err
	})
	if err != nil {
		return scheduler.Scope{}, fmt.Errorf("pause scope %s: %w", name, err)
	}
	return sr.Scope, nil
}

// findScopeByName reads one scope with its named resources' budgets, or
// ErrNotFound.
func findScopeByName(ctx context.Context, tx pgx.Tx, name string) (scopeRow, error) {
	sr, err := scanScope(tx.QueryRow(ctx, `SELECT `+scopeColumns+scopeFrom+`WHERE s.name = $1`, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return scopeRow{}, scheduler.ErrNotFound
	} else if err != nil {
		return scopeRow{}, err
	}
	named, err := namedBudgets(ctx, tx, []int64{sr.id})
	if err != nil {
		return scopeRow{}, err
	}
	sr.Resources = named[sr.id]
	tokens, err := tokenStatus(ctx, tx, []int64{sr.id})
	if err != nil {
		return scopeRow{}, err
	}
	sr.Token = tokens[sr.id]
	return sr, nil
}
