package pgtest

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// connect opens a connection to url, closed when the test ends.
func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// Each test gets a database of its own, empty, and it is dropped when the
// test ends.
func TestURLIsAFreshDatabasePerTest(t *testing.T) {
	var first, second string
	t.Run("first", func(t *testing.T) {
		first = URL(t)
		if _, err := connect(t, first).Exec(context.Background(), `CREATE TABLE mine (x int)`); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("second", func(t *testing.T) {
		second = URL(t)
		var n int
		err := connect(t, second).QueryRow(context.Background(), `SELECT count(*) FROM pg_tables WHERE tablename = 'mine'`).Scan(&n)
		if err != nil || n != 0 {
			t.Fatalf("a fresh database holds another test's table: %d, %v", n, err)
		}
	})
	if first == second {
		t.Fatalf("two tests got the same database %s", first)
	}
	var left int
	err := the.admin.QueryRow(context.Background(), `SELECT count(*) FROM pg_database WHERE datname = $1`,
		databaseName(t, first)).Scan(&left)
	if err != nil || left != 0 {
		t.Fatalf("the first test's database is still there after it ended: %d, %v", left, err)
	}
}

// A template's setup runs once; its clones start with what it made and
// are independent of each other.
func TestURLFromClonesTheTemplate(t *testing.T) {
	setups := 0
	tmpl := Template{Name: "counted", Setup: func(ctx context.Context, url string) error {
		setups++
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, `CREATE TABLE things (n int); INSERT INTO things VALUES (1)`)
		return err
	}}
	ctx := context.Background()
	a, b := connect(t, URLFrom(t, tmpl)), connect(t, URLFrom(t, tmpl))
	if _, err := a.Exec(ctx, `INSERT INTO things VALUES (2)`); err != nil {
		t.Fatal(err)
	}
	var na, nb int
	if err := a.QueryRow(ctx, `SELECT count(*) FROM things`).Scan(&na); err != nil {
		t.Fatal(err)
	}
	if err := b.QueryRow(ctx, `SELECT count(*) FROM things`).Scan(&nb); err != nil {
		t.Fatal(err)
	}
	if got, want := [3]int{setups, na, nb}, [3]int{1, 2, 1}; got != want {
		t.Fatalf("setups, rows in a, rows in b: got %v, want %v", got, want)
	}
}

// The figures the issue quotes: time to a ready server, and per fresh
// database (logged with -v).
func TestTimings(t *testing.T) {
	URL(t)
	const n = 10
	began := time.Now()
	for range n {
		t.Run("db", func(t *testing.T) { URL(t) })
	}
	t.Logf("server ready in %s; a fresh database (create + drop) in %s", StartTook().Round(time.Millisecond), (time.Since(began) / n).Round(time.Millisecond))
}

// databaseName is the database of url.
func databaseName(t *testing.T, url string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(errors.Join(errors.New("parse url"), err))
	}
	return cfg.Database
}
