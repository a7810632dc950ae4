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

// idleCheckpointMax is the longest wait between checkpoints while the WAL
// stays empty: idle checkpoints every 100 ms were most of an idle server's
// CPU (0.5 % of a core; design §11 "Idle is idle"), and a burst that starts
// after idling leaves at most this much WAL for the first checkpoint.
const idleCheckpointMax = 500 * time.Millisecond

// runCheckpoints checkpoints the store every interval until ctx ends, so
// that no commit has to: with SQLite's own checkpoints inside commits the
// p99 send lateness at 500 operations/s was 26 ms, with these 7.5 ms
// (scripts/bench, pacer-lateness). While checkpoints find nothing to do the
// wait grows to idleCheckpointMax (nextCheckpointWait). A failed checkpoint
// is tried again after interval, and logged without flooding
// (scheduler.FailureLog); the writer's own safety-net checkpoint bounds the
// WAL meanwhile.
func runCheckpoints(ctx context.Context, store checkpointer, clk clock.Clock, interval time.Duration, logger *slog.Logger) {
	wait := interval
	var last db.CheckpointStats
	timer := clk.Timer(wait)
	defer timer.Stop()
	failures := scheduler.NewFailureLog(logger, slog.LevelWarn, "checkpoint")
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
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
		wait = nextCheckpointWait(wait, interval, max(interval, idleCheckpointMax), last, st, err)
		last = st
		timer.Reset(wait)
	}
}

// nextCheckpointWait is the wait before the next checkpoint, after one
// that ended with st and err, the one before it with prev, the last wait
// having been wait: twice wait, at most most, when the checkpoint found
// nothing new (the WAL as long as before, all of it in the database file:
// SQLite keeps a checkpointed WAL's length until the next write restarts
// it); the base interval otherwise, or after a failure.
func nextCheckpointWait(wait, interval, most time.Duration, prev, st db.CheckpointStats, err error) time.Duration {
	if err != nil || st.WALFrames != prev.WALFrames || st.Checkpointed < st.WALFrames || st.Busy {
		return interval
	}
	return min(2*wait, most)
}
