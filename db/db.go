// Package db is pacer's storage: it implements scheduler.Store on SQLite
// (modernc.org/sqlite, no cgo) and owns every SQL statement, the embedded
// schema and its migrations, the encryption of scope credentials at rest and
// the one-process-per-database file lock.
//
// A DB has one writer connection (WAL, synchronous=NORMAL, immediate
// transactions) and a separate pool of query-only read connections. Under
// NORMAL a commit survives a crash of the process but may be lost to a
// power cut; the one commit that must not be, the claim of a mutation the
// provider cannot deduplicate, is followed by a commit with
// synchronous=FULL, which syncs the WAL (see ClaimDue). Every exported
// method is one transaction (that sync aside). The store never reads a clock: every
// time comes from the caller. Times are stored as INTEGER Unix milliseconds
// UTC and returned as UTC time.Time values (zero for "none").
package db

import (
	"context"
	"crypto/cipher"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"pacer/internal/scopecache"
	"pacer/scheduler"
)

var _ scheduler.Store = (*DB)(nil)

// DefaultReadConns is the size of the read pool when Options.ReadConns is 0.
const DefaultReadConns = 4

// BusyTimeout is how long a connection waits for a lock held by another
// connection before it reports SQLITE_BUSY.
const BusyTimeout = 10 * time.Second

// Options configure Open.
type Options struct {
	// Key is the 32-byte AES-256 key that seals scope credentials (see
	// ParseKey and LoadOrCreateKeyFile). Required.
	Key []byte
	// ReadConns bounds the read pool; 0 means DefaultReadConns.
	ReadConns int
	// MustExist refuses to create a database: the path must hold a pacer
	// database already (not a missing or empty file), else Open fails with
	// ErrNoDatabase. Every command but serve sets it.
	MustExist bool
}

// DB is pacer's SQLite store. It is safe for concurrent use.
type DB struct {
	path  string
	write *sql.DB // exactly one connection: SQLite has one writer
	read  *sql.DB // query-only pool
	ckpt  *sql.DB // one connection for Checkpoint
	aead  cipher.AEAD
	// writer is what the writer's connection reports to: whether its
	// writes succeed (Writable) and its commits (OnCommit).
	writer *writerHooks
	// scopes are the opened configurations of the scopes claims handed
	// out (claimScope).
	scopes *scopecache.Cache
	// idempotencies memoizes the scopes' idempotency for Enqueue.
	idempotencies idempotencies

	// claimCommitting, when set (by tests), is called with the claims and
	// the connection's PRAGMA synchronous just before a claim commits.
	claimCommitting func(claims []scheduler.Claim, synchronous int)
	// walSyncing, when set (by tests), is called with the connection's
	// PRAGMA synchronous just before the commit that syncs a durable claim
	// (syncWAL); an error it returns fails that sync.
	walSyncing func(synchronous int) error
	// credentialsOpening, when set (by tests), is called with the scope's
	// name each time sealed credentials are opened.
	credentialsOpening func(scope string)
}

// connRole selects the per-connection settings of connect.
type connRole int

const (
	roleWriter     connRole = iota // the single writer: immediate transactions
	roleReader                     // the read pool: query_only
	roleBackup                     // a one-off connection for VACUUM INTO
	roleCheckpoint                 // the connection Checkpoint runs on
)

// WALSafetyNetPages is the WAL size, in pages, at which the writer
// checkpoints by itself, holding up the commit that crossed it. Normally
// Checkpoint keeps the WAL well below it.
const WALSafetyNetPages = 16384

// writerHooks are what the writer's connection reports to.
type writerHooks struct {
	health  writeHealth
	commits commitHooks
}

// connect opens a pool on the SQLite file at path with the per-connection
// pragmas of role, set in the DSN so that every connection the pool opens
// gets them; writer is nil except for roleWriter. It is the only place
// that opens SQLite.
func connect(path string, role connRole, writer *writerHooks) (*sql.DB, error) {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", BusyTimeout.Milliseconds()))
	q.Add("_pragma", "foreign_keys(1)")
	// Statement journals (kept so one failing statement can be undone
	// inside a transaction) and temporary b-trees stay in memory instead of
	// a temporary file opened, written and closed for every such statement.
	q.Add("_pragma", "temp_store(MEMORY)")
	switch role {
	case roleWriter:
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous(NORMAL)")
		// Checkpoints run off the writer's path (Checkpoint, on a
		// connection of their own); the writer checkpoints only as a
		// safety net, when the WAL has grown this large.
		q.Add("_pragma", fmt.Sprintf("wal_autocheckpoint(%d)", WALSafetyNetPages))
		q.Set("_txlock", "immediate")
	case roleReader:
		q.Add("_pragma", "query_only(1)")
	case roleBackup:
	case roleCheckpoint:
		q.Add("_pragma", "synchronous(NORMAL)")
	}
	// The path goes through URL escaping so '?', '#' and '%' in a file name
	// cannot be read as URI syntax.
	u := url.URL{Scheme: "file", Opaque: (&url.URL{Path: path}).EscapedPath(), RawQuery: q.Encode()}
	conn := cachingConnector{dsn: u.String(), driver: &sqlite.Driver{}, writer: writer}
	pool := sql.OpenDB(conn)
	switch role {
	case roleWriter, roleBackup, roleCheckpoint:
		pool.SetMaxOpenConns(1)
		pool.SetMaxIdleConns(1)
	}
	pool.SetConnMaxLifetime(0)
	pool.SetConnMaxIdleTime(0)
	return pool, nil
}

