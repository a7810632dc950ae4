package scheduler_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"pacer/scheduler"
)

// durableSpy records, for each operation the engine claims, what the
// engine's ClaimParams.Durable said of it.
type durableSpy struct {
	scheduler.Store
	mu      sync.Mutex
	durable map[string]bool
}

func (s *durableSpy) CompleteAndClaim(ctx context.Context, cs []scheduler.Completion, p scheduler.ClaimParams) ([]bool, []scheduler.Claim, error) {
	applied, claims, err := s.Store.CompleteAndClaim(ctx, cs, p)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range claims {
		s.durable[c.Operation.ID] = p.Durable != nil && p.Durable(c)
	}
	return applied, claims, err
}

// §11 "Durable before it leaves": the engine asks for a durable claim for
// exactly the mutations whose provider cannot deduplicate them.
func TestEngineDurableClaims(t *testing.T) {
	h, prov := setupWithProvider(t)
	h.scope("plain", prov.URL, "", 10)                // no idempotency
	h.scope("keyed", prov.URL, "Idempotency-Key", 10) // deduplicates every method
	for _, in := range []scheduler.OperationInput{
		{ID: "plain-post", Scope: "plain", Method: "POST", Path: "/p"},
		{ID: "plain-delete", Scope: "plain", Method: "DELETE", Path: "/d"},
		{ID: "plain-get", Scope: "plain", Method: "GET", Path: "/g"},
		{ID: "keyed-post", Scope: "keyed", Method: "POST", Path: "/k"},
		{ID: "keyed-get", Scope: "keyed", Method: "GET", Path: "/kg"},
	} {
		h.enqueue(in)
	}
	spy := &durableSpy{Store: h.store, durable: map[string]bool{}}
	eng := newScheduler(t, spy, h.clock, scheduler.Config{Engine: scheduler.EngineConfig{Random: half}}).Engine
	if n, err := eng.RunOnce(context.Background()); err != nil || n != 5 {
		t.Fatalf("claim: %d, %v", n, err)
	}
	eng.Wait()
	want := map[string]bool{"plain-post": true, "plain-delete": true, "plain-get": false, "keyed-post": false, "keyed-get": false}
	spy.mu.Lock()
	defer spy.mu.Unlock()
	for id, w := range want {
		if got, ok := spy.durable[id]; !ok || got != w {
			t.Errorf("%s: durable claim %v (claimed %v), want %v", id, got, ok, w)
		}
	}
}

// unsyncedStore commits its claims but fails the call, as the store does
// when it cannot sync a durable claim to disk; it hands the claims back
// all the same, so a test sees whether the engine would send them.
type unsyncedStore struct {
	scheduler.Store
	fail bool
}

var errUnsynced = errors.New("sync the claim to disk: I/O error")

func (s *unsyncedStore) CompleteAndClaim(ctx context.Context, cs []scheduler.Completion, p scheduler.ClaimParams) ([]bool, []scheduler.Claim, error) {
	applied, claims, err := s.Store.CompleteAndClaim(ctx, cs, p)
	if err == nil && s.fail && len(claims) > 0 {
		return applied, claims, errUnsynced
	}
	return applied, claims, err
}

// §11 "Durable before it leaves": when the claim call fails (its sync to
// disk failed, after the claim committed), the engine sends nothing; the
// leases expire and are recovered as any lost lease: the read is sent
// again, the mutation the provider cannot deduplicate is held for a
// person (its outcome is unknown to the store), never sent twice.
func TestEngineUnsyncedClaimNotSent(t *testing.T) {
	h, prov := setupWithProvider(t)
	h.scope("plain", prov.URL, "", 10)
	h.enqueue(scheduler.OperationInput{ID: "post", Scope: "plain", Method: "POST", Path: "/p"})
	h.enqueue(scheduler.OperationInput{ID: "get", Scope: "plain", Method: "GET", Path: "/g"})
	store := &unsyncedStore{Store: h.store, fail: true}
	eng := newScheduler(t, store, h.clock, scheduler.Config{Engine: scheduler.EngineConfig{Random: half}}).Engine
	ctx := context.Background()
	if n, err := eng.RunOnce(ctx); !errors.Is(err, errUnsynced) || n != 0 {
		t.Fatalf("RunOnce = %d, %v; want 0 and the sync's error", n, err)
	}
	eng.Wait()
	if got := len(prov.requests("/p")) + len(prov.requests("/g")); got != 0 {
		t.Fatalf("%d requests sent after a failed claim call, want none", got)
	}
	h.wantState("post", scheduler.StateRunning)

	store.fail = false
	h.clock.Add(scheduler.DefaultLeaseDuration + time.Second)
	if _, err := eng.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	eng.Wait()
	if post := h.wantState("post", scheduler.StateHeld); post.HoldReason != scheduler.HoldUnknownOutcome {
		t.Errorf("post held for %q, want %q", post.HoldReason, scheduler.HoldUnknownOutcome)
	}
	if len(prov.requests("/p")) != 0 || len(prov.requests("/g")) != 1 {
		t.Errorf("requests after recovery: POST %d, GET %d; want 0 and 1", len(prov.requests("/p")), len(prov.requests("/g")))
	}
}
