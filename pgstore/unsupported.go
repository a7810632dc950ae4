package pgstore

import (
	"context"
	"errors"

	"pacer/scheduler"
)

// ErrNotYetSupported is returned by the methods the PostgreSQL store does
// not implement yet.
var ErrNotYetSupported = errors.New("not yet supported by the PostgreSQL store")

func (s *Store) ListChanges(ctx context.Context, f scheduler.ChangeFilter) (scheduler.ChangeBatch, error) {
	return scheduler.ChangeBatch{}, ErrNotYetSupported
}
