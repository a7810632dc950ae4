package pgstore

import (
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"pacer/scheduler"
)

// Pool is the store's connection pool.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// OnClaimCommitting sets the hook called with the claims and the
// transaction's synchronous_commit and plan_cache_mode just before a
// claim commits.
func (s *Store) OnClaimCommitting(fn func(claims []scheduler.Claim, synchronousCommit, planCacheMode string)) {
	s.claimCommitting = fn
}

// Kill ends the node as a killed process would: its goroutine stops and
// its connections close at once, without a word to the database.
func (s *Store) Kill() {
	s.stopAnnouncer()
	<-s.announcerDone
	s.stopNode(true)
	s.pool.Reset()
	s.pool.Close()
}

// CutSession closes the node's dedicated connection under it and stops
// its goroutine, so that the node neither notices nor reconnects: it
// still believes it holds its lock.
func (s *Store) CutSession() {
	s.stopNode(true)
	s.node.held.Store(true)
}

// SetRestartMargin sets how old the node's session must be before it
// recovers other nodes' leases on lock evidence.
func (s *Store) SetRestartMargin(d time.Duration) { s.restartMargin.Store(int64(d)) }

// NodeID is the node's current id.
func (s *Store) NodeID() int64 { return s.node.id.Load() }

// Holds says whether the node believes it holds its lock.
func (s *Store) Holds() bool { return s.node.held.Load() }

// OnCredentialsOpen sets the hook called with the scope's name each time
// a claim opens its sealed credentials.
func (s *Store) OnCredentialsOpen(fn func(scope string)) { s.credentialsOpened = fn }
