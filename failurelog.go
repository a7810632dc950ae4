package main

import (
	"log/slog"
	"time"
)

// failureLogEvery is how often a failure that keeps repeating is logged
// again, with its count.
const failureLogEvery = time.Minute

// failureLog logs a repeating failure of one background task without
// flooding the log: the first failure, then at most once per
// failureLogEvery with the number of failures so far, and the recovery.
// It is used from one goroutine.
type failureLog struct {
	logger *slog.Logger
	what   string // "checkpoint"
	every  time.Duration

	failures   int // since the first of this run of failures; 0 while fine
	since      time.Time
	lastLogged time.Time
}

// newFailureLog returns a failureLog for the task what.
func newFailureLog(logger *slog.Logger, what string) *failureLog {
	return &failureLog{logger: logger, what: what, every: failureLogEvery}
}

// failed records a failure at now, logging it when due.
func (f *failureLog) failed(now time.Time, err error) {
	f.failures++
	switch {
	case f.failures == 1:
		f.since, f.lastLogged = now, now
		f.logger.Warn(f.what+" failed; retrying at the next tick (repeats are logged once a minute)", "err", err)
	case now.Sub(f.lastLogged) >= f.every:
		f.lastLogged = now
		f.logger.Warn(f.what+" still failing", "failures", f.failures, "since", f.since, "err", err)
	}
}

// succeeded records a success at now, logging the recovery from a run of
// failures.
func (f *failureLog) succeeded(now time.Time) {
	if f.failures == 0 {
		return
	}
	f.logger.Info(f.what+" works again", "failures", f.failures, "failingFor", now.Sub(f.since).Round(time.Millisecond))
	f.failures = 0
}
