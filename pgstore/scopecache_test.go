package pgstore_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"pacer/internal/pgtest"
	"pacer/scheduler"
	"pacer/scheduler/storetest"
)

// A claim opens a scope's sealed credentials once per configuration: the
// admission state (a pause, a resume) changes without a reopen, and its
// claims carry it as the row has it now; new credentials put by this
// store or by another process on the same database are what the next
// claim hands out.
func TestClaimOpensCredentialsOncePerConfiguration(t *testing.T) {
	ctx := context.Background()
	t0 := storetest.T0
	url := pgtest.URLFrom(t, migrated)
	d := openStoreAt(t, url)
	var opens atomic.Int64
	d.OnCredentialsOpen(func(string) { opens.Add(1) })
	bearer := func(tok string) storetest.ScopeOpts {
		return storetest.ScopeOpts{MaxConcurrent: 8, Credentials: scheduler.Credentials{Type: scheduler.CredentialBearer, Token: tok}}
	}
	storetest.PutScope(t, d, "a", bearer("tok-1"))
	var ops []scheduler.NewOperation
	for _, id := range []string{"1", "2", "3", "4", "5", "6"} {
		ops = append(ops, storetest.NewOp(id, "a", t0))
	}
	storetest.Enqueue(t, d, t0, ops...)
	claim := func(at time.Time, wantToken string, wantOpens int64) scheduler.Scope {
		t.Helper()
		before := opens.Load()
		cs := storetest.Claim(t, d, at, 1)
		if len(cs) != 1 {
			t.Fatalf("claimed %d at %v, want 1", len(cs), at)
		}
		s := cs[0].Scope
		if s.Credentials.Token != wantToken {
			t.Fatalf("claim carries token %q, want %q", s.Credentials.Token, wantToken)
		}
		if got := opens.Load() - before; got != wantOpens {
			t.Fatalf("the claim opened credentials %d times, want %d", got, wantOpens)
		}
		return s
	}
	claim(t0, "tok-1", 1)
	claim(t0, "tok-1", 0)

	until := t0.Add(time.Second)
	if _, err := d.PauseScope(ctx, "a", until, scheduler.Action{Actor: "test", At: t0, Reason: "r"}); err != nil {
		t.Fatal(err)
	}
	if s := claim(until, "tok-1", 0); !s.PausedUntil.Equal(until) || s.InFlight != 3 || !s.UpdatedAt.Equal(t0) {
		t.Fatalf("after a pause the claim's scope is %+v: want the pause, 3 in flight, updated at t0", s)
	}
	if _, err := d.ResumeScope(ctx, "a", scheduler.Action{Actor: "test", At: until, Reason: "r"}); err != nil {
		t.Fatal(err)
	}
	if s := claim(until, "tok-1", 0); !s.PausedUntil.IsZero() || s.InFlight != 4 {
		t.Fatalf("after a resume the claim's scope is %+v: want no pause, 4 in flight", s)
	}

	storetest.PutScope(t, d, "a", bearer("tok-2"))
	claim(until, "tok-2", 1)

	// Another process on the same database.
	other := openStoreAt(t, url)
	storetest.PutScope(t, other, "a", bearer("tok-3"))
	claim(until, "tok-3", 1)
}
