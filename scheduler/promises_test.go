package scheduler_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"pacer/providers"
	"pacer/scheduler"
)

// The engine tests of design §11's retry rules: "Once a mutation may have
// applied, it never ends failed", "Rate limits do not spend retries" and
// "Deadlines end work even when it never ran".

// stripeScope puts a Stripe scope at url.
func (h *harness) stripeScope(name, url string) {
	h.t.Helper()
	_, _, err := h.svc.PutScope(context.Background(), scheduler.ScopeInput{
		Name: name, Provider: "stripe", BaseURL: url, MaxConcurrent: 1,
		Credentials: scheduler.Credentials{Type: scheduler.CredentialBearer, Token: "sk_test_" + name},
	}, "test")
	if err != nil {
		h.t.Fatal(err)
	}
}

// runUntilSettled passes and advances the clock by step until id is no
// longer waiting or running, at most n times.
func (h *harness) runUntilSettled(id string, step time.Duration, n int) scheduler.Operation {
	h.t.Helper()
	for range n {
		h.pass()
		if op := h.op(id); !op.State.Due() && op.State != scheduler.StateRunning {
			return op
		}
		h.clock.Add(step)
	}
	h.t.Fatalf("%s still %s after %d passes", id, h.op(id).State, n)
	return scheduler.Operation{}
}

// lastDecision is the decision text of the operation's latest attempt.
func (h *harness) lastDecision(id string) string {
	h.t.Helper()
	atts, err := h.svc.ListAttempts(context.Background(), id)
	if err != nil || len(atts) == 0 {
		h.t.Fatalf("attempts of %s: %v (%d)", id, err, len(atts))
	}
	return atts[len(atts)-1].Decision
}

// A Stripe charge whose first attempt timed out (it may have applied),
// answered later by 409 idempotency_key_in_use (transient, not uncertain in
// itself) until the attempts are spent, is held for a person, never
// failed; a release keeps the mark.
func TestMaybeAppliedStripeMutationIsHeld(t *testing.T) {
	h := setup(t, scheduler.EngineConfig{RequestTimeout: 20 * time.Second, LeaseDuration: 30 * time.Second})
	prov := newProvider(t, h.clock)
	h.stripeScope("acct", prov.URL)
	inUse := `{"error":{"type":"invalid_request_error","code":"idempotency_key_in_use","message":"There is currently another in-progress request using this Stripe API key."}}`
	prov.script("/v1/charges", answer{hang: true},
		answer{status: 409, body: inUse, headers: map[string]string{"Content-Type": "application/json"}})
	h.enqueue(scheduler.OperationInput{ID: "charge", Scope: "acct", Method: "POST", Path: "/v1/charges",
		Body: []byte(`{"amount":100}`), ContentType: "application/json", RequestIdentity: "charge-intent", MaxAttempts: 3})

	if n, err := h.engine.RunOnce(context.Background()); err != nil || n != 1 {
		t.Fatalf("claim: %d %v", n, err)
	}
	waitFor(t, func() bool { return len(prov.requests("/v1/charges")) == 1 })
	h.clock.Add(20 * time.Second) // the request times out: it may have applied
	h.engine.Wait()
	op := h.wantState("charge", scheduler.StateScheduled)
	if !op.MaybeApplied || op.LastOutcome.Class != providers.ClassUnknownOutcome {
		t.Fatalf("after the timeout: maybeApplied=%v last %+v", op.MaybeApplied, op.LastOutcome)
	}

	op = h.runUntilSettled("charge", 5*time.Second, 20)
	if op.State != scheduler.StateHeld || op.HoldReason != scheduler.HoldUnknownOutcome || op.FailureReason != "" || !op.MaybeApplied {
		t.Fatalf("spent budget: %s/%s/%s maybeApplied=%v, want held/unknownOutcome", op.State, op.HoldReason, op.FailureReason, op.MaybeApplied)
	}
	if op.Attempt != 3 {
		t.Errorf("attempts = %d, want 3", op.Attempt)
	}
	atts, _ := h.svc.ListAttempts(context.Background(), "charge")
	for _, a := range atts[1:] {
		if a.Status != 409 || a.Class != providers.ClassTransient || a.Reason != "idempotency-key-in-use" {
			t.Errorf("attempt %d: %+v, want Stripe's 409 idempotency-key-in-use (transient)", a.Number, a)
		}
	}
	if d := h.lastDecision("charge"); !strings.Contains(d, "earlier attempt may have applied") {
		t.Errorf("decision %q does not say an earlier attempt may have applied", d)
	}
	for _, r := range prov.requests("/v1/charges") {
		if r.key != "charge-intent" {
			t.Errorf("attempt sent key %q, want charge-intent", r.key)
		}
	}

	// A release gives a fresh budget but keeps the mark: 409s hold it again.
	if _, err := h.svc.Release(context.Background(), "charge", nil, "try once more", "staff"); err != nil {
		t.Fatal(err)
	}
	op = h.runUntilSettled("charge", 5*time.Second, 20)
	if op.State != scheduler.StateHeld || op.HoldReason != scheduler.HoldUnknownOutcome || !op.MaybeApplied {
		t.Fatalf("after a release: %s/%s/%s maybeApplied=%v, want held/unknownOutcome", op.State, op.HoldReason, op.FailureReason, op.MaybeApplied)
	}
	// Only a person ends it.
	op, err := h.svc.Resolve(context.Background(), "charge", scheduler.ResolvedNotApplied, "checked Stripe: no charge", "staff")
	if err != nil || op.State != scheduler.StateFailed || op.FailureReason != scheduler.FailureResolvedFailed {
		t.Fatalf("resolve: %s/%s %v", op.State, op.FailureReason, err)
	}
}

