package pgstore

import (
	"github.com/jackc/pgx/v5/pgxpool"

	"pacer/scheduler"
)

// Pool is the store's connection pool.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// OnClaimCommitting sets the hook called with the claims and the
// transaction's synchronous_commit just before a claim commits.
func (s *Store) OnClaimCommitting(fn func(claims []scheduler.Claim, synchronousCommit string)) {
	s.claimCommitting = fn
}
