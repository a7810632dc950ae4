package db_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"pacer/db"
	"pacer/providers"
	"pacer/scheduler"
)

// attention is the support page's default filter: held or failed.
func attention() []scheduler.State {
	return []scheduler.State{scheduler.StateHeld, scheduler.StateFailed}
}

// settle claims every due operation of d at now and completes each with
// the decision decide gives its ID.
func settle(t *testing.T, d *db.DB, now time.Time, decide func(id string) scheduler.Decision) {
	t.Helper()
	for {
		cs := claim(t, d, now, 100)
		if len(cs) == 0 {
			return
		}
		for _, c := range cs {
			dec := decide(c.Operation.ID)
			out := providers.Outcome{Class: providers.ClassTransient}
			switch {
			case dec.HoldReason == scheduler.HoldUnknownOutcome:
				out.Class = providers.ClassUnknownOutcome
			case dec.HoldReason == scheduler.HoldAuthRevoked:
				out.Class = providers.ClassAuthRevoked
			case dec.State == scheduler.StateFailed:
				out.Class = providers.ClassPermanent
			case dec.State == scheduler.StateSucceeded:
				out.Class = providers.ClassSuccess
			}
			if !complete(t, d, c, now, dec, out) {
				t.Fatalf("completion of %s not applied", c.Operation.ID)
			}
		}
	}
}

// decisions by operation ID prefix.
func decideByPrefix(id string) scheduler.Decision {
	switch {
	case strings.HasPrefix(id, "unknown"):
		return scheduler.Decision{State: scheduler.StateHeld, HoldReason: scheduler.HoldUnknownOutcome, Reason: "timeout after write"}
	case strings.HasPrefix(id, "auth"):
		return scheduler.Decision{State: scheduler.StateHeld, HoldReason: scheduler.HoldAuthRevoked, Reason: "401"}
	case strings.HasPrefix(id, "bad"):
		return scheduler.Decision{State: scheduler.StateFailed, FailureReason: scheduler.FailurePermanent, Reason: "422"}
	}
	return scheduler.Decision{State: scheduler.StateSucceeded, Reason: "ok"}
}

func TestListOperations_Attention(t *testing.T) {
	ctx := context.Background()
	d, _ := newTestDB(t)
	putScope(t, d, "a", scopeOpts{MaxConcurrent: 100})
	putScope(t, d, "b", scopeOpts{MaxConcurrent: 100})
	// Created one second apart so "newest first" is well defined.
	var want []string // attention rows, newest first
	for i := range 30 {
		var prefix string
		switch i % 5 {
		case 0:
			prefix = "unknown"
		case 1:
			prefix = "auth"
		case 2:
			prefix = "bad"
		default:
			prefix = "ok"
		}
		scope := "a"
		if i%2 == 1 {
			scope = "b"
		}
		id := fmt.Sprintf("%s-%02d", prefix, i)
		enqueue(t, d, t0.Add(time.Duration(i)*time.Second), newOp(id, scope, t0))
		if prefix != "ok" {
			want = append([]string{id}, want...)
		}
	}
	enqueue(t, d, t0.Add(time.Minute), newOp("waiting", "a", t0.Add(time.Hour)))
	settle(t, d, t0.Add(time.Minute), decideByPrefix)

	t.Run("NewestFirstAcrossPages", func(t *testing.T) {
		var got []string
		f := scheduler.OperationFilter{States: attention(), Limit: 7}
		for pages := 0; ; pages++ {
			if pages == 10 {
				t.Fatal("paging does not end")
			}
			page, err := d.ListOperations(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			for _, op := range page.Operations {
				got = append(got, op.ID)
			}
			if page.Next == "" {
				break
			}
			f.Cursor = page.Next
		}
		if g, w := strings.Join(got, ","), strings.Join(want, ","); g != w {
			t.Fatalf("attention list\n got %s\nwant %s", g, w)
		}
		n, err := d.CountOperations(ctx, scheduler.OperationFilter{States: attention(), Cursor: "ignored", Limit: 1})
		if err != nil || n != len(want) {
			t.Fatalf("count = %d, %v; want %d", n, err, len(want))
		}
	})

	t.Run("ByScopeAndReason", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			f    scheduler.OperationFilter
			want int
		}{
			{"ScopeA", scheduler.OperationFilter{States: attention(), Scope: "a"}, 9},
			{"ScopeB", scheduler.OperationFilter{States: attention(), Scope: "b"}, 9},
			{"Unknown", scheduler.OperationFilter{States: attention(), Reason: "unknownOutcome"}, 6},
			{"UnknownInA", scheduler.OperationFilter{States: attention(), Reason: "unknownOutcome", Scope: "a"}, 3},
			{"FailedInB", scheduler.OperationFilter{State: scheduler.StateFailed, Scope: "b"}, 3},
			{"Waiting", scheduler.OperationFilter{States: []scheduler.State{scheduler.StateScheduled, scheduler.StateWaitingForBudget}}, 1},
			{"NoSuchScope", scheduler.OperationFilter{States: attention(), Scope: "nope"}, 0},
		} {
			t.Run(tc.name, func(t *testing.T) {
				n, err := d.CountOperations(ctx, tc.f)
				if err != nil || n != tc.want {
					t.Fatalf("count = %d, %v; want %d", n, err, tc.want)
				}
				tc.f.Limit = 100
				page, err := d.ListOperations(ctx, tc.f)
				if err != nil || len(page.Operations) != tc.want {
					t.Fatalf("list = %d, %v; want %d", len(page.Operations), err, tc.want)
				}
				for _, op := range page.Operations {
					if (tc.f.Scope != "" && op.Scope != tc.f.Scope) || (tc.f.Reason != "" && string(op.HoldReason) != tc.f.Reason) {
						t.Fatalf("%s does not match the filter", op.ID)
					}
				}
			})
		}
	})

	t.Run("ErrInvalidState", func(t *testing.T) {
		_, err := d.ListOperations(ctx, scheduler.OperationFilter{States: []scheduler.State{"held'; DROP TABLE operations; --"}})
		var ve *scheduler.ValidationError
		if !errors.As(err, &ve) || ve.Fields[0].Field != "state" {
			t.Fatalf("err = %v, want a validation error on state", err)
		}
		if _, err := d.CountOperations(ctx, scheduler.OperationFilter{States: []scheduler.State{"nope"}}); !errors.As(err, &ve) {
			t.Fatalf("count err = %v, want a validation error", err)
		}
	})
}

