package db_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"

	"pacer/scheduler/storetest"
)

// Checkpoint moves committed pages from the WAL into the database file:
// a copy of the main file alone, without its WAL, holds the operation.
func TestCheckpointMovesTheWALIntoTheFile(t *testing.T) {
	d, path := newTestDB(t)
	storetest.PutScope(t, d, "a", storetest.ScopeOpts{})
	storetest.Enqueue(t, d, t0, storetest.NewOp("op-1", "a", t0.Add(time.Minute)))

	st, err := d.Checkpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.WALFrames == 0 || st.Checkpointed != st.WALFrames || st.Busy {
		t.Fatalf("checkpoint = %+v, want every WAL frame checkpointed", st)
	}

	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	copyPath := filepath.Join(t.TempDir(), "copy.db")
	if err := os.WriteFile(copyPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	raw, err := sql.Open("sqlite", "file:"+copyPath)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var n int
	if err := raw.QueryRow(`SELECT COUNT(*) FROM operations WHERE operation_id = 'op-1'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("the database file alone holds %d op-1 rows (%v), want 1", n, err)
	}
}
