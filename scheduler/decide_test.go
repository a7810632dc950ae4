package scheduler_test

import (
	"strings"
	"testing"
	"time"

	"pacer/providers"
	"pacer/scheduler"
)

var t0 = time.Date(2026, 9, 11, 2, 0, 0, 0, time.UTC)

func half() float64 { return 0.5 }

func testOp(kind scheduler.Kind, method string, budgetAttempts int) scheduler.Operation {
	return scheduler.Operation{
		ID: "op-1", Kind: kind, Request: scheduler.Request{Method: method, Path: "/x"},
		RequestIdentity: "op-1", State: scheduler.StateRunning,
		Attempt: budgetAttempts, BudgetAttempts: budgetAttempts,
		Retry:     scheduler.Retry{MaxAttempts: 5, MaxElapsed: 24 * time.Hour},
		CreatedAt: t0.Add(-time.Hour), Deadline: t0.Add(23 * time.Hour),
		FirstSentAt: t0.Add(-time.Minute),
	}
}

var stripeIdem = providers.Idempotency{Header: "Idempotency-Key", Retention: 24 * time.Hour, Methods: []string{"POST"}}

func TestDecide(t *testing.T) {
	p := scheduler.DefaultPolicy()
	hint := func(d time.Duration) providers.Hint {
		return providers.Hint{Source: "retry-after", Raw: "x", At: t0.Add(d)}
	}
	tests := []struct {
		name     string
		op       scheduler.Operation
		idem     providers.Idempotency
		out      providers.Outcome
		state    scheduler.State
		hold     scheduler.HoldReason
		failure  scheduler.FailureReason
		earliest time.Duration // NextAttemptAt >= t0+earliest (due states)
		latest   time.Duration // NextAttemptAt <= t0+latest (due states)
		pause    time.Duration // scope pause until t0+pause (0: none)
		// budgetPause is the pause of the answer's budget alone (design
		// §12), until t0+budgetPause (0: none).
		budgetPause time.Duration
	}{
		{name: "success", op: testOp(scheduler.KindRead, "GET", 1), out: providers.Outcome{Class: providers.ClassSuccess, Status: 200}, state: scheduler.StateSucceeded},
		{name: "permanent fails at once", op: testOp(scheduler.KindMutation, "POST", 1), out: providers.Outcome{Class: providers.ClassPermanent, Status: 422}, state: scheduler.StateFailed, failure: scheduler.FailurePermanent},
		{name: "auth revoked holds op", op: testOp(scheduler.KindRead, "GET", 1), out: providers.Outcome{Class: providers.ClassAuthRevoked, Status: 401}, state: scheduler.StateHeld, hold: scheduler.HoldAuthRevoked},
		{name: "rate limited honours hint and pauses scope", op: testOp(scheduler.KindRead, "GET", 1), out: providers.Outcome{Class: providers.ClassRateLimited, Status: 429, Hint: hint(57 * time.Second)}, state: scheduler.StateWaitingForBudget, earliest: 57 * time.Second, latest: 57*time.Second + p.Spread, pause: 57 * time.Second},
		{name: "rate limited without hint waits the default", op: testOp(scheduler.KindRead, "GET", 1), out: providers.Outcome{Class: providers.ClassRateLimited, Status: 429}, state: scheduler.StateWaitingForBudget, earliest: p.RateLimitDelay, latest: p.RateLimitDelay + p.Spread, pause: p.RateLimitDelay},
		{name: "rate limited with unusable hint waits the default", op: testOp(scheduler.KindRead, "GET", 1), out: providers.Outcome{Class: providers.ClassRateLimited, Status: 429, Hint: providers.Hint{Source: "retry-after", Raw: "-5", Note: "negative"}}, state: scheduler.StateWaitingForBudget, earliest: p.RateLimitDelay, latest: p.RateLimitDelay + p.Spread, pause: p.RateLimitDelay},
		{name: "tiny hint raised to minimum", op: testOp(scheduler.KindRead, "GET", 1), out: providers.Outcome{Class: providers.ClassRateLimited, Status: 429, Hint: hint(10 * time.Millisecond)}, state: scheduler.StateWaitingForBudget, earliest: p.MinHint, latest: p.MinHint + p.Spread, pause: p.MinHint},
		{name: "long hint clamped to maximum", op: testOp(scheduler.KindRead, "GET", 1), out: providers.Outcome{Class: providers.ClassRateLimited, Status: 429, Hint: hint(20 * time.Hour)}, state: scheduler.StateWaitingForBudget, earliest: p.MaxHint, latest: p.MaxHint + p.Spread, pause: p.MaxHint},
		{name: "hint beyond deadline fails", op: testOp(scheduler.KindRead, "GET", 1), out: providers.Outcome{Class: providers.ClassRateLimited, Status: 429, Hint: hint(100 * 24 * time.Hour)}, state: scheduler.StateFailed, failure: scheduler.FailureRetryBudgetExhausted},
		{name: "transient backs off", op: testOp(scheduler.KindRead, "GET", 3), out: providers.Outcome{Class: providers.ClassTransient, Status: 503}, state: scheduler.StateScheduled, earliest: 2 * time.Second, latest: 2 * time.Second},
		{name: "transient waits for a later hint", op: testOp(scheduler.KindRead, "GET", 1), out: providers.Outcome{Class: providers.ClassTransient, Status: 503, Hint: hint(30 * time.Second)}, state: scheduler.StateScheduled, earliest: 30 * time.Second, latest: 30 * time.Second},
		{name: "transient with attempts spent fails", op: testOp(scheduler.KindRead, "GET", 5), out: providers.Outcome{Class: providers.ClassTransient, Status: 503}, state: scheduler.StateFailed, failure: scheduler.FailureRetryBudgetExhausted},
		{name: "uncertain mutation without idempotency is held", op: testOp(scheduler.KindMutation, "POST", 1), out: providers.Outcome{Class: providers.ClassUnknownOutcome, Status: 502}, state: scheduler.StateHeld, hold: scheduler.HoldUnknownOutcome},
		{name: "uncertain mutation with idempotency is retried", op: testOp(scheduler.KindMutation, "POST", 1), idem: stripeIdem, out: providers.Outcome{Class: providers.ClassUnknownOutcome, Status: 502}, state: scheduler.StateScheduled, earliest: p.MinHint, latest: p.BackoffBase},
		{name: "uncertain mutation with key bound answer is held", op: testOp(scheduler.KindMutation, "POST", 1), idem: stripeIdem, out: providers.Outcome{Class: providers.ClassUnknownOutcome, Status: 500, KeyBound: true}, state: scheduler.StateHeld, hold: scheduler.HoldUnknownOutcome},
		{name: "uncertain DELETE where key applies to POST only is held", op: testOp(scheduler.KindMutation, "DELETE", 1), idem: stripeIdem, out: providers.Outcome{Class: providers.ClassUnknownOutcome}, state: scheduler.StateHeld, hold: scheduler.HoldUnknownOutcome},
		{name: "uncertain mutation after retry budget is held, not failed", op: testOp(scheduler.KindMutation, "POST", 5), idem: stripeIdem, out: providers.Outcome{Class: providers.ClassUnknownOutcome}, state: scheduler.StateHeld, hold: scheduler.HoldUnknownOutcome},
		{name: "uncertain read is just transient", op: testOp(scheduler.KindRead, "GET", 1), out: providers.Outcome{Class: providers.ClassUnknownOutcome}, state: scheduler.StateScheduled, earliest: p.MinHint, latest: p.BackoffBase},
		{name: "success with spent budget pauses its budget until reset", op: testOp(scheduler.KindRead, "GET", 1), out: providers.Outcome{Class: providers.ClassSuccess, Status: 200, Budget: &providers.Budget{Remaining: 0, Limit: 5000, ResetAt: t0.Add(10 * time.Minute)}}, state: scheduler.StateSucceeded, budgetPause: 10 * time.Minute},
		{name: "spent named resource's limit pauses its budget only", op: testOp(scheduler.KindRead, "GET", 1), out: providers.Outcome{Class: providers.ClassRateLimited, Status: 403, Budget: &providers.Budget{Remaining: 0, Resource: "search"}, Hint: providers.Hint{Source: "retry-after", At: t0.Add(30 * time.Second)}}, state: scheduler.StateWaitingForBudget, budgetPause: 30 * time.Second, earliest: 30 * time.Second, latest: 30*time.Second + p.Spread},
		{name: "secondary limit naming a resource pauses the scope", op: testOp(scheduler.KindRead, "GET", 1), out: providers.Outcome{Class: providers.ClassRateLimited, Status: 200, Budget: &providers.Budget{Remaining: 4000, Resource: "graphql"}, Hint: providers.Hint{Source: "retry-after", At: t0.Add(time.Minute)}}, state: scheduler.StateWaitingForBudget, pause: time.Minute, earliest: time.Minute, latest: time.Minute + p.Spread},
		{name: "secondary limit without spent figures pauses the scope", op: testOp(scheduler.KindRead, "GET", 1), out: providers.Outcome{Class: providers.ClassRateLimited, Status: 403, Budget: &providers.Budget{Remaining: 12}, Hint: providers.Hint{Source: "retry-after", At: t0.Add(time.Minute)}}, state: scheduler.StateWaitingForBudget, pause: time.Minute, earliest: time.Minute, latest: time.Minute + p.Spread},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := p.Decide(tt.op, tt.idem, tt.out, t0, half)
			if got, want := d.State, tt.state; got != want {
				t.Fatalf("state = %s, want %s (reason %q)", got, want, d.Reason)
			}
			if got, want := d.HoldReason, tt.hold; got != want {
				t.Errorf("hold = %q, want %q", got, want)
			}
			if got, want := d.FailureReason, tt.failure; got != want {
				t.Errorf("failure = %q, want %q", got, want)
			}
			if d.Reason == "" {
				t.Error("decision has no reason")
			}
			if tt.state.Due() {
				if d.NextAttemptAt.Before(t0.Add(tt.earliest)) || d.NextAttemptAt.After(t0.Add(tt.latest)) {
					t.Errorf("next = %s, want within [%s, %s]", d.NextAttemptAt.Sub(t0), tt.earliest, tt.latest)
				}
				if d.NextAttemptAt.After(tt.op.Deadline) {
					t.Errorf("next %s after deadline %s", d.NextAttemptAt, tt.op.Deadline)
				}
			} else if !d.NextAttemptAt.IsZero() {
				t.Errorf("next = %s for a state that is not due", d.NextAttemptAt)
			}
			if tt.pause == 0 && !d.Scope.PauseUntil.IsZero() {
				t.Errorf("scope paused until %s, want no pause", d.Scope.PauseUntil)
			}
			if tt.pause != 0 && !d.Scope.PauseUntil.Equal(t0.Add(tt.pause)) {
				t.Errorf("scope pause = %s, want %s", d.Scope.PauseUntil.Sub(t0), tt.pause)
			}
			if got := d.Scope.BudgetPauseUntil; tt.budgetPause == 0 && !got.IsZero() || tt.budgetPause != 0 && !got.Equal(t0.Add(tt.budgetPause)) {
				t.Errorf("budget pause = %s, want %s", got.Sub(t0), tt.budgetPause)
			}
			if b := tt.out.Budget; b != nil && (d.Scope.Resource != b.Resource || !d.Scope.ResourceKnown) {
				t.Errorf("effect on budget %q (known %v), want %q", d.Scope.Resource, d.Scope.ResourceKnown, b.Resource)
			}
			if tt.hold == scheduler.HoldAuthRevoked && d.Scope.Hold != scheduler.HoldAuthRevoked {
				t.Error("auth revoked did not hold the scope")
			}
		})
	}
}

