//go:build !unix

package db

import (
	"errors"
	"fmt"
)

// FileLock is an exclusive OS lock proving that one pacer process owns a
// database file. It is not implemented on this platform.
type FileLock struct{}

// Lock is not supported on this platform: it always fails.
func Lock(dbPath string) (*FileLock, error) {
	return nil, fmt.Errorf("lock database %s: %w", dbPath, errors.ErrUnsupported)
}

// Release does nothing.
func (l *FileLock) Release() error { return nil }
