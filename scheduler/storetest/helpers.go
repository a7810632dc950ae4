package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"pacer/providers"
	"pacer/scheduler"
)

// T0 is the fixed "now" of the tests.
var T0 = time.Date(2026, 9, 11, 2, 0, 0, 0, time.UTC)

// ScopeOpts shape a test scope; zero values are sensible.
type ScopeOpts struct {
	MaxConcurrent int
	Rate          *scheduler.RateLimit
	Credentials   scheduler.Credentials
}

// PutScope creates or replaces a generic scope at T0 (MaxConcurrent 4
// unless o says otherwise).
func PutScope(t testing.TB, d scheduler.Store, name string, o ScopeOpts) scheduler.Scope {
	t.Helper()
	if o.MaxConcurrent == 0 {
		o.MaxConcurrent = 4
	}
	s, _, err := d.PutScope(context.Background(), scheduler.ScopeConfig{
		Name: name, Provider: "generic", BaseURL: "https://api.example.com",
		Credentials: o.Credentials, MaxConcurrent: o.MaxConcurrent, RateLimit: o.Rate,
	}, scheduler.Action{Actor: "test", At: T0, Reason: "setup"})
	if err != nil {
		t.Fatalf("put scope %s: %v", name, err)
	}
	return s
}

// openWithOps returns a new store from open holding the generic scope
// "a" (see PutScope) and ops, enqueued at T0.
func openWithOps(t *testing.T, open Opener, ops ...scheduler.NewOperation) scheduler.Store {
	t.Helper()
	d := open(t)
	PutScope(t, d, "a", ScopeOpts{})
	Enqueue(t, d, T0, ops...)
	return d
}

// NewOp is a valid mutation of scope due at notBefore, its request
// identity its ID, with a retry budget of 5 attempts within an hour.
func NewOp(id, scope string, notBefore time.Time) scheduler.NewOperation {
	return scheduler.NewOperation{
		ID: id, Scope: scope, Kind: scheduler.KindMutation,
		Request: scheduler.Request{
			Method: "POST", Path: "/things", Headers: map[string]string{"Accept": "application/json"},
			Body: []byte(`{"n":1}`), ContentType: "application/json",
		},
		RequestIdentity: id, NotBefore: notBefore,
		Retry:       scheduler.Retry{MaxAttempts: 5, MaxElapsed: time.Hour},
		ContentHash: "hash-" + id,
	}
}

// Enqueue stores ops at now and fails on any rejection.
func Enqueue(t testing.TB, d scheduler.Store, now time.Time, ops ...scheduler.NewOperation) []scheduler.Operation {
	t.Helper()
	res, err := d.Enqueue(context.Background(), ops, now)
	if err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	out := make([]scheduler.Operation, len(res))
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("enqueue %s: %v", ops[i].ID, r.Err)
		}
		out[i] = r.Operation
	}
	return out
}

// Claim claims up to limit due operations at now, leasing them for a
// minute.
func Claim(t testing.TB, d scheduler.Store, now time.Time, limit int) []scheduler.Claim {
	t.Helper()
	cs, err := d.ClaimDue(context.Background(), scheduler.ClaimParams{Now: now, Limit: limit, LeaseFor: time.Minute})
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	return cs
}

// GetOp reads one operation.
func GetOp(t testing.TB, d scheduler.Store, id string) scheduler.Operation {
	t.Helper()
	op, err := d.GetOperation(context.Background(), id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return op
}

// Complete applies one completion of claim c at `at` and returns whether
// it applied.
func Complete(t testing.TB, d scheduler.Store, c scheduler.Claim, at time.Time, dec scheduler.Decision, out providers.Outcome) bool {
	t.Helper()
	applied, err := d.Complete(context.Background(), []scheduler.Completion{CompletionOf(c, at, dec, out)})
	if err != nil {
		t.Fatalf("complete %s: %v", c.Operation.ID, err)
	}
	return applied[0]
}

// CompletionOf is claim c's completion at `at` with decision dec.
func CompletionOf(c scheduler.Claim, at time.Time, dec scheduler.Decision, out providers.Outcome) scheduler.Completion {
	return scheduler.Completion{
		OperationID: c.Operation.ID, LeaseToken: c.Operation.LeaseToken, Attempt: c.Operation.Attempt,
		FinishedAt: at, Outcome: out, Decision: dec,
	}
}

// ClaimedIDs lists the operation IDs of claims, in order.
func ClaimedIDs(cs []scheduler.Claim) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Operation.ID
	}
	return out
}

