package db

import "pacer/scheduler"

// ClaimUpdate is the claim's UPDATE statement, for query-plan tests.
const ClaimUpdate = claimUpdate

// OnClaimCommit calls f with the claims and the writer's PRAGMA synchronous
// (1 NORMAL, 2 FULL) just before each claim transaction commits.
func (db *DB) OnClaimCommit(f func(claims []scheduler.Claim, synchronous int)) {
	db.claimCommitting = f
}
