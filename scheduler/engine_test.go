package scheduler_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"

	"pacer/internal/teststore"
	"pacer/providers"
	"pacer/scheduler"
)

// harness is an engine over a real store (the one teststore selects: a
// SQLite file in a temp dir, or a PostgreSQL database), on a mock clock;
// tests drive it with RunOnce and Wait.
type harness struct {
	t      *testing.T
	place  *teststore.Place
	clock  *clock.Mock
	store  teststore.Store
	svc    *scheduler.Service
	engine *scheduler.Engine
	cfg    scheduler.EngineConfig
}

func setup(t *testing.T, cfg scheduler.EngineConfig) *harness {
	t.Helper()
	clk := clock.NewMock()
	clk.Set(t0)
	h := &harness{t: t, place: teststore.NewPlace(t), clock: clk, cfg: cfg}
	h.open()
	return h
}

// open (re)opens the store and builds a fresh service and engine, as a
// restarted process would: the store open before is closed first.
func (h *harness) open() {
	h.t.Helper()
	if h.store != nil {
		h.store.Close()
	}
	store := h.place.Open(h.t)
	cfg := h.cfg
	if cfg.Random == nil {
		cfg.Random = half
	}
	s := newScheduler(h.t, store, h.clock, scheduler.Config{Engine: cfg})
	h.store, h.engine, h.svc = store, s.Engine, s.Service
}

