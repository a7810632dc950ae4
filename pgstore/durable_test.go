package pgstore_test

import (
	"context"
	"testing"
	"time"

	"pacer/scheduler"
	"pacer/scheduler/storetest"
)

// A claim a Durable says must be on disk commits with synchronous_commit
// on, whatever the server's setting (the throwaway server's is off); any
// other claim commits as the server says.
func TestDurableClaimCommitsSynchronously(t *testing.T) {
	ctx := context.Background()
	d := openStore(t)
	var server string
	if err := d.Pool().QueryRow(ctx, `SHOW synchronous_commit`).Scan(&server); err != nil {
		t.Fatal(err)
	}
	storetest.PutScope(t, d, "a", storetest.ScopeOpts{})
	storetest.Enqueue(t, d, storetest.T0, storetest.NewOp("plain", "a", storetest.T0), storetest.NewOp("durable", "a", storetest.T0.Add(time.Second)))
	var got []string
	d.OnClaimCommitting(func(cs []scheduler.Claim, sync, _ string) {
		for _, c := range cs {
			got = append(got, c.Operation.ID+":"+sync)
		}
	})
	durable := func(c scheduler.Claim) bool { return c.Operation.ID == "durable" }
	for _, at := range []time.Time{storetest.T0, storetest.T0.Add(time.Second)} {
		if _, err := d.ClaimDue(ctx, scheduler.ClaimParams{Now: at, Limit: 1, LeaseFor: time.Minute, Durable: durable}); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != 2 || got[0] != "plain:"+server || got[1] != "durable:on" {
		t.Fatalf("claims committing: %v; want plain:%s durable:on", got, server)
	}
}

// A tick's transaction plans its statements generically (hotPathTx); the
// setting is the transaction's own: the pool's connections keep the
// server's for every other statement.
func TestTickPlansGenericallyForItsTransactionOnly(t *testing.T) {
	ctx := context.Background()
	d := openStore(t)
	storetest.PutScope(t, d, "a", storetest.ScopeOpts{})
	storetest.Enqueue(t, d, storetest.T0, storetest.NewOp("op", "a", storetest.T0))
	var got []string
	d.OnClaimCommitting(func(_ []scheduler.Claim, _, plans string) { got = append(got, plans) })
	if cs := storetest.Claim(t, d, storetest.T0, 1); len(cs) != 1 {
		t.Fatalf("claimed %d operations; want 1", len(cs))
	}
	if len(got) != 1 || got[0] != "force_generic_plan" {
		t.Fatalf("the claim's plan_cache_mode: %v; want force_generic_plan", got)
	}
	conns := d.Pool().Stat().TotalConns()
	for range conns + 1 {
		var plans string
		if err := d.Pool().QueryRow(ctx, `SHOW plan_cache_mode`).Scan(&plans); err != nil {
			t.Fatal(err)
		}
		if plans != "auto" {
			t.Fatalf("a pooled connection's plan_cache_mode after the claim: %s; want auto", plans)
		}
	}
}
