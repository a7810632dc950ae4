package scheduler_test

import (
	"context"
	"testing"
	"time"

	"pacer/providers"
	"pacer/scheduler"
)

// customScope stores a "custom" scope whose declarative profile is spec.
func (h *harness) customScope(name, url string, spec providers.Spec) {
	h.t.Helper()
	_, _, err := h.svc.PutScope(context.Background(), scheduler.ScopeInput{
		Name: name, Provider: providers.CustomName, BaseURL: url, MaxConcurrent: 2, Profile: &spec,
		Credentials: scheduler.Credentials{Type: scheduler.CredentialBearer, Token: "secret-" + name},
	}, "test")
	if err != nil {
		h.t.Fatal(err)
	}
}

// A provider pacer does not know answers 420 with X-Wait-Ms: the custom
// scope's declarative profile classifies it as a rate limit and the
// operation waits exactly as declared, across a restart.
func TestCustomProfileWaitsAsDeclared(t *testing.T) {
	h, prov := setupWithProvider(t)
	h.customScope("odd", prov.URL, providers.Spec{
		Statuses:    map[string]providers.Class{"420": providers.ClassRateLimited, "5xx": providers.ClassUnknownOutcome},
		RetryAfter:  &providers.TimeHeader{Header: "X-Wait-Ms", Format: "delta-millis"},
		Idempotency: &providers.IdempotencySpec{Header: "Idempotency-Key", Retention: "24h", Methods: []string{"POST"}},
	})
	prov.script("/slow", answer{status: 420, headers: map[string]string{"X-Wait-Ms": "4500"}}, answer{status: 200})
	h.enqueue(scheduler.OperationInput{ID: "slow", Scope: "odd", Method: "GET", Path: "/slow"})

	if n := h.pass(); n != 1 {
		t.Fatalf("claimed %d, want 1", n)
	}
	op := h.wantState("slow", scheduler.StateWaitingForBudget)
	declared := t0.Add(4500 * time.Millisecond)
	if lo := op.LastOutcome; lo == nil || lo.Class != providers.ClassRateLimited || lo.Status != 420 ||
		lo.Hint == nil || lo.Hint.Source != "x-wait-ms" || lo.Hint.Raw != "4500" || !lo.Hint.At.Equal(declared) {
		t.Fatalf("last outcome: %+v (hint %+v)", op.LastOutcome, op.LastOutcome.Hint)
	}
	sc, err := h.svc.GetScope(context.Background(), "odd")
	if err != nil {
		t.Fatal(err)
	}
	if !sc.PausedUntil.Equal(declared) {
		t.Errorf("scope paused until %s, want exactly the declared %s", sc.PausedUntil, declared)
	}
	// The policy spreads waiters after the hint by a jitter (half of the
	// spread with the harness's fixed random source), never before it.
	if want := declared.Add(scheduler.DefaultSpread / 2); !op.NextAttemptAt.Equal(want) {
		t.Errorf("next attempt %s, want %s", op.NextAttemptAt, want)
	}

	// A restart keeps the scope's profile: the stored spec drives the
	// new engine.
	h.open()
	h.clock.Add(4499 * time.Millisecond)
	if n := h.pass(); n != 0 || len(prov.requests("/slow")) != 1 {
		t.Fatalf("sent before the declared wait: claimed %d, %d requests", n, len(prov.requests("/slow")))
	}
	h.clock.Set(op.NextAttemptAt)
	if n := h.pass(); n != 1 {
		t.Fatalf("claimed %d at the next attempt, want 1", n)
	}
	h.wantState("slow", scheduler.StateSucceeded)
	if got := prov.requests("/slow"); len(got) != 2 || got[1].at.Before(declared) {
		t.Fatalf("requests %+v: the second must leave at or after %s", got, declared)
	}
}

// The declared idempotency header is sent with the operation's identity,
// and a declared unknownOutcome is resent with the same key inside the
// declared retention.
func TestCustomProfileIdempotency(t *testing.T) {
	h, prov := setupWithProvider(t)
	h.customScope("keyed", prov.URL, providers.Spec{
		Statuses:    map[string]providers.Class{"5xx": providers.ClassUnknownOutcome},
		Idempotency: &providers.IdempotencySpec{Header: "Idempotency-Key", Retention: "24h", Methods: []string{"POST"}},
	})
	prov.script("/charge", answer{status: 500}, answer{status: 201})
	h.enqueue(scheduler.OperationInput{ID: "charge", Scope: "keyed", Method: "POST", Path: "/charge", Body: []byte(`{"n":1}`), ContentType: "application/json", RequestIdentity: "charge-identity"})

	h.pass()
	op := h.op("charge")
	if op.State != scheduler.StateScheduled || op.LastOutcome == nil || op.LastOutcome.Class != providers.ClassUnknownOutcome {
		t.Fatalf("after the 500: state %s, last %+v", op.State, op.LastOutcome)
	}
	h.clock.Set(op.NextAttemptAt)
	h.pass()
	h.wantState("charge", scheduler.StateSucceeded)
	got := prov.requests("/charge")
	if len(got) != 2 || got[0].key != "charge-identity" || got[1].key != "charge-identity" || got[0].body != got[1].body {
		t.Fatalf("requests %+v: want two with the same key and body", got)
	}
}

// Two custom scopes with different profiles read the same answer their
// own way: the engine's profile cache is keyed by the spec's content.
func TestCustomProfilesPerScope(t *testing.T) {
	h, prov := setupWithProvider(t)
	h.customScope("wait", prov.URL, providers.Spec{Statuses: map[string]providers.Class{"420": providers.ClassRateLimited}})
	h.customScope("fail", prov.URL, providers.Spec{Statuses: map[string]providers.Class{"420": providers.ClassPermanent}})
	prov.script("/x", answer{status: 420})
	h.enqueue(scheduler.OperationInput{ID: "w", Scope: "wait", Method: "GET", Path: "/x"})
	h.enqueue(scheduler.OperationInput{ID: "f", Scope: "fail", Method: "GET", Path: "/x"})
	if n := h.pass(); n != 2 {
		t.Fatalf("claimed %d, want 2", n)
	}
	h.wantState("w", scheduler.StateWaitingForBudget)
	h.wantState("f", scheduler.StateFailed)

	// Replacing a scope's profile changes how its next answer is read.
	h.customScope("fail", prov.URL, providers.Spec{Statuses: map[string]providers.Class{"420": providers.ClassTransient}})
	h.enqueue(scheduler.OperationInput{ID: "f2", Scope: "fail", Method: "GET", Path: "/x"})
	h.pass()
	if op := h.op("f2"); op.LastOutcome == nil || op.LastOutcome.Class != providers.ClassTransient {
		t.Fatalf("after the replace: last outcome %+v", op.LastOutcome)
	}
}
