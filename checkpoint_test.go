package main

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"

	"pacer/db"
)

// fakeCheckpointer counts checkpoints and fails the ones it is told to.
type fakeCheckpointer struct {
	mu    sync.Mutex
	calls int
	fail  bool
}

func (f *fakeCheckpointer) Checkpoint(context.Context) (db.CheckpointStats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.fail {
		return db.CheckpointStats{}, errors.New("disk on fire")
	}
	return db.CheckpointStats{WALFrames: 10, Checkpointed: 10}, nil
}

func (f *fakeCheckpointer) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// runCheckpointer runs a checkpointer of store on a mock clock, at
// interval, its logs in the buffer returned; stop ends it and waits for
// Run to return (at most 5 s).
func runCheckpointer(t *testing.T, store *fakeCheckpointer, interval time.Duration) (clk *clock.Mock, logs *lockedBuffer, stop func()) {
	t.Helper()
	clk, logs = clock.NewMock(), &lockedBuffer{}
	c := newCheckpointer(store, clk, checkpointConfig{Interval: interval, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	return clk, logs, func() {
		t.Helper()
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("the checkpointer did not return after its context ended")
		}
	}
}

// The checkpointer checkpoints once per interval on the injected clock, logs
// a failure and goes on, and returns when its context ends.
func TestRunCheckpointsTicksLogsFailuresAndStops(t *testing.T) {
	t.Parallel()
	store := &fakeCheckpointer{fail: true}
	clk, logs, stop := runCheckpointer(t, store, time.Second)

	for want := 1; want <= 3; want++ {
		waitFor(t, func() bool { clk.Add(time.Second); return store.count() >= want })
	}
	if logged := logs.String(); !strings.Contains(logged, "checkpoint failed") || !strings.Contains(logged, "disk on fire") {
		t.Fatalf("failure not logged: %q", logged)
	}
	stop()
}

// A checkpoint that keeps failing every 100 ms is logged once, then once a
// minute with the count, and its recovery once; not ten times a second.
func TestRunCheckpointsRateLimitsFailureLogs(t *testing.T) {
	t.Parallel()
	store := &fakeCheckpointer{fail: true}
	clk, logs, stop := runCheckpointer(t, store, 100*time.Millisecond)
	start := clk.Now()

	const ticks = 1500 // 2.5 minutes of failures
	for want := 1; want <= ticks; want++ {
		waitFor(t, func() bool { clk.Add(100 * time.Millisecond); return store.count() >= want })
	}
	store.mu.Lock()
	store.fail = false
	store.mu.Unlock()
	n := store.count()
	waitFor(t, func() bool { clk.Add(100 * time.Millisecond); return store.count() > n+1 })
	stop()
	logged := logs.String()
	first := strings.Count(logged, "checkpoint failed")
	again := strings.Count(logged, "checkpoint still failing")
	recovered := strings.Count(logged, "checkpoint works again")
	minutes := int(clk.Now().Sub(start) / time.Minute)
	if first != 1 || again < 1 || again > minutes || recovered != 1 {
		t.Fatalf("%d failures in %d minutes logged as %d first, %d repeats, %d recoveries; want 1, 1..%d, 1:\n%s", store.count(), minutes, first, again, recovered, minutes, logged)
	}
	if !strings.Contains(logged, "failures=") {
		t.Fatalf("repeats do not say how many failures: %s", logged)
	}
}

// waitFor retries cond for up to 5 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("condition not met within 5s")
}

// While checkpoints find nothing new the wait doubles up to the idle
// bound; new frames, a partial or busy checkpoint, or a failure bring it
// back to the base interval (design §11 "Idle is idle").
func TestNextCheckpointWait(t *testing.T) {
	t.Parallel()
	const base, most = 100 * time.Millisecond, 500 * time.Millisecond
	done := db.CheckpointStats{WALFrames: 40, Checkpointed: 40}
	for _, tc := range []struct {
		name     string
		wait     time.Duration
		prev, st db.CheckpointStats
		err      error
		want     time.Duration
	}{
		{"EmptyWAL", base, db.CheckpointStats{}, db.CheckpointStats{}, nil, 2 * base},
		{"NothingNew", 2 * base, done, done, nil, 4 * base},
		{"AtTheBound", 4 * base, done, done, nil, most},
		{"NewFrames", most, done, db.CheckpointStats{WALFrames: 90, Checkpointed: 90}, nil, base},
		{"WALRestarted", most, done, db.CheckpointStats{WALFrames: 3, Checkpointed: 3}, nil, base},
		{"Partial", most, done, db.CheckpointStats{WALFrames: 40, Checkpointed: 12}, nil, base},
		{"Busy", most, done, db.CheckpointStats{WALFrames: 40, Checkpointed: 40, Busy: true}, nil, base},
		{"Failed", most, done, db.CheckpointStats{}, errors.New("disk on fire"), base},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := nextCheckpointWait(tc.wait, base, most, tc.prev, tc.st, tc.err); got != tc.want {
				t.Fatalf("next wait %s, want %s", got, tc.want)
			}
		})
	}
}

// An idle store is checkpointed a few times a second at most, not every
// 100 ms: over 10 s of the mock clock, at most 30 checkpoints (the backoff
// gives ~21; a fixed 100 ms ticker 100).
func TestRunCheckpointsBacksOffWhileIdle(t *testing.T) {
	t.Parallel()
	store := &fakeCheckpointer{}
	clk, _, stop := runCheckpointer(t, store, 100*time.Millisecond)
	waitFor(t, func() bool { clk.Add(100 * time.Millisecond); return store.count() >= 1 })
	for range 100 {
		clk.Add(100 * time.Millisecond)
		time.Sleep(time.Millisecond) // let the loop take its timer
	}
	stop()
	if n := store.count(); n > 30 {
		t.Fatalf("%d checkpoints of an idle store in 10 s, want at most 30", n)
	}
}

// An idle server's checkpoints log once, not a line per tick: the WAL keeps
// its frames until the next write, so only a change is news (issue 14).
func TestCheckpointLogsOnlyChanges(t *testing.T) {
	t.Parallel()
	logs := &lockedBuffer{}
	c := newCheckpointer(&fakeCheckpointer{}, clock.NewMock(), checkpointConfig{Interval: time.Second,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	for range 5 {
		if _, err := c.RunOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if n := strings.Count(logs.String(), "msg=checkpoint"); n != 1 {
		t.Fatalf("five idle checkpoints logged %d lines, want 1:\n%s", n, logs)
	}
}