// An uncertain mutation is resent only while the provider still remembers
// the key (invariant 4).
func TestDecideUncertainPastRetention(t *testing.T) {
	p := scheduler.DefaultPolicy()
	op := testOp(scheduler.KindMutation, "POST", 1)
	op.FirstSentAt = t0.Add(-24*time.Hour + 30*time.Second)
	d := p.Decide(op, stripeIdem, providers.Outcome{Class: providers.ClassUnknownOutcome, Status: 502}, t0, half)
	if d.State != scheduler.StateHeld || d.HoldReason != scheduler.HoldUnknownOutcome {
		t.Fatalf("got %s/%s, want held/unknownOutcome: %s", d.State, d.HoldReason, d.Reason)
	}
	if !strings.Contains(d.Reason, "retention") {
		t.Errorf("reason %q does not mention retention", d.Reason)
	}
	// So is an ambiguous answer the key made resendable (a keyed 502).
	d = p.Decide(op, stripeIdem, providers.Outcome{Class: providers.ClassTransient, Status: 502, Ambiguous: true}, t0, half)
	if d.State != scheduler.StateHeld || d.HoldReason != scheduler.HoldUnknownOutcome || !strings.Contains(d.Reason, "retention") {
		t.Fatalf("keyed ambiguous 502 past retention: %s/%s (%s), want held/unknownOutcome for retention", d.State, d.HoldReason, d.Reason)
	}
}

