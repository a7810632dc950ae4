package db

// ClaimUpdate is the claim's UPDATE statement, for query-plan tests.
const ClaimUpdate = claimUpdate
