package db

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"pacer/providers"
	"pacer/scheduler"
)

// Enqueue stores ops in one transaction, each with its own result (see
// scheduler.Store): created; existing with the same ContentHash (nothing
// written, Created false); or rejected with ErrConflict or ErrUnknownScope
// (wrapped, naming the ID or scope). New operations start scheduled at
// NotBefore (now when zero), with Deadline NotBefore+Retry.MaxElapsed. Any
// other error rolls back the whole call.
//
// Each operation is judged in order, as if stored alone; the new ones are
// written in chunks (enqueueBatch.flush), a few statements per chunk
// rather than two per operation.
func (db *DB) Enqueue(ctx context.Context, ops []scheduler.NewOperation, now time.Time) ([]scheduler.EnqueueResult, error) {
	tx, err := db.beginWrite(ctx)
	if err != nil {
		return nil, fmt.Errorf("enqueue: %w", err)
	}
	ctx = uncancellable(ctx) // see beginWrite
	defer tx.Rollback()
	b := enqueueBatch{
		tx: tx, now: now, idem: &db.idempotencies,
		scopes:  map[string]scopeRef{},
		results: make([]scheduler.EnqueueResult, len(ops)),
		created: map[int64]int{},
		ids:     map[string]bool{},
		keys:    map[identityKey]bool{},
	}
	for i, op := range ops {
		if err := b.add(ctx, i, op); err != nil {
			return nil, fmt.Errorf("enqueue %s: %w", op.ID, err)
		}
	}
	if err := b.flush(ctx); err != nil {
		return nil, fmt.Errorf("enqueue: %w", err)
	}
	if err := readReported(ctx, tx, b.created, b.results); err != nil {
		return nil, fmt.Errorf("enqueue: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("enqueue: %w", err)
	}
	return b.results, nil
}

// enqueueBatch is one Enqueue call's transaction: the results so far, and
// the operations judged new but not written yet.
type enqueueBatch struct {
	tx     *sql.Tx
	now    time.Time
	idem   *idempotencies
	scopes map[string]scopeRef // by scope name
	// results[i] is ops[i]'s; created maps a new operation's row ID to
	// its index in results.
	results []scheduler.EnqueueResult
	created map[int64]int
	// pending are the operations to write, in order; ids and keys are
	// their operation IDs and the request identities they hold.
	pending []pendingOperation
	ids     map[string]bool
	keys    map[identityKey]bool
}

// pendingOperation is an operation judged new, with what its rows hold.
type pendingOperation struct {
	i                   int // its index in results
	op                  scheduler.NewOperation
	scope               scopeRef
	headers             sql.NullString
	body                []byte
	notBefore, deadline time.Time
}

// identityKey is a request identity held in one scope.
type identityKey struct {
	scope    int64
	identity string
}

// maxPending bounds the operations a batch holds before writing them.
const maxPending = 32

// add judges ops[i] = op: a rejection or an existing operation is its
// result at once; a new operation waits in pending. What the pending
// operations would change about op's result (its ID, or the request
// identity it sends, taken by one of them) is written first.
func (b *enqueueBatch) add(ctx context.Context, i int, op scheduler.NewOperation) error {
	scope, err := b.scope(ctx, op.Scope)
	if err != nil {
		return err
	}
	if scope.id == 0 {
		b.results[i] = scheduler.EnqueueResult{Err: fmt.Errorf("%w: %s", scheduler.ErrUnknownScope, op.Scope)}
		return nil
	}
	checksIdentity := scope.idem.Applies(op.Request.Method)
	key := identityKey{scope.id, op.RequestIdentity}
	if b.ids[op.ID] || (checksIdentity && b.keys[key]) {
		if err := b.flush(ctx); err != nil {
			return err
		}
	}
	if checksIdentity {
		other, err := identityHolder(ctx, b.tx, scope.id, op, scope.idem.Retention, b.now)
		if err != nil {
			return err
		}
		if other != "" {
			b.results[i] = scheduler.EnqueueResult{Err: fmt.Errorf("%w: operation %s of scope %s sends request identity %q as its idempotency key", scheduler.ErrIdentityInUse, other, op.Scope, op.RequestIdentity)}
			return nil
		}
		b.keys[key] = true
	}
	headers, err := encodeHeaders(op.Request.Headers)
	if err != nil {
		return err
	}
	p := pendingOperation{i: i, op: op, scope: scope, headers: headers, notBefore: op.NotBefore}
	if len(op.Request.Body) > 0 {
		p.body = op.Request.Body
	}
	if p.notBefore.IsZero() {
		p.notBefore = b.now
	}
	p.deadline = p.notBefore.Add(op.Retry.MaxElapsed)
	b.pending = append(b.pending, p)
	b.ids[op.ID] = true
	if len(b.pending) == maxPending {
		return b.flush(ctx)
	}
	return nil
}

// scope returns the scope named name, read once per batch (id 0 when no
// scope has the name).
func (b *enqueueBatch) scope(ctx context.Context, name string) (scopeRef, error) {
	if scope, ok := b.scopes[name]; ok {
		return scope, nil
	}
	var (
		scope      scopeRef
		idemHeader string
		spec       sql.NullString
		learned    bool
	)
	err := b.tx.QueryRowContext(ctx, `SELECT id, provider, idempotency_header, profile_spec,
		EXISTS (SELECT 1 FROM scope_routes r WHERE r.scope_id = scopes.id)
		FROM scopes WHERE name = ?`, name).
		Scan(&scope.id, &scope.provider, &idemHeader, &spec, &learned)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return scopeRef{}, err
	default:
		if scope.idem, err = b.idem.of(scope.provider, idemHeader, spec); err != nil {
			return scopeRef{}, err
		}
		if learned {
			if scope.routes, err = scopeRoutes(ctx, b.tx, scope.id); err != nil {
				return scopeRef{}, err
			}
		}
	}
	b.scopes[name] = scope
	return scope, nil
}

