package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/benbjohnson/clock"
)

// Config shapes a Scheduler. Zero fields take their defaults.
type Config struct {
	// Policy decides retries, holds and bounds; the zero Policy means
	// DefaultPolicy().
	Policy Policy
	// Engine shapes the claim loop.
	Engine EngineConfig
	// Pruner shapes the retention loop (KeepForever turns it off).
	Pruner PrunerConfig
	// Logger receives the scheduler's own logs (leases recovered at start)
	// and is the loops' logger where their config names none; nil discards.
	Logger *slog.Logger
}

// Scheduler is the scheduler's parts over one store, linked: the Service
// people and programs speak to, the Engine that sends, the Pruner that
// keeps the database bounded, and the Notifier that the store's commits
// signal and the change feed's long-polls wait on. Build it with New; Run
// drives every loop.
type Scheduler struct {
	// Service validates input, records manual actions and wakes Engine.
	Service *Service
	// Engine claims, sends and records attempts.
	Engine *Engine
	// Pruner removes finished operations and old changes.
	Pruner *Pruner
	// Changes is signaled after each commit of the store (Store.OnCommit);
	// Service.Changes waits on it. Close it when the HTTP server shuts down.
	Changes *Notifier

	clock clock.Clock
	log   *slog.Logger
}

// maxRecoverRetry bounds the wait between two failed recoveries in Run.
const maxRecoverRetry = 30 * time.Second

// New returns the Service, Engine, Pruner and change Notifier over store,
// already linked: the Service wakes the Engine, and the store signals the
// Notifier after each commit (Store.OnCommit), whoever wrote. It fails for
// an invalid policy, engine or pruner config.
func New(store Store, clk clock.Clock, cfg Config) (*Scheduler, error) {
	if cfg.Policy == (Policy{}) {
		cfg.Policy = DefaultPolicy()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Engine.Logger == nil {
		cfg.Engine.Logger = cfg.Logger
	}
	if cfg.Pruner.Logger == nil {
		cfg.Pruner.Logger = cfg.Logger
	}
	pruner, err := newPruner(store, clk, cfg.Pruner)
	if err != nil {
		return nil, err
	}
	engine, err := newEngine(store, clk, cfg.Policy, cfg.Engine)
	if err != nil {
		return nil, err
	}
	changes := NewNotifier()
	store.OnCommit(changes.Notify)
	// Another process's commits (PostgreSQL) wake the loop and the
	// long-polls of this one.
	store.OnWake(func() { engine.storeWoke(); changes.Notify() })
	svc := &Service{store: store, clock: clk, policy: cfg.Policy, wake: engine.Wake, wakeFor: engine.WakeFor, changes: changes, enqueues: newEnqueueGroup(store)}
	return &Scheduler{Service: svc, Engine: engine, Pruner: pruner, Changes: changes, clock: clk, log: cfg.Logger}, nil
}

// Recover returns the leases whose holder is gone to the queue
// (Engine.Recover: on SQLite every lease an earlier process left, on a
// shared database those of processes known dead) and logs how many there
// were. Run recovers too; a caller that must not serve
// before the recovery (the HTTP API) calls Recover first.
func (s *Scheduler) Recover(ctx context.Context) error {
	n, err := s.Engine.Recover(ctx)
	if err != nil {
		return fmt.Errorf("recover leases: %w", err)
	}
	if n > 0 {
		s.log.Warn("recovered leases left by an earlier process", "count", n)
	}
	return nil
}

// Run recovers the leases of an earlier process (a failed recovery is
// logged and tried again, with a growing wait), then runs the engine and
// the pruner until ctx ends; each loop backs off on its errors and never
// gives up. It returns once every loop has stopped (the engine after its
// shutdown grace).
func (s *Scheduler) Run(ctx context.Context) error {
	failures := NewFailureLog(s.log, slog.LevelError, "lease recovery")
	for {
		err := s.Recover(ctx)
		if err == nil {
			failures.Succeeded(s.clock.Now())
			break
		}
		if ctx.Err() != nil {
			return nil
		}
		failures.Failed(s.clock.Now(), err)
		timer := s.clock.Timer(min(maxRecoverRetry, time.Duration(failures.Failures())*time.Second))
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-timer.C:
		}
	}
	loops := []func(context.Context) error{s.Engine.Run, s.Pruner.Run}
	errs := make([]error, len(loops))
	var wg sync.WaitGroup
	for i, run := range loops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = run(ctx)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