// A keyed mutation's ambiguous 502 is resent with the key (transient), but
// it may have applied: 503s until the attempts are spent hold it.
func TestKeyedAmbiguousMutationIsHeld(t *testing.T) {
	h, prov := setupWithProvider(t)
	h.scope("keyed", prov.URL, "Idempotency-Key", 1)
	prov.script("/k", answer{status: 502}, answer{status: 503})
	h.enqueue(scheduler.OperationInput{ID: "k", Scope: "keyed", Method: "POST", Path: "/k", Body: []byte(`{}`), ContentType: "application/json", MaxAttempts: 3})
	op := h.runUntilSettled("k", 5*time.Second, 20)
	if op.State != scheduler.StateHeld || op.HoldReason != scheduler.HoldUnknownOutcome || !op.MaybeApplied || op.Attempt != 3 {
		t.Fatalf("%s/%s/%s maybeApplied=%v after %d attempts, want held/unknownOutcome after 3", op.State, op.HoldReason, op.FailureReason, op.MaybeApplied, op.Attempt)
	}
}

// A mutation whose lease was lost in flight may have applied: answers
// that would fail it later hold it instead. The first attempt's request
// outlives its lease (its transport ignores the deadline), so another
// engine, as another process would on either store, recovers the expired
// lease and sends again.
func TestRecoveredMutationIsNeverFailed(t *testing.T) {
	h := setup(t, scheduler.EngineConfig{RequestTimeout: 20 * time.Second, LeaseDuration: 30 * time.Second,
		Client: &http.Client{Transport: ignoreDeadline{}}})
	prov := newProvider(t, h.clock)
	release := make(chan struct{})
	var once sync.Once
	answer := func() { once.Do(func() { close(release) }) }
	t.Cleanup(answer) // before the provider closes, also when the test fails
	prov.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		prov.serve(httptest.NewRecorder(), r) // record it
		if len(prov.requests("/v1/refunds")) == 1 {
			<-release // the first attempt never answers in time
			w.WriteHeader(502)
			return
		}
		w.WriteHeader(400)
		io.WriteString(w, `{"error":{"type":"invalid_request_error","message":"charge already refunded"}}`)
	})
	h.stripeScope("acct", prov.URL)
	h.enqueue(scheduler.OperationInput{ID: "refund", Scope: "acct", Method: "POST", Path: "/v1/refunds", Body: []byte(`{}`), ContentType: "application/json"})
	old := h.engine
	if n, err := old.RunOnce(context.Background()); err != nil || n != 1 {
		t.Fatalf("claim: %d %v", n, err)
	}
	waitFor(t, func() bool { return len(prov.requests("/v1/refunds")) == 1 })

	h.clock.Set(h.op("refund").LeaseExpiresAt)
	second := newScheduler(t, h.store, h.clock, scheduler.Config{Engine: scheduler.EngineConfig{Random: half}}).Engine
	if _, err := second.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	second.Wait()
	if op := h.op("refund"); !op.MaybeApplied {
		t.Fatal("a recovered mutation is not marked maybe applied")
	}
	for i := 0; len(prov.requests("/v1/refunds")) < 2; i++ { // sent again once its scope admits it
		if i == 20 {
			t.Fatalf("the recovered mutation was not sent again: %+v", h.op("refund"))
		}
		h.clock.Add(time.Second)
		if _, err := second.RunOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		second.Wait()
	}
	answer() // the old attempt ends; its completion is fenced out
	old.Wait()
	op := h.wantState("refund", scheduler.StateHeld)
	if op.HoldReason != scheduler.HoldUnknownOutcome || op.LastOutcome.Status != 400 || !op.MaybeApplied {
		t.Fatalf("permanent answer after a lost lease: %s/%s last %+v maybeApplied=%v, want held/unknownOutcome", op.State, op.HoldReason, op.LastOutcome, op.MaybeApplied)
	}
}

