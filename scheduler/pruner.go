package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/benbjohnson/clock"
)

// Pruner defaults.
const (
	// DefaultRetention is how long succeeded and canceled operations, and
	// change-feed entries, are kept: seven days.
	DefaultRetention = 7 * 24 * time.Hour
	// MinRetention is the shortest retention a Pruner accepts, so a slip of
	// the finger cannot empty the change feed under its readers.
	MinRetention = time.Minute
	// DefaultPruneBatch is how many operations (and changes) one batch
	// removes in one transaction.
	DefaultPruneBatch = 500
	// DefaultPruneInterval is the pause between sweeps once nothing is left
	// to remove.
	DefaultPruneInterval = time.Minute
	// DefaultPrunePause is the pause between two batches of one sweep: the
	// claim loop gets the writer back in between.
	DefaultPrunePause = 100 * time.Millisecond
)

// PrunerConfig shapes a Pruner. Zero fields take the defaults above.
type PrunerConfig struct {
	// Retention is the age after which succeeded and canceled operations
	// (with their attempts and audit entries) and change-feed entries are
	// removed. Held and failed operations are kept until a person acts.
	Retention time.Duration
	// BatchSize bounds the rows of one transaction (see PruneParams.Limit).
	BatchSize int
	// Interval is the pause between sweeps once a batch found little left.
	Interval time.Duration
	// Pause is the pause between full batches.
	Pause time.Duration
	// Logger receives what was removed and any errors; nil discards.
	Logger *slog.Logger
	// KeepForever turns retention off: nothing is removed, Retention is
	// ignored, and Run only waits for its context to end.
	KeepForever bool
}

func (c *PrunerConfig) applyDefaults() error {
	if c.Retention == 0 {
		c.Retention = DefaultRetention
	}
	if c.BatchSize == 0 {
		c.BatchSize = DefaultPruneBatch
	}
	if c.Interval == 0 {
		c.Interval = DefaultPruneInterval
	}
	if c.Pause == 0 {
		c.Pause = DefaultPrunePause
	}
	switch {
	case c.KeepForever:
	case c.Retention < MinRetention:
		return fmt.Errorf("pruner: retention %s is shorter than the minimum %s", c.Retention, MinRetention)
	case c.BatchSize < 1 || c.BatchSize > 100_000:
		return fmt.Errorf("pruner: batch size %d out of range 1..100000", c.BatchSize)
	case c.Interval < 0 || c.Pause < 0:
		return errors.New("pruner: interval and pause must not be negative")
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Pruner is the retention service: it removes finished operations and old
// change-feed entries in small batches so the database does not grow
// without bound under steady traffic. Run drives it; tests call RunOnce.
type Pruner struct {
	store Store
	clock clock.Clock
	cfg   PrunerConfig
	log   *slog.Logger
}

// newPruner returns a Pruner over store, or an error for an invalid cfg
// (New builds it).
func newPruner(store Store, clk clock.Clock, cfg PrunerConfig) (*Pruner, error) {
	if err := cfg.applyDefaults(); err != nil {
		return nil, err
	}
	return &Pruner{store: store, clock: clk, cfg: cfg, log: cfg.Logger}, nil
}

// Retention is the configured retention.
func (p *Pruner) Retention() time.Duration { return p.cfg.Retention }

// RunOnce removes one batch of what is older than the retention at the
// clock's now: at most BatchSize operations and BatchSize changes, in one
// transaction. Result.More says a batch was full and more may be left.
// With KeepForever it removes nothing.
func (p *Pruner) RunOnce(ctx context.Context) (PruneResult, error) {
	if p.cfg.KeepForever {
		return PruneResult{}, nil
	}
	before := p.clock.Now().UTC().Add(-p.cfg.Retention)
	return p.store.PruneFinished(ctx, PruneParams{Before: before, Limit: p.cfg.BatchSize})
}

// Run prunes until ctx ends: batch after batch with Pause between them
// while batches are full, then a sweep every Interval. Errors are logged
// and retried with a growing delay (up to Interval); Run never gives up
// because of one. It returns nil when ctx ends. With KeepForever it only
// waits for ctx.
func (p *Pruner) Run(ctx context.Context) error {
	if p.cfg.KeepForever {
		p.log.Info("retention off: finished operations are kept forever")
		<-ctx.Done()
		return nil
	}
	var (
		failures int
		sweep    PruneResult
	)
	for {
		res, err := p.RunOnce(ctx)
		delay := p.cfg.Interval
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return nil
			}
			failures++
			delay = min(p.cfg.Interval, max(p.cfg.Pause, time.Second)*time.Duration(1<<min(failures, 10)))
			p.log.Error("retention batch failed", "err", err, "failures", failures, "retry", delay)
		default:
			failures = 0
			sweep = sweep.Add(res)
			if res.More {
				delay = p.cfg.Pause
			} else {
				if sweep.Operations+sweep.Changes > 0 {
					p.log.Info("retention: removed finished operations and old changes",
						"operations", sweep.Operations, "attempts", sweep.Attempts, "audit", sweep.Audit,
						"changes", sweep.Changes, "retention", p.cfg.Retention.String())
				}
				sweep = PruneResult{}
			}
		}
		timer := p.clock.Timer(delay)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-timer.C:
		}
	}
}
