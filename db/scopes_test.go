package db_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"pacer/providers"
	"pacer/scheduler"
)

func TestPutScope(t *testing.T) {
	ctx := context.Background()
	d, path := newTestDB(t)
	creds := scheduler.Credentials{Type: scheduler.CredentialBearer, Token: "secret-1"}
	cfg := scheduler.ScopeConfig{
		Name: "a", Provider: "github", BaseURL: "https://api.github.com", Credentials: creds,
		MaxConcurrent: 3, RateLimit: &scheduler.RateLimit{Requests: 5000, Per: time.Hour},
	}
	act := scheduler.Action{Actor: "alice", At: t0, Reason: "onboard"}
	s, created, err := d.PutScope(ctx, cfg, act)
	if err != nil || !created {
		t.Fatalf("put = %v, created %v", err, created)
	}
	if s.Name != "a" || s.Provider != "github" || s.MaxConcurrent != 3 || *s.RateLimit != *cfg.RateLimit ||
		!s.CreatedAt.Equal(t0) || s.Status(t0) != scheduler.ScopeOpen || s.Budget != nil {
		t.Fatalf("scope = %+v", s)
	}

	// Give the scope a pause, a budget and an authRevoked hold, as attempts would.
	raw := rawDB(t, path)
	pause := t0.Add(time.Hour)
	if _, err := raw.Exec(`UPDATE scopes SET paused_until = ?, pause_reason = 'secondary', hold_reason = 'authRevoked' WHERE name = 'a'`, pause.UnixMilli()); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`UPDATE scope_budgets SET remaining = 7, "limit" = 5000 WHERE resource = '' AND scope_id = (SELECT id FROM scopes WHERE name = 'a')`); err != nil {
		t.Fatal(err)
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
		enqueue(t, d, t0, newOp("op-new-creds", "a", t0))
		if cs := claim(t, d, pause, 1); len(cs) != 1 || cs[0].Scope.Credentials.Token != "secret-2" {
			t.Fatalf("claim after new credentials: %d claims, token replaced: %v", len(cs), len(cs) == 1 && cs[0].Scope.Credentials.Token == "secret-2")
		}
	})

	t.Run("AuditWithoutSecrets", func(t *testing.T) {
		entries, err := d.ListScopeAudit(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
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
		putScope(t, d, "0-first", scopeOpts{})
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

func TestResumeScope(t *testing.T) {
	ctx := context.Background()
	d, _ := newTestDB(t)
	putScope(t, d, "a", scopeOpts{})
	enqueue(t, d, t0, newOp("op-1", "a", t0))
	c := claim(t, d, t0, 1)[0]
	complete(t, d, c, t0, scheduler.Decision{
		State: scheduler.StateHeld, HoldReason: scheduler.HoldAuthRevoked,
		Scope: scheduler.ScopeEffect{Hold: scheduler.HoldAuthRevoked, PauseUntil: t0.Add(time.Hour), PauseReason: "x"},
	}, providers.Outcome{Class: providers.ClassAuthRevoked, Status: 401})

	s, err := d.ResumeScope(ctx, "a", scheduler.Action{Actor: "bob", At: t0.Add(time.Minute), Reason: "fixed token"})
	if err != nil {
		t.Fatal(err)
	}
	if s.HoldReason != "" || !s.PausedUntil.IsZero() || s.Status(t0) != scheduler.ScopeOpen {
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