// Invariant 5: whatever the provider says, an operation that keeps failing
// ends within its attempt and time budget.
func TestDecideIsBounded(t *testing.T) {
	p := scheduler.DefaultPolicy()
	outcomes := []providers.Outcome{
		{Class: providers.ClassTransient, Status: 500},
		{Class: providers.ClassRateLimited, Status: 429},
		{Class: providers.ClassRateLimited, Status: 429, Hint: providers.Hint{Source: "retry-after", Raw: "0", Note: "zero"}},
		{Class: providers.ClassUnknownOutcome, Status: 502},
	}
	for _, out := range outcomes {
		for _, rnd := range []scheduler.Random{func() float64 { return 0 }, half, func() float64 { return 0.999999 }} {
			op := testOp(scheduler.KindMutation, "POST", 0)
			op.Retry = scheduler.Retry{MaxAttempts: 8, MaxElapsed: 2 * time.Hour}
			op.FirstSentAt = t0
			op.Deadline = t0.Add(op.Retry.MaxElapsed)
			now := t0
			steps := 0
			for ; steps < 100000; steps++ {
				op.Attempt++
				op.BudgetAttempts++
				d := p.Decide(op, stripeIdem, out, now, rnd)
				if !d.State.Due() {
					break
				}
				if !d.NextAttemptAt.After(now) {
					t.Fatalf("%s: next attempt %s not after now %s", out.Class, d.NextAttemptAt, now)
				}
				now = d.NextAttemptAt
			}
			if steps == 100000 {
				t.Fatalf("%s: no end after %d attempts", out.Class, steps)
			}
			if now.After(op.Deadline) {
				t.Errorf("%s: ran until %s, after deadline %s", out.Class, now, op.Deadline)
			}
		}
	}
}