// flush writes the pending operations, in order, in chunks of
// valuesChunk's sizes: per chunk, one read of the operation IDs that exist
// already (each such operation is judged by its content), then, for the
// new ones, one INSERT of their operation rows, one read of the row IDs
// given, one INSERT of their requests.
func (b *enqueueBatch) flush(ctx context.Context) error {
	for len(b.pending) > 0 {
		n := valuesChunk(len(b.pending))
		chunk := b.pending[:n]
		existing, err := existingOperations(ctx, b.tx, chunk)
		if err != nil {
			return fmt.Errorf("find existing operations: %w", err)
		}
		fresh := make([]pendingOperation, 0, n)
		for _, p := range chunk {
			if !existing[p.op.ID] {
				fresh = append(fresh, p)
				continue
			}
			if b.results[p.i], err = judgeExisting(ctx, b.tx, p.op); err != nil {
				return err
			}
		}
		for len(fresh) > 0 {
			m := valuesChunk(len(fresh))
			if err := b.insert(ctx, fresh[:m]); err != nil {
				return err
			}
			fresh = fresh[m:]
		}
		b.pending = b.pending[n:]
	}
	clear(b.ids)
	clear(b.keys)
	return nil
}

// existingOperations returns which of the chunk's operation IDs exist.
func existingOperations(ctx context.Context, tx *sql.Tx, chunk []pendingOperation) (map[string]bool, error) {
	args := make([]any, len(chunk))
	for i, p := range chunk {
		args[i] = p.op.ID
	}
	rows, err := tx.QueryContext(ctx, valuesList("j(op)", 1, len(chunk))+`
		SELECT o.operation_id FROM j JOIN operations o ON o.operation_id = j.op`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	existing := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		existing[id] = true
	}
	return existing, rows.Err()
}