// "7 × 429 then one 503 with maxAttempts: 8" goes on: rate-limited answers
// do not count toward maxAttempts.
func TestRateLimitsDoNotSpendAttempts(t *testing.T) {
	h, prov := setupWithProvider(t)
	h.scope("a", prov.URL, "", 1)
	prov.script("/r", append(rateLimited(7), answer{status: 503}, answer{status: 200})...)
	h.enqueue(scheduler.OperationInput{ID: "r", Scope: "a", Method: "GET", Path: "/r", MaxAttempts: 8})
	op := h.runUntilSettled("r", 3*time.Second, 50)
	if op.State != scheduler.StateSucceeded || op.Attempt != 9 {
		t.Fatalf("%s after %d attempts (failure %q), want succeeded after 9", op.State, op.Attempt, op.FailureReason)
	}
}

// "16 × 429 with maxAttempts: 2" goes on too, and a rate limit that never
// ends is bounded by the deadline alone.
func TestRateLimitsAreBoundedByTheDeadline(t *testing.T) {
	h, prov := setupWithProvider(t)
	h.scope("a", prov.URL, "", 2)
	prov.script("/sixteen", append(rateLimited(16), answer{status: 200})...)
	prov.script("/forever", rateLimited(1)...)
	h.enqueue(scheduler.OperationInput{ID: "sixteen", Scope: "a", Method: "GET", Path: "/sixteen", MaxAttempts: 2})
	h.enqueue(scheduler.OperationInput{ID: "forever", Scope: "a", Method: "GET", Path: "/forever", MaxAttempts: 2, MaxElapsed: time.Minute})
	op := h.runUntilSettled("sixteen", 3*time.Second, 50)
	// Counted at the provider: an attempt a worker did not send into the
	// pause the other operation's 429 set counts in Attempt, not here.
	if sent := len(prov.requests("/sixteen")); op.State != scheduler.StateSucceeded || sent != 17 {
		t.Fatalf("sixteen: %s after %d requests (%d attempts), want succeeded after 17", op.State, sent, op.Attempt)
	}
	op = h.runUntilSettled("forever", 3*time.Second, 50)
	if op.State != scheduler.StateFailed || op.FailureReason != scheduler.FailureRetryBudgetExhausted {
		t.Fatalf("forever: %s/%s, want failed/retryBudgetExhausted", op.State, op.FailureReason)
	}
	if op.Attempt <= 2 {
		t.Errorf("forever ended after %d attempts: rate limits spent its attempts", op.Attempt)
	}
	if late := h.clock.Now().Sub(op.Deadline); late > scheduler.DeadlineGrace+3*time.Second {
		t.Errorf("forever ended %s after its deadline", late)
	}
}