func TestBackoffFullJitter(t *testing.T) {
	p := scheduler.DefaultPolicy()
	for n := 1; n < 80; n++ {
		hi := p.Backoff(n, func() float64 { return 0.999999 })
		lo := p.Backoff(n, func() float64 { return 0 })
		if lo != p.MinHint {
			t.Errorf("n=%d: lowest backoff %s, want %s", n, lo, p.MinHint)
		}
		if hi > p.BackoffMax || hi < p.MinHint {
			t.Errorf("n=%d: highest backoff %s outside [%s, %s]", n, hi, p.MinHint, p.BackoffMax)
		}
	}
	if got, want := p.Backoff(4, func() float64 { return 0.999999 }).Round(time.Second), 8*time.Second; got != want {
		t.Errorf("backoff(4) ceiling = %s, want %s", got, want)
	}
}

func TestRecoverDecisions(t *testing.T) {
	p := scheduler.DefaultPolicy()
	_, d := p.Recover(testOp(scheduler.KindRead, "GET", 1), providers.Idempotency{}, t0, "restart")
	if d.State != scheduler.StateScheduled || !d.NextAttemptAt.Equal(t0) {
		t.Errorf("read: got %s at %s, want scheduled at once", d.State, d.NextAttemptAt)
	}
	_, d = p.Recover(testOp(scheduler.KindMutation, "POST", 1), providers.Idempotency{}, t0, "restart")
	if d.State != scheduler.StateHeld || d.HoldReason != scheduler.HoldUnknownOutcome {
		t.Errorf("non-idempotent mutation: got %s/%s, want held/unknownOutcome", d.State, d.HoldReason)
	}
	_, d = p.Recover(testOp(scheduler.KindMutation, "POST", 1), stripeIdem, t0, "restart")
	if d.State != scheduler.StateScheduled || !d.NextAttemptAt.Equal(t0) {
		t.Errorf("idempotent mutation: got %s at %s, want scheduled at once", d.State, d.NextAttemptAt)
	}
}

