// Package pgstore implements scheduler.Store on PostgreSQL (≥ 14, through
// pgx v5), so that several pacer processes can share one database with the
// semantics of one (design §10). It owns its SQL, its embedded schema and
// migrations; the row formats and the sealing of credentials are package
// stored's, shared with the SQLite store (package db), which is the
// reference for every method's behaviour. The contract both keep is
// scheduler/storetest.
//
// Times are stored as BIGINT Unix milliseconds UTC, as on SQLite, and the
// store never reads a clock: every time comes from the caller. Every
// exported method is one transaction (READ COMMITTED). What PostgreSQL
// adds over SQLite's single writer:
//   - a claim locks the scope rows it admits from (FOR NO KEY UPDATE SKIP
//     LOCKED) before it counts what runs in them, and the operation rows it
//     takes (FOR UPDATE SKIP LOCKED), so two processes never exceed a cap;
//   - manual actions read their row FOR UPDATE;
//   - a transaction that fails for a deadlock or a serialization failure
//     (40P01, 40001) is run again, a few times;
//   - migrations run under a transaction-scoped advisory lock;
//   - every store is a node holding a session-level advisory lock, and
//     recovers the leases of dead nodes (node.go, orphans.go);
//   - claims are guarded by the database's clock (dbclock.go), wake-ups
//     cross nodes by LISTEN/NOTIFY (wake.go), and retention runs on one
//     elected node (election.go).
//
// The times the store keeps come from its callers; the database's clock
// only bounds them where several clocks meet: a claim admits by
// LEAST(now, the database's time), so does expiry's ListRunning, and a
// node's registration lives in database time.
package pgstore

import (
	"context"
	"crypto/cipher"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"pacer/internal/scopecache"
	"pacer/internal/stored"
	"pacer/scheduler"
)

var _ scheduler.Store = (*Store)(nil)

// Options configure Open.
type Options struct {
	// Key is the 32-byte AES-256 key that seals scope credentials; the
	// same on every process sharing the database. Required.
	Key []byte
	// MaxConns bounds the connection pool; 0 means pgxpool's default. The
	// node's own connection (node.go) comes on top.
	MaxConns int32
	// MustExist refuses to create the schema: the database must hold a
	// pacer database already, else Open fails with ErrNoDatabase. Every
	// command but serve sets it.
	MustExist bool
	// Clock is the store's own clock: its loops' pacing, the age of its
	// session and the offset to the database's clock are measured on it.
	// nil means the real clock.
	Clock clock.Clock
	// NoNode opens the store for a command that runs no scheduler (pacer
	// users): it registers no node, holds no lock and keeps no heartbeat,
	// so no other node ever sees it; it claims nothing, recovers nothing
	// and wins no election (retention, the database-wide gauges).
	NoNode bool
	// RequestTimeout is the longest a request of the engine may take
	// (scheduler.EngineConfig.RequestTimeout); zero means
	// scheduler.DefaultRequestTimeout. A node claims only while its
	// registration outlasts it, and after a database restart waits it
	// (plus scheduler.LeaseMargin) before recovering other nodes' leases.
	RequestTimeout time.Duration
}

// Store is pacer's PostgreSQL store. It is safe for concurrent use.
type Store struct {
	pool    *pgxpool.Pool
	aead    cipher.AEAD
	commits commitHooks
	// scopes are the opened configurations of the scopes claims handed
	// out (scopecache.go).
	scopes *scopecache.Cache
	clock  clock.Clock

	// node is the store's registration (node.go); wakes are the OnWake
	// functions; announcements feed runAnnouncer (wake.go).
	node          node
	wakes         commitHooks
	announcements chan struct{}
	stopAnnouncer context.CancelFunc
	announcerDone chan struct{}
	// requestTimeout is Options.RequestTimeout; restartMargin is how old
	// (nanoseconds) the node's session must be before it recovers on lock
	// evidence.
	requestTimeout time.Duration
	restartMargin  atomic.Int64
	// process is the key of the lock each pooled connection holds shared
	// for its life (node.go): while one is open the process is alive.
	// Random, positive; 0 with Options.NoNode.
	process int32

	// claimCommitting, when set (by tests), is called with the claims and
	// the transaction's synchronous_commit and plan_cache_mode just before
	// a claim commits.
	claimCommitting func(claims []scheduler.Claim, synchronousCommit, planCacheMode string)
	// credentialsOpened, when set (by tests), is called with the scope's
	// name each time a claim opens its sealed credentials.
	credentialsOpened func(scope string)
}

