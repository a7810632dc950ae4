package db_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"pacer/scheduler"
	"pacer/scheduler/storetest"
)

// NextWake and ClaimDue follow one rule (design §11 "Idle is idle"): over
// random scope states (holds, pauses, rate slots, learned budgets above,
// at and below their reserve with resets past, future and unknown, full
// and free concurrency, due work now, past and future), the time NextWake
// returns is never one at which the claim admits nothing (unless a lease
// expires then): a wake-up in the past is a claim loop that spins. And it
// is never late: a millisecond before it, nothing is admitted.
func TestNextWakeIsWhenTheClaimAdmits(t *testing.T) {
	d, path := newTestDB(t)
	raw := rawDB(t, path)
	// The schema refuses to delete a scope (the feed names changes by
	// their scope's row); this test starts each state afresh on one file.
	if _, err := raw.Exec(`DROP TRIGGER scopes_never_deleted`); err != nil {
		t.Fatal(err)
	}
	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		// One database, emptied for each state.
		for _, table := range []string{"attempts", "audit", "operation_requests", "operations", "changes", "scope_routes", "scope_budgets", "scopes"} {
			if _, err := raw.Exec(`DELETE FROM ` + table); err != nil {
				rt.Fatal(err)
			}
		}
		offset := func(label string, lo, hi int) int64 {
			return t0.Add(time.Duration(rapid.IntRange(lo, hi).Draw(rt, label)) * time.Second).UnixMilli()
		}

		nScopes := rapid.IntRange(1, 4).Draw(rt, "scopes")
		for i := range nScopes {
			name := fmt.Sprintf("s%d", i)
			cfg := scheduler.ScopeConfig{Name: name, Provider: "generic", BaseURL: "https://api.example.com",
				MaxConcurrent: rapid.IntRange(1, 3).Draw(rt, "maxConcurrent"), BudgetReserve: rapid.IntRange(0, 3).Draw(rt, "reserve")}
			if rapid.Bool().Draw(rt, "rate") {
				cfg.RateLimit = &scheduler.RateLimit{Requests: rapid.IntRange(1, 3).Draw(rt, "rateRequests"), Per: time.Duration(rapid.IntRange(1, 20).Draw(rt, "ratePerSeconds")) * time.Second}
			}
			if _, _, err := d.PutScope(ctx, cfg, scheduler.Action{Actor: "t", At: t0, Reason: "setup"}); err != nil {
				rt.Fatal(err)
			}
			var ops []scheduler.NewOperation
			for j := range rapid.IntRange(0, 4).Draw(rt, "ops") {
				ops = append(ops, storetest.NewOp(fmt.Sprintf("%s-%d", name, j), name, t0.Add(time.Duration(rapid.IntRange(-60, 120).Draw(rt, "due"))*time.Second)))
			}
			if len(ops) > 0 {
				if _, err := d.Enqueue(ctx, ops, t0.Add(-time.Hour)); err != nil {
					rt.Fatal(err)
				}
			}
			// Some of them in flight, leased until a random time.
			if n := rapid.IntRange(0, 2).Draw(rt, "running"); n > 0 {
				if _, err := raw.Exec(`
					UPDATE operations SET state = 'running', lease_token = 1, attempt = 1, budget_attempts = 1,
						first_sent_at = ?1, lease_expires_at = ?2
					WHERE id IN (SELECT id FROM operations WHERE scope_id = (SELECT id FROM scopes WHERE name = ?3) LIMIT ?4)`,
					t0.UnixMilli(), offset("leaseExpires", 1, 120), name, n); err != nil {
					rt.Fatal(err)
				}
			}
			// Its admission state.
			var hold any
			if rapid.IntRange(0, 4).Draw(rt, "held") == 0 {
				hold = "authRevoked"
			}
			var paused, slot int64
			if rapid.Bool().Draw(rt, "paused") {
				paused = offset("pausedUntil", -30, 120)
			}
			if rapid.Bool().Draw(rt, "slot") {
				slot = offset("nextSlotAt", -30, 120)
			}
			if _, err := raw.Exec(`UPDATE scopes SET hold_reason = ?, paused_until = ?, next_slot_at = ? WHERE name = ?`,
				hold, paused, slot, name); err != nil {
				rt.Fatal(err)
			}
			// Its budgets: the default one, and sometimes a named
			// resource's that some of its operations spend (design §12).
			resources := []string{""}
			if rapid.Bool().Draw(rt, "namedResource") {
				resources = append(resources, "search")
				if _, err := raw.Exec(`INSERT INTO scope_budgets (scope_id, resource) SELECT id, 'search' FROM scopes WHERE name = ?`, name); err != nil {
					rt.Fatal(err)
				}
				if _, err := raw.Exec(`UPDATE operations SET resource = 'search'
					WHERE id IN (SELECT id FROM operations WHERE scope_id = (SELECT id FROM scopes WHERE name = ?) ORDER BY random() LIMIT ?)`,
					name, rapid.IntRange(0, 4).Draw(rt, "searchOps")); err != nil {
					rt.Fatal(err)
				}
			}
			for _, res := range resources {
				var remaining, reset any
				if rapid.Bool().Draw(rt, "budget") {
					remaining = rapid.IntRange(0, 5).Draw(rt, "remaining")
					if rapid.IntRange(0, 3).Draw(rt, "resetKnown") > 0 {
						reset = offset("resetAt", -30, 300)
					}
				}
				var budgetPaused, budgetSlot int64
				if rapid.IntRange(0, 3).Draw(rt, "budgetPaused") == 0 {
					budgetPaused = offset("budgetPausedUntil", -30, 120)
				}
				if rapid.IntRange(0, 3).Draw(rt, "budgetSlot") == 0 {
					budgetSlot = offset("budgetSlotAt", -30, 120)
				}
				if _, err := raw.Exec(`UPDATE scope_budgets SET remaining = ?, reset_at = ?, paused_until = ?, next_slot_at = ?
					WHERE scope_id = (SELECT id FROM scopes WHERE name = ?) AND resource = ?`,
					remaining, reset, budgetPaused, budgetSlot, name, res); err != nil {
					rt.Fatal(err)
				}
			}
		}
		storetest.CheckNextWake(rt, d, t0.Add(time.Duration(rapid.IntRange(0, 60).Draw(rt, "now"))*time.Second), func() time.Time {
			var leaseEnd sql.NullInt64
			if err := raw.QueryRow(`SELECT MIN(lease_expires_at) FROM operations WHERE state = 'running'`).Scan(&leaseEnd); err != nil {
				rt.Fatal(err)
			}
			if !leaseEnd.Valid {
				return time.Time{}
			}
			return time.UnixMilli(leaseEnd.Int64).UTC()
		})
	})
}

