package main

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"pacer/db"
	"pacer/scheduler"
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

// Design §14: a viewer role, an account locked after five failed sign-ins
// and unlocked by pacer users unlock, and pacer users passwd.
func TestCLIUsersRolesUnlockPasswd(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "pacer.db")
	const password, newPassword = "a long staff password", "another long password"
	key, _, err := db.LoadOrCreateKeyFile(path + ".key")
	if err != nil {
		t.Fatal(err)
	}
	created, err := db.Open(path, db.Options{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	created.Close()
	if out := runPacer(ctx, nil, password+"\n", "users", "add", "--db", path, "--role", "viewer", "vic").ok(t); !strings.Contains(out, "(viewer)") {
		t.Fatalf("add a viewer: %q", out)
	}
	runPacer(ctx, nil, password+"\n", "users", "add", "--db", path, "--role", "boss", "bob").fails(t, 2, "--role")
	// Five wrong passwords lock the account, even against the right one.
	store, err := db.Open(path, db.Options{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	for range scheduler.MaxFailedSignIns {
		if ok, err := store.CheckPassword(ctx, "vic", "wrong password!"); ok || err != nil {
			t.Fatalf("wrong password: %v %v", ok, err)
		}
	}
	if _, err := store.CheckPassword(ctx, "vic", password); !errors.Is(err, scheduler.ErrAccountLocked) {
		t.Fatalf("after %d failures: %v, want ErrAccountLocked", scheduler.MaxFailedSignIns, err)
	}
	store.Close()
	if out := runPacer(ctx, nil, "", "users", "list", "--db", path).ok(t); !strings.Contains(out, "viewer") || !strings.Contains(out, "locked (pacer users unlock vic)") {
		t.Fatalf("list: %q, want vic as a locked viewer", out)
	}
	if out := runPacer(ctx, nil, "", "users", "unlock", "--db", path, "vic").ok(t); !strings.Contains(out, "unlocked staff account vic") {
		t.Fatalf("unlock: %q", out)
	}
	runPacer(ctx, nil, "", "users", "unlock", "--db", path, "nobody").fails(t, 1, "no staff account")
	if out := runPacer(ctx, nil, newPassword+"\n", "users", "passwd", "--db", path, "vic").ok(t); !strings.Contains(out, "set the password of staff account vic") {
		t.Fatalf("passwd: %q", out)
	}
	runPacer(ctx, nil, "short\n", "users", "passwd", "--db", path, "vic").fails(t, 2, "at least 10 characters")
	store, err = db.Open(path, db.Options{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if ok, err := store.CheckPassword(ctx, "vic", newPassword); !ok || err != nil {
		t.Fatalf("the new password: %v %v", ok, err)
	}
	if ok, _ := store.CheckPassword(ctx, "vic", password); ok {
		t.Fatal("the old password still signs in")
	}
}
