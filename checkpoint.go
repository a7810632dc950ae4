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

// checkpointStore is the part of the store a checkpointer drives (db.DB).
type checkpointStore interface {
	Checkpoint(ctx context.Context) (db.CheckpointStats, error)
}

// idleCheckpointMax is the longest wait between checkpoints while the WAL
// stays empty: idle checkpoints every 100 ms were most of an idle server's
// CPU (0.5 % of a core; design §11 "Idle is idle"), and a burst that starts
// after idling leaves at most this much WAL for the first checkpoint.
const idleCheckpointMax = 500 * time.Millisecond

// checkpointConfig shapes a checkpointer. Zero fields take the defaults.
type checkpointConfig struct {
	// Interval is the wait between checkpoints while the WAL grows, and
	// after a failure; default checkpointInterval.
	Interval time.Duration
	// IdleMax is the longest wait while checkpoints find nothing to do;
	// default idleCheckpointMax, never below Interval.
	IdleMax time.Duration
	// Logger receives failures (without flooding) and, at debug level,
	// the checkpoints that copied frames; nil discards.
	Logger *slog.Logger
}

// checkpointer is serve's WAL checkpoint loop: it checkpoints the store
// off the writer's path so that no commit has to. With SQLite's own
// checkpoints inside commits the p99 send lateness at 500 operations/s was
// 26 ms, with these 7.5 ms (scripts/bench, pacer-lateness). While
// checkpoints find nothing to do the wait grows to IdleMax
// (nextCheckpointWait). A failed checkpoint is tried again after Interval,
// and logged without flooding (scheduler.FailureLog); the writer's own
// safety-net checkpoint bounds the WAL meanwhile. Run drives it; tests may
// call RunOnce.
type checkpointer struct {
	store    checkpointStore
	clock    clock.Clock
	cfg      checkpointConfig
	failures *scheduler.FailureLog
	// wait is the wait before the next checkpoint; last what the last one
	// found.
	wait time.Duration
	last db.CheckpointStats
}

// newCheckpointer returns a checkpointer of store.
func newCheckpointer(store checkpointStore, clk clock.Clock, cfg checkpointConfig) *checkpointer {
	if cfg.Interval <= 0 {
		cfg.Interval = checkpointInterval
	}
	if cfg.IdleMax <= 0 {
		cfg.IdleMax = idleCheckpointMax
	}
	cfg.IdleMax = max(cfg.IdleMax, cfg.Interval)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &checkpointer{store: store, clock: clk, cfg: cfg, wait: cfg.Interval,
		failures: scheduler.NewFailureLog(cfg.Logger, slog.LevelWarn, "checkpoint")}
}

// RunOnce checkpoints once, logs the outcome and sets the wait before the
// next checkpoint.
func (c *checkpointer) RunOnce(ctx context.Context) (db.CheckpointStats, error) {
	st, err := c.store.Checkpoint(ctx)
	switch {
	case err != nil && ctx.Err() == nil:
		c.failures.Failed(c.clock.Now(), err)
	case err == nil:
		c.failures.Succeeded(c.clock.Now())
		// Only what changed: an idle server's WAL keeps its frames until
		// the next write, and a line per tick would say nothing new.
		if st.WALFrames > 0 && st != c.last {
			c.cfg.Logger.Debug("checkpoint", "walFrames", st.WALFrames, "checkpointed", st.Checkpointed, "busy", st.Busy)
		}
	}
	c.wait = nextCheckpointWait(c.wait, c.cfg.Interval, c.cfg.IdleMax, c.last, st, err)
	c.last = st
	return st, err
}

// Run checkpoints after each wait until ctx ends; a failure is retried
// after Interval, and Run never gives up because of one. It returns nil
// when ctx ends.
func (c *checkpointer) Run(ctx context.Context) error {
	timer := c.clock.Timer(c.wait)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
		_, _ = c.RunOnce(ctx) // logged by RunOnce
		timer.Reset(c.wait)
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
