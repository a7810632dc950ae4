package db

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"pacer/scheduler"
)

// unavailableError is a SQLite error that means the database does not
// accept writes now (disk full, read-only file, I/O error): it is
// scheduler.ErrStoreUnavailable, and errors.As still finds the SQLite
// error under it.
type unavailableError struct{ err error }

func (e *unavailableError) Error() string        { return e.err.Error() }
func (e *unavailableError) Unwrap() error        { return e.err }
func (e *unavailableError) Is(target error) bool { return target == scheduler.ErrStoreUnavailable }

// classify returns err marked as scheduler.ErrStoreUnavailable when its
// SQLite code says the database cannot be written now; other errors are
// returned as they are.
func classify(err error) error {
	var se *sqlite.Error
	if err == nil || !errors.As(err, &se) {
		return err
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_FULL, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN:
		var ue *unavailableError
		if errors.As(err, &ue) {
			return err
		}
		return &unavailableError{err: err}
	}
	return err
}

// writeHealth is whether the database accepts writes, as the last write
// that failed or the last probe found. It is safe for concurrent use.
type writeHealth struct {
	mu       sync.Mutex
	failure  error     // the last write failure; nil once a probe succeeds
	probedAt time.Time // when the last probe ran
}

// failed records a write that failed because the database cannot be
// written now.
func (h *writeHealth) failed(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failure = err
}

// ProbeEvery is how long Writable trusts its last probe while no write
// has failed.
const ProbeEvery = 10 * time.Second

// writeProbeBytes is how much the probe writes while no write has failed:
// more than a page.
const writeProbeBytes = 16 << 10

// maxProbePages bounds the probe of a database marked unwritable: it needs
// every free page and a few more (so the database must grow, which is what
// a full disk refuses), but at most this many: a database with more free
// pages than that has room.
const maxProbePages = 256

// Writable reports whether the database accepts writes: nil, or an error
// that is scheduler.ErrStoreUnavailable (disk full, read-only file, I/O
// error) or another failure of the probe. A write of any caller that
// failed so marks the database until a probe succeeds; the probe (a row
// written and removed in one transaction) runs while the database is so
// marked (and then needs the file to grow), and otherwise once every
// ProbeEvery (on the times given).
func (db *DB) Writable(ctx context.Context, now time.Time) error {
	h := &db.writer.health
	h.mu.Lock()
	failure, probedAt := h.failure, h.probedAt
	h.mu.Unlock()
	if failure == nil && !probedAt.IsZero() && now.Sub(probedAt) < ProbeEvery && now.After(probedAt) {
		return nil
	}
	err := db.probeWrite(ctx, failure != nil)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.probedAt = now
	if err != nil {
		if errors.Is(err, scheduler.ErrStoreUnavailable) {
			h.failure = err
		}
		return err
	}
	h.failure = nil
	return nil
}

// probeWrite writes a row and removes it in one transaction; with grow,
// a row larger than the database's free pages (up to maxProbePages).
func (db *DB) probeWrite(ctx context.Context, grow bool) error {
	tx, err := db.beginWrite(ctx)
	if err != nil {
		return fmt.Errorf("probe write: %w", err)
	}
	defer tx.Rollback()
	size := writeProbeBytes
	if grow {
		var free, pageSize int
		if err := tx.QueryRowContext(ctx, `SELECT freelist_count, page_size FROM pragma_freelist_count, pragma_page_size`).Scan(&free, &pageSize); err != nil {
			return fmt.Errorf("probe write: %w", err)
		}
		size = max(size, min(free+4, maxProbePages)*pageSize)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO write_probe (id, pad) VALUES (1, zeroblob(?))
		ON CONFLICT (id) DO UPDATE SET pad = excluded.pad`, size); err != nil {
		return fmt.Errorf("probe write: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM write_probe`); err != nil {
		return fmt.Errorf("probe write: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("probe write: %w", err)
	}
	return nil
}

// checkedTx is a transaction whose failures are classified (classify) and
// recorded in the writer's health.
type checkedTx struct {
	inner interface {
		Commit() error
		Rollback() error
	}
	conn *cachingConn
}

// Commit implements driver.Tx. A commit on the writer's connection calls
// the store's commit hooks (DB.OnCommit) once it succeeded.
func (t *checkedTx) Commit() error {
	if err := t.conn.check(t.inner.Commit()); err != nil {
		return err
	}
	if w := t.conn.writer; w != nil {
		w.commits.committed()
	}
	return nil
}

// Rollback implements driver.Tx.
func (t *checkedTx) Rollback() error { return t.conn.check(t.inner.Rollback()) }

// check classifies err and, on the writer's connection, records a failure
// that means the database cannot be written.
func (c *cachingConn) check(err error) error {
	err = classify(err)
	if c.writer != nil && errors.Is(err, scheduler.ErrStoreUnavailable) {
		c.writer.health.failed(err)
	}
	return err
}
