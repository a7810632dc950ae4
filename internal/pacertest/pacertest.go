// Package pacertest opens the real SQLite store for tests, one way for
// every package: a fresh file in the test's temporary directory, the one
// test credentials key, closed when the test ends.
package pacertest

import (
	"path/filepath"
	"testing"

	"pacer/db"
)

// Key returns the credentials key of test stores (32 bytes).
func Key() []byte {
	return []byte("0123456789abcdef0123456789abcdef")
}

// Options are the db.Options of test stores: the test key.
func Options() db.Options {
	return db.Options{Key: Key()}
}

// OpenStore opens a fresh store file in tb.TempDir() and closes it when
// the test ends.
func OpenStore(tb testing.TB) *db.DB {
	tb.Helper()
	return OpenStoreAt(tb, filepath.Join(tb.TempDir(), "pacer.db"))
}

// OpenStoreAt opens (or creates) the store at path with the test key and
// closes it when the test ends.
func OpenStoreAt(tb testing.TB, path string) *db.DB {
	tb.Helper()
	d, err := db.Open(path, Options())
	if err != nil {
		tb.Fatalf("open store %s: %v", path, err)
	}
	tb.Cleanup(func() { d.Close() })
	return d
}