// Open connects to the database at url (postgres://…), applies the schema
// and any pending migrations (under an advisory lock: processes opening at
// once are safe) and returns the store. It fails when the schema is newer
// than this binary knows (*SchemaTooNewError), for another application's
// database (*NotPacerError), for an empty one with opts.MustExist
// (ErrNoDatabase), when opts.Key is not 32 bytes, or when the key does not
// open the stored credentials.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	aead, err := stored.NewAEAD(opts.Key)
	if err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	var process int32
	if !opts.NoNode {
		if process, err = newProcessKey(); err != nil {
			return nil, fmt.Errorf("open database: %w", err)
		}
		holdProcessLock(cfg, process)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	s := &Store{pool: pool, aead: aead, scopes: scopecache.New(scopecache.Size), clock: opts.Clock, requestTimeout: opts.RequestTimeout,
		process: process, announcements: make(chan struct{}, 1)}
	if s.clock == nil {
		s.clock = clock.New()
	}
	if s.requestTimeout <= 0 {
		s.requestTimeout = scheduler.DefaultRequestTimeout
	}
	s.restartMargin.Store(int64(s.requestTimeout + scheduler.LeaseMargin))
	if err := migrate(ctx, pool, !opts.MustExist); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open database: %w", err)
	}
	if err := s.verifyKey(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open database: %w", err)
	}
	if !opts.NoNode {
		if err := s.startNode(ctx); err != nil {
			pool.Close()
			return nil, fmt.Errorf("open database: %w", err)
		}
	}
	actx, cancel := context.WithCancel(context.Background())
	s.stopAnnouncer, s.announcerDone = cancel, make(chan struct{})
	go s.runAnnouncer(actx, s.announcerDone)
	return s, nil
}

// Close ends the node (its leases left, if any, may be recovered by any
// node at once: close the store after the engine has stopped) and closes
// the connections.
func (s *Store) Close() error {
	s.stopAnnouncer()
	<-s.announcerDone
	s.stopNode(false)
	s.pool.Close()
	return nil
}

// keyCheckData is the additional data of the key check's sealed value
// (no scope has this name: it holds spaces).
const keyCheckData = "pacer key check"

// verifyKey checks that the key opens the stored credentials (of the
// first scope) and the key check, which the first process to open the
// database seals with its key, so a wrong key fails at start-up, not at
// the first send, and two processes never seal credentials with two keys.
func (s *Store) verifyKey(ctx context.Context) error {
	const refused = "the credentials key does not open the stored credentials%s: every process sharing the database must use the key it was created with (PACER_SECRET_KEY or --secret-key-file)"
	var (
		name string
		blob []byte
	)
	err := s.pool.QueryRow(ctx, `SELECT name, credentials FROM scopes ORDER BY id LIMIT 1`).Scan(&name, &blob)
	switch {
	case err == nil:
		if _, err := stored.OpenCredentials(s.aead, name, blob); err != nil {
			return fmt.Errorf(refused, " of scope "+name)
		}
	case !errors.Is(err, pgx.ErrNoRows):
		return err
	}
	err = s.pool.QueryRow(ctx, `SELECT sealed FROM key_check WHERE id = 1`).Scan(&blob)
	if errors.Is(err, pgx.ErrNoRows) { // the first process: its key is the database's
		check, serr := stored.SealCredentials(s.aead, keyCheckData, scheduler.Credentials{})
		if serr != nil {
			return serr
		}
		// Of processes opening at once, one inserts; all read what it wrote.
		if _, err := s.pool.Exec(ctx, `INSERT INTO key_check (id, sealed) VALUES (1, $1) ON CONFLICT (id) DO NOTHING`, check); err != nil {
			return fmt.Errorf("store the key check: %w", err)
		}
		err = s.pool.QueryRow(ctx, `SELECT sealed FROM key_check WHERE id = 1`).Scan(&blob)
	}
	if err != nil {
		return fmt.Errorf("read the key check: %w", err)
	}
	plain, err := stored.OpenSealed(s.aead, keyCheckData, blob)
	if err != nil {
		return fmt.Errorf(refused, " (the key check)")
	}
	clear(plain)
	return nil
}

