package db

// ClaimUpdate is the claim's UPDATE statement, for query-plan tests.
const ClaimUpdate = claimUpdate

// OverdueOperations and EarliestWaitingDeadline are the expiry's queries,
// for query-plan tests.
const (
	OverdueOperations       = overdueOperations
	EarliestWaitingDeadline = earliestWaitingDeadline
)
