package db

import (
	"context"
	"database/sql"
	_ "embed"
	"fmt"
)

// schema is version 1 of the database: applied in one transaction to a new
// database.
//
//go:embed schema.sql
var schema string

// migrations lists the steps after the schema, in order: migrations()[i]
// takes a database from version i+1 to i+2. The list is append-only:
// never edit or reorder a step that has shipped; add a new one.
func migrations() []string {
	return []string{
		// version 2: the row DB.Writable writes to find out whether the
		// database accepts writes (and removes in the same transaction).
		`CREATE TABLE write_probe (
			id INTEGER PRIMARY KEY CHECK (id = 1),
			pad BLOB NOT NULL
		) STRICT;`,
	}
}

// SchemaVersion is the schema version this binary writes and expects
// (PRAGMA user_version).
func SchemaVersion() int { return 1 + len(migrations()) }

// SchemaTooNewError is returned by Open for a database written by a newer
// pacer: Found is its version, Known the newest this binary knows.
type SchemaTooNewError struct {
	Found, Known int
}

// Error implements error.
func (e *SchemaTooNewError) Error() string {
	return fmt.Sprintf("database schema version %d is newer than this pacer binary knows (%d): run a newer pacer, or restore a backup taken before the upgrade", e.Found, e.Known)
}

// migrate brings the database on conn up to SchemaVersion, one transaction
// per step: the schema when user_version is 0, then each pending migration.
func migrate(ctx context.Context, conn *sql.DB) error {
	steps := append([]string{schema}, migrations()...)
	for {
		done, err := migrateStep(ctx, conn, steps)
		if err != nil {
			return err
		}
		if done {
			return nil
		}
	}
}

// migrateStep applies the next pending step, if any, and reports whether
// the database is current.
func migrateStep(ctx context.Context, conn *sql.DB, steps []string) (done bool, err error) {
	tx, err := conn.BeginTx(ctx, nil) // immediate: no one else migrates at once
	if err != nil {
		return false, fmt.Errorf("migrate: %w", err)
	}
	defer tx.Rollback()
	version, err := userVersion(ctx, tx)
	if err != nil {
		return false, fmt.Errorf("migrate: %w", err)
	}
	switch {
	case version > len(steps):
		return false, &SchemaTooNewError{Found: version, Known: len(steps)}
	case version == len(steps):
		return true, nil
	}
	if _, err := tx.ExecContext(ctx, steps[version]); err != nil {
		return false, fmt.Errorf("migrate to version %d: %w", version+1, err)
	}
	// PRAGMA takes no parameters; version is an int.
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", version+1)); err != nil {
		return false, fmt.Errorf("migrate to version %d: %w", version+1, err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("migrate to version %d: %w", version+1, err)
	}
	return false, nil
}

// userVersion reads PRAGMA user_version.
func userVersion(ctx context.Context, tx *sql.Tx) (int, error) {
	var v int
	if err := tx.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}