// newScheduler is scheduler.New that fails the test on an error.
func newScheduler(t testing.TB, store scheduler.Store, clk clock.Clock, cfg scheduler.Config) *scheduler.Scheduler {
	t.Helper()
	s, err := scheduler.New(store, clk, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (h *harness) scope(name, url, idemHeader string, maxConcurrent int) {
	h.t.Helper()
	_, _, err := h.svc.PutScope(context.Background(), scheduler.ScopeInput{
		Name: name, Provider: "generic", BaseURL: url, IdempotencyHeader: idemHeader, MaxConcurrent: maxConcurrent,
		Credentials: scheduler.Credentials{Type: scheduler.CredentialBearer, Token: "secret-" + name},
	}, "test")
	if err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) enqueue(in scheduler.OperationInput) {
	h.t.Helper()
	res, err := h.svc.Enqueue(context.Background(), []scheduler.OperationInput{in}, func(int) string { return "" })
	if err != nil {
		h.t.Fatal(err)
	}
	if res[0].Err != nil {
		h.t.Fatal(res[0].Err)
	}
}

// pass claims and lets every claimed attempt complete.
func (h *harness) pass() int {
	h.t.Helper()
	n, err := h.engine.RunOnce(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	h.engine.Wait()
	return n
}

func (h *harness) op(id string) scheduler.Operation {
	h.t.Helper()
	op, err := h.svc.GetOperation(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return op
}

func (h *harness) wantState(id string, want scheduler.State) scheduler.Operation {
	h.t.Helper()
	op := h.op(id)
	if op.State != want {
		h.t.Fatalf("%s: state %s, want %s (hold %q, failure %q, last %+v)", id, op.State, want, op.HoldReason, op.FailureReason, op.LastOutcome)
	}
	return op
}

// provider is an httptest stand-in answering from a script per path, and
// recording what it received.
type provider struct {
	*httptest.Server
	clock *clock.Mock

	mu       sync.Mutex
	answers  map[string][]answer // path → answers in turn; the last repeats
	received []received
}

type answer struct {
	status  int
	headers map[string]string
	body    string
	hang    bool // block until the request's context ends
}

type received struct {
	path, key, auth, body string
	at                    time.Time
}

func newProvider(t *testing.T, clk *clock.Mock) *provider {
	p := &provider{clock: clk, answers: map[string][]answer{}}
	p.Server = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.Close)
	return p
}

// setupWithProvider is a harness with the default engine configuration
// (see setup) and a provider on its clock.
func setupWithProvider(t *testing.T) (*harness, *provider) {
	t.Helper()
	h := setup(t, scheduler.EngineConfig{})
	return h, newProvider(t, h.clock)
}

// rateLimited is n answers of 429 asking to retry after a second.
func rateLimited(n int) []answer {
	as := make([]answer, n)
	for i := range as {
		as[i] = answer{status: 429, headers: map[string]string{"Retry-After": "1"}}
	}
	return as
}

func (p *provider) script(path string, as ...answer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.answers[path] = as
}

func (p *provider) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	p.mu.Lock()
	p.received = append(p.received, received{path: r.URL.Path, key: r.Header.Get("Idempotency-Key"), auth: r.Header.Get("Authorization"), body: string(body), at: p.clock.Now()})
	a := answer{status: 200, body: `{"ok":true}`}
	if as := p.answers[r.URL.Path]; len(as) > 0 {
		a = as[0]
		if len(as) > 1 {
			p.answers[r.URL.Path] = as[1:]
		}
	}
	p.mu.Unlock()
	if a.hang {
		<-r.Context().Done()
		return
	}
	for k, v := range a.headers {
		w.Header().Set(k, v)
	}
	w.WriteHeader(a.status)
	io.WriteString(w, a.body)
}

func (p *provider) requests(path string) []received {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []received
	for _, r := range p.received {
		if path == "" || r.path == path {
			out = append(out, r)
		}
	}
	return out
}

// Invariant 1: nothing leaves before its nextAttemptAt.
func TestEngineNeverEarly(t *testing.T) {
	h, prov := setupWithProvider(t)
	h.scope("a", prov.URL, "", 4)
	nb := t0.Add(10 * time.Second)
	h.enqueue(scheduler.OperationInput{ID: "later", Scope: "a", Method: "GET", Path: "/later", NotBefore: &nb})

	for _, step := range []time.Duration{0, 5 * time.Second, 4999 * time.Millisecond} {
		h.clock.Add(step)
		if n := h.pass(); n != 0 {
			t.Fatalf("claimed %d at %s, before notBefore %s", n, h.clock.Now(), nb)
		}
	}
	if got := len(prov.requests("")); got != 0 {
		t.Fatalf("provider saw %d requests before the due time", got)
	}
	h.clock.Add(time.Millisecond)
	if n := h.pass(); n != 1 {
		t.Fatalf("claimed %d at the due time, want 1", n)
	}
	h.wantState("later", scheduler.StateSucceeded)
	r := prov.requests("/later")[0]
	if r.at.Before(nb) {
		t.Errorf("sent at %s, before %s", r.at, nb)
	}
	if r.auth != "Bearer secret-a" {
		t.Errorf("credentials not sent: Authorization %q", r.auth)
	}
}

// Invariant 6: a rate limit pauses its own scope and no other.
func TestRateLimitPausesOnlyItsScope(t *testing.T) {
	h, prov := setupWithProvider(t)
	h.scope("a", prov.URL, "", 1)
	h.scope("b", prov.URL, "", 1)
	prov.script("/a1", answer{status: 429, headers: map[string]string{"Retry-After": "30"}}, answer{status: 200})
	h.enqueue(scheduler.OperationInput{ID: "a1", Scope: "a", Method: "GET", Path: "/a1"})
	h.enqueue(scheduler.OperationInput{ID: "a2", Scope: "a", Method: "GET", Path: "/a2"})
	h.enqueue(scheduler.OperationInput{ID: "b1", Scope: "b", Method: "GET", Path: "/b1"})

	if n := h.pass(); n != 2 { // a1 and b1: one slot each
		t.Fatalf("first pass claimed %d, want 2", n)
	}
	op := h.wantState("a1", scheduler.StateWaitingForBudget)
	if op.NextAttemptAt.Before(t0.Add(30 * time.Second)) {
		t.Errorf("a1 next attempt %s, before the 30 s Retry-After", op.NextAttemptAt)
	}
	if op.LastOutcome == nil || op.LastOutcome.Hint == nil || op.LastOutcome.Hint.Source != "retry-after" || op.LastOutcome.Hint.Raw != "30" {
		t.Errorf("last outcome does not show the hint: %+v", op.LastOutcome)
	}
	sa, _ := h.svc.GetScope(context.Background(), "a")
	if sa.Status(h.clock.Now()) != scheduler.ScopePaused {
		t.Fatalf("scope a status %s, want paused", sa.Status(h.clock.Now()))
	}
	h.wantState("b1", scheduler.StateSucceeded)

	// Scope a is paused: a2 (due now) waits; scope b carries on.
	h.enqueue(scheduler.OperationInput{ID: "b2", Scope: "b", Method: "GET", Path: "/b2"})
	h.clock.Add(10 * time.Second)
	if n := h.pass(); n != 1 {
		t.Fatalf("pass during pause claimed %d, want 1 (b2 only)", n)
	}
	h.wantState("b2", scheduler.StateSucceeded)
	// a2 says what will happen: it waits for its scope's pause.
	if a2 := h.wantState("a2", scheduler.StateWaitingForBudget); !a2.NextAttemptAt.Equal(sa.PausedUntil) {
		t.Errorf("a2 next attempt %s, want the pause end %s", a2.NextAttemptAt, sa.PausedUntil)
	}
	if got := len(prov.requests("/a2")); got != 0 {
		t.Fatalf("a2 sent during its scope's pause")
	}

	h.clock.Add(20 * time.Second) // pause over; a1's jittered time may be later
	h.pass()
	h.wantState("a2", scheduler.StateSucceeded)
	h.clock.Add(scheduler.DefaultSpread)
	h.pass()
	h.wantState("a1", scheduler.StateSucceeded)
}

// Invariants 3 and 4: an uncertain mutation keeps body and identity; it is
// resent with the same key where the provider honours keys, else held.
func TestUncertainMutation(t *testing.T) {
	h, prov := setupWithProvider(t)
	h.scope("keyed", prov.URL, "Idempotency-Key", 2)
	h.scope("plain", prov.URL, "", 2)
	prov.script("/k", answer{status: 502}, answer{status: 502}, answer{status: 201, body: `{"id":7}`})
	prov.script("/p", answer{status: 502}, answer{status: 201})
	body := []byte(`{"amount":100}`)
	h.enqueue(scheduler.OperationInput{ID: "k", Scope: "keyed", Method: "POST", Path: "/k", Body: body, ContentType: "application/json", RequestIdentity: "intent-1"})
	h.enqueue(scheduler.OperationInput{ID: "p", Scope: "plain", Method: "POST", Path: "/p", Body: body, ContentType: "application/json"})

	for range 10 {
		h.pass()
		h.clock.Add(time.Minute)
	}
	op := h.wantState("k", scheduler.StateSucceeded)
	if op.Result == nil || string(op.Result.Body) != `{"id":7}` || op.Result.Status != 201 {
		t.Errorf("result = %+v", op.Result)
	}
	ks := prov.requests("/k")
	if len(ks) != 3 {
		t.Fatalf("keyed mutation sent %d times, want 3", len(ks))
	}
	for _, r := range ks {
		if r.key != "intent-1" || r.body != string(body) {
			t.Errorf("attempt sent key %q body %q, want intent-1 and the same body", r.key, r.body)
		}
	}
	h.wantState("p", scheduler.StateHeld)
	if got := len(prov.requests("/p")); got != 1 {
		t.Errorf("uncertain non-idempotent mutation sent %d times, want 1", got)
	}
	if ps := prov.requests("/p"); ps[0].key != "" {
		t.Errorf("plain scope sent an idempotency key %q", ps[0].key)
	}

	// A person releases it: it runs again with the same identity.
	if _, err := h.svc.Release(context.Background(), "p", nil, "checked: not applied", "staff"); err != nil {
		t.Fatal(err)
	}
	h.pass()
	h.wantState("p", scheduler.StateSucceeded)
	if ps := prov.requests("/p"); len(ps) != 2 || ps[1].body != string(body) {
		t.Errorf("released mutation not resent with the same body: %+v", ps)
	}
}

// Invariant 5: malformed or absurd timing never loops; every operation
// ends within its budget.
func TestMalformedTimingIsBounded(t *testing.T) {
	values := []string{"", "soon", "-5", "NaN", "1e400", "99999999999999999999999", "Wed, 21 Oct 2015 07:28:00 GMT", "Fri, 31 Dec 9999 23:59:59 GMT", "0"}
	h, prov := setupWithProvider(t)
	h.scope("a", prov.URL, "", 100)
	for i, v := range values {
		path := fmt.Sprintf("/m%d", i)
		hdr := map[string]string{}
		if v != "" {
			hdr["Retry-After"] = v
		}
		prov.script(path, answer{status: 429, headers: hdr})
		h.enqueue(scheduler.OperationInput{ID: fmt.Sprintf("m%d", i), Scope: "a", Method: "GET", Path: path, MaxElapsed: 10 * time.Minute, MaxAttempts: 50})
	}
	policy := scheduler.DefaultPolicy()
	for step := 0; ; step++ {
		if step > 1000 {
			t.Fatal("operations still running after 1000 passes")
		}
		h.pass()
		page, err := h.svc.ListOperations(context.Background(), scheduler.OperationFilter{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		open := 0
		for _, op := range page.Operations {
			if op.State.Due() {
				open++
				if wait := op.NextAttemptAt.Sub(h.clock.Now()); wait > policy.MaxHint+policy.Spread || wait < 0 {
					t.Fatalf("%s waits %s: unbounded", op.ID, wait)
				}
			}
		}
		if open == 0 {
			break
		}
		h.clock.Add(30 * time.Second)
	}
	for i := range values {
		op := h.wantState(fmt.Sprintf("m%d", i), scheduler.StateFailed)
		if op.FailureReason != scheduler.FailureRetryBudgetExhausted {
			t.Errorf("m%d: failure %q", i, op.FailureReason)
		}
		if !h.clock.Now().Before(op.Deadline.Add(2 * time.Minute)) {
			t.Errorf("m%d ran long past its deadline", i)
		}
	}
}

// Invariant 2: a request's deadline ends before its lease, so a hung
// provider cannot leave a request in flight after the lease is gone.
func TestRequestEndsBeforeLease(t *testing.T) {
	h := setup(t, scheduler.EngineConfig{RequestTimeout: 20 * time.Second, LeaseDuration: 30 * time.Second})
	prov := newProvider(t, h.clock)
	h.scope("a", prov.URL, "", 1)
	prov.script("/hang", answer{hang: true}, answer{status: 200})
	h.enqueue(scheduler.OperationInput{ID: "r", Scope: "a", Method: "GET", Path: "/hang"})
	if n, err := h.engine.RunOnce(context.Background()); err != nil || n != 1 {
		t.Fatalf("claim: %d, %v", n, err)
	}
	waitFor(t, func() bool { return len(prov.requests("/hang")) == 1 })
	claimed := h.op("r")
	h.clock.Add(20 * time.Second)
	h.engine.Wait()
	op := h.wantState("r", scheduler.StateScheduled)
	atts, _ := h.svc.ListAttempts(context.Background(), "r")
	if len(atts) != 1 || atts[0].Stale || atts[0].FinishedAt.IsZero() {
		t.Fatalf("attempts = %+v", atts)
	}
	if !atts[0].FinishedAt.Before(claimed.LeaseExpiresAt) {
		t.Errorf("attempt finished %s, not before its lease expiry %s", atts[0].FinishedAt, claimed.LeaseExpiresAt)
	}
	if op.LeaseToken != claimed.LeaseToken {
		t.Errorf("lease token changed by a completion: %d → %d", claimed.LeaseToken, op.LeaseToken)
	}
}

// Invariant 2: a completion that arrives after the lease was lost is
// discarded by the fence, even when the operation ran again meanwhile.
// The first attempt's request outlives its lease (its transport ignores
// the deadline, as a wall-clock step past the lease would), so another
// engine, as another process would, takes the expired lease over: on
// either store, since on a shared database only an expired lease or a
// dead node's is taken.
func TestStaleCompletionIsFenced(t *testing.T) {
	h := setup(t, scheduler.EngineConfig{Client: &http.Client{Transport: ignoreDeadline{}}})
	prov := newProvider(t, h.clock)
	h.scope("a", prov.URL, "", 1)
	release := make(chan struct{})
	var once sync.Once
	answer := func() { once.Do(func() { close(release) }) }
	t.Cleanup(answer) // before the provider closes, also when the test fails
	prov.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		prov.serve(httptest.NewRecorder(), r) // record it
		if len(prov.requests("/slow")) == 1 {
			<-release // the first attempt is slow
			w.WriteHeader(500)
			return
		}
		w.WriteHeader(200)
	})
	h.enqueue(scheduler.OperationInput{ID: "s", Scope: "a", Method: "GET", Path: "/slow"})
	old := h.engine
	if n, err := old.RunOnce(context.Background()); err != nil || n != 1 {
		t.Fatalf("claim: %d %v", n, err)
	}
	waitFor(t, func() bool { return len(prov.requests("/slow")) == 1 })

	// A second engine on the same store takes the lease over once it has
	// expired and runs the operation to success.
	h.clock.Set(h.op("s").LeaseExpiresAt)
	second := newScheduler(t, h.store, h.clock, scheduler.Config{Engine: scheduler.EngineConfig{Random: half}}).Engine
	if n, err := second.RunOnce(context.Background()); err != nil || n != 1 {
		t.Fatalf("second engine claimed %d, %v; want the recovered operation", n, err)
	}
	second.Wait()
	h.wantState("s", scheduler.StateSucceeded)

	answer() // the first attempt now answers 500, too late
	old.Wait()
	op := h.wantState("s", scheduler.StateSucceeded)
	if op.LastOutcome == nil || op.LastOutcome.Class != providers.ClassSuccess {
		t.Errorf("stale completion overwrote the outcome: %+v", op.LastOutcome)
	}
	atts, _ := h.svc.ListAttempts(context.Background(), "s")
	if len(atts) != 2 {
		t.Fatalf("attempts = %d, want 2", len(atts))
	}
	if atts[0].Status == 500 {
		t.Errorf("first attempt's late 500 was recorded: %+v", atts[0])
	}
	if atts[0].Reason != "interrupted" {
		t.Errorf("first attempt not closed by the lease recovery: %+v", atts[0])
	}
	if atts[1].Stale || atts[1].Class != providers.ClassSuccess {
		t.Errorf("second attempt = %+v", atts[1])
	}
}

// A 401 holds the operation and the whole scope; new credentials lift it.
func TestAuthRevokedHoldsScope(t *testing.T) {
	h, prov := setupWithProvider(t)
	h.scope("a", prov.URL, "", 1)
	prov.script("/x", answer{status: 401, body: `{"message":"Bad credentials"}`})
	h.enqueue(scheduler.OperationInput{ID: "x", Scope: "a", Method: "GET", Path: "/x"})
	h.enqueue(scheduler.OperationInput{ID: "y", Scope: "a", Method: "GET", Path: "/y"})
	h.pass()
	if op := h.op("x"); op.State != scheduler.StateHeld && op.State != scheduler.StateScheduled {
		t.Fatalf("x state %s", op.State)
	}
	// Whichever went first was refused; the scope is now held.
	sc, _ := h.svc.GetScope(context.Background(), "a")
	if sc.Status(h.clock.Now()) != scheduler.ScopeHeld || sc.HoldReason != scheduler.HoldAuthRevoked {
		t.Fatalf("scope status %s hold %q, want held/authRevoked", sc.Status(h.clock.Now()), sc.HoldReason)
	}
	before := len(prov.requests(""))
	h.clock.Add(time.Hour)
	h.pass()
	if got := len(prov.requests("")); got != before {
		t.Fatalf("%d requests sent while the scope was held", got-before)
	}
	h.scope("a", prov.URL, "", 1) // the same credentials again: still held
	if sc, _ = h.svc.GetScope(context.Background(), "a"); sc.HoldReason != scheduler.HoldAuthRevoked {
		t.Fatalf("putting the same credentials lifted the hold")
	}
	_, _, err := h.svc.PutScope(context.Background(), scheduler.ScopeInput{Name: "a", Provider: "generic", BaseURL: prov.URL, MaxConcurrent: 1,
		Credentials: scheduler.Credentials{Type: scheduler.CredentialBearer, Token: "rotated"}}, "test")
	if err != nil {
		t.Fatal(err)
	}
	sc, _ = h.svc.GetScope(context.Background(), "a")
	if sc.HoldReason != "" {
		t.Errorf("replacing credentials did not lift the hold")
	}
}

// Invariant 7: after a restart the delay survives and nothing is early.
func TestRestartKeepsEligibility(t *testing.T) {
	h, prov := setupWithProvider(t)
	h.scope("a", prov.URL, "", 1)
	prov.script("/r", answer{status: 429, headers: map[string]string{"Retry-After": "120"}}, answer{status: 200})
	h.enqueue(scheduler.OperationInput{ID: "r", Scope: "a", Method: "GET", Path: "/r"})
	h.pass()
	before := h.wantState("r", scheduler.StateWaitingForBudget)

	h.store.Close()
	h.open()
	if n, err := h.engine.Recover(context.Background()); err != nil || n != 0 {
		t.Fatalf("recover: %d %v", n, err)
	}
	after := h.wantState("r", scheduler.StateWaitingForBudget)
	if !after.NextAttemptAt.Equal(before.NextAttemptAt) {
		t.Fatalf("next attempt changed across restart: %s → %s", before.NextAttemptAt, after.NextAttemptAt)
	}
	sc, _ := h.svc.GetScope(context.Background(), "a")
	if sc.Status(h.clock.Now()) != scheduler.ScopePaused {
		t.Fatalf("pause lost across restart")
	}
	h.clock.Add(119 * time.Second)
	h.pass()
	if got := len(prov.requests("/r")); got != 1 {
		t.Fatalf("sent %d times before the Retry-After elapsed", got)
	}
	h.clock.Add(time.Second + scheduler.DefaultSpread)
	h.pass()
	h.wantState("r", scheduler.StateSucceeded)
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Graceful shutdown: Run stops claiming, gives in-flight requests the
// grace period, then cancels them and records them as interrupted.
func TestShutdownInterruptsAfterGrace(t *testing.T) {
	h := setup(t, scheduler.EngineConfig{ShutdownGrace: 15 * time.Second})
	prov := newProvider(t, h.clock)
	h.scope("a", prov.URL, "", 1)
	prov.script("/hang", answer{hang: true})
	h.enqueue(scheduler.OperationInput{ID: "r", Scope: "a", Method: "GET", Path: "/hang"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.engine.Run(ctx) }()
	waitFor(t, func() bool { return len(prov.requests("/hang")) == 1 })
	cancel()
	for i := 0; ; i++ {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			atts, _ := h.svc.ListAttempts(context.Background(), "r")
			if len(atts) != 1 || atts[0].Reason != "interrupted" {
				t.Fatalf("attempt = %+v, want one interrupted", atts)
			}
			if atts[0].FinishedAt.Sub(t0) < 15*time.Second {
				t.Errorf("interrupted after %s, before the 15 s grace", atts[0].FinishedAt.Sub(t0))
			}
			h.wantState("r", scheduler.StateScheduled)
			return
		case <-time.After(10 * time.Millisecond):
			if i > 500 {
				t.Fatal("Run did not return after shutdown")
			}
			if i > 5 && h.clock.Now().Sub(t0) < 30*time.Second {
				h.clock.Add(time.Second)
			}
		}
	}
}