// maxTries bounds the runs of a write transaction that keeps failing for
// a deadlock or a serialization failure.
const maxTries = 5

// write runs fn in a transaction and commits it, running it again (from
// the start, in a new transaction) when PostgreSQL aborted it for a
// deadlock or a serialization failure (writeRetrying). After the commit it
// calls the OnCommit functions.
func (s *Store) write(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return s.writeWith(ctx, pgx.TxOptions{}, fn)
}

// hotPathTx begins the transactions of the hot path (a tick's
// completions and claim, an enqueue): their statements run on generic
// plans (plan_cache_mode force_generic_plan for the transaction only),
// planned once per connection for each prepared statement, instead of
// custom plans drawn up again for every execution's parameters. Their
// statements look rows up by key or by arrays of keys, whose plans do not
// depend on the values; PostgreSQL's default planned each one anew (the
// generic plan's estimate of an array parameter is not cheaper than the
// custom plans'), about 13 % of the server's CPU in the bench
// (docs/performance.md, issue 16). The SET travels with BEGIN in one
// simple-protocol message: no round trip more. Listings and other reads
// keep the default, so a state or scope parameter still picks its
// partial index.
var hotPathTx = pgx.TxOptions{BeginQuery: `BEGIN; SET LOCAL plan_cache_mode TO force_generic_plan`}

// writeHot runs fn as write does, in a transaction of the hot path
// (hotPathTx).
func (s *Store) writeHot(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return s.writeWith(ctx, hotPathTx, fn)
}

// writeWith runs fn as write does, in a transaction begun with opts.
func (s *Store) writeWith(ctx context.Context, opts pgx.TxOptions, fn func(tx pgx.Tx) error) error {
	if err := s.writeRetrying(ctx, opts, fn); err != nil {
		return err
	}
	s.commits.committed()
	return nil
}

// writeRetrying is writeWith without the OnCommit functions, for a write
// that wakes no one: fn runs in a transaction begun with opts, again (from
// the start, in a new transaction) when PostgreSQL aborted it for a
// deadlock or a serialization failure; fn must not keep anything of a run
// that failed.
func (s *Store) writeRetrying(ctx context.Context, opts pgx.TxOptions, fn func(tx pgx.Tx) error) error {
	var err error
	for try := 1; try <= maxTries; try++ {
		if err = s.writeOnce(ctx, opts, fn); err == nil || !retryable(err) {
			return err
		}
	}
	return fmt.Errorf("%d tries: %w", maxTries, err)
}

func (s *Store) writeOnce(ctx context.Context, opts pgx.TxOptions, fn func(tx pgx.Tx) error) error {
	tx, err := s.pool.BeginTx(ctx, opts)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// read runs fn in a read-only transaction: one snapshot for all its
// statements (REPEATABLE READ).
func (s *Store) read(ctx context.Context, fn func(tx pgx.Tx) error) error {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// Error codes PostgreSQL aborts a transaction with that another run may
// not meet.
const (
	codeSerializationFailure = "40001"
	codeDeadlockDetected     = "40P01"
	codeUniqueViolation      = "23505"
	codeForeignKeyViolation  = "23503"
)

// retryable reports whether err aborted a transaction that may succeed when
// run again.
func retryable(err error) bool {
	c := pgCode(err)
	return c == codeSerializationFailure || c == codeDeadlockDetected
}

// pgCode is the SQLSTATE of err, "" when it is not PostgreSQL's.
func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// OnCommit adds fn to the functions called after each write transaction
// the store commits (see scheduler.Store), on the committing goroutine,
// once the commit returned: a read started by fn or after it sees it.
func (s *Store) OnCommit(fn func()) { s.commits.add(fn) }

// millis converts t to stored Unix milliseconds.
func millis(t time.Time) int64 { return t.UnixMilli() }

// nullMillis is t as stored, nil (NULL) for the zero time.
func nullMillis(t time.Time) *int64 {
	if t.IsZero() {
		return nil
	}
	ms := t.UnixMilli()
	return &ms
}

// fromMillis converts stored Unix milliseconds to a UTC time; 0 is the
// zero time.
func fromMillis(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// fromNullMillis converts a nullable stored time; NULL is the zero time.
func fromNullMillis(ms *int64) time.Time {
	if ms == nil {
		return time.Time{}
	}
	return fromMillis(*ms)
}

// nullString is s as stored, nil (NULL) when empty.
func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
