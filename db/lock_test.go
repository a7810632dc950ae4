//go:build unix

package db_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pacer/db"
)

func TestLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pacer.db")
	first, err := db.Lock(path)
	if err != nil {
		t.Fatalf("first lock: %v", err)
	}
	t.Cleanup(func() { first.Release() })

	// The database file serve makes is readable by its owner only, as the
	// key is (issue 14: a hand-run pacer.db was world-readable).
	t.Run("NewFileOwnerOnly", func(t *testing.T) {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != 0o600 {
			t.Fatalf("new database file mode %04o, want 0600", got)
		}
	})

	t.Run("ErrSecondHolder", func(t *testing.T) {
		_, err := db.Lock(path)
		if err == nil {
			t.Fatal("second lock succeeded")
		}
		for _, want := range []string{path, "another pacer process"} {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("error %q does not mention %q", err, want)
			}
		}
	})

	t.Run("ErrSameFileUnderAnotherName", func(t *testing.T) {
		dir := t.TempDir()
		symlink, hardlink := filepath.Join(dir, "alias.db"), filepath.Join(filepath.Dir(path), "hard.db")
		if err := os.Symlink(path, symlink); err != nil {
			t.Fatal(err)
		}
		if err := os.Link(path, hardlink); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{symlink, hardlink} {
			if l, err := db.Lock(name); err == nil {
				l.Release()
				t.Errorf("lock through %s succeeded while the file is locked", name)
			}
		}
	})

	t.Run("ReleasedLockCanBeTaken", func(t *testing.T) {
		if err := first.Release(); err != nil {
			t.Fatalf("release: %v", err)
		}
		if err := first.Release(); err != nil {
			t.Fatalf("second release: %v", err)
		}
		again, err := db.Lock(path)
		if err != nil {
			t.Fatalf("lock after release: %v", err)
		}
		again.Release()
	})
}
