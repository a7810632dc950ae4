package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"pacer/db"
	"pacer/scheduler"
)

// §11 "Operator commands never invent a database": every command but serve
// refuses a --db that holds no pacer database (missing, or an empty file),
// with one line and a non-zero exit, and creates neither the database nor
// a key file for it.
func TestCommandsNeverInventDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	missing := filepath.Join(dir, "mistyped.db")
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, msg string }{
		{missing, "no database file at"},
		{empty, "holds no pacer database yet"},
	} {
		for _, args := range [][]string{
			{"users", "list", "--db", tc.path}, {"users", "remove", "--db", tc.path, "alice"}, {"users", "add", "--db", tc.path, "alice"},
			{"check", "--db", tc.path}, {"backup", "--db", tc.path, "--to", filepath.Join(dir, "copy.db")},
		} {
			r := runPacer(ctx, nil, "a long staff password\n", args...)
			if r.code == 0 || !strings.Contains(r.msg, tc.msg) || !strings.Contains(r.msg, "only pacer serve creates") || strings.Contains(r.msg, "\n") {
				t.Errorf("pacer %s: exit %d %q, want a non-zero exit and one line saying %q and that only serve creates a database", strings.Join(args, " "), r.code, r.msg, tc.msg)
			}
		}
	}
	for _, p := range []string{missing, missing + ".key", empty + ".key", filepath.Join(dir, "copy.db")} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists after the refused commands (%v)", p, err)
		}
	}
	if fi, err := os.Stat(empty); err != nil || fi.Size() != 0 {
		t.Errorf("the empty file was written to: %v, %v", fi, err)
	}
}

// foreignDB writes another application's SQLite database (with the given
// user_version) and returns its path and its table count.
func foreignDB(t *testing.T, userVersion int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "crm.db")
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	for _, q := range []string{
		`CREATE TABLE contacts (id INTEGER PRIMARY KEY, name TEXT)`,
		`INSERT INTO contacts (name) VALUES ('ada')`,
		`PRAGMA user_version = ` + []string{"0", "1", "7"}[userVersion],
	} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

// tables lists the tables of the SQLite file at path.
func tables(t *testing.T, path string) []string {
	t.Helper()
	raw, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	rows, err := raw.Query(`SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	return names
}

// journalMode reads the journal mode of the SQLite file at path.
func journalMode(t *testing.T, path string) string {
	t.Helper()
	raw, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var mode string
	if err := raw.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil {
		t.Fatal(err)
	}
	return mode
}

// A --db that is another application's SQLite file is refused by every
// command, serve included, and gets no pacer table.
func TestCommandsRefuseForeignDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for i, name := range []string{"NoVersion", "VersionOne", "OtherVersion"} {
		t.Run(name, func(t *testing.T) {
			path := foreignDB(t, i)
			for _, args := range [][]string{
				{"users", "list", "--db", path}, {"users", "add", "--db", path, "alice"}, {"check", "--db", path},
				{"backup", "--db", path, "--to", filepath.Join(t.TempDir(), "copy.db")},
			} {
				r := runPacer(ctx, nil, "a long staff password\n", args...)
				if r.code == 0 || !strings.Contains(r.msg, "is not a pacer database") || strings.Contains(r.msg, "\n") {
					t.Errorf("pacer %s: exit %d %q, want a non-zero exit and one line saying it is not a pacer database", strings.Join(args, " "), r.code, r.msg)
				}
			}
			sctx, cancel := context.WithTimeout(ctx, 15*time.Second) // a serve that starts is stopped
			defer cancel()
			out, err := exec.CommandContext(sctx, pacerBin(t), "serve", "--db", path, "--listen", freeAddr(t)).CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || !strings.Contains(string(out), "is not a pacer database") {
				t.Errorf("serve on another application's database: %v\n%s", err, out)
			}
			if got := tables(t, path); strings.Join(got, ",") != "contacts" {
				t.Errorf("tables after the refused commands: %v, want only contacts", got)
			}
			if mode := journalMode(t, path); mode != "delete" {
				t.Errorf("journal mode after the refused commands: %s, want it untouched (delete)", mode)
			}
			if _, err := os.Stat(path + ".key"); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a key file was made beside another application's database: %v", err)
			}
		})
	}
}

// A command given a link to the database uses the key beside the database
// file itself: it makes no second key beside the link.
func TestKeyFileFollowsTheDatabaseFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	real := filepath.Join(dir, "pacer.db")
	key, created, err := db.LoadOrCreateKeyFile(real + ".key")
	if err != nil || !created {
		t.Fatalf("make key: %v %v", created, err)
	}
	store, err := db.Open(real, db.Options{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	store.Close()
	alias := filepath.Join(t.TempDir(), "alias.db")
	if err := os.Symlink(real, alias); err != nil {
		t.Fatal(err)
	}
	r := runPacer(context.Background(), nil, "a long staff password\n", "users", "add", "--db", alias, "alice")
	if r.code != 0 {
		t.Fatalf("users add through a link: exit %d %s", r.code, r.msg)
	}
	if _, err := os.Stat(alias + ".key"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a second key file was made beside the link (%v)", err)
	}
	if got := runPacer(context.Background(), nil, "", "users", "list", "--db", real).ok(t); !strings.Contains(got, "alice") {
		t.Errorf("users list on the file itself: %q, want alice", got)
	}
}

// A database whose credentials another key sealed refuses the key, and the
// key file a refused start made is gone again: a wrong key leaves no new
// key file behind (serve and users alike).
func TestWrongKeyLeavesNoKeyFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "pacer.db")
	store, err := db.Open(path, db.Options{Key: bytes.Repeat([]byte{7}, db.KeySize)})
	if err != nil {
		t.Fatal(err)
	}
	act := scheduler.Action{Actor: "test", At: time.Now(), Reason: "setup"}
	if _, _, err := store.PutScope(context.Background(), scheduler.ScopeConfig{Name: "a", Provider: "generic", BaseURL: "https://api.example.com",
		MaxConcurrent: 1, Credentials: scheduler.Credentials{Type: scheduler.CredentialBearer, Token: "t"}}, act); err != nil {
		t.Fatal(err)
	}
	store.Close()
	for _, args := range [][]string{
		{"serve", "--db", path, "--listen", freeAddr(t), "--secret-key-file", filepath.Join(dir, "serve.key")},
		{"users", "list", "--db", path, "--secret-key-file", filepath.Join(dir, "users.key")},
	} {
		r := runPacer(context.Background(), nil, "", args...)
		if r.code != 1 || !strings.Contains(r.msg, "key") {
			t.Errorf("%v: exit %d %q, want 1 naming the key", args, r.code, r.msg)
		}
		if _, err := os.Stat(args[len(args)-1]); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%v left the key file it made (%v)", args, err)
		}
	}
}
