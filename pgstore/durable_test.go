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
	d.OnClaimCommitting(func(cs []scheduler.Claim, sync string) {
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
