package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Ping reports whether the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	return nil
}

// errReadOnly is Writable's answer for a server that refuses writes.
var errReadOnly = errors.New("the server is read-only (a standby, or default_transaction_read_only is on): point --db at the primary")

// Writable reports whether the database accepts writes: nil, or why not
// (a standby after a failover, a database or role made read-only). It
// writes nothing: a transaction as the store's writes begin them says
// whether it may write. now is unused (SQLite's store throttles its
// probe by it).
func (s *Store) Writable(ctx context.Context, _ time.Time) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("probe write: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var readOnly bool
	if err := tx.QueryRow(ctx, `SELECT current_setting('transaction_read_only') = 'on' OR pg_is_in_recovery()`).Scan(&readOnly); err != nil {
		return fmt.Errorf("probe write: %w", err)
	}
	if readOnly {
		return errReadOnly
	}
	return nil
}
