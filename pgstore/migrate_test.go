package pgstore_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"pacer/internal/pacertest"
	"pacer/internal/pgtest"
	"pacer/pgstore"
)

// exec runs sql on the database at url.
func exec(t *testing.T, url, sql string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// Three processes opening a new database at once: one applies the schema,
// the others wait for it and find it current.
func TestThreeOpensMigrateAtOnce(t *testing.T) {
	url := pgtest.URL(t)
	const n = 3
	var (
		wg     sync.WaitGroup
		errs   = make([]error, n)
		stores = make([]*pgstore.Store, n)
		start  = make(chan struct{})
	)
	for i := range n {
		wg.Go(func() {
			<-start
			stores[i], errs[i] = pgstore.Open(context.Background(), url, pgstore.Options{Key: pacertest.Key(), MaxConns: 2})
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("open %d: %v", i, err)
			continue
		}
		stores[i].Close()
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var version, rows int
	if err := conn.QueryRow(ctx, `SELECT max(version), count(*) FROM pacer_schema`).Scan(&version, &rows); err != nil {
		t.Fatal(err)
	}
	if got, want := [2]int{version, rows}, [2]int{pgstore.SchemaVersion(), 1}; got != want {
		t.Fatalf("version, rows of pacer_schema: got %v, want %v", got, want)
	}
}

// A database migrated already opens as it is; one of a newer pacer, or of
// another application, is refused.
func TestOpenRefusesWhatItDoesNotKnow(t *testing.T) {
	ctx := context.Background()
	t.Run("current", func(t *testing.T) {
		openStoreAt(t, pgtest.URLFrom(t, migrated))
	})
	t.Run("newer", func(t *testing.T) {
		url := pgtest.URLFrom(t, migrated)
		exec(t, url, `UPDATE pacer_schema SET version = version + 1`)
		_, err := pgstore.Open(ctx, url, pgstore.Options{Key: pacertest.Key()})
		var tooNew *pgstore.SchemaTooNewError
		if !errors.As(err, &tooNew) || tooNew.Found != pgstore.SchemaVersion()+1 {
			t.Fatalf("got %v, want a SchemaTooNewError for version %d", err, pgstore.SchemaVersion()+1)
		}
	})
	t.Run("foreign", func(t *testing.T) {
		url := pgtest.URL(t)
		exec(t, url, `CREATE TABLE invoices (id int)`)
		_, err := pgstore.Open(ctx, url, pgstore.Options{Key: pacertest.Key()})
		var notPacer *pgstore.NotPacerError
		if !errors.As(err, &notPacer) {
			t.Fatalf("got %v, want a NotPacerError", err)
		}
	})
	t.Run("bad key", func(t *testing.T) {
		_, err := pgstore.Open(ctx, pgtest.URL(t), pgstore.Options{Key: []byte("short")})
		if err == nil {
			t.Fatal("opened with a 5-byte key")
		}
	})
}
