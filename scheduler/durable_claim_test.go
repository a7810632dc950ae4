package scheduler_test

import (
	"context"
	"sync"
	"testing"

	"pacer/scheduler"
)

// durableSpy records, for each operation the engine claims, what the
// engine's ClaimParams.Durable said of it.
type durableSpy struct {
	scheduler.Store
	mu      sync.Mutex
	durable map[string]bool
}

func (s *durableSpy) ClaimDue(ctx context.Context, p scheduler.ClaimParams) ([]scheduler.Claim, error) {
	claims, err := s.Store.ClaimDue(ctx, p)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range claims {
		s.durable[c.Operation.ID] = p.Durable != nil && p.Durable(c)
	}
	return claims, err
}

// §11 "Durable before it leaves": the engine asks for a durable claim for
// exactly the mutations whose provider cannot deduplicate them.
func TestEngineDurableClaims(t *testing.T) {
	h := setup(t, scheduler.EngineConfig{})
	prov := newProvider(t, h.clock)
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
	eng, err := scheduler.NewEngine(spy, h.clock, scheduler.DefaultPolicy(), scheduler.EngineConfig{Random: half})
	if err != nil {
		t.Fatal(err)
	}
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
