package db_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"pgregory.net/rapid"

	"pacer/db"
	"pacer/scheduler"
)

// NextWake and ClaimDue follow one rule (design §11 "Idle is idle"): over
// random scope states (holds, pauses, rate slots, learned budgets above,
// at and below their reserve with resets past, future and unknown, full
// and free concurrency, due work now, past and future), the time NextWake
// returns is never one at which the claim admits nothing (unless a lease
// expires then): a wake-up in the past is a claim loop that spins. And it
// is never late: a millisecond before it, nothing is admitted.
func TestNextWakeIsWhenTheClaimAdmits(t *testing.T) {
	dir := t.TempDir()
	runs := 0
	rapid.Check(t, func(rt *rapid.T) {
		runs++
		path := filepath.Join(dir, fmt.Sprintf("wake-%d.db", runs))
		d, err := db.Open(path, db.Options{Key: testKey()})
		if err != nil {
			rt.Fatal(err)
		}
		defer d.Close()
		raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
		if err != nil {
			rt.Fatal(err)
		}
		defer raw.Close()
		ctx := context.Background()
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
				ops = append(ops, newOp(fmt.Sprintf("%s-%d", name, j), name, t0.Add(time.Duration(rapid.IntRange(-60, 120).Draw(rt, "due"))*time.Second)))
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
			var remaining, reset any
			if rapid.Bool().Draw(rt, "budget") {
				remaining = rapid.IntRange(0, 5).Draw(rt, "remaining")
				if rapid.IntRange(0, 3).Draw(rt, "resetKnown") > 0 {
					reset = offset("resetAt", -30, 300)
				}
			}
			if _, err := raw.Exec(`UPDATE scopes SET hold_reason = ?, paused_until = ?, next_slot_at = ?,
				budget_remaining = ?, budget_reset_at = ? WHERE name = ?`,
				hold, paused, slot, remaining, reset, name); err != nil {
				rt.Fatal(err)
			}
		}
		now := t0.Add(time.Duration(rapid.IntRange(0, 60).Draw(rt, "now")) * time.Second)

		at, ok, err := d.NextWake(ctx)
		if err != nil {
			rt.Fatal(err)
		}
		claimAt := func(when time.Time) int {
			cs, err := d.ClaimDue(ctx, scheduler.ClaimParams{Now: when, Limit: 100, LeaseFor: time.Hour})
			if err != nil {
				rt.Fatal(err)
			}
			return len(cs)
		}
		var leaseEnd sql.NullInt64
		if err := raw.QueryRow(`SELECT MIN(lease_expires_at) FROM operations WHERE state = 'running'`).Scan(&leaseEnd); err != nil {
			rt.Fatal(err)
		}
		if !ok {
			if n := claimAt(now.Add(24 * time.Hour)); n != 0 {
				rt.Fatalf("NextWake says nothing waits, yet a claim a day later admits %d", n)
			}
			return
		}
		if at.After(now) {
			if n := claimAt(at.Add(-time.Millisecond)); n != 0 {
				rt.Fatalf("NextWake %s is late: a claim a millisecond before admits %d", at, n)
			}
		}
		when := at
		if when.Before(now) {
			when = now
		}
		if n := claimAt(when); n == 0 && !(leaseEnd.Valid && leaseEnd.Int64 == at.UnixMilli()) {
			rt.Fatalf("NextWake %s (now %s): the claim there admits nothing and no lease expires then: the loop would spin", at, now)
		}
	})
}