// A limit the provider reports as app-wide pauses the scope's group.
func TestDecideSharedLimitPausesGroup(t *testing.T) {
	p := scheduler.DefaultPolicy()
	out := providers.Outcome{Class: providers.ClassRateLimited, Status: 429, Shared: true,
		Hint: providers.Hint{Source: "retry-after", Raw: "30", At: t0.Add(30 * time.Second)}}
	d := p.Decide(testOp(scheduler.KindRead, "GET", 1), providers.Idempotency{}, out, t0, half)
	if !d.Scope.Shared || !d.Scope.PauseUntil.Equal(t0.Add(30*time.Second)) {
		t.Fatalf("scope effect = %+v, want a shared pause of 30 s", d.Scope)
	}
	out.Shared = false
	if d := p.Decide(testOp(scheduler.KindRead, "GET", 1), providers.Idempotency{}, out, t0, half); d.Scope.Shared {
		t.Fatal("a per-scope limit paused the group")
	}
}

// Design §11 "Once a mutation may have applied, it never ends failed":
// after an uncertain attempt every path that would fail the operation
// holds it (unknownOutcome) instead; without one the same answers fail it.
func TestDecideMaybeAppliedNeverFails(t *testing.T) {
	p := scheduler.DefaultPolicy()
	beyond := providers.Hint{Source: "retry-after", Raw: "x", At: t0.Add(100 * 24 * time.Hour)}
	tests := []struct {
		name    string
		op      func(*scheduler.Operation)
		out     providers.Outcome
		failure scheduler.FailureReason // when not maybe applied
	}{
		{name: "attempts spent", op: func(o *scheduler.Operation) { o.BudgetAttempts = o.Retry.MaxAttempts },
			out: providers.Outcome{Class: providers.ClassTransient, Status: 503}, failure: scheduler.FailureRetryBudgetExhausted},
		{name: "next attempt after the deadline", op: func(o *scheduler.Operation) { o.Deadline = t0.Add(100 * time.Millisecond) },
			out: providers.Outcome{Class: providers.ClassTransient, Status: 409, Reason: "idempotency-key-in-use"}, failure: scheduler.FailureRetryBudgetExhausted},
		{name: "transient hint beyond the deadline", out: providers.Outcome{Class: providers.ClassTransient, Status: 503, Hint: beyond}, failure: scheduler.FailureRetryBudgetExhausted},
		{name: "rate-limit hint beyond the deadline", out: providers.Outcome{Class: providers.ClassRateLimited, Status: 429, Hint: beyond}, failure: scheduler.FailureRetryBudgetExhausted},
		{name: "rate limited past the deadline", op: func(o *scheduler.Operation) { o.Deadline = t0.Add(time.Second) },
			out: providers.Outcome{Class: providers.ClassRateLimited, Status: 429}, failure: scheduler.FailureRetryBudgetExhausted},
		{name: "permanent answer", out: providers.Outcome{Class: providers.ClassPermanent, Status: 400}, failure: scheduler.FailurePermanent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			op := testOp(scheduler.KindMutation, "POST", 2)
			if tt.op != nil {
				tt.op(&op)
			}
			d := p.Decide(op, stripeIdem, tt.out, t0, half)
			if d.State != scheduler.StateFailed || d.FailureReason != tt.failure {
				t.Fatalf("without an uncertain attempt: %s/%s, want failed/%s (%s)", d.State, d.FailureReason, tt.failure, d.Reason)
			}
			op.MaybeApplied = true
			d = p.Decide(op, stripeIdem, tt.out, t0, half)
			if d.State != scheduler.StateHeld || d.HoldReason != scheduler.HoldUnknownOutcome || d.FailureReason != "" || !d.NextAttemptAt.IsZero() {
				t.Fatalf("after an uncertain attempt: %s/%s/%s next %s, want held/unknownOutcome", d.State, d.HoldReason, d.FailureReason, d.NextAttemptAt)
			}
			if !strings.Contains(d.Reason, "earlier attempt may have applied") {
				t.Errorf("reason %q does not say an earlier attempt may have applied", d.Reason)
			}
		})
	}

	// The uncertain attempt itself, when the budget is spent.
	op := testOp(scheduler.KindMutation, "POST", 5)
	d := p.Decide(op, stripeIdem, providers.Outcome{Class: providers.ClassUnknownOutcome, Reason: "timeout"}, t0, half)
	if d.State != scheduler.StateHeld || d.HoldReason != scheduler.HoldUnknownOutcome || !d.MaybeApplied {
		t.Fatalf("uncertain attempt with the budget spent: %s/%s maybeApplied=%v", d.State, d.HoldReason, d.MaybeApplied)
	}
	if !strings.Contains(d.Reason, "this attempt may have applied") {
		t.Errorf("reason %q", d.Reason)
	}
	// A read has no effect to doubt: it fails as usual and records nothing.
	read := testOp(scheduler.KindRead, "GET", 5)
	if d := p.Decide(read, stripeIdem, providers.Outcome{Class: providers.ClassUnknownOutcome}, t0, half); d.State != scheduler.StateFailed || d.MaybeApplied {
		t.Fatalf("uncertain read: %s maybeApplied=%v, want failed and not maybe applied", d.State, d.MaybeApplied)
	}
}

