package scheduler_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"pgregory.net/rapid"

	"pacer/internal/teststore"
	"pacer/providers"
	"pacer/scheduler"
)

// machine is a model of the claim/complete/recover state machine, checked
// against the real store (teststore's choice) over random interleavings (invariants 1, 2,
// 5 and 7 of design §3). Time is a plain value passed to the store, as the
// engine passes its clock's.
type machine struct {
	t      *rapid.T
	place  *teststore.Place
	store  teststore.Store
	policy scheduler.Policy
	now    time.Time
	nextID int

	// model
	ops     map[string]*modelOp
	paused  map[string]time.Time // scope → pause end
	leases  []scheduler.Claim    // every lease handed out, live or not
	maxConc map[string]int
}

type modelOp struct {
	state    scheduler.State
	next     time.Time
	token    int64 // current lease token
	deadline time.Time
}

const leaseFor = 30 * time.Second

func (m *machine) open() {
	store, err := m.place.Connect(context.Background())
	if err != nil {
		m.t.Fatal(err)
	}
	m.store = store
}

// newMachine is a machine on a fresh place of tb's (each run of the
// property its own file or database).
func newMachine(t *rapid.T, tb testing.TB) *machine {
	m := &machine{t: t, place: teststore.NewPlace(tb),
		policy: scheduler.DefaultPolicy(), now: t0,
		ops: map[string]*modelOp{}, paused: map[string]time.Time{}, maxConc: map[string]int{"plain": 2, "keyed": 1}}
	m.open()
	clk := clock.NewMock()
	clk.Set(t0)
	s, err := scheduler.New(m.store, clk, scheduler.Config{Policy: m.policy})
	if err != nil {
		t.Fatal(err)
	}
	svc := s.Service
	for name, mc := range m.maxConc {
		idem := ""
		if name == "keyed" {
			idem = "Idempotency-Key"
		}
		if _, _, err := svc.PutScope(context.Background(), scheduler.ScopeInput{Name: name, Provider: "generic", BaseURL: "http://127.0.0.1:9", MaxConcurrent: mc, IdempotencyHeader: idem}, "test"); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

func (m *machine) idem(scope string) providers.Idempotency {
	p, _ := providers.Lookup("generic", providers.Options{IdempotencyHeader: map[string]string{"keyed": "Idempotency-Key"}[scope]})
	return p.Idempotency()
}

func (m *machine) enqueue(t *rapid.T) {
	scope := rapid.SampledFrom([]string{"plain", "keyed"}).Draw(t, "scope")
	method := rapid.SampledFrom([]string{"GET", "POST"}).Draw(t, "method")
	delay := time.Duration(rapid.IntRange(0, 60).Draw(t, "delaySeconds")) * time.Second
	m.nextID++
	id := fmt.Sprintf("op-%d", m.nextID)
	kind := scheduler.KindMutation
	if method == "GET" {
		kind = scheduler.KindRead
	}
	nb := m.now.Add(delay)
	op := scheduler.NewOperation{ID: id, Scope: scope, Kind: kind, Request: scheduler.Request{Method: method, Path: "/" + id},
		RequestIdentity: id, NotBefore: nb, Retry: scheduler.Retry{MaxAttempts: 4, MaxElapsed: 10 * time.Minute}, ContentHash: id}
	res, err := m.store.Enqueue(context.Background(), []scheduler.NewOperation{op}, m.now)
	if err != nil || res[0].Err != nil {
		t.Fatalf("enqueue: %v %v", err, res[0].Err)
	}
	m.ops[id] = &modelOp{state: scheduler.StateScheduled, next: nb, deadline: nb.Add(10 * time.Minute)}
}

func (m *machine) advance(t *rapid.T) {
	m.now = m.now.Add(time.Duration(rapid.IntRange(0, 40_000).Draw(t, "advanceMs")) * time.Millisecond)
}

func (m *machine) claim(t *rapid.T) {
	limit := rapid.IntRange(1, 5).Draw(t, "limit")
	cs, err := m.store.ClaimDue(context.Background(), scheduler.ClaimParams{Now: m.now, Limit: limit, LeaseFor: leaseFor})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		mo := m.ops[c.Operation.ID]
		// Invariant 1: never early, never during a pause.
		if !mo.state.Due() || mo.next.After(m.now) {
			t.Fatalf("%s claimed at %s in state %s due %s", c.Operation.ID, m.now, mo.state, mo.next)
		}
		if p := m.paused[c.Scope.Name]; p.After(m.now) {
			t.Fatalf("%s claimed at %s while scope %s paused until %s", c.Operation.ID, m.now, c.Scope.Name, p)
		}
		// Invariant 2: a fresh fencing token for the one live lease.
		if c.Operation.LeaseToken <= mo.token {
			t.Fatalf("%s lease token %d not after %d", c.Operation.ID, c.Operation.LeaseToken, mo.token)
		}
		mo.state, mo.token = scheduler.StateRunning, c.Operation.LeaseToken
		m.leases = append(m.leases, c)
	}
	running := map[string]int{}
	for _, l := range m.leases {
		if mo := m.ops[l.Operation.ID]; mo.state == scheduler.StateRunning && mo.token == l.Operation.LeaseToken {
			running[l.Scope.Name]++
		}
	}
	for scope, n := range running {
		if n > m.maxConc[scope] {
			t.Fatalf("scope %s has %d live leases, max %d", scope, n, m.maxConc[scope])
		}
	}
}

func (m *machine) outcome(t *rapid.T) providers.Outcome {
	class := rapid.SampledFrom([]providers.Class{providers.ClassSuccess, providers.ClassRateLimited, providers.ClassTransient, providers.ClassPermanent, providers.ClassUnknownOutcome}).Draw(t, "class")
	out := providers.Outcome{Class: class, Status: 500}
	if rapid.Bool().Draw(t, "hint") {
		out.Hint = providers.Hint{Source: "retry-after", Raw: "x", At: m.now.Add(time.Duration(rapid.IntRange(1, 120).Draw(t, "hintSeconds")) * time.Second)}
	}
	return out
}

// complete finishes any lease handed out, live or stale.
func (m *machine) complete(t *rapid.T) {
	if len(m.leases) == 0 {
		t.Skip("no lease")
	}
	i := rapid.IntRange(0, len(m.leases)-1).Draw(t, "lease")
	c := m.leases[i]
	m.leases = append(m.leases[:i], m.leases[i+1:]...)
	out := m.outcome(t)
	d := m.policy.Decide(c.Operation, m.idem(c.Scope.Name), out, m.now, half)
	m.apply(t, c, out, d)
}

func (m *machine) apply(t *rapid.T, c scheduler.Claim, out providers.Outcome, d scheduler.Decision) {
	mo := m.ops[c.Operation.ID]
	live := mo.state == scheduler.StateRunning && mo.token == c.Operation.LeaseToken
	applied, err := m.store.Complete(context.Background(), []scheduler.Completion{{OperationID: c.Operation.ID, LeaseToken: c.Operation.LeaseToken, Attempt: c.Operation.Attempt, FinishedAt: m.now, Outcome: out, Decision: d}})
	if err != nil {
		t.Fatal(err)
	}
	// Invariant 2: the fence takes exactly the live lease's completion.
	if applied[0] != live {
		t.Fatalf("%s completion with token %d applied=%v, live=%v", c.Operation.ID, c.Operation.LeaseToken, applied[0], live)
	}
	if !live {
		return
	}
	mo.state, mo.next = d.State, d.NextAttemptAt
	if d.State.Due() && d.NextAttemptAt.After(mo.deadline) {
		t.Fatalf("invariant 5: %s next attempt %s after its deadline %s", c.Operation.ID, d.NextAttemptAt, mo.deadline)
	}
	if !d.Scope.PauseUntil.IsZero() && d.Scope.PauseUntil.After(m.paused[c.Scope.Name]) {
		m.paused[c.Scope.Name] = d.Scope.PauseUntil
	}
}

// expire recovers leases whose expiry has passed, as the engine's pass does.
func (m *machine) expire(t *rapid.T) {
	m.now = m.now.Add(leaseFor)
	m.recover(t, m.now)
}

func (m *machine) recover(t *rapid.T, expiredBy time.Time) {
	cs, err := m.store.ListRunning(context.Background(), expiredBy, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		out, d := m.policy.Recover(c.Operation, m.idem(c.Scope.Name), m.now, "test")
		m.apply(t, c, out, d)
	}
}

// restart closes and reopens the store, checks that everything durable
// survived (invariant 7), and recovers every lease as start-up does.
func (m *machine) restart(t *rapid.T) {
	before := m.snapshot(t)
	if err := m.store.Close(); err != nil {
		t.Fatal(err)
	}
	m.open()
	after := m.snapshot(t)
	for id, b := range before {
		if a := after[id]; a != b {
			t.Fatalf("invariant 7: %s changed across restart: %+v → %+v", id, b, a)
		}
	}
	m.recover(t, time.Time{})
}

type durable struct {
	state scheduler.State
	next  time.Time
	token int64
}

func (m *machine) snapshot(t *rapid.T) map[string]durable {
	out := map[string]durable{}
	for id := range m.ops {
		op, err := m.store.GetOperation(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		out[id] = durable{op.State, op.NextAttemptAt, op.LeaseToken}
	}
	for _, name := range []string{"plain", "keyed"} {
		s, err := m.store.GetScope(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		out["scope:"+name] = durable{next: s.PausedUntil}
	}
	return out
}

// check compares the store with the model. A due operation whose scope's
// pause ends after its own time reports waitingForBudget until the pause
// end (design §11, "What the API says is what will happen").
func (m *machine) check(t *rapid.T) {
	for id, mo := range m.ops {
		op, err := m.store.GetOperation(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		state, next := mo.state, mo.next
		if p := m.paused[op.Scope]; mo.state.Due() && p.After(mo.next) {
			state, next = scheduler.StateWaitingForBudget, p
		}
		if op.State != state {
			t.Fatalf("%s: store %s, model %s", id, op.State, state)
		}
		if mo.state.Due() && !op.NextAttemptAt.Equal(next) {
			t.Fatalf("%s: store next %s, model %s", id, op.NextAttemptAt, next)
		}
	}
}

// drain runs every operation to an end with transient failures only and
// checks that it ends within its budget (invariant 5).
func (m *machine) drain(t *rapid.T) {
	m.recover(t, time.Time{})
	for step := 0; ; step++ {
		open := 0
		for _, mo := range m.ops {
			if mo.state.Due() || mo.state == scheduler.StateRunning {
				open++
			}
		}
		if open == 0 {
			return
		}
		if step > 2000 {
			for id, mo := range m.ops {
				if mo.state.Due() || mo.state == scheduler.StateRunning {
					op, _ := m.store.GetOperation(context.Background(), id)
					t.Logf("%s model %+v store %s next %s attempts %d/%d", id, *mo, op.State, op.NextAttemptAt, op.BudgetAttempts, op.Retry.MaxAttempts)
				}
			}
			for _, name := range []string{"plain", "keyed"} {
				sc, err := m.store.GetScope(context.Background(), name)
				t.Logf("scope %s: %+v %v", name, sc, err)
			}
			t.Fatalf("invariant 5: %d operations still open after 2000 steps (now %s)", open, m.now)
		}
		cs, err := m.store.ClaimDue(context.Background(), scheduler.ClaimParams{Now: m.now, Limit: 100, LeaseFor: leaseFor})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			m.ops[c.Operation.ID].state, m.ops[c.Operation.ID].token = scheduler.StateRunning, c.Operation.LeaseToken
			out := providers.Outcome{Class: providers.ClassTransient, Status: 503}
			m.apply(t, c, out, m.policy.Decide(c.Operation, m.idem(c.Scope.Name), out, m.now, half))
		}
		m.now = m.now.Add(5 * time.Second)
	}
}

func TestStateMachine(t *testing.T) {
	outer := t
	rapid.Check(t, func(t *rapid.T) {
		m := newMachine(t, outer)
		defer m.store.Close()
		t.Repeat(map[string]func(*rapid.T){
			"enqueue":  m.enqueue,
			"advance":  m.advance,
			"claim":    m.claim,
			"complete": m.complete,
			"expire":   m.expire,
			"restart":  m.restart,
			"":         m.check,
		})
		m.drain(t)
	})
}
