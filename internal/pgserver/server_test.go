package pgserver

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
)

// connect opens a connection to url, closed when the test ends.
func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// As root, the server runs as an unprivileged user (initdb refuses root),
// listens on no TCP port, and its directory goes when it stops.
func TestServerRunsUnprivilegedOnASocket(t *testing.T) {
	ctx := context.Background()
	srv, err := Start(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			srv.Stop()
		}
	}()
	conn := connect(t, srv.URL())
	var listen string
	if err := conn.QueryRow(ctx, `SHOW listen_addresses`).Scan(&listen); err != nil || listen != "" {
		t.Fatalf("listen_addresses: got %q (%v), want none", listen, err)
	}
	fi, err := os.Stat(filepath.Join(srv.Dir(), "data"))
	if err != nil {
		t.Fatal(err)
	}
	owner := fi.Sys().(*syscall.Stat_t).Uid
	if os.Geteuid() == 0 && owner == 0 {
		t.Fatalf("the data directory belongs to root: the server runs as root")
	}
	if os.Geteuid() != 0 && owner != uint32(os.Geteuid()) {
		t.Fatalf("the data directory belongs to uid %d, not the tests' user", owner)
	}
	conn.Close(ctx)
	stopped = true
	if err := srv.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if _, err := os.Stat(srv.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the server's directory is left after it stopped: %v", err)
	}
}

// The newest installed version is used; none installed is the install
// hint.
func TestFindBin(t *testing.T) {
	root := t.TempDir()
	for _, v := range []string{"9.6", "16", "14"} {
		bin := filepath.Join(root, v, "bin")
		if err := os.MkdirAll(bin, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"initdb", "postgres"} {
			if err := os.WriteFile(filepath.Join(bin, f), nil, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "17", "bin"), 0o755); err != nil { // no binaries
		t.Fatal(err)
	}
	got, err := findBin(root)
	if want := filepath.Join(root, "16", "bin"); err != nil || got != want {
		t.Fatalf("got %q, %v; want %q", got, err, want)
	}
	t.Setenv("PATH", t.TempDir())
	if _, err := findBin(t.TempDir()); err == nil || err.Error() != InstallHint {
		t.Fatalf("with none installed: got %v, want %q", err, InstallHint)
	}
}

// A durable server keeps what a commit wrote across an immediate stop
// (a crash of the server) and answers again on the same URL after
// Restart.
func TestDurableServerSurvivesAnImmediateStop(t *testing.T) {
	ctx := context.Background()
	srv, err := Start(ctx, Options{Durable: true})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	conn, err := pgx.Connect(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`CREATE TABLE kept (n int)`, `INSERT INTO kept VALUES (1), (2), (3)`} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	conn.Close(ctx)
	if err := srv.StopImmediate(); err != nil {
		t.Fatalf("stop immediate: %v", err)
	}
	if _, err := pgx.Connect(ctx, srv.URL()); err == nil {
		t.Fatal("the stopped server answered")
	}
	if err := srv.Restart(ctx); err != nil {
		t.Fatalf("restart: %v", err)
	}
	var n int
	if err := connect(t, srv.URL()).QueryRow(ctx, `SELECT count(*) FROM kept`).Scan(&n); err != nil || n != 3 {
		t.Fatalf("after the restart: %d rows, %v; want the 3 committed", n, err)
	}
}

// Options.Settings reach the server, after (so over) the throwaway ones.
func TestSettingsReachTheServer(t *testing.T) {
	ctx := context.Background()
	srv, err := Start(ctx, Options{Settings: []string{"autovacuum_naptime=7s", "deadlock_timeout=250ms"}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	conn := connect(t, srv.URL())
	var naptime, deadlock string
	if err := conn.QueryRow(ctx, `SELECT current_setting('autovacuum_naptime'), current_setting('deadlock_timeout')`).Scan(&naptime, &deadlock); err != nil {
		t.Fatal(err)
	}
	if naptime != "7s" || deadlock != "250ms" {
		t.Fatalf("autovacuum_naptime %q, deadlock_timeout %q: want 7s, 250ms", naptime, deadlock)
	}
}
