package scheduler

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"

	"pacer/providers"
)

// Engine defaults.
const (
	DefaultWorkers        = 32
	DefaultLeaseDuration  = 2 * time.Minute
	DefaultRequestTimeout = 60 * time.Second
	DefaultPollInterval   = 5 * time.Second
	DefaultShutdownGrace  = 15 * time.Second
	// DefaultResultLimit bounds a stored answer body unless configured
	// (serve --result-limit): large enough for a page of 100 GitHub
	// repositories.
	DefaultResultLimit = 1 << 20
	// MinResultLimit and MaxResultLimit bound a configured result limit:
	// below 1 KiB no provider error fits, and every worker may hold one
	// body of up to the limit in memory while it reads.
	MinResultLimit = 1 << 10
	MaxResultLimit = 64 << 20
	// LeaseMargin is the least time between a request's context deadline
	// and its lease's expiry: a request always ends before its lease does,
	// so an expired lease never belongs to a request still in flight.
	LeaseMargin = 5 * time.Second
	// DeadlineGrace is how long past its deadline a waiting operation may
	// still be claimed before the loop ends it (design §11 "Deadlines end
	// work even when it never ran"): an attempt due at or just before its
	// deadline still leaves despite the loop's own lateness, while one held
	// back (a paused or held scope, no free slot) ends within this grace.
	DeadlineGrace = time.Second
	// expireBatch bounds one transaction of deadline expiry.
	expireBatch = 500
)

// CheckResultLimit reports whether n bytes is an acceptable result limit
// (MinResultLimit..MaxResultLimit).
func CheckResultLimit(n int) error {
	if n < MinResultLimit || n > MaxResultLimit {
		return fmt.Errorf("result limit %d bytes out of range %d (1 KiB)..%d (64 MiB)", n, MinResultLimit, MaxResultLimit)
	}
	return nil
}

// EngineConfig shapes the engine. Zero fields take the defaults above.
type EngineConfig struct {
	// Workers bounds the requests in flight at once.
	Workers int
	// LeaseDuration is how long a claim is valid.
	LeaseDuration time.Duration
	// RequestTimeout bounds one request; it must be at most
	// LeaseDuration-LeaseMargin.
	RequestTimeout time.Duration
	// PollInterval is the longest the loop sleeps without a wake-up.
	PollInterval time.Duration
	// ShutdownGrace is how long in-flight requests may finish after Run's
	// context ends before they are canceled and recorded as interrupted.
	ShutdownGrace time.Duration
	// ResultLimit bounds a stored answer body (a success's result, the last
	// answer of a failed or held operation), in bytes; see CheckResultLimit.
	ResultLimit int
	// Client sends the requests; nil uses a client with sane transport
	// timeouts. The engine keeps a copy made when it is built, whose
	// CheckRedirect is its own: it follows redirects itself (design §12).
	Client *http.Client
	// Logger receives the engine's logs; nil discards them.
	Logger *slog.Logger
	// Random is the jitter source; nil uses a seeded generator.
	Random Random
	// UserAgent is sent with every request.
	UserAgent string
	// Observer receives measurements for metrics; nil records nothing.
	Observer Observer
}

