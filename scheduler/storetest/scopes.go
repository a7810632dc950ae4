package storetest

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"pacer/providers"
	"pacer/scheduler"
)

func testPutScope(t *testing.T, open Opener) {
	ctx := context.Background()
	d := open(t)
	creds := scheduler.Credentials{Type: scheduler.CredentialBearer, Token: "secret-1"}
	cfg := scheduler.ScopeConfig{
		Name: "a", Provider: "github", BaseURL: "https://api.github.com", Credentials: creds,
		MaxConcurrent: 3, RateLimit: &scheduler.RateLimit{Requests: 5000, Per: time.Hour},
	}
	act := scheduler.Action{Actor: "alice", At: T0, Reason: "onboard"}
	s, created, err := d.PutScope(ctx, cfg, act)
	if err != nil || !created {
		t.Fatalf("put = %v, created %v", err, created)
	}
	if s.Name != "a" || s.Provider != "github" || s.MaxConcurrent != 3 || *s.RateLimit != *cfg.RateLimit ||
		!s.CreatedAt.Equal(T0) || s.Status(T0) != scheduler.ScopeOpen || s.Budget != nil {
		t.Fatalf("scope = %+v", s)
	}

	// Give the scope a pause, a budget and an authRevoked hold, as an
	// attempt's answer does.
	pause := T0.Add(time.Hour)
	Enqueue(t, d, T0, NewOp("op", "a", T0))
	if !Complete(t, d, Claim(t, d, T0, 1)[0], T0, scheduler.Decision{State: scheduler.StateHeld, HoldReason: scheduler.HoldAuthRevoked,
		Scope: scheduler.ScopeEffect{Hold: scheduler.HoldAuthRevoked, PauseUntil: pause, PauseReason: "secondary",
			Budget: &providers.Budget{Remaining: 7, Limit: 5000}}},
		providers.Outcome{Class: providers.ClassAuthRevoked, Status: 401}) {
		t.Fatal("the answer was not applied")
	}

	t.Run("ReplaceKeepsPauseHoldBudget", func(t *testing.T) {
		cfg := cfg
		cfg.MaxConcurrent = 9
		s, created, err := d.PutScope(ctx, cfg, act)
		if err != nil || created {
			t.Fatalf("replace = %v, created %v", err, created)
		}
		if s.MaxConcurrent != 9 || !s.PausedUntil.Equal(pause) || s.PauseReason != "secondary" ||
			s.HoldReason != scheduler.HoldAuthRevoked || s.Budget == nil || s.Budget.Remaining != 7 || s.Budget.Limit != 5000 {
			t.Fatalf("after replace: %+v", s)
		}
	})

	t.Run("NewCredentialsLiftAuthRevoked", func(t *testing.T) {
		cfg := cfg
		cfg.Credentials.Token = "secret-2"
		s, _, err := d.PutScope(ctx, cfg, act)
		if err != nil {
			t.Fatal(err)
		}
		if s.HoldReason != "" || !s.PausedUntil.Equal(pause) {
			t.Fatalf("after new credentials: hold %q, pause %v", s.HoldReason, s.PausedUntil)
		}
		// The new credentials are what a claim is sent with (once the
		// pause is over); the scope returned shows only their type.
		if s.Credentials != (scheduler.Credentials{Type: scheduler.CredentialBearer}) {
			t.Fatalf("put scope returned credentials %#v, want the type only", s.Credentials)
		}
		Enqueue(t, d, T0, NewOp("op-new-creds", "a", T0))
		if cs := Claim(t, d, pause, 1); len(cs) != 1 || cs[0].Scope.Credentials.Token != "secret-2" {
			t.Fatalf("claim after new credentials: %d claims, token replaced: %v", len(cs), len(cs) == 1 && cs[0].Scope.Credentials.Token == "secret-2")
		}
	})

	t.Run("AuditWithoutSecrets", func(t *testing.T) {
		entries, err := d.ListScopeAudit(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		// The answer's hold and pause are pacer's own entries (issue 14);
		// the rest are alice's.
		var system []string
		var staff []scheduler.AuditEntry
		for _, e := range entries {
			if e.Actor == scheduler.SystemActor {
				system = append(system, e.Action+": "+e.Detail)
				continue
			}
			staff = append(staff, e)
		}
		if got := strings.Join(system, "; "); !strings.Contains(got, "pause: paused until") || !strings.Contains(got, "hold: open → held (authRevoked)") {
			t.Fatalf("pacer's entries %q, want the answer's pause and hold", got)
		}
		entries = staff
		if got, want := len(entries), 3; got != want {
			t.Fatalf("entries = %d, want %d", got, want)
		}
		for _, e := range entries {
			if e.Action != "putScope" || e.Actor != "alice" || e.Reason != "onboard" || strings.Contains(e.Detail, "secret-") {
				t.Fatalf("entry %+v", e)
			}
		}
		if !strings.Contains(entries[2].Detail, "authRevoked hold lifted") {
			t.Fatalf("last detail %q does not say the hold was lifted", entries[2].Detail)
		}
	})

	t.Run("List", func(t *testing.T) {
		PutScope(t, d, "0-first", ScopeOpts{})
		all, err := d.ListScopes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != 2 || all[0].Name != "0-first" || all[1].Name != "a" {
			t.Fatalf("list = %v", all)
		}
	})

	t.Run("ErrNotFound", func(t *testing.T) {
		if _, err := d.GetScope(ctx, "nope"); !errors.Is(err, scheduler.ErrNotFound) {
			t.Fatalf("get unknown = %v", err)
		}
	})
}

func testResumeScope(t *testing.T, open Opener) {
	ctx := context.Background()
	d := openWithOps(t, open, NewOp("op-1", "a", T0))
	c := Claim(t, d, T0, 1)[0]
	Complete(t, d, c, T0, scheduler.Decision{
		State: scheduler.StateHeld, HoldReason: scheduler.HoldAuthRevoked,
		Scope: scheduler.ScopeEffect{Hold: scheduler.HoldAuthRevoked, PauseUntil: T0.Add(time.Hour), PauseReason: "x"},
	}, providers.Outcome{Class: providers.ClassAuthRevoked, Status: 401})

	s, err := d.ResumeScope(ctx, "a", scheduler.Action{Actor: "bob", At: T0.Add(time.Minute), Reason: "fixed token"})
	if err != nil {
		t.Fatal(err)
	}
	if s.HoldReason != "" || !s.PausedUntil.IsZero() || s.Status(T0) != scheduler.ScopeOpen {
		t.Fatalf("after resume: %+v", s)
	}
	entries, err := d.ListScopeAudit(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	last := entries[len(entries)-1]
	if last.Action != "resume" || last.Actor != "bob" || last.Reason != "fixed token" || !strings.Contains(last.Detail, "held (authRevoked)") {
		t.Fatalf("audit %+v", last)
	}
	if _, err := d.ResumeScope(ctx, "nope", scheduler.Action{}); !errors.Is(err, scheduler.ErrNotFound) {
		t.Fatalf("resume unknown = %v", err)
	}
}

// A person's pause (design §14) holds the scope's work until its end,
// never shortens a later pause in place, is audited, and is lifted by
// resume.
func testPauseScope(t *testing.T, open Opener) {
	ctx := context.Background()
	d := openWithOps(t, open, NewOp("op-1", "a", T0))
	until := T0.Add(time.Hour)
	act := scheduler.Action{Actor: "bob", At: T0, Reason: "provider maintenance"}
	s, err := d.PauseScope(ctx, "a", until, act)
	if err != nil {
		t.Fatal(err)
	}
	if s.Status(T0) != scheduler.ScopePaused || !s.PausedUntil.Equal(until) || !strings.Contains(s.PauseReason, "provider maintenance") || !strings.Contains(s.PauseReason, "bob") {
		t.Fatalf("after pause: %s until %s (%q)", s.Status(T0), s.PausedUntil, s.PauseReason)
	}
	if cs := Claim(t, d, T0.Add(30*time.Minute), 10); len(cs) != 0 {
		t.Fatalf("claimed %d while paused by hand", len(cs))
	}
	if op := GetOp(t, d, "op-1"); op.State != scheduler.StateWaitingForBudget || !op.NextAttemptAt.Equal(until) {
		t.Fatalf("op-1 %s until %s, want waitingForBudget until %s", op.State, op.NextAttemptAt, until)
	}
	// A shorter pause keeps the longer one.
	if s, err = d.PauseScope(ctx, "a", T0.Add(time.Minute), act); err != nil || !s.PausedUntil.Equal(until) {
		t.Fatalf("a shorter pause: until %s, %v; want %s kept", s.PausedUntil, err, until)
	}
	entries, err := d.ListScopeAudit(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(entries); n < 2 || entries[n-2].Action != "pause" || entries[n-1].Action != "pause" || !strings.Contains(entries[n-1].Detail, "kept") {
		t.Fatalf("audit %+v, want two pauses, the second kept the first", entries)
	}
	if s, err = d.ResumeScope(ctx, "a", scheduler.Action{Actor: "bob", At: T0.Add(2 * time.Minute), Reason: "done"}); err != nil || s.Status(T0.Add(2*time.Minute)) != scheduler.ScopeOpen {
		t.Fatalf("after resume: %v %v", s.Status(T0.Add(2*time.Minute)), err)
	}
	if len(Claim(t, d, T0.Add(2*time.Minute), 10)) != 1 {
		t.Fatal("op-1 not claimed after resume")
	}
	if _, err := d.PauseScope(ctx, "nope", until, act); !errors.Is(err, scheduler.ErrNotFound) {
		t.Fatalf("pause unknown = %v", err)
	}
}

// A custom scope's declarative profile is stored and read back
// equal, by GetScope, ListScopes and the claim; a built-in scope has none.
func testPutScopeProfileSpec(t *testing.T, open Opener) {
	ctx := context.Background()
	d := open(t)
	act := scheduler.Action{Actor: "alice", At: T0, Reason: "onboard"}
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
	Enqueue(t, d, T0, NewOp("op-1", "odd", T0))
	claims, err := d.ClaimDue(ctx, scheduler.ClaimParams{Now: T0, Limit: 1, LeaseFor: time.Minute})
	if err != nil || len(claims) != 1 || !reflect.DeepEqual(claims[0].Scope.Profile, spec) {
		t.Fatalf("claim: %+v (%v)", claims, err)
	}

	// Replaced by a built-in provider, the profile goes.
	cfg.Provider, cfg.Profile = "generic", nil
	if s, _, err = d.PutScope(ctx, cfg, act); err != nil || s.Profile != nil {
		t.Fatalf("replace: profile %+v (%v)", s.Profile, err)
	}

	// The store ties the two: custom needs a profile, others take none.
	bad := scheduler.ScopeConfig{Name: "bad", Provider: providers.CustomName, BaseURL: "https://x", MaxConcurrent: 1}
	if _, _, err := d.PutScope(ctx, bad, act); err == nil {
		t.Errorf("custom scope without a profile stored")
	}
	bad.Provider, bad.Profile = "github", spec
	if _, _, err := d.PutScope(ctx, bad, act); err == nil {
		t.Errorf("github scope with a profile stored")
	}
}