func TestReleaseHeldInScope(t *testing.T) {
	ctx := context.Background()
	d, path := newTestDB(t)
	putScope(t, d, "a", scopeOpts{MaxConcurrent: 100})
	putScope(t, d, "b", scopeOpts{MaxConcurrent: 100})
	enqueue(t, d, t0,
		newOp("unknown-1", "a", t0), newOp("unknown-2", "a", t0), newOp("auth-1", "a", t0),
		newOp("bad-1", "a", t0), newOp("ok-1", "a", t0), newOp("unknown-b", "b", t0))
	settle(t, d, t0, decideByPrefix)

	at := t0.Add(time.Hour)
	act := scheduler.Action{Actor: "alice", At: at, Reason: "provider checked: none applied"}
	n, err := d.ReleaseHeldInScope(ctx, "a", at, act)
	if err != nil || n != 3 {
		t.Fatalf("release held = %d, %v; want 3", n, err)
	}
	for _, id := range []string{"unknown-1", "unknown-2", "auth-1"} {
		op := getOp(t, d, id)
		if op.State != scheduler.StateScheduled || op.HoldReason != "" || !op.NextAttemptAt.Equal(at) || op.BudgetAttempts != 0 ||
			!op.Deadline.Equal(at.Add(time.Hour)) || op.RequestIdentity != id || !op.UpdatedAt.Equal(at) {
			t.Fatalf("%s after release: %+v", id, op)
		}
		entries, err := d.ListAudit(ctx, id)
		if err != nil || len(entries) != 1 {
			t.Fatalf("audit of %s = %+v, %v", id, entries, err)
		}
		e := entries[0]
		if e.Action != "release" || e.Actor != "alice" || e.Reason != act.Reason || !e.At.Equal(at) ||
			!strings.HasPrefix(e.Detail, "held (") || !strings.HasSuffix(e.Detail, ") → scheduled at 2026-09-11T03:00:00Z") {
			t.Fatalf("audit entry of %s: %+v", id, e)
		}
	}
	if op := getOp(t, d, "bad-1"); op.State != scheduler.StateFailed {
		t.Fatalf("failed operation changed: %s", op.State)
	}
	if op := getOp(t, d, "unknown-b"); op.State != scheduler.StateHeld {
		t.Fatalf("other scope's operation changed: %s", op.State)
	}
	scopeAudit, err := d.ListScopeAudit(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	last := scopeAudit[len(scopeAudit)-1]
	if last.Action != "releaseHeld" || last.Actor != "alice" || last.Reason != act.Reason || !strings.Contains(last.Detail, "released 3 held operations") {
		t.Fatalf("scope audit: %+v", last)
	}
	var changes int
	if err := rawDB(t, path).QueryRow(`SELECT COUNT(*) FROM changes WHERE state = 'scheduled' AND at = ?`, at.UnixMilli()).Scan(&changes); err != nil || changes != 3 {
		t.Fatalf("change feed rows = %d, %v; want 3", changes, err)
	}
	// The released operations are due again at `at`, with the same identity.
	if cs := claim(t, d, at, 10); len(cs) != 3 {
		t.Fatalf("claimed %d after release, want 3", len(cs))
	}

	t.Run("NothingHeld", func(t *testing.T) {
		n, err := d.ReleaseHeldInScope(ctx, "a", at, act)
		if err != nil || n != 0 {
			t.Fatalf("second release = %d, %v; want 0", n, err)
		}
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		if _, err := d.ReleaseHeldInScope(ctx, "nope", at, act); !errors.Is(err, scheduler.ErrNotFound) {
			t.Fatalf("err = %v, want ErrNotFound", err)
		}
	})
}

func TestQueryPlans_Attention(t *testing.T) {
	// The support page's lists read only the rows they show, in order:
	// no full scan and no sort, whatever the backlog.
	_, path := newTestDB(t)
	raw := rawDB(t, path)
	from := `SELECT o.id FROM operations o JOIN scopes s ON s.id = o.scope_id WHERE coalesce(o.hold_reason, o.failure_reason) IS NOT NULL`
	order := ` ORDER BY o.created_at DESC, o.id DESC LIMIT 51`
	for _, tc := range []struct {
		name, query, index string
	}{
		{"Attention", from + order, "operations_attention"},
		{"AttentionPage", from + ` AND (o.created_at, o.id) < (5, 6)` + order, "operations_attention"},
		{"AttentionScope", from + ` AND o.scope_id = 3` + order, "operations_attention_scope"},
		{"AttentionReason", from + ` AND coalesce(o.hold_reason, o.failure_reason) = 'permanent'` + order, "operations_reason_created"},
		{"CountAttentionScope", `SELECT COUNT(*) FROM operations o WHERE coalesce(o.hold_reason, o.failure_reason) IS NOT NULL AND o.scope_id = 3`, "operations_attention_scope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := queryPlan(t, raw, tc.query)
			if !strings.Contains(got, tc.index) || strings.Contains(got, "TEMP B-TREE") {
				t.Fatalf("plan %q, want index %s and no sort", got, tc.index)
			}
		})
	}
}