func (c *EngineConfig) applyDefaults() error {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if c.Workers == 0 {
		c.Workers = DefaultWorkers
	}
	def(&c.LeaseDuration, DefaultLeaseDuration)
	def(&c.RequestTimeout, DefaultRequestTimeout)
	def(&c.PollInterval, DefaultPollInterval)
	def(&c.ShutdownGrace, DefaultShutdownGrace)
	if c.ResultLimit == 0 {
		c.ResultLimit = DefaultResultLimit
	}
	if err := CheckResultLimit(c.ResultLimit); err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	switch {
	case c.Workers < 1 || c.Workers > 10000:
		return fmt.Errorf("engine: workers %d out of range 1..10000", c.Workers)
	case c.RequestTimeout <= 0 || c.RequestTimeout > c.LeaseDuration-LeaseMargin:
		return fmt.Errorf("engine: request timeout (%s) must be positive and at most the lease duration (%s) minus %s, so a request always ends before its lease", c.RequestTimeout, c.LeaseDuration, LeaseMargin)
	case c.PollInterval <= 0 || c.ShutdownGrace < 0:
		return errors.New("engine: poll interval must be positive and shutdown grace not negative")
	}
	if c.Client == nil {
		c.Client = &http.Client{
			Transport: &http.Transport{
				Proxy:                 http.ProxyFromEnvironment,
				MaxIdleConnsPerHost:   c.Workers,
				IdleConnTimeout:       90 * time.Second,
				TLSHandshakeTimeout:   10 * time.Second,
				ResponseHeaderTimeout: c.RequestTimeout,
				ForceAttemptHTTP2:     true,
			},
		}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Random == nil {
		var seed [16]byte
		_, _ = crand.Read(seed[:])
		r := rand.New(rand.NewPCG(binary.LittleEndian.Uint64(seed[:8]), binary.LittleEndian.Uint64(seed[8:])))
		var mu sync.Mutex
		c.Random = func() float64 { mu.Lock(); defer mu.Unlock(); return r.Float64() }
	}
	if c.UserAgent == "" {
		c.UserAgent = "pacer"
	}
	if c.Observer == nil {
		c.Observer = NopObserver{}
	}
	return nil
}

// Engine claims due operations, sends them, classifies the answers and
// commits the decisions. Run drives it; tests may drive RunOnce and Wait.
type Engine struct {
	store  Store
	clock  clock.Clock
	policy Policy
	cfg    EngineConfig
	log    *slog.Logger

	wake chan struct{}
	// slots holds one token per worker busy sending or waiting for its
	// attempt's commit; only ticks take tokens.
	slots chan struct{}
	// sending counts the sends in flight, settled the claims whose
	// attempt is not yet committed (or given up).
	sending, settled sync.WaitGroup
	// inFlight counts the requests being sent (InFlight).
	inFlight atomic.Int64
	// pauses are the scope pauses the workers decided, checked before
	// each send (learnedPauses).
	pauses learnedPauses

	// tickMu serializes ticks (Run's loop, RunOnce, Wait); tickFailed
	// says the last one failed.
	tickMu     sync.Mutex
	tickFailed bool
	// finished holds the decided attempts waiting for a tick;
	// finishedSignal tells the loop one arrived.
	finishedMu     sync.Mutex
	finished       []finishedAttempt
	finishedSignal chan struct{}
	// housekeepAt is when the loop next looks for expired leases and
	// overdue deadlines without a reason to look sooner; busy says work
	// was claimed, committed or enqueued since it last looked, so it
	// looks again by then (Run's loop only).
	housekeepAt time.Time
	busy        bool

	// sendCtx is the parent of every request; canceled once the shutdown
	// grace has passed.
	sendCtx    context.Context
	cancelSend context.CancelFunc
	// sender sends the claimed attempts over cfg.Client.
	sender *sender
	// tokens keeps the access tokens of renewing grants (design §13).
	tokens *tokenKeeper

	profilesMu sync.Mutex
	profiles   map[[2]string]providers.Profile
	redactors  redactors

	// leases are the leases this engine's live workers hold: operation ID
	// → lease token. recover never takes one of them.
	leasesMu sync.Mutex
	leases   map[string]int64

	// lastPass is the scheduler-clock time (Unix nanoseconds) at which the
	// last successful pass ended; 0 before the first. See Stalled.
	lastPass atomic.Int64
	// nextExpiry is when the earliest waiting deadline known to the last
	// pass runs out (its deadline plus DeadlineGrace), in Unix nanoseconds;
	// 0 when none waits.
	nextExpiry atomic.Int64
	// sleepsUntil is when Run's sleep ends (scheduler-clock Unix
	// nanoseconds), set before it sleeps; 0 from the start of each pass
	// until then. enqueued says WakeFor let work enqueued meanwhile wait
	// for that pass (so the loop counts it as busy). See WakeFor.
	sleepsUntil atomic.Int64
	enqueued    atomic.Bool
	// orphans says the store woke the loop (Store.OnWake): the next pass
	// recovers the leases of processes gone (recoverOrphaned).
	orphans atomic.Bool
}

// newEngine returns an engine over store (New builds it).
func newEngine(store Store, clk clock.Clock, policy Policy, cfg EngineConfig) (*Engine, error) {
	if err := policy.Validate(); err != nil {
		return nil, err
	}
	if err := cfg.applyDefaults(); err != nil {
		return nil, err
	}
	sendCtx, cancel := context.WithCancel(context.Background())
	return &Engine{
		tokens: newTokenKeeper(sendCtx, store, clk, cfg),
		store:  store, clock: clk, policy: policy, cfg: cfg, log: cfg.Logger,
		wake:           make(chan struct{}, 1),
		slots:          make(chan struct{}, cfg.Workers),
		finishedSignal: make(chan struct{}, 1),
		sendCtx:        sendCtx, cancelSend: cancel,
		sender:   newSender(cfg.Client, cfg.ResultLimit, cfg.UserAgent),
		profiles: map[[2]string]providers.Profile{},
		leases:   map[string]int64{},
	}, nil
}

// Wake asks the loop to look for due work now. It never blocks.
func (e *Engine) Wake() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// WakeFor asks the loop to look for work that becomes due at `at` (an
// operation just committed): it wakes the loop, unless the loop sleeps
// until no later than at, when the pass it runs then finds that work (or
// learns when it is due) by itself; the loop still counts it as new work
// for its housekeeping (busy). A pass that has begun, or a loop not yet
// asleep, is always woken, as it may have read the store before the work
// was committed. It never blocks.
func (e *Engine) WakeFor(at time.Time) {
	if until := e.sleepsUntil.Load(); until != 0 && until <= at.UnixNano() {
		e.enqueued.Store(true)
		return
	}
	e.Wake()
}

// Recover returns the leases whose holder is gone (Store.ListOrphaned) to
// the queue: on SQLite, whose process lock the caller holds, every lease
// left by an earlier process; on a database several processes share, only
// those of processes known dead, never a live one's. Reads are rescheduled
// at once; mutations follow invariant 4.
func (e *Engine) Recover(ctx context.Context) (int, error) {
	return e.recover(ctx, e.store.ListOrphaned, "pacer restarted while the attempt was in flight")
}

// recoverOrphaned returns the leases of processes known gone
// (Store.ListOrphaned) to the queue, as Recover does, while the engine
// runs: the store's OnWake said there may be some (another process died).
func (e *Engine) recoverOrphaned(ctx context.Context) (int, error) {
	return e.recover(ctx, e.store.ListOrphaned, "the process holding the lease stopped while the attempt was in flight")
}

// recoverExpired returns leases that expired before now, except those of
// the engine's own live workers (see recover).
func (e *Engine) recoverExpired(ctx context.Context, now time.Time) (int, error) {
	list := func(ctx context.Context, limit int) ([]Claim, error) { return e.store.ListRunning(ctx, now, limit) }
	return e.recover(ctx, list, "lease expired before the attempt completed")
}

// storeWoke is the store's wake-up (Store.OnWake): work another process
// made due, or leases of a process gone, which the next pass recovers.
func (e *Engine) storeWoke() {
	e.orphans.Store(true)
	e.Wake()
}

// recoverBatch bounds the leases one recovery step lists, beyond those of
// the engine's own workers.
const recoverBatch = 200

// recover completes, as interrupted, the running operations list returns
// (expired leases, or those of a process gone), except those held by this
// engine's own live workers: within a process, expiry is a safety net for
// a worker that is gone, never a race with one that still runs (a step of
// the wall clock must not send a request twice). It logs each lease it
// actually recovered, after the commit.
func (e *Engine) recover(ctx context.Context, list func(ctx context.Context, limit int) ([]Claim, error), why string) (int, error) {
	total := 0
	for {
		claims, err := list(ctx, recoverBatch+e.ownLeases())
		if err != nil {
			return total, fmt.Errorf("list leases to recover: %w", err)
		}
		now := e.clock.Now().UTC()
		taken := make([]Claim, 0, len(claims))
		cs := make([]Completion, 0, len(claims))
		for _, c := range claims {
			if e.ownLease(c.Operation) {
				continue
			}
			idem := e.idempotency(c.Scope)
			out, d := e.policy.Recover(c.Operation, idem, now, why)
			taken = append(taken, c)
			cs = append(cs, c.Operation.completion(now, out, d))
		}
		if len(cs) == 0 {
			return total, nil
		}
		applied, err := e.store.Complete(ctx, cs)
		if err != nil {
			return total, fmt.Errorf("recover leases: %w", err)
		}
		n := 0
		for i, a := range applied {
			if !a {
				continue // completed meanwhile: the fence kept that answer
			}
			n++
			c := taken[i]
			e.log.Warn("lease recovered", "operation", c.Operation.ID, "scope", c.Scope.Name, "kind", c.Operation.Kind, "state", cs[i].Decision.State, "reason", why)
		}
		total += n
		if n == 0 { // every one completed concurrently; avoid spinning
			return total, nil
		}
	}
}

// holdLease records that one of the engine's workers holds op's lease.
func (e *Engine) holdLease(op Operation) {
	e.leasesMu.Lock()
	defer e.leasesMu.Unlock()
	e.leases[op.ID] = op.LeaseToken
}

// dropLease records that the worker holding op's lease is done.
func (e *Engine) dropLease(op Operation) {
	e.leasesMu.Lock()
	defer e.leasesMu.Unlock()
	if e.leases[op.ID] == op.LeaseToken {
		delete(e.leases, op.ID)
	}
}

// ownLease reports whether op's current lease is held by one of the
// engine's live workers.
func (e *Engine) ownLease(op Operation) bool {
	e.leasesMu.Lock()
	defer e.leasesMu.Unlock()
	tok, ok := e.leases[op.ID]
	return ok && tok == op.LeaseToken
}

// ownLeases counts the leases the engine's live workers hold.
func (e *Engine) ownLeases() int {
	e.leasesMu.Lock()
	defer e.leasesMu.Unlock()
	return len(e.leases)
}

// expireOverdue ends every waiting operation whose deadline passed more
// than DeadlineGrace before now (Policy.Expire decides how), in bounded
// batches, and notes when the next deadline runs out.
func (e *Engine) expireOverdue(ctx context.Context, now time.Time) error {
	total := 0
	for {
		res, err := e.store.ExpireOverdue(ctx, ExpireParams{
			Now: now, Before: now.Add(-DeadlineGrace), Limit: expireBatch,
			Decide: func(op Operation) Decision { return e.policy.Expire(op, now) },
		})
		if err != nil {
			return fmt.Errorf("end operations past their deadline: %w", err)
		}
		total += res.Expired
		if !res.More {
			var next int64 // only a deadline before the next poll matters
			if at := res.Next.Add(DeadlineGrace); !res.Next.IsZero() && at.Before(now.Add(e.cfg.PollInterval)) {
				next = at.UnixNano()
			}
			e.nextExpiry.Store(next)
			break
		}
	}
	if total > 0 {
		e.log.Info("operations ended: their deadline passed while they waited", "count", total)
	}
	return nil
}

// RunOnce recovers expired leases, ends waiting operations whose deadline
// has passed, then commits the finished attempts and claims as many due
// operations as there are free workers, in one tick, and starts sending
// them. It returns the number claimed; the sends go on in the background
// (see Wait).
func (e *Engine) RunOnce(ctx context.Context) (int, error) {
	n, _, err := e.pass(ctx, true)
	return n, err
}

// housekeepingInterval is how often Run's loop looks for expired leases
// and overdue deadlines when nothing tells it to look sooner: a lease
// expires only when its worker is gone (within a process, never), and a
// deadline the loop knows of wakes it (nextExpiry).
const housekeepingInterval = time.Second

// pass is one turn of the loop: housekeeping (always, or when due by
// housekeepingInterval and nextExpiry), then a tick. It also says whether
// the claim was cut short by the free workers, so the loop knows to claim
// again as soon as enough are free.
func (e *Engine) pass(ctx context.Context, housekeep bool) (claimed int, full bool, err error) {
	now := e.clock.Now().UTC()
	if ns := e.nextExpiry.Load(); ns != 0 && now.UnixNano() >= ns {
		housekeep = true
	}
	if e.orphans.Swap(false) {
		if _, err := e.recoverOrphaned(ctx); err != nil {
			e.orphans.Store(true)
			return 0, false, err
		}
	}
	if housekeep || !now.Before(e.housekeepAt) {
		if _, err := e.recoverExpired(ctx, now); err != nil {
			return 0, false, err
		}
		if err := e.expireOverdue(ctx, now); err != nil {
			return 0, false, err
		}
		e.tokens.keepFresh(now)
		e.housekeepAt, e.busy = now.Add(housekeepingInterval), false
	}
	claimed, full, err = e.tick(ctx, true)
	if err != nil {
		return 0, false, err
	}
	if claimed > 0 {
		e.busy = true
	}
	e.heartbeat()
	return claimed, full, nil
}

// StallMargin is how much longer than its PollInterval the claim loop may
// go without finishing a pass before Stalled reports it: room for a pass
// that waits on a busy database.
const StallMargin = 30 * time.Second

// heartbeat records that a pass ended well, on the scheduler's clock.
func (e *Engine) heartbeat() { e.lastPass.Store(e.clock.Now().UnixNano()) }

// LastPass is when the last successful pass (RunOnce, or a turn of Run's
// loop) ended, on the scheduler's clock; zero before the first.
func (e *Engine) LastPass() time.Time {
	if ns := e.lastPass.Load(); ns != 0 {
		return time.Unix(0, ns).UTC()
	}
	return time.Time{}
}

// Stalled returns an error when the claim loop has not finished a
// successful pass within PollInterval+StallMargin before now (or never
// has): the loop is stuck, or every pass fails because the store is
// unusable. It returns nil for a loop that keeps turning.
func (e *Engine) Stalled(now time.Time) error {
	last := e.LastPass()
	if last.IsZero() {
		return errors.New("the claim loop has not completed a pass yet")
	}
	if age := now.Sub(last); age > e.cfg.PollInterval+StallMargin {
		return fmt.Errorf("the claim loop last completed a pass %s ago (at %s)", age.Round(time.Second), last.Format(time.RFC3339))
	}
	return nil
}

// InFlight is the number of requests being sent right now.
func (e *Engine) InFlight() int { return int(e.inFlight.Load()) }

// Run loops until ctx ends: it claims due work on wake-ups, at the earliest
// known due time and at least every PollInterval, and commits finished
// attempts with the next claim as soon as a share of the workers has
// finished (gatherShare) or GatherWait after the first. Errors are logged
// and retried with backoff; Run never gives up. When ctx ends it stops
// claiming, lets in-flight attempts finish within ShutdownGrace, then
// cancels them (they are recorded as interrupted) and returns.
func (e *Engine) Run(ctx context.Context) error {
	failures := NewFailureLog(e.log, slog.LevelError, "engine pass")
	for {
		e.sleepsUntil.Store(0)
		claimed, full, err := e.pass(ctx, false)
		delay := e.cfg.PollInterval
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			failures.Failed(e.clock.Now(), err)
			delay = min(e.cfg.PollInterval, time.Duration(failures.Failures())*100*time.Millisecond)
		} else {
			failures.Succeeded(e.clock.Now())
			if ns := e.nextExpiry.Load(); ns != 0 {
				delay = min(delay, max(time.Unix(0, ns).Sub(e.clock.Now()), 0)+time.Millisecond)
			}
			if e.busy {
				// New work may have a deadline the last look did not see.
				delay = min(delay, max(e.housekeepAt.Sub(e.clock.Now()), 0)+time.Millisecond)
			}
			if !full && len(e.slots) < cap(e.slots) {
				// Workers are free: sleep until something is due. (With
				// none free, the next finished attempt wakes the loop.)
				if at, ok, err := e.store.NextWake(ctx); err != nil {
					e.log.Error("find next due time", "err", err)
				} else if ok {
					wait := max(at.Sub(e.clock.Now()), 0)
					if wait == 0 && claimed == 0 {
						// Due now, yet the claim took nothing: a lease
						// expired. Look for it on the next pass.
						e.housekeepAt = time.Time{}
					}
					delay = min(delay, wait+time.Millisecond)
				}
			}
		}
		e.sleepsUntil.Store(e.clock.Now().Add(delay).UnixNano())
		woken, ok := e.await(ctx, delay, err != nil, full)
		if !ok {
			return e.shutdown()
		}
		// Work enqueued without a wake-up (WakeFor) counts as new work too.
		e.busy = e.busy || woken || e.enqueued.Swap(false)
	}
	return e.shutdown()
}