// Which answers record a possible effect, and which give their attempt
// back (design §11 "Rate limits do not spend retries").
func TestDecideRecordsMaybeAppliedAndCounts(t *testing.T) {
	p := scheduler.DefaultPolicy()
	tests := []struct {
		kind             scheduler.Kind
		class            providers.Class
		maybe, uncounted bool
	}{
		{scheduler.KindMutation, providers.ClassUnknownOutcome, true, false},
		{scheduler.KindRead, providers.ClassUnknownOutcome, false, false},
		{scheduler.KindMutation, providers.ClassTransient, false, false},
		{scheduler.KindMutation, providers.ClassRateLimited, false, true},
		{scheduler.KindRead, providers.ClassRateLimited, false, true},
		{scheduler.KindMutation, providers.ClassSuccess, false, false},
		{scheduler.KindMutation, providers.ClassPermanent, false, false},
	}
	for _, tt := range tests {
		d := p.Decide(testOp(tt.kind, "POST", 1), stripeIdem, providers.Outcome{Class: tt.class}, t0, half)
		if d.MaybeApplied != tt.maybe || d.Uncounted != tt.uncounted {
			t.Errorf("%s %s: maybeApplied=%v uncounted=%v, want %v %v", tt.kind, tt.class, d.MaybeApplied, d.Uncounted, tt.maybe, tt.uncounted)
		}
	}
	// An ambiguous answer retried with the key (transient) may have applied.
	ambiguous := providers.Outcome{Class: providers.ClassTransient, Status: 502, Ambiguous: true}
	if d := p.Decide(testOp(scheduler.KindMutation, "POST", 1), stripeIdem, ambiguous, t0, half); !d.MaybeApplied || d.State != scheduler.StateScheduled {
		t.Errorf("keyed ambiguous 502: %s maybeApplied=%v, want scheduled and maybe applied", d.State, d.MaybeApplied)
	}
	if d := p.Decide(testOp(scheduler.KindRead, "GET", 1), stripeIdem, ambiguous, t0, half); d.MaybeApplied {
		t.Error("an ambiguous answer to a read is recorded as maybe applied")
	}
	// A lost lease of a mutation may have applied it.
	if _, d := p.Recover(testOp(scheduler.KindMutation, "POST", 1), stripeIdem, t0, "restart"); !d.MaybeApplied {
		t.Error("a recovered mutation is not recorded as maybe applied")
	}
	if _, d := p.Recover(testOp(scheduler.KindRead, "GET", 1), stripeIdem, t0, "restart"); d.MaybeApplied {
		t.Error("a recovered read is recorded as maybe applied")
	}
}

// Design §11 "Deadlines end work even when it never ran".
func TestExpire(t *testing.T) {
	p := scheduler.DefaultPolicy()
	op := testOp(scheduler.KindMutation, "POST", 0)
	op.State = scheduler.StateScheduled
	d := p.Expire(op, t0)
	if d.State != scheduler.StateFailed || d.FailureReason != scheduler.FailureRetryBudgetExhausted || !strings.Contains(d.Reason, "deadline") {
		t.Fatalf("expired: %s/%s (%s), want failed/retryBudgetExhausted", d.State, d.FailureReason, d.Reason)
	}
	op.MaybeApplied = true
	if d := p.Expire(op, t0); d.State != scheduler.StateHeld || d.HoldReason != scheduler.HoldUnknownOutcome {
		t.Fatalf("expired maybe-applied mutation: %s/%s, want held/unknownOutcome", d.State, d.HoldReason)
	}
}
