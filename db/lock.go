//go:build unix

package db

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// FileLock is an exclusive OS lock proving that one pacer process owns a
// database file. The OS drops it when the process dies, however it dies.
//
// The lock is an flock(2) on the database file itself, so it follows the
// file, not its name: a symlink, a hard link, another relative path and a
// stray or deleted lock file all lead to the same lock. flock locks are
// independent of the POSIX (fcntl) locks SQLite takes on the same file.
// POSIX locks, though, belong to the process and the file: closing any
// descriptor of the file drops every one of them, SQLite's included. The
// lock therefore keeps its one descriptor open until Release, which must
// come after the store on the file is closed.
type FileLock struct {
	f *os.File
}

// Lock takes an exclusive, non-blocking lock on the database file at
// dbPath, creating an empty file if there is none (SQLite makes an empty
// file a new database). When another process holds the lock it returns an
// error that names the database file and says another pacer process is
// using it. Release the lock with Release, after closing the store.
func Lock(dbPath string) (*FileLock, error) {
	f, err := os.OpenFile(dbPath, os.O_RDONLY|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock database %s: %w", dbPath, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close() // nothing of SQLite's is open on it yet: no lock to lose
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("database %s is in use by another pacer process (under this or another name: a link or another path to the same file); stop that process or use another --db", dbPath)
		}
		return nil, fmt.Errorf("lock database %s: %w", dbPath, err)
	}
	return &FileLock{f: f}, nil
}

// Release drops the lock. Call it only once the store on the file is
// closed: closing the lock's descriptor drops the process's SQLite locks
// on the file too. It is safe to call more than once.
func (l *FileLock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	// Closing the file drops the flock; unlocking first makes the release
	// explicit even if the descriptor was duplicated.
	err := syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	err = errors.Join(err, l.f.Close())
	l.f = nil
	if err != nil {
		return fmt.Errorf("release database lock: %w", err)
	}
	return nil
}
