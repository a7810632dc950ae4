package pgstore

import (
	"context"
	"fmt"
)

// FeedBacklog counts the changes not numbered yet (no seq): those of
// transactions the sequencer has not reached (design §10: a long
// transaction anywhere delays the feed, never skips it). For metrics: a
// number that keeps growing means the feed is held back.
func (s *Store) FeedBacklog(ctx context.Context) (int, error) {
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM changes WHERE seq IS NULL`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count the feed's backlog: %w", err)
	}
	return n, nil
}