// expiredBy checks that id ended as want, never sent, within the grace of
// its deadline, and that the change feed says so.
func (h *harness) expiredBy(id string, want scheduler.State, path string, prov *provider) {
	h.t.Helper()
	op := h.op(id)
	switch want {
	case scheduler.StateFailed:
		if op.State != want || op.FailureReason != scheduler.FailureRetryBudgetExhausted {
			h.t.Fatalf("%s: %s/%s/%s, want failed/retryBudgetExhausted", id, op.State, op.HoldReason, op.FailureReason)
		}
	case scheduler.StateHeld:
		if op.State != want || op.HoldReason != scheduler.HoldUnknownOutcome || !op.MaybeApplied {
			h.t.Fatalf("%s: %s/%s/%s maybeApplied=%v, want held/unknownOutcome", id, op.State, op.HoldReason, op.FailureReason, op.MaybeApplied)
		}
	}
	if late := op.UpdatedAt.Sub(op.Deadline); late <= 0 || late > scheduler.DeadlineGrace+time.Second {
		h.t.Errorf("%s ended %s after its deadline", id, late)
	}
	if path != "" {
		if n := len(prov.requests(path)); n != 0 {
			h.t.Errorf("%s was sent %d times", id, n)
		}
	}
	b, err := h.store.ListChanges(context.Background(), scheduler.ChangeFilter{Limit: 1000})
	if err != nil {
		h.t.Fatal(err)
	}
	if last := lastChange(b.Changes, id); last.State != want {
		h.t.Errorf("%s: the change feed's last state is %q, want %s", id, last.State, want)
	}
}

func lastChange(cs []scheduler.Change, id string) scheduler.Change {
	var last scheduler.Change
	for _, c := range cs {
		if c.OperationID == id {
			last = c
		}
	}
	return last
}