// await waits for the loop's next pass: until ctx ends (it returns false),
// delay passes, a wake-up finds a free worker, or finished attempts are to
// be committed. With work waiting for workers (the last claim was full,
// backlog) the loop gathers them: it commits once a share of the workers
// has finished (gatherShare), or GatherWait after the first, so one commit
// and one claim serve many; otherwise it commits each at once (more gather
// while a tick runs). After a failed pass (retrying) attempts wait
// for the delay, the pass's backoff. woken says the wait ended for work
// (a wake-up or finished attempts), not for the delay.
func (e *Engine) await(ctx context.Context, delay time.Duration, retrying, backlog bool) (woken, ok bool) {
	timer := e.clock.Timer(delay)
	defer timer.Stop()
	var gathering *clock.Timer
	defer func() {
		if gathering != nil {
			gathering.Stop()
		}
	}()
	// ready says whether the attempts waiting should be committed now,
	// starting the gathering wait when not.
	ready := func() bool {
		n := e.pendingAttempts()
		switch {
		case n == 0 || retrying:
			return false
		case !backlog || n >= e.gatherShare():
			return true
		}
		if gathering == nil {
			gathering = e.clock.Timer(GatherWait)
		}
		return false
	}
	gathered := func() <-chan time.Time {
		if gathering == nil {
			return nil
		}
		return gathering.C
	}
	if ready() {
		return true, true // finished during the pass
	}
	for {
		select {
		case <-ctx.Done():
			return false, false
		case <-timer.C:
			return false, true
		case <-gathered():
			return true, true
		case <-e.wake:
			if len(e.slots) < cap(e.slots) {
				return true, true
			}
			// Every worker is busy: the claim waits for finished ones.
			backlog = true
			if ready() {
				return true, true
			}
		case <-e.finishedSignal:
			if ready() {
				return true, true
			}
		}
	}
}

