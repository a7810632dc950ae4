package pgstore_test

import (
	"context"
	"testing"

	"pacer/internal/pgtest"
	"pacer/scheduler/storetest"
)

// A store answers Ping and accepts writes; a server that turned read-only
// (a standby) is not Writable.
func TestPingWritable(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URLFrom(t, migrated)
	s := openStoreAt(t, url)
	if err := s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Writable(ctx, storetest.T0); err != nil {
		t.Fatal(err)
	}
	var db string
	if err := s.Pool().QueryRow(ctx, `SELECT current_database()`).Scan(&db); err != nil {
		t.Fatal(err)
	}
	exec(t, url, `ALTER DATABASE "`+db+`" SET default_transaction_read_only = on`)
	// New sessions read the setting: the pool's are opened anew (a store
	// cannot open on a read-only database at all: its node registers).
	s.Pool().Reset()
	if err := s.Writable(ctx, storetest.T0); err == nil {
		t.Fatal("Writable on a read-only database")
	}
}
