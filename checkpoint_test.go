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

// runCheckpoints checkpoints once per interval on the injected clock, logs
// a failure and goes on, and returns when its context ends.
func TestRunCheckpointsTicksLogsFailuresAndStops(t *testing.T) {
	clk := clock.NewMock()
	var logs lockedBuffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	store := &fakeCheckpointer{fail: true}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { runCheckpoints(ctx, store, clk, time.Second, logger); close(done) }()

	for want := 1; want <= 3; want++ {
		waitFor(t, func() bool { clk.Add(time.Second); return store.count() >= want })
	}
	if logged := logs.String(); !strings.Contains(logged, "checkpoint failed") || !strings.Contains(logged, "disk on fire") {
		t.Fatalf("failure not logged: %q", logged)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("runCheckpoints did not return after its context ended")
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