// BenchmarkListOperations_Support measures the support page's queries
// over 100,000 operations (5% held or failed): one page of 50 and the
// count, for each filter the page offers.
func BenchmarkListOperations_Support(b *testing.B) {
	ctx := context.Background()
	path := b.TempDir() + "/pacer.db"
	d, err := db.Open(path, db.Options{Key: testKey()})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	for i := range 20 {
		if _, _, err := d.PutScope(ctx, scheduler.ScopeConfig{
			Name: fmt.Sprintf("s%02d", i), Provider: "generic", BaseURL: "https://api.example.com", MaxConcurrent: 4,
		}, scheduler.Action{Actor: "bench", At: t0, Reason: "setup"}); err != nil {
			b.Fatal(err)
		}
	}
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)")
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	// 100,000 rows: scopes in runs of 7; 2% held, 3% failed, 5% waiting.
	_, err = raw.Exec(`
		WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000)
		INSERT INTO operations (operation_id, scope_id, kind, method, path, request_identity, state,
			next_attempt_at, hold_reason, failure_reason, created_at, updated_at, deadline,
			max_attempts, max_elapsed_ms, content_hash)
		SELECT 'op-' || i, 1 + ((i / 7) % 20), 'mutation', 'POST', '/x', 'op-' || i,
			CASE WHEN i % 100 < 2 THEN 'held' WHEN i % 100 < 5 THEN 'failed'
			     WHEN i % 100 < 10 THEN 'waitingForBudget' ELSE 'succeeded' END,
			CASE WHEN i % 100 BETWEEN 5 AND 9 THEN 1000 END,
			CASE WHEN i % 100 = 0 THEN 'unknownOutcome' WHEN i % 100 = 1 THEN 'authRevoked' END,
			CASE WHEN i % 100 BETWEEN 2 AND 4 THEN 'permanent' END,
			1000000 + i, 1000000 + i, 9000000, 5, 1000, 'h'
		FROM n`)
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		f    scheduler.OperationFilter
	}{
		{"Attention", scheduler.OperationFilter{States: attention()}},
		{"AttentionScope", scheduler.OperationFilter{States: attention(), Scope: "s03"}},
		{"AttentionReason", scheduler.OperationFilter{States: attention(), Reason: "unknownOutcome"}},
		{"Held", scheduler.OperationFilter{State: scheduler.StateHeld}},
		{"WaitingInScope", scheduler.OperationFilter{States: []scheduler.State{scheduler.StateScheduled, scheduler.StateWaitingForBudget}, Scope: "s03"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			f := bc.f
			f.Limit = 50
			// A page deep in the list: the 20th.
			for range 20 {
				page, err := d.ListOperations(ctx, f)
				if err != nil {
					b.Fatal(err)
				}
				if page.Next == "" {
					break
				}
				f.Cursor = page.Next
			}
			for b.Loop() {
				if _, err := d.ListOperations(ctx, f); err != nil {
					b.Fatal(err)
				}
				if _, err := d.CountOperations(ctx, f); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
