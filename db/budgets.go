package db

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"pacer/providers"
	"pacer/scheduler"
)

// namedBudgets reads the learned budgets of the named resources (every
// resource but the default, named "") of the scopes with the given row IDs, by
// scope, each scope's by resource name.
func namedBudgets(ctx context.Context, tx *sql.Tx, scopeIDs []int64) (map[int64][]scheduler.ResourceBudget, error) {
	ids, err := json.Marshal(scopeIDs)
	if err != nil {
		return nil, err
	}
	rows, err := tx.QueryContext(ctx, `
		SELECT b.scope_id, b.resource, b.remaining, b."limit", b.reset_at, b.paused_until, `+budgetGateAt+`, b.pause_reason
		FROM scope_budgets b JOIN scopes s ON s.id = b.scope_id
		WHERE b.scope_id IN (SELECT value FROM json_each(?)) AND b.resource <> ''
		ORDER BY b.scope_id, b.resource`, string(ids))
	if err != nil {
		return nil, fmt.Errorf("read resource budgets: %w", err)
	}
	defer rows.Close()
	out := map[int64][]scheduler.ResourceBudget{}
	for rows.Next() {
		var (
			id                        int64
			r                         scheduler.ResourceBudget
			remaining, limit, resetAt sql.NullInt64
			paused, gate              int64
		)
		if err := rows.Scan(&id, &r.Resource, &remaining, &limit, &resetAt, &paused, &gate, &r.PauseReason); err != nil {
			return nil, fmt.Errorf("read resource budgets: %w", err)
		}
		if remaining.Valid {
			r.Budget = &providers.Budget{Remaining: remaining.Int64, Limit: limit.Int64, ResetAt: fromNullMillis(resetAt)}
		}
		r.PausedUntil, r.PauseEnds = fromMillis(paused), fromMillis(gate)
		out[id] = append(out[id], r)
	}
	return out, rows.Err()
}

// scopeRoutes reads what the scope learned of its provider's budgets.
func scopeRoutes(ctx context.Context, tx *sql.Tx, scopeID int64) (scheduler.Routes, error) {
	rows, err := tx.QueryContext(ctx, `SELECT route, resource FROM scope_routes WHERE scope_id = ?`, scopeID)
	if err != nil {
		return nil, fmt.Errorf("read learned routes: %w", err)
	}
	defer rows.Close()
	routes := scheduler.Routes{}
	for rows.Next() {
		var route, resource string
		if err := rows.Scan(&route, &resource); err != nil {
			return nil, fmt.Errorf("read learned routes: %w", err)
		}
		routes[route] = resource
	}
	return routes, rows.Err()
}

// learnRoute records that the provider's answer to a request of method and
// path named resource (scheduler.Routes.Learn), at the time at, and moves
// the scope's waiting operations of that method whose resource changes
// with it. The triggers of scope_routes create the budget row a new
// resource needs, so every operation's budget exists. Past
// scheduler.MaxExceptionRoutes whole-path routes the oldest are forgotten,
// and their waiting operations move back to what their segment says.
func learnRoute(ctx context.Context, tx *sql.Tx, scopeID int64, method, path, resource string, at int64) error {
	routes, err := scopeRoutes(ctx, tx, scopeID)
	if err != nil {
		return err
	}
	set, del := routes.Learn(method, path, resource)
	if len(set) == 0 && len(del) == 0 {
		return nil
	}
	prefix, _ := scheduler.RouteKeys(method, path)
	for route, res := range set {
		if _, err := tx.ExecContext(ctx, `
			INSERT INTO scope_routes (scope_id, route, resource, exception, learned_at) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (scope_id, route) DO UPDATE SET resource = excluded.resource, learned_at = excluded.learned_at`,
			scopeID, route, res, boolInt(route != prefix), at); err != nil {
			return fmt.Errorf("learn route %s: %w", route, err)
		}
		routes[route] = res
	}
	for _, route := range del {
		if _, err := tx.ExecContext(ctx, `DELETE FROM scope_routes WHERE scope_id = ? AND route = ?`, scopeID, route); err != nil {
			return fmt.Errorf("forget route %s: %w", route, err)
		}
		delete(routes, route)
	}
	res, err := tx.ExecContext(ctx, `
		DELETE FROM scope_routes WHERE scope_id = ?1 AND route IN (
			SELECT route FROM scope_routes WHERE scope_id = ?1 AND exception
			ORDER BY learned_at DESC, route LIMIT -1 OFFSET ?2)`, scopeID, scheduler.MaxExceptionRoutes)
	if err != nil {
		return fmt.Errorf("forget the oldest routes: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n > 0 {
		if routes, err = scopeRoutes(ctx, tx, scopeID); err != nil {
			return err
		}
	}
	return repartition(ctx, tx, scopeID, method, routes)
}

// repartition gives the scope's waiting operations of method the resource
// routes say their requests spend, where it changed.
func repartition(ctx context.Context, tx *sql.Tx, scopeID int64, method string, routes scheduler.Routes) error {
	rows, err := tx.QueryContext(ctx, `
		SELECT o.id, r.path, o.resource FROM operations o INDEXED BY operations_due JOIN operation_requests r ON r.id = o.id
		WHERE o.scope_id = ? AND o.state IN `+dueStates+` AND r.method = ?`, scopeID, method)
	if err != nil {
		return fmt.Errorf("read waiting operations: %w", err)
	}
	moves := map[int64]string{}
	for rows.Next() {
		var (
			id             int64
			path, resource string
		)
		if err := rows.Scan(&id, &path, &resource); err != nil {
			rows.Close()
			return fmt.Errorf("read waiting operations: %w", err)
		}
		if now := routes.Resource(method, path); now != resource {
			moves[id] = now
		}
	}
	if err := rows.Close(); err != nil {
		return err
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read waiting operations: %w", err)
	}
	for id, resource := range moves {
		if _, err := tx.ExecContext(ctx, `UPDATE operations SET resource = ? WHERE id = ?`, resource, id); err != nil {
			return fmt.Errorf("move operation to budget %q: %w", resource, err)
		}
	}
	return nil
}
