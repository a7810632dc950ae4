package pgstore

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"pacer/scheduler"
)

// nodeLockHeld is true for a node row n whose lock some session holds.
var nodeLockHeld = `EXISTS (SELECT 1 FROM pg_locks l
	WHERE l.locktype = 'advisory' AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
	AND l.classid = ` + strconv.Itoa(int(nodeLockClass)) + ` AND l.objid = n.id AND l.objsubid = 2 AND l.granted)`

// processConnected is true for a node row n some connection of whose
// process is still open: it holds the process lock (node.go). False for a
// node registered without a process key.
var processConnected = `(n.process IS NOT NULL AND EXISTS (SELECT 1 FROM pg_locks l
	WHERE l.locktype = 'advisory' AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
	AND l.classid = ` + strconv.Itoa(int(processLockClass)) + ` AND l.objid = n.process AND l.objsubid = 2 AND l.granted))`

// nodeGone is true for a node row n that lock evidence shows dead: its
// lock is free and none of its process's connections is left.
var nodeGone = `(NOT ` + nodeLockHeld + ` AND NOT ` + processConnected + `)`

// nodeHoldsLeases is true for a node row n that holds running leases.
const nodeHoldsLeases = `EXISTS (SELECT 1 FROM operations o WHERE o.state = 'running' AND o.lease_node = n.id)`

// mayRecoverOnLock reports whether this node may recover another's
// leases on lock evidence: it holds its own lock, taken longer ago than
// restartMargin (design §10: after a database restart every node looks
// dead for a moment).
func (s *Store) mayRecoverOnLock() bool {
	return s.node.held.Load() && s.clock.Now().UnixNano()-s.node.since.Load() >= s.restartMargin.Load()
}

// watchNodes looks, on the dedicated connection, for other nodes that hold
// leases and are dead (their lock free, or their row expired); when this
// node may recover them it tells the claim loop (OnWake), whose recovery
// takes them (ListOrphaned).
func (s *Store) watchNodes(ctx context.Context) error {
	ctx, cancel := s.clock.WithTimeout(ctx, nodeQueryTimeout)
	defer cancel()
	var lapsed, gone bool
	err := s.node.conn.QueryRow(ctx, `
		SELECT COALESCE(bool_or(n.expires_at < `+dbNowMS+`), false), COALESCE(bool_or(`+nodeGone+`), false)
		FROM nodes n WHERE n.id <> $1 AND `+nodeHoldsLeases+`
		AND (n.expires_at < `+dbNowMS+` OR `+nodeGone+`)`, s.node.id.Load()).Scan(&lapsed, &gone)
	if err != nil {
		return fmt.Errorf("watch nodes: %w", err)
	}
	if lapsed || (gone && s.mayRecoverOnLock()) {
		s.node.orphans.Store(true)
		s.wakes.committed()
	}
	return nil
}

// forgetDeadNodes removes the rows of dead nodes that hold no lease any
// more, and the elections they won; when it removed one it tells the
// claim loop (OnWake), as the work the dead node had scheduled (retries
// due later) is now this node's to wake for.
func (s *Store) forgetDeadNodes(ctx context.Context) error {
	ctx, cancel := s.clock.WithTimeout(ctx, nodeQueryTimeout)
	defer cancel()
	var gone int
	err := s.node.conn.QueryRow(ctx, `
		WITH gone AS (
			DELETE FROM nodes n WHERE n.id <> $1 AND NOT `+nodeHoldsLeases+`
			AND (n.expires_at < `+dbNowMS+` OR `+nodeGone+`)
			RETURNING id
		), lost AS (
			DELETE FROM elections WHERE node IN (SELECT id FROM gone)
		)
		SELECT count(*) FROM gone`, s.node.id.Load()).Scan(&gone)
	if err != nil {
		return fmt.Errorf("forget dead nodes: %w", err)
	}
	if gone > 0 {
		s.wakes.committed()
	}
	return nil
}

// ListOrphaned returns the running operations leased by nodes known dead,
// oldest lease first, at most limit (see scheduler.Store): those whose
// row expired (none of their requests can still be in flight), and, once
// this node's own session is older than restartMargin, those whose lock
// is free with no connection of their process left (nodeGone). A node
// with a claim in progress is alive (its claim holds the guard lock
// shared); the guard is taken here exclusively, so no claim of a node
// found dead commits after. Most calls cost nothing: it looks only
// when the node's watch saw dead nodes with leases since the last look
// (or at the first call).
func (s *Store) ListOrphaned(ctx context.Context, limit int) ([]scheduler.Claim, error) {
	if !s.node.orphans.Swap(false) {
		return nil, nil
	}
	var claims []scheduler.Claim
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		dead, err := s.deadNodes(ctx, tx)
		if err != nil || len(dead) == 0 {
			return err
		}
		var q query
		q.where("o.state = 'running'")
		q.where("o.lease_node = ANY(" + q.arg(dead) + ")")
		sql := `SELECT ` + operationColumns + operationFrom + q.whereClause() + ` ORDER BY o.lease_expires_at, o.id`
		if limit > 0 {
			sql += ` LIMIT ` + q.arg(limit)
		}
		rows, err := tx.Query(ctx, sql, q.args...)
		if err != nil {
			return err
		}
		ops, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (opRow, error) { return scanOperation(row) })
		if err != nil {
			return err
		}
		claims, err = s.withScopes(ctx, tx, ops)
		return err
	})
	if err != nil {
		s.node.orphans.Store(true)
		return nil, fmt.Errorf("list orphaned leases: %w", err)
	}
	if limit > 0 && len(claims) == limit {
		s.node.orphans.Store(true) // more may be left
	}
	return claims, nil
}

// deadNodes returns the ids of the other nodes holding leases that tx
// finds dead, each with its guard lock taken exclusively.
func (s *Store) deadNodes(ctx context.Context, tx pgx.Tx) ([]int32, error) {
	rows, err := tx.Query(ctx, `SELECT n.id, n.expires_at < `+dbNowMS+`, `+processConnected+` FROM nodes n
		WHERE n.id <> $1 AND `+nodeHoldsLeases+` ORDER BY n.id`, s.node.id.Load())
	if err != nil {
		return nil, err
	}
	type candidate struct {
		id        int32
		lapsed    bool
		connected bool
	}
	cands, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (candidate, error) {
		var c candidate
		return c, row.Scan(&c.id, &c.lapsed, &c.connected)
	})
	if err != nil {
		return nil, err
	}
	onLock := s.mayRecoverOnLock()
	var dead []int32
	for _, c := range cands {
		if !c.lapsed && (!onLock || c.connected) {
			continue // not known dead: too soon to trust lock evidence, or its process is connected
		}
		var free bool
		if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1, $2)`, guardLockClass, c.id).Scan(&free); err != nil {
			return nil, err
		}
		if !free {
			continue // a claim of the node is in progress: it is alive
		}
		if !c.lapsed {
			if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1, $2)`, nodeLockClass, c.id).Scan(&free); err != nil {
				return nil, err
			}
			if !free {
				continue // its session holds its lock
			}
		}
		dead = append(dead, c.id)
	}
	return dead, nil
}
