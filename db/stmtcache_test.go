package db

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"

	"modernc.org/sqlite"
)

// openCachingPool opens a one-connection pool through cachingConnector and
// returns it with that connection.
func openCachingPool(t *testing.T) (*sql.Conn, *cachingConn) {
	t.Helper()
	pool := sql.OpenDB(cachingConnector{dsn: "file:" + filepath.Join(t.TempDir(), "cache.db"), driver: &sqlite.Driver{}})
	t.Cleanup(func() { pool.Close() })
	conn, err := pool.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	var cc *cachingConn
	if err := conn.Raw(func(dc any) error { cc = dc.(*cachingConn); return nil }); err != nil {
		t.Fatal(err)
	}
	return conn, cc
}

// A text is prepared once per connection, however often it runs.
func TestStatementCacheReusesPreparedStatements(t *testing.T) {
	ctx := context.Background()
	conn, cc := openCachingPool(t)
	if _, err := conn.ExecContext(ctx, `CREATE TABLE t (n INTEGER)`); err != nil {
		t.Fatal(err)
	}
	before := cc.prepared
	for i := range 100 {
		if _, err := conn.ExecContext(ctx, `INSERT INTO t (n) VALUES (?)`, i); err != nil {
			t.Fatal(err)
		}
		var n int
		if err := conn.QueryRowContext(ctx, `SELECT COUNT(*) FROM t WHERE n <= ?`, i).Scan(&n); err != nil || n != i+1 {
			t.Fatalf("count after %d inserts = %d, %v", i+1, n, err)
		}
	}
	if got := cc.prepared - before; got != 2 {
		t.Fatalf("prepared %d statements for 2 texts run 100 times each, want 2", got)
	}
}

// A query nested inside an open one with the same text gets a statement of
// its own: the outer rows are not reset under it.
//
// Were the statement shared, the outer query would restart or never end
// (seen: it hangs, and the test fails by its timeout).
func TestStatementCacheNestedSameText(t *testing.T) {
	ctx := context.Background()
	conn, _ := openCachingPool(t)
	const q = `SELECT value FROM json_each(?)`
	rows, err := conn.QueryContext(ctx, q, `[1,2,3]`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var outer []int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		outer = append(outer, v)
		if len(outer) > 3 {
			t.Fatalf("outer rows restarted: %v", outer)
		}
		var inner int
		if err := conn.QueryRowContext(ctx, q, `[7]`).Scan(&inner); err != nil || inner != 7 {
			t.Fatalf("nested query = %d, %v", inner, err)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(outer) != "[1 2 3]" {
		t.Fatalf("outer rows = %v, want [1 2 3]", outer)
	}
}

// The cache stays within its bound, evicting the least recently used
// statements, which still work when they come back.
func TestStatementCacheIsBounded(t *testing.T) {
	ctx := context.Background()
	conn, cc := openCachingPool(t)
	for round := range 2 {
		for i := range StatementCacheSize + 50 {
			var v int
			if err := conn.QueryRowContext(ctx, fmt.Sprintf(`SELECT %d`, i)).Scan(&v); err != nil || v != i {
				t.Fatalf("round %d: SELECT %d = %d, %v", round, i, v, err)
			}
			if len(cc.byText) > StatementCacheSize || cc.idle.Len() != len(cc.byText) {
				t.Fatalf("cache holds %d texts (%d idle), bound %d", len(cc.byText), cc.idle.Len(), StatementCacheSize)
			}
		}
	}
}