// Design §11 "Deadlines end work even when it never ran": an operation
// waiting past its deadline ends within the grace, whatever holds it back.
func TestDeadlineEndsWaitingWork(t *testing.T) {
	short := 5 * time.Second
	justAfter := short + scheduler.DeadlineGrace + time.Millisecond

	t.Run("PausedScope", func(t *testing.T) {
		h, prov := setupWithProvider(t)
		h.scope("a", prov.URL, "", 1)
		prov.script("/first", answer{status: 429, headers: map[string]string{"Retry-After": "7200"}})
		h.enqueue(scheduler.OperationInput{ID: "first", Scope: "a", Method: "GET", Path: "/first"})
		h.pass() // the scope is now paused for two hours
		h.enqueue(scheduler.OperationInput{ID: "short", Scope: "a", Method: "GET", Path: "/short", MaxElapsed: short})
		h.clock.Add(short)
		h.pass()
		h.wantState("short", scheduler.StateWaitingForBudget) // behind the pause, at its deadline: not yet ended
		h.clock.Add(justAfter - short)
		h.pass()
		h.expiredBy("short", scheduler.StateFailed, "/short", prov)
		if op := h.op("short"); op.Attempt != 0 {
			t.Errorf("attempt %d, want 0", op.Attempt)
		}
		h.wantState("first", scheduler.StateWaitingForBudget) // its own deadline is a day away
	})

	t.Run("HeldScope", func(t *testing.T) {
		h, prov := setupWithProvider(t)
		h.scope("a", prov.URL, "", 1)
		prov.script("/first", answer{status: 401})
		h.enqueue(scheduler.OperationInput{ID: "first", Scope: "a", Method: "GET", Path: "/first"})
		h.pass() // the scope is now held: authRevoked
		h.enqueue(scheduler.OperationInput{ID: "short", Scope: "a", Method: "GET", Path: "/short", MaxElapsed: short})
		h.clock.Add(justAfter)
		h.pass()
		h.expiredBy("short", scheduler.StateFailed, "/short", prov)
	})

	t.Run("NoFreeSlot", func(t *testing.T) {
		h := setup(t, scheduler.EngineConfig{RequestTimeout: 20 * time.Second, LeaseDuration: 30 * time.Second})
		prov := newProvider(t, h.clock)
		h.scope("a", prov.URL, "", 1)
		prov.script("/hang", answer{hang: true}, answer{status: 200})
		h.enqueue(scheduler.OperationInput{ID: "hang", Scope: "a", Method: "GET", Path: "/hang"})
		if n, err := h.engine.RunOnce(context.Background()); err != nil || n != 1 {
			t.Fatalf("claim: %d %v", n, err)
		}
		waitFor(t, func() bool { return len(prov.requests("/hang")) == 1 })
		h.enqueue(scheduler.OperationInput{ID: "short", Scope: "a", Method: "GET", Path: "/short", MaxElapsed: short})
		h.clock.Add(justAfter)
		if _, err := h.engine.RunOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		h.expiredBy("short", scheduler.StateFailed, "/short", prov)
		h.clock.Add(20 * time.Second)
		h.engine.Wait()
	})

	t.Run("OwnTimeWhileDown", func(t *testing.T) {
		// Due at t0+10s with a deadline at t0+15s, and pacer was not
		// running then: it ends at the first pass, unsent.
		h, prov := setupWithProvider(t)
		h.scope("a", prov.URL, "", 1)
		nb := t0.Add(10 * time.Second)
		h.enqueue(scheduler.OperationInput{ID: "own", Scope: "a", Method: "GET", Path: "/own", NotBefore: &nb, MaxElapsed: short})
		h.clock.Add(10*time.Second + justAfter)
		h.pass()
		h.expiredBy("own", scheduler.StateFailed, "/own", prov)
	})

	t.Run("DueAtItsDeadlineStillLeaves", func(t *testing.T) {
		// The loop wakes a moment after a due time: an attempt due at its
		// deadline is sent, not expired.
		h, prov := setupWithProvider(t)
		h.scope("a", prov.URL, "", 1)
		prov.script("/edge", answer{status: 503}, answer{status: 200})
		h.enqueue(scheduler.OperationInput{ID: "edge", Scope: "a", Method: "GET", Path: "/edge", MaxElapsed: time.Second})
		h.pass() // 503: backoff 1 s, exactly the deadline
		op := h.wantState("edge", scheduler.StateScheduled)
		if !op.NextAttemptAt.Equal(op.Deadline) {
			t.Fatalf("next %s, deadline %s: the test needs them equal", op.NextAttemptAt, op.Deadline)
		}
		h.clock.Add(time.Second + 50*time.Millisecond)
		h.pass()
		h.wantState("edge", scheduler.StateSucceeded)
	})

	t.Run("MaybeAppliedMutationIsHeld", func(t *testing.T) {
		h := setup(t, scheduler.EngineConfig{RequestTimeout: 20 * time.Second, LeaseDuration: 30 * time.Second})
		prov := newProvider(t, h.clock)
		h.scope("keyed", prov.URL, "Idempotency-Key", 2)
		prov.script("/m", answer{hang: true}, answer{status: 201})
		prov.script("/blocker", answer{status: 429, headers: map[string]string{"Retry-After": "3600"}})
		h.enqueue(scheduler.OperationInput{ID: "m", Scope: "keyed", Method: "POST", Path: "/m", Body: []byte(`{}`), ContentType: "application/json", MaxElapsed: time.Minute})
		h.enqueue(scheduler.OperationInput{ID: "blocker", Scope: "keyed", Method: "GET", Path: "/blocker"})
		if n, err := h.engine.RunOnce(context.Background()); err != nil || n != 2 {
			t.Fatalf("claim: %d %v", n, err)
		}
		waitFor(t, func() bool { return len(prov.requests("/m")) == 1 && len(prov.requests("/blocker")) == 1 })
		h.clock.Add(20 * time.Second) // blocker: the scope pauses for an hour; m times out
		h.engine.Wait()
		if op := h.wantState("m", scheduler.StateWaitingForBudget); !op.MaybeApplied { // behind the scope's pause
			t.Fatal("the uncertain attempt did not mark m")
		}
		h.clock.Add(time.Minute - 20*time.Second + scheduler.DeadlineGrace + time.Millisecond)
		h.pass()
		h.expiredBy("m", scheduler.StateHeld, "", prov)
		if n := len(prov.requests("/m")); n != 1 {
			t.Errorf("m sent %d times, want 1", n)
		}
	})
}

// The loop wakes for a deadline: with a long poll interval, a waiting
// operation still ends within the grace of its deadline.
func TestRunWakesForDeadlines(t *testing.T) {
	h := setup(t, scheduler.EngineConfig{PollInterval: time.Hour})
	prov := newProvider(t, h.clock)
	h.scope("a", prov.URL, "", 1)
	prov.script("/first", answer{status: 401})
	h.enqueue(scheduler.OperationInput{ID: "first", Scope: "a", Method: "GET", Path: "/first"})
	h.pass() // the scope is held
	h.enqueue(scheduler.OperationInput{ID: "short", Scope: "a", Method: "GET", Path: "/short", MaxElapsed: 5 * time.Second})

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.engine.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	deadline := h.op("short").Deadline
	for h.op("short").State == scheduler.StateScheduled {
		if h.clock.Now().After(deadline.Add(time.Minute)) {
			t.Fatalf("still scheduled a minute after its deadline (poll interval 1h)")
		}
		time.Sleep(2 * time.Millisecond)
		h.clock.Add(100 * time.Millisecond)
	}
	h.expiredBy("short", scheduler.StateFailed, "/short", prov)
}