// shutdown waits up to the grace period for the sends in flight,
// committing their attempts as they finish, then cancels what is left and
// commits it.
func (e *Engine) shutdown() error {
	sent := make(chan struct{})
	go func() { e.sending.Wait(); close(sent) }()
	grace := e.clock.Timer(e.cfg.ShutdownGrace)
	defer grace.Stop()
	for waiting := true; waiting; {
		select {
		case <-sent:
			waiting = false
		case <-e.finishedSignal:
			e.flush()
		case <-grace.C:
			e.log.Warn("shutdown grace over: canceling in-flight requests", "inFlight", e.InFlight())
			e.cancelSend()
			<-sent
			waiting = false
		}
	}
	e.flush()
	e.settled.Wait()
	e.tokens.wait()
	return nil
}

// sendEnded counts one claimed attempt's send as over (sent or not).
func (e *Engine) sendEnded() {
	e.inFlight.Add(-1)
	e.cfg.Observer.ObserveInFlight(-1)
}

// work sends one claimed operation, decides what its answer means and
// queues the decided attempt for the loop's next tick.
func (e *Engine) work(c Claim) {
	defer e.sending.Done()
	op := c.Operation
	if until, held := e.pauses.heldUntil(c.Scope.Name, e.clock.Now()); held {
		e.sendEnded()
		out, d := e.policy.NotSent(op, until)
		e.finish(finishedAttempt{claim: c, comp: op.completion(e.clock.Now().UTC().Truncate(time.Millisecond), out, d)})
		return
	}
	profile := e.profile(c.Scope)
	red := e.redactors.of(c.Scope)
	deadline := e.clock.Now().Add(e.cfg.RequestTimeout)
	if lease := op.LeaseExpiresAt.Add(-LeaseMargin); lease.Before(deadline) {
		deadline = lease
	}
	ctx, cancel := e.clock.WithDeadline(e.sendCtx, deadline)
	started := e.clock.Now()
	var sr sendResult
	if c.Scope.Credentials.Type.Renews() {
		var fail *tokenFailure
		if sr, red, fail = e.sendRenewing(ctx, c, profile); fail != nil {
			cancel()
			e.sendEnded()
			e.tokenFailed(c, fail, e.clock.Now().UTC().Truncate(time.Millisecond))
			return
		}
	} else {
		sr = e.sender.send(ctx, c, profile, red)
	}
	cancel()
	e.sendEnded()
	now := e.clock.Now().UTC().Truncate(time.Millisecond)
	sr.exchange.Now = now
	out := sr.redirects.settle(profile.Classify(sr.exchange), red)
	e.cfg.Observer.ObserveAttempt(c.Scope.Provider, out.Class, now.Sub(started))
	if e.sendCtx.Err() != nil && sr.exchange.Err != nil {
		out.Reason = "interrupted"
		out.Detail = "canceled at shutdown: " + out.Detail
	}
	// The profile saw only redacted text; this pass covers a profile that
	// assembles a secret from pieces, and the texts derived from Detail.
	out.Detail, out.Reason = red.String(out.Detail), red.String(out.Reason)
	out.Hint.Raw, out.Hint.Note = red.String(out.Hint.Raw), red.String(out.Hint.Note)
	d := e.policy.Decide(op, profile.Idempotency(), out, now, e.cfg.Random)
	if until := d.Scope.PauseUntil; until.After(now) {
		e.pauses.note(c.Scope.Name, until, now) // before the commit: see learnedPauses
	}
	if d.State == StateSucceeded {
		d.Result = sr.result
	}
	comp := op.completion(now, out, d)
	comp.Response, comp.AttemptResponse = keptAnswers(sr.result, d.State == StateSucceeded, red)
	e.finish(finishedAttempt{claim: c, comp: comp, took: now.Sub(started)})
}

