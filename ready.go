package main

import (
	"context"
	"fmt"
	"time"
)

// pinger is a store that can say whether it answers and whether it
// accepts writes (db.DB).
type pinger interface {
	Ping(ctx context.Context) error
	Writable(ctx context.Context, now time.Time) error
}

// loop is a claim loop that can say whether it keeps turning
// (scheduler.Engine).
type loop interface {
	Stalled(now time.Time) error
}

// readiness is GET /readyz's verdict: not ready while the database does
// not answer a query or rejects writes (disk full, read-only file), or the
// claim loop has not completed a pass lately.
func readiness(store pinger, engine loop, now func() time.Time) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if err := store.Ping(ctx); err != nil {
			return fmt.Errorf("database: %w", err)
		}
		if err := store.Writable(ctx, now()); err != nil {
			return fmt.Errorf("database does not accept writes: %w", err)
		}
		if err := engine.Stalled(now()); err != nil {
			return fmt.Errorf("engine: %w", err)
		}
		return nil
	}
}
