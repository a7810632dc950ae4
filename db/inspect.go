package db

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"pacer/internal/scopecache"
)

// openForInspection returns a DB over an existing database file for
// reading only: no credentials key, no schema migration, no process lock,
// and no writer connection, so it is safe next to a running `pacer serve`.
// Its methods that write fail; Check, Backup and Close work.
func openForInspection(path string) (*DB, error) {
	return openReadOnly(path, false)
}

// openReadOnly opens a read connection on the existing file at path and
// refuses another application's database (*NotPacerError) and, unless
// allowNew, an empty one (ErrNoDatabase). It writes nothing.
func openReadOnly(path string, allowNew bool) (*DB, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	if err := requireFile(abs); err != nil {
		return nil, err
	}
	read, err := connect(abs, roleReader, nil)
	if err != nil {
		return nil, err
	}
	read.SetMaxOpenConns(1)
	db := &DB{path: abs, read: read, scopes: scopecache.New(scopecache.Size)}
	if err := db.recognize(context.Background(), path, allowNew); err != nil {
		read.Close()
		return nil, err
	}
	return db, nil
}

// recognize refuses a file that is not a pacer database, or, unless
// allowNew, an empty one.
func (db *DB) recognize(ctx context.Context, path string, allowNew bool) error {
	tx, err := db.beginRead(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	_, isNew, err := recognize(ctx, tx, path)
	if err == nil && isNew && !allowNew {
		err = fmt.Errorf("%s holds no pacer database yet: %w", path, ErrNoDatabase)
	}
	return err
}

// RefuseForeign returns *NotPacerError when the file at path exists and is
// another application's database, without writing to it (the writer would
// turn it to WAL before migrate could look); a missing or empty file is
// fine: Open creates the database. serve calls it before it creates a
// credentials key beside the file.
func RefuseForeign(path string) error {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	db, err := openReadOnly(path, true)
	if err != nil {
		return err
	}
	return db.Close()
}

// RequireDatabase returns an error unless path holds a pacer database
// already (ErrNoDatabase for a missing or empty file, *NotPacerError for
// another application's), without writing to it: commands other than
// serve call it before anything could create a database or its key file.
func RequireDatabase(path string) error {
	db, err := openForInspection(path)
	if err != nil {
		return err
	}
	return db.Close()
}

// requireFile returns an error unless path names an existing file (not a
// directory): SQLite would create a missing one.
func requireFile(path string) error {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("no database file at %s: %w", path, ErrNoDatabase)
	case err != nil:
		return err
	case fi.IsDir():
		return fmt.Errorf("%s is a directory, not a database file", path)
	}
	return nil
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
