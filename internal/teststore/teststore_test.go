package teststore_test

import (
	"os"
	"testing"
	"time"

	"pacer/internal/teststore"
	"pacer/scheduler/storetest"
)

func TestMain(m *testing.M) { os.Exit(teststore.Main(m)) }

// Env chooses the kind; unset or empty is SQLite.
func TestSelected(t *testing.T) {
	for env, want := range map[string]teststore.Kind{"": teststore.SQLite, "sqlite": teststore.SQLite, "postgres": teststore.Postgres} {
		t.Setenv(teststore.Env, env)
		if got := teststore.Selected(t); got != want {
			t.Errorf("%s=%q: %s, want %s", teststore.Env, env, got, want)
		}
	}
}

// Rows counts what each kind of store keeps, on a connection of its own,
// and a place opened again holds what it held.
func TestRowsOnEitherStore(t *testing.T) {
	for _, k := range []teststore.Kind{teststore.SQLite, teststore.Postgres} {
		t.Run(string(k), func(t *testing.T) {
			p := teststore.NewPlaceOf(t, k)
			if p.Kind() != k {
				t.Fatalf("place of kind %s, want %s", p.Kind(), k)
			}
			s := p.Open(t)
			storetest.PutScope(t, s, "a", storetest.ScopeOpts{})
			storetest.Enqueue(t, s, time.Now(), storetest.NewOp("op-1", "a", time.Now()), storetest.NewOp("op-2", "a", time.Now()))
			s.Close()
			for table, want := range map[string]int{"scopes": 1, "operations": 2, "attempts": 0, "changes": 2} {
				if got := p.Rows(t, table); got != want {
					t.Errorf("%s rows: %d, want %d", table, got, want)
				}
			}
			if op := storetest.GetOp(t, p.Open(t), "op-2"); op.ID != "op-2" {
				t.Errorf("after reopening: %+v", op)
			}
		})
	}
}
