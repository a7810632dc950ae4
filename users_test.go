package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"pacer/db"
)

func TestCLIUsers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "pacer.db")
	const password = "a long staff password"

	// serve creates the database; the users commands only open it.
	key, _, err := db.LoadOrCreateKeyFile(path + ".key")
	if err != nil {
		t.Fatal(err)
	}
	created, err := db.Open(path, db.Options{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	created.Close()

	r := runPacer(ctx, nil, "", "users", "list", "--db", path)
	if r.ok(t) != "" || !strings.Contains(r.stderr, "no staff accounts") {
		t.Fatalf("list on a new database: stdout %q stderr %q", r.stdout, r.stderr)
	}

	out := runPacer(ctx, nil, password+"\n", "users", "add", "--db", path, "alice").ok(t)
	if !strings.Contains(out, "added staff account alice") {
		t.Fatalf("add: %q", out)
	}
	runPacer(ctx, nil, "another password\n", "users", "add", "--db", path, "alice").fails(t, 1, "exists already")
	runPacer(ctx, nil, "short\n", "users", "add", "--db", path, "bob").fails(t, 2, "at least 10 characters")
	runPacer(ctx, nil, "", "users", "add", "--db", path, "bob").fails(t, 2, "read the password")
	runPacer(ctx, nil, password+"\n", "users", "add", "--db", path, "bad name").fails(t, 2, "name must be")
	runPacer(ctx, nil, password+"\n", "users", "add", "--db", path).fails(t, 2, "one argument")

	if out := runPacer(ctx, nil, "", "users", "list", "--db", path).ok(t); !strings.Contains(out, "NAME") || !strings.Contains(out, "alice") {
		t.Fatalf("list: %q", out)
	}

	// The password was read as typed (without its newline) and stored hashed.
	store, err := db.Open(path, db.Options{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	ok, err := store.CheckPassword(ctx, "alice", password)
	store.Close()
	if err != nil || !ok {
		t.Fatalf("check the stored password: %v, %v", ok, err)
	}

	if out := runPacer(ctx, nil, "", "users", "remove", "--db", path, "alice").ok(t); !strings.Contains(out, "removed staff account alice") {
		t.Fatalf("remove: %q", out)
	}
	runPacer(ctx, nil, "", "users", "remove", "--db", path, "alice").fails(t, 1, "no staff account")
}
