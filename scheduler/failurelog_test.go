package scheduler_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"pacer/scheduler"
)

// A failure repeating ten times a second for five minutes is logged once,
// then once a minute with its count, and its recovery once.
func TestFailureLogRateLimits(t *testing.T) {
	var buf bytes.Buffer
	f := scheduler.NewFailureLog(slog.New(slog.NewTextHandler(&buf, nil)), slog.LevelError, "engine pass")
	now := t0
	for range 3000 {
		f.Failed(now, errors.New("disk full"))
		now = now.Add(100 * time.Millisecond)
	}
	f.Succeeded(now)
	f.Succeeded(now.Add(time.Second)) // nothing to recover from
	logs := buf.String()
	if got := strings.Count(logs, "engine pass failed"); got != 1 {
		t.Fatalf("first failure logged %d times:\n%s", got, logs)
	}
	if got := strings.Count(logs, "engine pass still failing"); got != 4 {
		t.Fatalf("repeats logged %d times in 5 minutes, want 4 (once a minute after the first):\n%s", got, logs)
	}
	if !strings.Contains(logs, "failures=3000") || strings.Count(logs, "works again") != 1 {
		t.Fatalf("recovery not logged once with the count:\n%s", logs)
	}
	if f.Failures() != 0 {
		t.Fatalf("Failures after a success: %d", f.Failures())
	}
}
