package scheduler

import (
	"context"
	"log/slog"
	"time"
)

// FailureLogEvery is how often a failure that keeps repeating is logged
// again, with its count.
const FailureLogEvery = time.Minute

// FailureLog logs a repeating failure of one background task (the claim
// loop, the checkpoints) without flooding the log: the first failure, then
// at most once per FailureLogEvery with the number of failures so far, and
// the recovery. Times come from the caller's clock. It is used from one
// goroutine.
type FailureLog struct {
	logger *slog.Logger
	level  slog.Level
	what   string

	failures   int // in the current run of failures; 0 while fine
	since      time.Time
	lastLogged time.Time
}

// NewFailureLog returns a FailureLog that logs failures of the task what
// ("checkpoint") at level.
func NewFailureLog(logger *slog.Logger, level slog.Level, what string) *FailureLog {
	return &FailureLog{logger: logger, level: level, what: what}
}

// Failed records a failure at now, logging it when due.
func (f *FailureLog) Failed(now time.Time, err error) {
	f.failures++
	switch {
	case f.failures == 1:
		f.since, f.lastLogged = now, now
		f.logger.Log(context.Background(), f.level, f.what+" failed; retrying (repeats are logged once a minute)", "err", err)
	case now.Sub(f.lastLogged) >= FailureLogEvery:
		f.lastLogged = now
		f.logger.Log(context.Background(), f.level, f.what+" still failing", "failures", f.failures, "since", f.since, "err", err)
	}
}

// Succeeded records a success at now, logging the recovery from a run of
// failures.
func (f *FailureLog) Succeeded(now time.Time) {
	if f.failures == 0 {
		return
	}
	f.logger.Info(f.what+" works again", "failures", f.failures, "failingFor", now.Sub(f.since).Round(time.Millisecond))
	f.failures = 0
}

// Failures is the number of failures in the current run; 0 while fine.
func (f *FailureLog) Failures() int { return f.failures }