// Design §11 "What the API says is what will happen", in SQLite: an
// operation held back by its scope (pause, spent budget, rate slot) reads
// waitingForBudget, computed at read time from the scope's columns set
// here directly, without rewriting the backlog's rows. The read paths'
// answers are in storetest's OperationsReportWhatTheirScopeDoes.
func TestWaitingIsComputedAtReadTime(t *testing.T) {
	d, path := newTestDB(t)
	raw := rawDB(t, path)
	for _, s := range []string{"paused", "spent", "slot", "held", "open"} {
		storetest.PutScope(t, d, s, storetest.ScopeOpts{MaxConcurrent: 10})
	}
	pauseEnd, reset, slot := t0.Add(time.Hour), t0.Add(2*time.Hour), t0.Add(time.Minute)
	for _, q := range []struct {
		query string
		args  []any
	}{
		{`UPDATE scopes SET paused_until = ? WHERE name = 'paused'`, []any{pauseEnd.UnixMilli()}},
		{`UPDATE scope_budgets SET remaining = 0, reset_at = ? WHERE resource = '' AND scope_id = (SELECT id FROM scopes WHERE name = 'spent')`, []any{reset.UnixMilli()}},
		{`UPDATE scopes SET next_slot_at = ? WHERE name = 'slot'`, []any{slot.UnixMilli()}},
		{`UPDATE scopes SET hold_reason = 'authRevoked' WHERE name = 'held'`, nil},
	} {
		if _, err := raw.Exec(q.query, q.args...); err != nil {
			t.Fatal(err)
		}
	}
	n := storetest.EnqueueBehindScopes(t, d, pauseEnd, reset, slot)
	var stored int
	if err := raw.QueryRow(`SELECT COUNT(*) FROM operations WHERE state = 'scheduled'`).Scan(&stored); err != nil || stored != n {
		t.Fatalf("stored scheduled rows = %d, %v: the backlog must not be rewritten", stored, err)
	}
}
