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
type FileLock struct {
	f *os.File
}

// Lock takes an exclusive, non-blocking lock on dbPath+".lock", creating
// that file if needed. When another process holds the lock it returns an
// error that names the database file and says another pacer process is
// using it. Release the lock with Release.
func Lock(dbPath string) (*FileLock, error) {
	lockPath := dbPath + ".lock"
	f, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock database %s: %w", dbPath, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("database %s is in use by another pacer process (it holds %s); stop that process or use another --db", dbPath, lockPath)
		}
		return nil, fmt.Errorf("lock database %s: %w", dbPath, err)
	}
	return &FileLock{f: f}, nil
}

// Release drops the lock. It is safe to call more than once.
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
