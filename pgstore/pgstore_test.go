package pgstore_test

import (
	"context"
	"os"
	"testing"

	"pacer/internal/pacertest"
	"pacer/internal/pgtest"
	"pacer/pgstore"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// migrated is the template of the tests' databases: the schema applied
// once, cloned per test.
var migrated = pgtest.Template{Name: "pgstore", Setup: func(ctx context.Context, url string) error {
	s, err := pgstore.Open(ctx, url, pgstore.Options{Key: pacertest.Key()})
	if err != nil {
		return err
	}
	return s.Close()
}}

// openStore opens a store on a fresh migrated database, closed when the
// test ends.
func openStore(t *testing.T) *pgstore.Store {
	t.Helper()
	return openStoreAt(t, pgtest.URLFrom(t, migrated))
}

// openStoreAt opens the store at url with the test key, closed when the
// test ends.
func openStoreAt(t testing.TB, url string) *pgstore.Store {
	t.Helper()
	s, err := pgstore.Open(context.Background(), url, pgstore.Options{Key: pacertest.Key(), MaxConns: 8})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
