package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"pacer/db"
	"pacer/httpapi"
	"pacer/internal/staff"
	"pacer/metrics"
	"pacer/pgstore"
	"pacer/scheduler"
)

// serviceStore is what serve's assembly needs of a store, on either kind
// of database (db.DB on SQLite, pgstore.Store on PostgreSQL): the
// scheduler's Store, the state gauges, the support page's staff accounts
// and sessions, and the readiness probes.
type serviceStore interface {
	scheduler.Store
	metrics.Counter
	httpapi.UserStore
	pinger
	Close() error
}

// staffStore is what `pacer users` needs of a store, on either kind of
// database.
type staffStore interface {
	AddUser(ctx context.Context, u staff.NewUser, now time.Time) error
	SetPassword(ctx context.Context, name, password string, cost int) error
	UnlockUser(ctx context.Context, name string) error
	RemoveUser(ctx context.Context, name string) error
	ListUsers(ctx context.Context) ([]staff.User, error)
	Close() error
}

var (
	_ serviceStore = (*db.DB)(nil)
	_ serviceStore = (*pgstore.Store)(nil)
	_ staffStore   = (*db.DB)(nil)
	_ staffStore   = (*pgstore.Store)(nil)
	// On PostgreSQL one node reports the database-wide gauges.
	_ metrics.SharedCounter = (*pgstore.Store)(nil)
	// On PostgreSQL the sign-in throttle is shared too.
	_ httpapi.SignInThrottle = (*pgstore.Store)(nil)
)

// dbName is how logs and messages name the database of --db: a SQLite
// file's path as given, a PostgreSQL URL without its password.
func dbName(dbFlag string) string {
	if pgstore.IsURL(dbFlag) {
		return pgstore.Redact(dbFlag)
	}
	return dbFlag
}

// errKeyRequired is the refusal of a command on PostgreSQL without a
// credentials key (design §10).
var errKeyRequired = errors.New("on PostgreSQL the credentials key is required and must be the same on every process: set PACER_SECRET_KEY (--secret-key) or --secret-key-file; no key file is created beside a PostgreSQL database")

// sharedKey reads the credentials key of a PostgreSQL database: secret
// (--secret-key), or the existing file keyFile (--secret-key-file); with
// neither it is errKeyRequired. It never creates a key: every process
// sharing the database must hold the same one.
func sharedKey(secret, keyFile string) ([]byte, error) {
	switch {
	case secret != "":
		return db.ParseKey(secret)
	case keyFile != "":
		return db.ReadKeyFile(keyFile)
	}
	return nil, errKeyRequired
}

// openPostgres opens the PostgreSQL store at url with opts and the key of
// secret or keyFile (sharedKey): for serve (migrating it, under pgstore's
// advisory lock) or, with opts.MustExist, for another command (refusing a
// database without pacer's schema). Its errors are cli.ExitCoder errors
// of one line: 2 for a missing or unreadable key, 1 when the database
// cannot be opened, has a schema this binary cannot run, or its stored
// credentials do not open with the key.
func openPostgres(ctx context.Context, url, secret, keyFile string, opts pgstore.Options) (*pgstore.Store, error) {
	key, err := sharedKey(secret, keyFile)
	if err != nil {
		return nil, cli.Exit(errLine(err), 2)
	}
	opts.Key = key
	store, err := pgstore.Open(ctx, url, opts)
	if err != nil {
		return nil, cli.Exit(fmt.Sprintf("%s: %s", pgstore.Redact(url), errLine(err)), 1)
	}
	return store, nil
}

// openSQLiteForCommand opens the SQLite database at path for a command
// other than serve: it must exist (only serve creates one), and its key
// is --secret-key, --secret-key-file or the key file beside it.
func openSQLiteForCommand(c *cli.Context, path string) (*db.DB, error) {
	if err := db.RequireDatabase(path); err != nil { // before a key file is made for it
		return nil, cli.Exit(errLine(err), 1)
	}
	logger := slog.New(slog.NewTextHandler(c.App.ErrWriter, &slog.HandlerOptions{Level: slog.LevelWarn}))
	key, createdKey, err := loadKey(c.String("secret-key"), c.String("secret-key-file"), path, logger)
	if err != nil {
		return nil, cli.Exit(errLine(err), 2)
	}
	store, err := db.Open(path, db.Options{Key: key, MustExist: true})
	if err != nil {
		if createdKey != "" {
			os.Remove(createdKey) // a key the database refused is no key of it
		}
		return nil, cli.Exit(errLine(err), 1)
	}
	return store, nil
}
