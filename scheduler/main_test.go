package scheduler_test

import (
	"os"
	"testing"

	"pacer/internal/teststore"
)

// The tests run on the store teststore selects (PACER_TEST_STORE): SQLite
// by default, or a throwaway PostgreSQL that Main stops at the end.
func TestMain(m *testing.M) { os.Exit(teststore.Main(m)) }

// openStore opens a fresh store of teststore's choice, closed when t ends.
func openStore(t testing.TB) teststore.Store {
	t.Helper()
	return teststore.NewPlace(t).Open(t)
}
