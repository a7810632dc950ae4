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
	"testing"

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
	{"PauseScope", testPauseScope},
	{"Enqueue", testEnqueue},
	{"EnqueueReturnsWhatIsStored", testEnqueueReturnsWhatIsStored},
	{"EnqueueIdentityInUse", testEnqueueIdentityInUse},
	{"EnqueueManyInOneCall", testEnqueueManyInOneCall},
	{"ListOperations", testListOperations},
	{"FindOperations", testFindOperations},
	{"ListOperationsFilters", testListOperationsFilters},
	{"ListOperationsAttention", testListOperationsAttention},
	{"OperationsReportWhatTheirScopeDoes", testOperationsReportWhatTheirScopeDoes},
	{"ClaimDue", testClaimDue},
	{"ListRunning", testListRunning},
	{"ListOrphaned", testListOrphaned},
	{"NextWakeIsWhenTheClaimAdmits", testNextWakeIsWhenTheClaimAdmits},
	{"NextWake", testNextWake},
	{"Complete", testComplete},
	{"CompleteRecordsMaybeAppliedAndCounts", testCompleteRecordsMaybeAppliedAndCounts},
	{"CompleteAndClaim", testCompleteAndClaim},
	{"LearnedBudgetPausesBeforeTheProviderSays429", testLearnedBudgetPausesBeforeTheProviderSays429},
	{"BudgetKeepsTheLowerFigureWithinAWindow", testBudgetKeepsTheLowerFigureWithinAWindow},
	{"BudgetReserve", testBudgetReserve},
	{"SharedLimitPausesTheGroup", testSharedLimitPausesTheGroup},
	{"SpentResourceBudgetHoldsOnlyItsRequests", testSpentResourceBudgetHoldsOnlyItsRequests},
	{"SpentDefaultBudgetHoldsOnlyItsRequests", testSpentDefaultBudgetHoldsOnlyItsRequests},
	{"ManualActions", testManualActions},
	{"ChangeOrUndoRelease", testChangeOrUndoRelease},
	{"ActOnOperations", testActOnOperations},
	{"ReleaseHeldInScope", testReleaseHeldInScope},
	{"ChangesFeed", testChangesFeed},
	{"ListChanges", testListChanges},
	{"ScopeFeedScanIsBounded", testScopeFeedScanIsBounded},
	{"ExpireOverdue", testExpireOverdue},
	{"ExpireOverdueBatches", testExpireOverdueBatches},
	{"ExpireOverdueRefusesOtherStates", testExpireOverdueRefusesOtherStates},
	{"PruneFinished", testPruneFinished},
	{"CountByState", testCountByState},
	{"TokenRefreshLease", testTokenRefreshLease},
	{"TokenRefreshLeaseIsExclusive", testTokenRefreshLeaseIsExclusive},
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
