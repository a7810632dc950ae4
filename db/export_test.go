package db

import (
	"strconv"

	"pacer/internal/scopecache"
	"pacer/scheduler"
)

// ClaimUpdate is the claim's UPDATE statement, for query-plan tests.
const ClaimUpdate = claimUpdate

// OperationSelect and ClaimedSelect read operations as the reads and the
// claim do, for query-plan tests (a WHERE clause follows).
const (
	OperationSelect = `SELECT ` + operationColumns + operationFrom
	ClaimedSelect   = `SELECT ` + claimedColumns + claimedFrom
)

// CompletionStatements are a chunk of n completions' statements (the
// fence, the operation rows' UPDATE, the attempt rows' UPDATE) and their
// parameters per row, for query-plan tests.
func CompletionStatements(n int) map[string]string {
	return map[string]string{
		"Fence":              valuesList(fencedValues, 3, n) + fenced,
		"CompleteOperations": valuesList(completedOperationsValues, 10, n) + completedOperations,
		"CompleteAttempts":   valuesList(completedAttemptsValues, 14, n) + completedAttempts,
	}
}

// IdentityHolderQuery is the enqueue's look-up of another operation
// sending a request identity, for query-plan tests.
const IdentityHolderQuery = identityHolderQuery

// FindOperationsQuery is the search by ID prefix, for query-plan tests.
const FindOperationsQuery = findOperations

// OverdueOperations and EarliestWaitingDeadline are the expiry's queries,
// for query-plan tests.
const (
	OverdueOperations       = overdueOperations
	EarliestWaitingDeadline = earliestWaitingDeadline
)

// ClaimScopeState is a claim's read of a scope's version and admission
// state, for query-plan tests.
const ClaimScopeState = claimScopeState

// AllChanges, ScopeChanges and ChangesExamined are the feed's queries, for
// query-plan tests.
const (
	AllChanges      = allChanges
	ScopeChanges    = scopeChanges
	ChangesExamined = changesExamined
)

// SetMaxPageCount bounds the database at n pages on the writer's
// connection, as a full disk would (PRAGMA max_page_count), and returns
// the page count it had; n 0 lifts the bound.
func (db *DB) SetMaxPageCount(n int) (pages int, err error) {
	if err := db.write.QueryRow(`PRAGMA page_count`).Scan(&pages); err != nil {
		return 0, err
	}
	if n == 0 {
		n = 1 << 30
	}
	_, err = db.write.Exec(`PRAGMA max_page_count = ` + strconv.Itoa(n))
	return pages, err
}

// OnClaimCommit calls f with the claims and the writer's PRAGMA synchronous
// (1 NORMAL, 2 FULL) just before each claim transaction commits.
func (db *DB) OnClaimCommit(f func(claims []scheduler.Claim, synchronous int)) {
	db.claimCommitting = f
}

// OnWALSync calls f with the writer's PRAGMA synchronous just before the
// commit that syncs a durable claim batch to disk; an error from f fails
// that sync (the commit is rolled back).
func (db *DB) OnWALSync(f func(synchronous int) error) {
	db.walSyncing = f
}

// OnCredentialsOpen calls f with the scope's name each time the store
// opens sealed credentials.
func (db *DB) OnCredentialsOpen(f func(scope string)) {
	db.credentialsOpening = f
}

// ScopeCacheSize is how many scopes' opened configurations a store keeps.
const ScopeCacheSize = scopecache.Size

// WriterSynchronous returns the writer connection's PRAGMA synchronous.
func (db *DB) WriterSynchronous() (int, error) {
	var sync int
	err := db.write.QueryRow(`PRAGMA synchronous`).Scan(&sync)
	return sync, err
}

// SealedPlaintext is the plaintext of a credentials blob sealed for scope,
// for tests of its stored format.
func (db *DB) SealedPlaintext(scope string, blob []byte) (string, error) {
	plain, err := db.openSealed(scope, blob)
	return string(plain), err
}
