package storetest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"pacer/providers"
	"pacer/scheduler"
)

// testEnqueueIdentityInUse: when the scope's provider is sent the request
// identity as an idempotency key, another operation of the scope with the
// same identity that is unfinished, or was last updated less than the
// key's retention (24h for a generic scope's header) before now, holds
// it: the newcomer is rejected with ErrIdentityInUse naming the holder,
// and writes nothing while the rest of its batch commits. A scope sent no
// key, or another scope, is not concerned.
func testEnqueueIdentityInUse(t *testing.T, open Opener) {
	ctx := context.Background()
	d := open(t)
	for _, name := range []string{"pay", "pay-2"} {
		if _, _, err := d.PutScope(ctx, scheduler.ScopeConfig{Name: name, Provider: "generic", BaseURL: "https://pay.example",
			MaxConcurrent: 4, IdempotencyHeader: "X-Request-Key"}, scheduler.Action{Actor: "test", At: T0, Reason: "setup"}); err != nil {
			t.Fatal(err)
		}
	}
	PutScope(t, d, "plain", ScopeOpts{})
	withIdentity := func(id, scope, identity string) scheduler.NewOperation {
		op := NewOp(id, scope, T0)
		op.RequestIdentity = identity
		return op
	}
	// inUse enqueues op at now and wants it rejected for holder.
	inUse := func(op scheduler.NewOperation, now time.Time, holder string) {
		t.Helper()
		res, err := d.Enqueue(ctx, []scheduler.NewOperation{op}, now)
		if err != nil {
			t.Fatal(err)
		}
		if !errors.Is(res[0].Err, scheduler.ErrIdentityInUse) || !strings.Contains(res[0].Err.Error(), holder) {
			t.Fatalf("enqueue %s at %s: %v, want ErrIdentityInUse naming %s", op.ID, now, res[0].Err, holder)
		}
		if _, err := d.GetOperation(ctx, op.ID); !errors.Is(err, scheduler.ErrNotFound) {
			t.Fatalf("rejected %s stored: %v", op.ID, err)
		}
	}

	Enqueue(t, d, T0, withIdentity("op-1", "pay", "k1"))
	inUse(withIdentity("op-2", "pay", "k1"), T0, "op-1")
	// In a batch only the item at fault is rejected.
	res, err := d.Enqueue(ctx, []scheduler.NewOperation{withIdentity("op-3", "pay", "k2"), withIdentity("op-4", "pay", "k1")}, T0)
	if err != nil || res[0].Err != nil || !res[0].Created || !errors.Is(res[1].Err, scheduler.ErrIdentityInUse) {
		t.Fatalf("batch = %+v, %v; want op-3 created, op-4 rejected", res, err)
	}
	// Another scope, or a scope sent no key, is free to use it.
	Enqueue(t, d, T0, withIdentity("other-scope", "pay-2", "k1"), withIdentity("plain-1", "plain", "k1"), withIdentity("plain-2", "plain", "k1"))

	// op-1 succeeds at T0+1m: it holds the key for the retention after.
	var c1 scheduler.Claim
	for _, c := range Claim(t, d, T0.Add(time.Minute), 10) {
		if c.Operation.ID == "op-1" {
			c1 = c
		}
	}
	if c1.Operation.ID == "" {
		t.Fatal("op-1 not claimed")
	}
	done := T0.Add(time.Minute)
	Complete(t, d, c1, done, scheduler.Decision{State: scheduler.StateSucceeded}, providers.Outcome{Class: providers.ClassSuccess, Status: 200})
	inUse(withIdentity("op-5", "pay", "k1"), done.Add(24*time.Hour-time.Millisecond), "op-1")
	Enqueue(t, d, done.Add(24*time.Hour), withIdentity("op-5", "pay", "k1"))
	// An unfinished holder keeps it however long it waits.
	if op := GetOp(t, d, "op-3"); op.State.Terminal() {
		t.Fatalf("op-3 is %s, want it unfinished", op.State)
	}
	inUse(withIdentity("op-6", "pay", "k2"), T0.Add(30*24*time.Hour), "op-3")
}
