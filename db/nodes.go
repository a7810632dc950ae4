package db

import (
	"context"
	"time"

	"pacer/scheduler"
)

// ListOrphaned returns every running operation (see scheduler.Store): the
// process lock makes this process the database's only one, so no lease is
// held by another; the caller skips those of its own live workers.
func (db *DB) ListOrphaned(ctx context.Context, limit int) ([]scheduler.Claim, error) {
	return db.ListRunning(ctx, time.Time{}, limit)
}

// OnWake never calls fn: only this process writes the database, and its
// Service wakes its claim loop itself (see scheduler.Store).
func (db *DB) OnWake(fn func()) {}