// Feed lists changes with f and renders them as "seq:op:scope:state".
func Feed(t testing.TB, d scheduler.Store, f scheduler.ChangeFilter) string {
	t.Helper()
	b, err := d.ListChanges(context.Background(), f)
	if err != nil {
		t.Fatalf("list changes %+v: %v", f, err)
	}
	parts := make([]string, len(b.Changes))
	for i, c := range b.Changes {
		parts[i] = fmt.Sprintf("%d:%s:%s:%s", c.Seq, c.OperationID, c.Scope, c.State)
	}
	return strings.Join(parts, " ")
}

// FeedGap lists the changes after `after` and wants the
// *scheduler.FeedGapError wrapping want, resuming at resume.
func FeedGap(t testing.TB, d scheduler.Store, after int64, want error, resume int64) {
	t.Helper()
	_, err := d.ListChanges(context.Background(), scheduler.ChangeFilter{After: after, Limit: 10})
	var ge *scheduler.FeedGapError
	if !errors.As(err, &ge) || !errors.Is(err, want) || ge.Resume != resume {
		t.Fatalf("after %d: got %v, want %v resuming at %d", after, err, want, resume)
	}
}

// AllChanges returns every change the store holds, in Seq order.
func AllChanges(t testing.TB, d scheduler.Store) []scheduler.Change {
	t.Helper()
	var all []scheduler.Change
	var after int64
	for {
		b, err := d.ListChanges(context.Background(), scheduler.ChangeFilter{After: after, Limit: scheduler.MaxChangeLimit})
		if err != nil {
			t.Fatalf("list changes after %d: %v", after, err)
		}
		all = append(all, b.Changes...)
		if !b.More {
			return all
		}
		after = b.Next
	}
}

// Expire runs one ExpireOverdue batch at now with the policy's decision.
func Expire(t testing.TB, d scheduler.Store, now time.Time, limit int) scheduler.ExpireResult {
	t.Helper()
	p := scheduler.DefaultPolicy()
	res, err := d.ExpireOverdue(context.Background(), scheduler.ExpireParams{
		Now: now, Before: now, Limit: limit,
		Decide: func(op scheduler.Operation) scheduler.Decision { return p.Expire(op, now) },
	})
	if err != nil {
		t.Fatalf("expire overdue: %v", err)
	}
	return res
}

// OpWith is NewOp with its own retry budget (MaxElapsed).
func OpWith(id, scope string, notBefore time.Time, maxElapsed time.Duration) scheduler.NewOperation {
	op := NewOp(id, scope, notBefore)
	op.Retry.MaxElapsed = maxElapsed
	return op
}

// NewRequest is an operation of scope sending method path.
func NewRequest(id, scope, method, path string) scheduler.NewOperation {
	op := NewOp(id, scope, T0)
	op.Request.Method, op.Request.Path = method, path
	if method == "GET" {
		op.Kind = scheduler.KindRead
	}
	return op
}

// Answer completes claim c at at as the provider's answer naming resource
// with budget b (nil: none), rescheduled to retry at once when retry is
// set, succeeded otherwise; pause, when not zero, pauses that budget.
func Answer(t testing.TB, d scheduler.Store, c scheduler.Claim, at time.Time, resource string, b *providers.Budget, pause time.Time, retry bool) {
	t.Helper()
	dec := scheduler.Decision{State: scheduler.StateSucceeded, Reason: "ok",
		Scope: scheduler.ScopeEffect{Resource: resource, ResourceKnown: true, Budget: b, BudgetPauseUntil: pause, BudgetPauseReason: "rate limited: test"}}
	class := providers.ClassSuccess
	if retry {
		dec.State, dec.NextAttemptAt, class = scheduler.StateWaitingForBudget, at, providers.ClassRateLimited
	}
	applied, err := d.Complete(context.Background(), []scheduler.Completion{{
		OperationID: c.Operation.ID, LeaseToken: c.Operation.LeaseToken, Attempt: c.Operation.Attempt, FinishedAt: at,
		Outcome: providers.Outcome{Class: class, Status: 200, Budget: b}, Decision: dec,
	}})
	if err != nil || !applied[0] {
		t.Fatalf("complete %s: %v %v", c.Operation.ID, applied, err)
	}
}

// settle claims every due operation of d at now and completes each with
// the decision decide gives its ID.
func settle(t *testing.T, d scheduler.Store, now time.Time, decide func(id string) scheduler.Decision) {
	t.Helper()
	for {
		cs := Claim(t, d, now, 100)
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
			if !Complete(t, d, c, now, dec, out) {
				t.Fatalf("completion of %s not applied", c.Operation.ID)
			}
		}
	}
}
