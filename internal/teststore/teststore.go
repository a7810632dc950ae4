// Package teststore opens the store that store-independent tests run on
// (the engine's, the state machine's, the pruner's, the feed's), chosen by
// the environment: PACER_TEST_STORE=postgres runs them on a throwaway
// PostgreSQL database per test (package pgtest), anything else (or
// nothing) on a fresh SQLite file (package pacertest), the default. What
// tests read of a store beyond scheduler.Store (how many rows a table
// holds) goes through Place, so a test never speaks one store's SQL.
//
// A package that uses it runs its tests through Main from its TestMain,
// which stops the PostgreSQL server when one was started.
package teststore

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite" // the SQLite driver, to count rows on a connection of the test's own

	"pacer/db"
	"pacer/internal/pacertest"
	"pacer/internal/pgtest"
	"pacer/pgstore"
	"pacer/scheduler"
)

// Env is the environment variable choosing the store: "postgres" or
// "sqlite" (the default when unset or empty).
const Env = "PACER_TEST_STORE"

// Kind is a kind of store.
type Kind string

// The kinds of store.
const (
	SQLite   Kind = "sqlite"
	Postgres Kind = "postgres"
)

// Selected is the kind of store Env chooses; an unknown value fails the
// test, so a typo never runs the default silently.
func Selected(tb testing.TB) Kind {
	tb.Helper()
	switch v := os.Getenv(Env); v {
	case "", string(SQLite):
		return SQLite
	case string(Postgres):
		return Postgres
	default:
		tb.Fatalf("%s=%q: want %q or %q", Env, v, SQLite, Postgres)
		return ""
	}
}

// Main runs the binary's tests (m.Run) through pgtest.Main, which stops
// the PostgreSQL server if a test started one. Call it from TestMain:
// os.Exit(teststore.Main(m)).
func Main(m *testing.M) int { return pgtest.Main(m) }

// Store is a store under test: scheduler.Store, closed with Close (which
// may be called more than once).
type Store interface {
	scheduler.Store
	Close() error
}

// Place is where a test's store lives (a SQLite file, or a PostgreSQL
// database): it can be opened more than once, as a restarted process
// opens the database again, or at once, as a second process would.
type Place struct {
	kind Kind
	path string // SQLite
	url  string // PostgreSQL
}

// migrated is the template of PostgreSQL places: the schema applied once
// per test binary, cloned per test.
var migrated = pgtest.Template{Name: "teststore", Setup: func(ctx context.Context, url string) error {
	s, err := pgstore.Open(ctx, url, pgstore.Options{Key: pacertest.Key()})
	if err != nil {
		return err
	}
	return s.Close()
}}

// NewPlace makes a fresh place of the selected kind for tb: a file in
// tb.TempDir(), or a new database dropped when tb ends.
func NewPlace(tb testing.TB) *Place {
	tb.Helper()
	return NewPlaceOf(tb, Selected(tb))
}

// NewPlaceOf makes a fresh place of kind k for tb.
func NewPlaceOf(tb testing.TB, k Kind) *Place {
	tb.Helper()
	if k == Postgres {
		return &Place{kind: k, url: pgtest.URLFrom(tb, migrated)}
	}
	return &Place{kind: SQLite, path: filepath.Join(tb.TempDir(), "pacer.db")}
}

// Kind is the place's kind of store.
func (p *Place) Kind() Kind { return p.kind }

// String names the place in messages (the file, or the database's URL
// without a password).
func (p *Place) String() string {
	if p.kind == Postgres {
		return pgstore.Redact(p.url)
	}
	return p.path
}

// Open opens the store at the place with the test key and closes it when
// tb ends. On PostgreSQL each store is a node of its own (its loops on the
// real clock, as the store's own loops pace themselves); closing it ends
// the node, so a store opened after recovers the leases it left.
func (p *Place) Open(tb testing.TB) Store {
	tb.Helper()
	s, err := p.Connect(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// Connect opens the store at the place, as Open does, for a caller that
// closes it itself (a property test's run, which is no testing.TB).
func (p *Place) Connect(ctx context.Context) (Store, error) {
	var (
		s   Store
		err error
	)
	if p.kind == Postgres {
		s, err = pgstore.Open(ctx, p.url, pgstore.Options{Key: pacertest.Key(), MaxConns: 8})
	} else {
		s, err = db.Open(p.path, pacertest.Options())
	}
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", p, err)
	}
	return s, nil
}

// tables are the tables Rows counts: the same names in both schemas.
var tables = map[string]bool{"scopes": true, "operations": true, "attempts": true, "audit": true, "changes": true}

// Rows counts the rows of table (scopes, operations, attempts, audit or
// changes) at the place, on a connection of its own: what a store keeps,
// whatever its methods show.
func (p *Place) Rows(tb testing.TB, table string) int {
	tb.Helper()
	if !tables[table] {
		tb.Fatalf("teststore: Rows of unknown table %q", table)
	}
	n, err := p.rows(context.Background(), table)
	if err != nil {
		tb.Fatalf("count the rows of %s in %s: %v", table, p, err)
	}
	return n
}

// rows is Rows' count.
func (p *Place) rows(ctx context.Context, table string) (int, error) {
	var n int
	if p.kind == Postgres {
		conn, err := pgx.Connect(ctx, p.url)
		if err != nil {
			return 0, err
		}
		defer conn.Close(ctx)
		err = conn.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{table}.Sanitize()).Scan(&n)
		return n, err
	}
	conn, err := sql.Open("sqlite", "file:"+p.path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	if err := conn.QueryRowContext(ctx, fmt.Sprintf(`SELECT COUNT(*) FROM %q`, table)).Scan(&n); err != nil {
		return 0, err
	}
	return n, nil
}