// judgeExisting is the result of enqueueing op again: the stored
// operation when the content is the same, else ErrConflict.
func judgeExisting(ctx context.Context, tx *sql.Tx, op scheduler.NewOperation) (scheduler.EnqueueResult, error) {
	existing, err := findOperation(ctx, tx, op.ID)
	if err != nil {
		return scheduler.EnqueueResult{}, err
	}
	if existing.ContentHash != op.ContentHash {
		return scheduler.EnqueueResult{Err: fmt.Errorf("%w: operation %s exists with other content", scheduler.ErrConflict, op.ID)}, nil
	}
	return scheduler.EnqueueResult{Operation: existing.Operation}, nil
}

// insert writes new operations (none of whose IDs exists) and sets their
// results. Exec, not RETURNING: an INSERT … RETURNING costs SQLite an
// ephemeral table per statement, several times the INSERT.
func (b *enqueueBatch) insert(ctx context.Context, ps []pendingOperation) error {
	now := millis(b.now)
	args := make([]any, 0, 7*len(ps))
	ids := make([]any, 0, len(ps))
	for _, p := range ps {
		args = append(args, p.op.ID, p.scope.id, millis(p.notBefore), now, now, millis(p.deadline),
			p.scope.routes.Resource(p.op.Request.Method, p.op.Request.Path))
		ids = append(ids, p.op.ID)
	}
	_, err := b.tx.ExecContext(ctx, `INSERT INTO operations (operation_id, scope_id, next_attempt_at, created_at, updated_at, deadline, resource, state)
		`+valuesRows(7, len(ps), "'scheduled'"), args...)
	if err != nil {
		return fmt.Errorf("insert %d operations: %w", len(ps), err)
	}
	rowIDs := make(map[string]int64, len(ps))
	rows, err := b.tx.QueryContext(ctx, valuesList("j(op)", 1, len(ps))+`
		SELECT o.operation_id, o.id FROM j JOIN operations o ON o.operation_id = j.op`, ids...)
	if err != nil {
		return fmt.Errorf("read the new operations' rows: %w", err)
	}
	for rows.Next() {
		var id string
		var rowID int64
		if err := rows.Scan(&id, &rowID); err != nil {
			rows.Close()
			return fmt.Errorf("read the new operations' rows: %w", err)
		}
		rowIDs[id] = rowID
	}
	if err := rows.Close(); err != nil {
		return err
	}
	if len(rowIDs) != len(ps) {
		return fmt.Errorf("inserted %d operations, found %d", len(ps), len(rowIDs)) // cannot happen: in this transaction
	}
	args = args[:0]
	for _, p := range ps {
		op := p.op
		args = append(args, rowIDs[op.ID], string(op.Kind), op.Request.Method, op.Request.Path, p.headers, p.body,
			op.Request.ContentType, op.RequestIdentity, op.ContentHash, op.Retry.MaxAttempts, op.Retry.MaxElapsed.Milliseconds())
	}
	_, err = b.tx.ExecContext(ctx, `INSERT INTO operation_requests (id, kind, method, path, headers, body, content_type,
		request_identity, content_hash, max_attempts, max_elapsed_ms) `+valuesRows(11, len(ps), ""), args...)
	if err != nil {
		return fmt.Errorf("insert %d requests: %w", len(ps), err)
	}
	for _, p := range ps {
		b.results[p.i] = scheduler.EnqueueResult{Operation: createdOperation(p, b.now), Created: true}
		b.created[rowIDs[p.op.ID]] = p.i
	}
	return nil
}

