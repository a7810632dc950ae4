// Package storetest is the scheduler.Store contract as one test suite:
// every behaviour the interface's doc comments promise (fencing, claim
// admission, fairness, learned budgets, lease recovery, retention, the
// change feed's order, manual actions and their errors, expiry, enqueue
// idempotency), driven through the Store's own methods with fixed times.
// A store package runs it from a test:
//
//	func TestStoreContract(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) scheduler.Store { … })
//	}
//
// Store-specific behaviour (query plans, pragmas, migrations,
// durability across a reopen) is tested by the store's own package.
package storetest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"pacer/providers"
	"pacer/scheduler"
)

// Opener returns a new, empty store for one test, closed when that test
// ends (t.Cleanup). Each call must return a store of its own: the suite
// runs its tests in parallel.
type Opener func(t *testing.T) scheduler.Store

// suite lists the contract's tests by name.
var suite = []struct {
	name string
	run  func(*testing.T, Opener)
}{
	{"PutScope", testPutScope},
	{"PutScopeProfileSpec", testPutScopeProfileSpec},
	{"ResumeScope", testResumeScope},
	{"Enqueue", testEnqueue},
	{"EnqueueReturnsWhatIsStored", testEnqueueReturnsWhatIsStored},
	{"ListOperations", testListOperations},
	{"ListOperationsFilters", testListOperationsFilters},
	{"ListOperationsAttention", testListOperationsAttention},
	{"ClaimDue", testClaimDue},
	{"ListRunning", testListRunning},
	{"NextWake", testNextWake},
	{"Complete", testComplete},
	{"CompleteRecordsMaybeAppliedAndCounts", testCompleteRecordsMaybeAppliedAndCounts},
	{"LearnedBudgetPausesBeforeTheProviderSays429", testLearnedBudgetPausesBeforeTheProviderSays429},
	{"BudgetKeepsTheLowerFigureWithinAWindow", testBudgetKeepsTheLowerFigureWithinAWindow},
	{"BudgetReserve", testBudgetReserve},
	{"SharedLimitPausesTheGroup", testSharedLimitPausesTheGroup},
	{"SpentResourceBudgetHoldsOnlyItsRequests", testSpentResourceBudgetHoldsOnlyItsRequests},
	{"SpentDefaultBudgetHoldsOnlyItsRequests", testSpentDefaultBudgetHoldsOnlyItsRequests},
	{"ManualActions", testManualActions},
	{"ReleaseHeldInScope", testReleaseHeldInScope},
	{"ChangesFeed", testChangesFeed},
	{"ListChanges", testListChanges},
	{"ExpireOverdue", testExpireOverdue},
	{"ExpireOverdueBatches", testExpireOverdueBatches},
	{"ExpireOverdueRefusesOtherStates", testExpireOverdueRefusesOtherStates},
	{"PruneFinished", testPruneFinished},
	{"CountByState", testCountByState},
}

// Run runs the whole contract against the stores open returns, each test
// (and each subtest that opens a store of its own) in parallel.
func Run(t *testing.T, open func(t *testing.T) scheduler.Store) {
	for _, tc := range suite {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, open)
		})
	}
}

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
	applied, err := d.Complete(context.Background(), []scheduler.Completion{{
		OperationID: c.Operation.ID, LeaseToken: c.Operation.LeaseToken, Attempt: c.Operation.Attempt,
		FinishedAt: at, Outcome: out, Decision: dec,
	}})
	if err != nil {
		t.Fatalf("complete %s: %v", c.Operation.ID, err)
	}
	return applied[0]
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
	cs, err := d.ListChanges(context.Background(), f)
	if err != nil {
		t.Fatalf("list changes %+v: %v", f, err)
	}
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = fmt.Sprintf("%d:%s:%s:%s", c.Seq, c.OperationID, c.Scope, c.State)
	}
	return strings.Join(parts, " ")
}

// AllChanges returns every change the store holds, in Seq order.
func AllChanges(t testing.TB, d scheduler.Store) []scheduler.Change {
	t.Helper()
	var all []scheduler.Change
	var after int64
	for {
		cs, err := d.ListChanges(context.Background(), scheduler.ChangeFilter{After: after, Limit: scheduler.MaxChangeLimit})
		if err != nil {
			t.Fatalf("list changes after %d: %v", after, err)
		}
		all = append(all, cs...)
		if len(cs) < scheduler.MaxChangeLimit {
			return all
		}
		after = cs[len(cs)-1].Seq
	}
}