// profile returns the scope's profile, cached by provider and options
// (for a custom scope, the content of its declarative profile).
func (e *Engine) profile(s Scope) providers.Profile {
	// A custom scope's declarative profile is part of the key (by content).
	key := [2]string{s.Provider, s.IdempotencyHeader + "\x00" + s.Profile.Key()}
	e.profilesMu.Lock()
	defer e.profilesMu.Unlock()
	if p, ok := e.profiles[key]; ok {
		return p
	}
	p, err := providers.Lookup(s.Provider, providers.Options{IdempotencyHeader: s.IdempotencyHeader, Spec: s.Profile})
	if err != nil {
		// A scope is validated when stored; an unknown provider here means
		// a newer binary wrote it. Generic is the safe reading.
		e.log.Error("unknown provider; classifying with the generic profile", "provider", s.Provider, "scope", s.Name)
		p = providers.NewGeneric(providers.Options{})
	}
	e.profiles[key] = p
	return p
}

func (e *Engine) idempotency(s Scope) providers.Idempotency { return e.profile(s).Idempotency() }

// durableClaim reports whether c's claim must be on disk before its request
// leaves (§11 "Durable before it leaves"): a mutation its provider cannot
// deduplicate. Lost in a power cut, such a claim would make the mutation
// look unsent, and it would be sent again without a key to catch it.
func (e *Engine) durableClaim(c Claim) bool {
	return c.Operation.Kind == KindMutation && !e.idempotency(c.Scope).Applies(c.Operation.Request.Method)
}