// createdOperation is the operation p becomes, as it reads back (times to the
// millisecond) but for what its scope makes it report (readReported).
func createdOperation(p pendingOperation, now time.Time) scheduler.Operation {
	op := p.op
	ms := func(t time.Time) time.Time { return fromMillis(millis(t)) }
	o := scheduler.Operation{
		ID: op.ID, Scope: op.Scope, Provider: p.scope.provider, Kind: op.Kind,
		Request:         scheduler.Request{Method: op.Request.Method, Path: op.Request.Path, Body: p.body, ContentType: op.Request.ContentType},
		RequestIdentity: op.RequestIdentity, State: scheduler.StateScheduled,
		NextAttemptAt: ms(p.notBefore), CreatedAt: ms(now), UpdatedAt: ms(now), Deadline: ms(p.deadline),
		Retry:       scheduler.Retry{MaxAttempts: op.Retry.MaxAttempts, MaxElapsed: op.Retry.MaxElapsed.Truncate(time.Millisecond)},
		ContentHash: op.ContentHash,
	}
	if p.headers.Valid {
		o.Request.Headers = maps.Clone(op.Request.Headers)
	}
	return o
}

// identityHolderQuery finds an operation of scope ?2, other than ?3, that
// sends request identity ?1 and is unfinished or was updated after ?4.
const identityHolderQuery = `
	SELECT o.operation_id FROM operation_requests r JOIN operations o ON o.id = r.id
	WHERE r.request_identity = ?1 AND o.scope_id = ?2 AND o.operation_id <> ?3
	  AND (o.updated_at > ?4 OR o.state NOT IN ('succeeded', 'failed', 'canceled'))
	LIMIT 1`

// identityHolder returns the ID of another operation of the scope that
// holds op's request identity within retention (unfinished, or updated
// less than retention before now), or "" when there is none or op's own
// ID exists already (a repeated enqueue is judged by content).
func identityHolder(ctx context.Context, tx *sql.Tx, scopeID int64, op scheduler.NewOperation, retention time.Duration, now time.Time) (string, error) {
	var other string
	err := tx.QueryRowContext(ctx, identityHolderQuery, op.RequestIdentity, scopeID, op.ID, millis(now.Add(-retention))).Scan(&other)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("find request identity: %w", err)
	}
	var exists int
	err = tx.QueryRowContext(ctx, `SELECT 1 FROM operations WHERE operation_id = ?`, op.ID).Scan(&exists)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return other, nil
	case err != nil:
		return "", fmt.Errorf("find operation: %w", err)
	}
	return "", nil
}

// readReported sets, on the results of the new operations (row ID → index
// in results), the state, next attempt time and blocked-by they report,
// which depend on their scope (a pause, a spent budget, a hold): read as
// every read path reads them, in one query for the whole batch.
func readReported(ctx context.Context, tx *sql.Tx, created map[int64]int, results []scheduler.EnqueueResult) error {
	if len(created) == 0 {
		return nil
	}
	ids := make([]int64, 0, len(created))
	for id := range created {
		ids = append(ids, id)
	}
	list, err := json.Marshal(ids)
	if err != nil {
		return err
	}
	rows, err := tx.QueryContext(ctx, `SELECT o.id, `+opState+`, `+opNextAttemptAt+`, `+opBlockedBy+operationFrom+
		`WHERE o.id IN (SELECT value FROM json_each(?))`, string(list))
	if err != nil {
		return fmt.Errorf("read the new operations' states: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id, next  int64
			state     string
			blockedBy sql.NullString
		)
		if err := rows.Scan(&id, &state, &next, &blockedBy); err != nil {
			return fmt.Errorf("read the new operations' states: %w", err)
		}
		op := &results[created[id]].Operation
		op.State, op.NextAttemptAt = scheduler.State(state), fromMillis(next)
		op.BlockedBy = scheduler.BlockedBy(blockedBy.String)
	}
	return rows.Err()
}

// scopeRef is what an enqueue needs of a scope: its row ID (0 when no scope
// has the name) and provider.
type scopeRef struct {
	id       int64
	provider string
	idem     providers.Idempotency // whether and how long its provider keeps request identities
	routes   scheduler.Routes      // which budget each learned route spends
}
