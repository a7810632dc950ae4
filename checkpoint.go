package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/benbjohnson/clock"

	"pacer/db"
	"pacer/scheduler"
)

// checkpointInterval is how often serve moves the WAL into the database
// file, off the writer's path. Short on purpose: at 500 operations/s the
// WAL grows by ~10,000 pages a second, and the fsync that ends a
// checkpoint stalls the filesystem's other writes (the WAL's too) for as
// long as it takes: 10,000-page checkpoints once a second held sends up
// for 50–150 ms, ~1,000-page ones every 100 ms for under 25 ms. An idle
// checkpoint costs ~0.2 ms.
const checkpointInterval = 100 * time.Millisecond

// checkpointer is the part of the store runCheckpoints drives.
type checkpointer interface {
	Checkpoint(ctx context.Context) (db.CheckpointStats, error)
}

// runCheckpoints checkpoints the store every interval until ctx ends, so
// that no commit has to: with SQLite's own checkpoints inside commits the
// p99 send lateness at 500 operations/s was 26 ms, with these 7.5 ms
// (scripts/bench, pacer-lateness). A failed checkpoint is tried again at
// the next tick, and logged without flooding (scheduler.FailureLog); the writer's own
// safety-net checkpoint bounds the WAL meanwhile.
func runCheckpoints(ctx context.Context, store checkpointer, clk clock.Clock, interval time.Duration, logger *slog.Logger) {
	ticker := clk.Ticker(interval)
	defer ticker.Stop()
	failures := scheduler.NewFailureLog(logger, slog.LevelWarn, "checkpoint")
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		st, err := store.Checkpoint(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			failures.Failed(clk.Now(), err)
		case err == nil:
			failures.Succeeded(clk.Now())
			if st.WALFrames > 0 {
				logger.Debug("checkpoint", "walFrames", st.WALFrames, "checkpointed", st.Checkpointed, "busy", st.Busy)
			}
		}
	}
}
