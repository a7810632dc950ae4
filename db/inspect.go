package db

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// openForInspection returns a DB over an existing database file for
// reading only: no credentials key, no schema migration, no process lock,
// and no writer connection, so it is safe next to a running `pacer serve`.
// Its methods that write fail; Check, Backup and Close work.
func openForInspection(path string) (*DB, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	// SQLite would create a missing file: look first.
	fi, err := os.Stat(abs)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("no database file at %s", path)
	case err != nil:
		return nil, err
	case fi.IsDir():
		return nil, fmt.Errorf("%s is a directory, not a database file", path)
	}
	read, err := connect(abs, roleReader)
	if err != nil {
		return nil, err
	}
	read.SetMaxOpenConns(1)
	if err := read.Ping(); err != nil {
		read.Close()
		return nil, err
	}
	return &DB{path: abs, read: read}, nil
}

// BackupFile writes a consistent copy of the database file at path to the
// new file `to` (see DB.Backup) without opening the database for writing:
// it needs neither the credentials key nor the process lock, so it runs
// while `pacer serve` holds both and keeps writing. The copy holds
// everything committed when the copy began. The credentials key is not
// part of the database: back up the key file separately.
func BackupFile(ctx context.Context, path, to string) error {
	db, err := openForInspection(path)
	if err != nil {
		return fmt.Errorf("back up %s: %w", path, err)
	}
	defer db.Close()
	return db.Backup(ctx, to)
}

// CheckFile verifies the database file at path (see DB.Check: integrity,
// foreign keys, schema version) without the credentials key or the process
// lock, and without changing it. It returns the schema version found.
func CheckFile(ctx context.Context, path string) (version int, err error) {
	db, err := openForInspection(path)
	if err != nil {
		return 0, fmt.Errorf("check %s: %w", path, err)
	}
	defer db.Close()
	if err := db.Check(ctx); err != nil {
		return 0, err
	}
	tx, err := db.beginRead(ctx)
	if err != nil {
		return 0, fmt.Errorf("check %s: %w", path, err)
	}
	defer tx.Rollback()
	return userVersion(ctx, tx)
}
