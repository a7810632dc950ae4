package db_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"pacer/providers"
	"pacer/scheduler"
)

// A custom scope's declarative profile is stored as JSON and read back
// equal, by GetScope, ListScopes and the claim; a built-in scope has none.
func TestPutScopeProfileSpec(t *testing.T) {
	ctx := context.Background()
	d, _ := newTestDB(t)
	act := scheduler.Action{Actor: "alice", At: t0, Reason: "onboard"}
	spec := &providers.Spec{
		Statuses:    map[string]providers.Class{"420": providers.ClassRateLimited},
		RetryAfter:  &providers.TimeHeader{Header: "X-Wait-Ms", Format: "delta-millis"},
		Idempotency: &providers.IdempotencySpec{Header: "Idempotency-Key", Retention: "24h"},
	}
	cfg := scheduler.ScopeConfig{Name: "odd", Provider: providers.CustomName, BaseURL: "https://api.example.com", MaxConcurrent: 2, Group: "custom:api.example.com", Profile: spec}
	s, _, err := d.PutScope(ctx, cfg, act)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s.Profile, spec) {
		t.Fatalf("put: profile %+v, want %+v", s.Profile, spec)
	}
	got, err := d.GetScope(ctx, "odd")
	if err != nil || !reflect.DeepEqual(got.Profile, spec) {
		t.Fatalf("get: profile %+v (%v), want %+v", got.Profile, err, spec)
	}
	list, err := d.ListScopes(ctx)
	if err != nil || len(list) != 1 || !reflect.DeepEqual(list[0].Profile, spec) {
		t.Fatalf("list: %+v (%v)", list, err)
	}
	enqueue(t, d, t0, newOp("op-1", "odd", t0))
	claims, err := d.ClaimDue(ctx, scheduler.ClaimParams{Now: t0, Limit: 1, LeaseFor: time.Minute})
	if err != nil || len(claims) != 1 || !reflect.DeepEqual(claims[0].Scope.Profile, spec) {
		t.Fatalf("claim: %+v (%v)", claims, err)
	}

	// Replaced by a built-in provider, the profile goes.
	cfg.Provider, cfg.Profile = "generic", nil
	if s, _, err = d.PutScope(ctx, cfg, act); err != nil || s.Profile != nil {
		t.Fatalf("replace: profile %+v (%v)", s.Profile, err)
	}

	// The schema ties the two: custom needs a profile, others take none.
	bad := scheduler.ScopeConfig{Name: "bad", Provider: providers.CustomName, BaseURL: "https://x", MaxConcurrent: 1}
	if _, _, err := d.PutScope(ctx, bad, act); err == nil {
		t.Errorf("custom scope without a profile stored")
	}
	bad.Provider, bad.Profile = "github", spec
	if _, _, err := d.PutScope(ctx, bad, act); err == nil {
		t.Errorf("github scope with a profile stored")
	}
}
