package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// §11 "One process per SQLite database, however it is named": while one
// serve runs, a second one on the same file refuses to start under every
// spelling of its name, and after the lock file of older releases was
// deleted.
func TestSecondServeRefusedUnderAnyName(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "pacer.db")
	startPacer(t, dbPath, freeAddr(t))

	other := t.TempDir()
	symlink := filepath.Join(other, "alias.db")
	if err := os.Symlink(dbPath, symlink); err != nil {
		t.Fatal(err)
	}
	hardlink := filepath.Join(dir, "hard.db")
	if err := os.Link(dbPath, hardlink); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, db, cwd string
		before        func(t *testing.T)
	}{
		{name: "SamePath", db: dbPath},
		{name: "Symlink", db: symlink},
		{name: "HardLink", db: hardlink},
		{name: "RelativePath", db: "pacer.db", cwd: dir},
		{name: "OtherRelativePath", db: filepath.Join("..", filepath.Base(dir), ".", "pacer.db"), cwd: other},
		{name: "LockFileDeleted", db: dbPath, before: func(t *testing.T) {
			if err := os.Remove(dbPath + ".lock"); err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.before != nil {
				tc.before(t)
			}
			// A serve that does start is stopped after a while (and fails the test).
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, pacerBin(t), "serve", "--db", tc.db, "--listen", freeAddr(t))
			cmd.Env, cmd.Dir = envWithoutPacer(), tc.cwd
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 3 {
				t.Fatalf("second serve --db %s: %v, want exit status 3:\n%s", tc.db, err, out)
			}
			if !strings.Contains(string(out), "in use by another pacer process") || !strings.Contains(string(out), tc.db) {
				t.Errorf("message does not name %s and the other process:\n%s", tc.db, out)
			}
			if _, err := os.Stat(filepath.Join(tc.cwd, tc.db) + ".key"); tc.db != dbPath && tc.cwd == "" && !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the refused serve created a key file beside %s (%v)", tc.db, err)
			}
		})
	}
}