// Open opens (creating if needed, unless opts.MustExist) the database at
// path, applies the schema and any pending migrations, and returns the
// store. It fails for another application's database (*NotPacerError),
// when the database's schema is newer than this binary knows (*SchemaTooNewError),
// when opts.Key is not 32 bytes, or when the key does not open the stored
// credentials. Open does not take the process lock: see Lock.
func Open(path string, opts Options) (*DB, error) {
	aead, err := newAEAD(opts.Key)
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	// Before the writer, which would write to an empty or foreign file.
	check := RefuseForeign
	if opts.MustExist {
		check = RequireDatabase
	}
	if err := check(abs); err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	readConns := opts.ReadConns
	if readConns <= 0 {
		readConns = DefaultReadConns
	}

	db := &DB{path: abs, aead: aead, writer: &writerHooks{}, scopes: scopecache.New(scopecache.Size)}
	if db.write, err = connect(abs, roleWriter, db.writer); err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	ctx := context.Background()
	if err := db.write.PingContext(ctx); err != nil {
		db.write.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	if err := migrate(ctx, db.write, path, !opts.MustExist); err != nil {
		db.write.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	if db.read, err = connect(abs, roleReader, nil); err != nil {
		db.write.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	db.read.SetMaxOpenConns(readConns)
	db.read.SetMaxIdleConns(readConns)
	if err := db.read.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	if db.ckpt, err = connect(abs, roleCheckpoint, nil); err != nil {
		db.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	if err := db.verifyKey(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	if err := db.recordCredentialTypes(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	return db, nil
}

// verifyKey checks that the key opens the stored credentials (of the
// first scope), so a wrong key fails at start-up, not at the first send.
func (db *DB) verifyKey(ctx context.Context) error {
	var (
		name string
		blob []byte
	)
	err := db.read.QueryRowContext(ctx, `SELECT name, credentials FROM scopes ORDER BY id LIMIT 1`).Scan(&name, &blob)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	} else if err != nil {
		return err
	}
	if _, err := db.openCredentials(name, blob); err != nil {
		return fmt.Errorf("the credentials key does not open the stored credentials of scope %s: use the key this database was created with", name)
	}
	return nil
}

// Path is the absolute path of the database file.
func (db *DB) Path() string { return db.path }

// Close closes every connection. The last connection to close checkpoints
// the WAL into the database file.
func (db *DB) Close() error {
	var errs []error
	if db.ckpt != nil {
		errs = append(errs, db.ckpt.Close())
	}
	if db.read != nil {
		errs = append(errs, db.read.Close())
	}
	if db.write != nil {
		errs = append(errs, db.write.Close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close database: %w", err)
	}
	return nil
}

// CheckpointStats is what one Checkpoint did, in WAL frames (pages).
type CheckpointStats struct {
	// WALFrames is the size of the WAL when the checkpoint ran.
	WALFrames int
	// Checkpointed counts the frames now in the database file; fewer than
	// WALFrames when readers still used older snapshots.
	Checkpointed int
	// Busy is true when another checkpoint was running.
	Busy bool
}

// Checkpoint copies the WAL's committed pages into the database file (a
// PASSIVE checkpoint: it waits for no reader or writer) on a connection
// of its own. Run it periodically: then the writer never has to
// checkpoint, and fsync the database file, inside a commit, where it held
// up claims for tens of milliseconds (see WALSafetyNetPages).
func (db *DB) Checkpoint(ctx context.Context) (CheckpointStats, error) {
	var busy, frames, done int
	if err := db.ckpt.QueryRowContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &frames, &done); err != nil {
		return CheckpointStats{}, fmt.Errorf("checkpoint: %w", err)
	}
	return CheckpointStats{WALFrames: max(frames, 0), Checkpointed: max(done, 0), Busy: busy != 0}, nil
}

// Check verifies the database: SQLite's integrity and foreign-key checks,
// and that the schema version is the one this binary knows. It returns nil
// when all is well, else an error listing the problems found.
func (db *DB) Check(ctx context.Context) error {
	tx, err := db.read.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("check database: %w", err)
	}
	defer tx.Rollback()

	var problems []error
	version, err := userVersion(ctx, tx)
	if err != nil {
		return fmt.Errorf("check database: %w", err)
	}
	if want := SchemaVersion(); version != want {
		problems = append(problems, fmt.Errorf("schema version is %d, this binary expects %d", version, want))
	}
	rows, err := tx.QueryContext(ctx, `PRAGMA integrity_check`)
	if err != nil {
		return fmt.Errorf("check database: %w", err)
	}
	for rows.Next() {
		var msg string
		if err := rows.Scan(&msg); err != nil {
			rows.Close()
			return fmt.Errorf("check database: %w", err)
		}
		if msg != "ok" {
			problems = append(problems, fmt.Errorf("integrity: %s", msg))
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("check database: %w", err)
	}
	rows.Close()
	rows, err = tx.QueryContext(ctx, `PRAGMA foreign_key_check`)
	if err != nil {
		return fmt.Errorf("check database: %w", err)
	}
	for rows.Next() {
		var table, parent string
		var rowid sql.NullInt64
		var fkid int64
		if err := rows.Scan(&table, &rowid, &parent, &fkid); err != nil {
			rows.Close()
			return fmt.Errorf("check database: %w", err)
		}
		problems = append(problems, fmt.Errorf("foreign key: %s row %d refers to a missing %s row", table, rowid.Int64, parent))
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("check database: %w", err)
	}
	rows.Close()
	if len(problems) > 0 {
		return fmt.Errorf("check database %s: %w", db.path, errors.Join(problems...))
	}
	return nil
}

// Backup writes a consistent, compacted copy of the database to the file
// `to` (VACUUM INTO) while the store stays usable: it reads a snapshot on a
// connection of its own, so writers are not blocked. It refuses to
// overwrite an existing file.
func (db *DB) Backup(ctx context.Context, to string) error {
	abs, err := filepath.Abs(to)
	if err != nil {
		return fmt.Errorf("back up to %s: %w", to, err)
	}
	if _, err := os.Stat(abs); err == nil {
		return fmt.Errorf("back up to %s: file exists; choose a new file name", to)
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("back up to %s: %w", to, err)
	}
	conn, err := connect(db.path, roleBackup, nil)
	if err != nil {
		return fmt.Errorf("back up to %s: %w", to, err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `VACUUM INTO ?`, abs); err != nil {
		return fmt.Errorf("back up to %s: %w", to, err)
	}
	return nil
}

// beginWrite starts an immediate transaction on the writer connection,
// unless ctx has ended. Once begun, a write is never interrupted by ctx:
// the writer's transactions are short, and a cancellable context costs
// every statement of modernc.org/sqlite a watcher goroutine (and the
// transaction one more). The hot paths (tick, Enqueue) run their
// statements with uncancellable too.
func (db *DB) beginWrite(ctx context.Context) (*sql.Tx, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return db.write.BeginTx(uncancellable(ctx), nil)
}

// uncancellable is ctx without its cancellation (see beginWrite).
func uncancellable(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }

// beginRead starts a read transaction (one consistent snapshot) on the read
// pool.
func (db *DB) beginRead(ctx context.Context) (*sql.Tx, error) {
	return db.read.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
}

// millis converts t to stored Unix milliseconds.
func millis(t time.Time) int64 { return t.UnixMilli() }

// nullMillis converts t to stored Unix milliseconds, NULL for the zero time.
func nullMillis(t time.Time) sql.NullInt64 {
	if t.IsZero() {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: t.UnixMilli(), Valid: true}
}

// fromMillis converts stored Unix milliseconds to a UTC time; 0 is the zero
// time.
func fromMillis(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// fromNullMillis converts a nullable stored time; NULL is the zero time.
func fromNullMillis(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return fromMillis(v.Int64)
}

// nullString stores s, NULL when empty.
func nullString(s string) sql.NullString {
	return sql.NullString{String: s, Valid: s != ""}
}

// constraintCode returns the extended SQLite result code of a constraint
// violation (sqlite3.SQLITE_CONSTRAINT_UNIQUE, …), or 0 when err is not one.
func constraintCode(err error) int {
	var se *sqlite.Error
	if errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_CONSTRAINT {
		return se.Code()
	}
	return 0
}

// isUniqueViolation reports whether err is a UNIQUE or PRIMARY KEY
// constraint violation.
func isUniqueViolation(err error) bool {
	c := constraintCode(err)
	return c == sqlite3.SQLITE_CONSTRAINT_UNIQUE || c == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
}

// isForeignKeyViolation reports whether err is a FOREIGN KEY constraint
// violation.
func isForeignKeyViolation(err error) bool {
	return constraintCode(err) == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY
}
