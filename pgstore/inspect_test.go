package pgstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"pacer/internal/pacertest"
	"pacer/internal/pgtest"
	"pacer/pgstore"
)

// pacer check on PostgreSQL: the current schema passes; an empty
// database, another application's, a newer or older schema and a missing
// table do not; none of them is changed.
func TestCheck(t *testing.T) {
	ctx := context.Background()
	t.Run("current", func(t *testing.T) {
		v, err := pgstore.Check(ctx, pgtest.URLFrom(t, migrated))
		if err != nil || v != pgstore.SchemaVersion() {
			t.Fatalf("check = %d, %v; want version %d", v, err, pgstore.SchemaVersion())
		}
	})
	t.Run("empty", func(t *testing.T) {
		url := pgtest.URL(t)
		if _, err := pgstore.Check(ctx, url); !errors.Is(err, pgstore.ErrNoDatabase) {
			t.Fatalf("check = %v, want ErrNoDatabase", err)
		}
		if _, err := pgstore.Check(ctx, url); !errors.Is(err, pgstore.ErrNoDatabase) {
			t.Fatalf("second check = %v: the first one created something", err)
		}
	})
	t.Run("foreign", func(t *testing.T) {
		url := pgtest.URL(t)
		exec(t, url, `CREATE TABLE invoices (id int)`)
		var notPacer *pgstore.NotPacerError
		if _, err := pgstore.Check(ctx, url); !errors.As(err, &notPacer) {
			t.Fatalf("check = %v, want a NotPacerError", err)
		}
	})
	t.Run("newer", func(t *testing.T) {
		url := pgtest.URLFrom(t, migrated)
		exec(t, url, `UPDATE pacer_schema SET version = version + 1`)
		var tooNew *pgstore.SchemaTooNewError
		if _, err := pgstore.Check(ctx, url); !errors.As(err, &tooNew) {
			t.Fatalf("check = %v, want a SchemaTooNewError", err)
		}
	})
	t.Run("older", func(t *testing.T) {
		url := pgtest.URLFrom(t, migrated)
		exec(t, url, `UPDATE pacer_schema SET version = 1`)
		if _, err := pgstore.Check(ctx, url); err == nil || !strings.Contains(err.Error(), "schema version is 1") {
			t.Fatalf("check = %v, want the old version named", err)
		}
	})
	t.Run("missing table", func(t *testing.T) {
		url := pgtest.URLFrom(t, migrated)
		exec(t, url, `DROP TABLE changes`)
		if _, err := pgstore.Check(ctx, url); err == nil || !strings.Contains(err.Error(), "changes") {
			t.Fatalf("check = %v, want the missing table named", err)
		}
	})
}

// MustExist (every command but serve) refuses an empty database and
// creates nothing in it; a migrated one opens.
func TestOpenMustExist(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	opts := pgstore.Options{Key: pacertest.Key(), MustExist: true}
	if _, err := pgstore.Open(ctx, url, opts); !errors.Is(err, pgstore.ErrNoDatabase) {
		t.Fatalf("open an empty database = %v, want ErrNoDatabase", err)
	}
	if _, err := pgstore.Check(ctx, url); !errors.Is(err, pgstore.ErrNoDatabase) {
		t.Fatalf("after the refused open: %v, want still no database", err)
	}
	s, err := pgstore.Open(ctx, pgtest.URLFrom(t, migrated), opts)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}
