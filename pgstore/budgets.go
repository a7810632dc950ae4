package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"pacer/providers"
	"pacer/scheduler"
)

// namedBudgets reads the learned budgets of the named resources (every
// resource but the default, named "") of the scopes with the given row
// IDs, by scope, each scope's by resource name.
func namedBudgets(ctx context.Context, tx pgx.Tx, scopeIDs []int64) (map[int64][]scheduler.ResourceBudget, error) {
	rows, err := tx.Query(ctx, `
		SELECT b.scope_id, b.resource, b.remaining, b."limit", b.reset_at, b.paused_until, `+budgetGateAt+`, b.pause_reason
		FROM scope_budgets b JOIN scopes s ON s.id = b.scope_id
		WHERE b.scope_id = ANY($1) AND b.resource <> ''
		ORDER BY b.scope_id, b.resource COLLATE "C"`, scopeIDs)
	if err != nil {
		return nil, fmt.Errorf("read resource budgets: %w", err)
	}
	defer rows.Close()
	out := map[int64][]scheduler.ResourceBudget{}
	for rows.Next() {
		var (
			id                        int64
			r                         scheduler.ResourceBudget
			remaining, limit, resetAt *int64
			paused, gate              int64
		)
		if err := rows.Scan(&id, &r.Resource, &remaining, &limit, &resetAt, &paused, &gate, &r.PauseReason); err != nil {
			return nil, fmt.Errorf("read resource budgets: %w", err)
		}
		if remaining != nil {
			r.Budget = &providers.Budget{Remaining: *remaining, Limit: deref(limit), ResetAt: fromNullMillis(resetAt)}
		}
		r.PausedUntil, r.PauseEnds = fromMillis(paused), fromMillis(gate)
		out[id] = append(out[id], r)
	}
	return out, rows.Err()
}

// scopeRoutes reads what the scope learned of its provider's budgets.
func scopeRoutes(ctx context.Context, tx pgx.Tx, scopeID int64) (scheduler.Routes, error) {
	rows, err := tx.Query(ctx, `SELECT route, resource FROM scope_routes WHERE scope_id = $1`, scopeID)
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
// path named resource, at the time at, as the SQLite store's learnRoute
// does: the budget row of a new resource is written with it (SQLite's
// triggers do that there), past scheduler.MaxExceptionRoutes whole-path
// routes the oldest are forgotten, and the scope's waiting operations of
// that method move to the budget their route now spends.
func learnRoute(ctx context.Context, tx pgx.Tx, scopeID int64, method, path, resource string, at int64) error {
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
		if _, err := tx.Exec(ctx, `
			INSERT INTO scope_routes (scope_id, route, resource, exception, learned_at) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (scope_id, route) DO UPDATE SET resource = excluded.resource, learned_at = excluded.learned_at`,
			scopeID, route, res, route != prefix, at); err != nil {
			return fmt.Errorf("learn route %s: %w", route, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO scope_budgets (scope_id, resource) VALUES ($1, $2) ON CONFLICT DO NOTHING`,
			scopeID, res); err != nil {
			return fmt.Errorf("record budget %q: %w", res, err)
		}
		routes[route] = res
	}
	for _, route := range del {
		if _, err := tx.Exec(ctx, `DELETE FROM scope_routes WHERE scope_id = $1 AND route = $2`, scopeID, route); err != nil {
			return fmt.Errorf("forget route %s: %w", route, err)
		}
		delete(routes, route)
	}
	tag, err := tx.Exec(ctx, `
		DELETE FROM scope_routes WHERE scope_id = $1 AND route IN (
			SELECT route FROM scope_routes WHERE scope_id = $1 AND exception
			ORDER BY learned_at DESC, route COLLATE "C" OFFSET $2)`, scopeID, scheduler.MaxExceptionRoutes)
	if err != nil {
		return fmt.Errorf("forget the oldest routes: %w", err)
	}
	if tag.RowsAffected() > 0 {
		if routes, err = scopeRoutes(ctx, tx, scopeID); err != nil {
			return err
		}
	}
	return repartition(ctx, tx, scopeID, method, routes)
}

// repartition gives the scope's waiting operations of method the resource
// routes say their requests spend, where it changed.
func repartition(ctx context.Context, tx pgx.Tx, scopeID int64, method string, routes scheduler.Routes) error {
	rows, err := tx.Query(ctx, `
		SELECT id, path, resource FROM operations
		WHERE scope_id = $1 AND state IN `+dueStates+` AND method = $2 ORDER BY id`, scopeID, method)
	if err != nil {
		return fmt.Errorf("read waiting operations: %w", err)
	}
	var (
		ids       []int64
		resources []string
	)
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
			ids, resources = append(ids, id), append(resources, now)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read waiting operations: %w", err)
	}
	if len(ids) == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, `
		UPDATE operations o SET resource = m.resource
		FROM unnest($1::bigint[], $2::text[]) AS m (id, resource) WHERE o.id = m.id`, ids, resources); err != nil {
		return fmt.Errorf("move operations to their budgets: %w", err)
	}
	return nil
}
