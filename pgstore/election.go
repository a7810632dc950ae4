package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Maintenance that must run once (design §10: retention) runs on one
// elected node: the row of its task in elections names the node and a
// term in database time. A node wins the term when the row is new, is its
// own, or its term ended; each run renews it. A node found dead loses its
// elections with its row (forgetDeadNodes), so another takes over at its
// next run.

// retentionTask is the elections row of retention (PruneFinished).
const retentionTask = "retention"

// gaugesTask is the elections row of the database-wide gauges
// (ReportsDatabaseGauges).
const gaugesTask = "gauges"

// electionTerm is how long a won election lasts without a renewal: longer
// than the pruner's sweep interval, so its winner keeps it.
const electionTerm = 5 * time.Minute

// elected reports whether this node runs task now, winning or renewing its
// term in tx.
func (s *Store) elected(ctx context.Context, tx pgx.Tx, task string) (bool, error) {
	if s.node.id.Load() == 0 {
		return false, nil // no node (Options.NoNode), or one that lost its row: it runs nothing
	}
	var node int32
	err := tx.QueryRow(ctx, `
		INSERT INTO elections (task, node, expires_at) VALUES ($1, $2, `+dbNowMS+` + $3)
		ON CONFLICT (task) DO UPDATE SET node = excluded.node, expires_at = excluded.expires_at
		WHERE elections.node = excluded.node OR elections.expires_at < `+dbNowMS+`
		RETURNING node`, task, int32(s.node.id.Load()), electionTerm.Milliseconds()).Scan(&node)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// ReportsDatabaseGauges reports whether this node is the one that reports
// the gauges counting the whole database (metrics.SharedCounter): the node
// elected for them, winning or renewing its term. A node that is not
// scraped any more loses them to one that is when its term ends; one that
// closes, at once.
func (s *Store) ReportsDatabaseGauges(ctx context.Context) (bool, error) {
	var ok bool
	err := s.writeRetrying(ctx, pgx.TxOptions{}, func(tx pgx.Tx) error { // a scrape wakes no one
		var err error
		ok, err = s.elected(ctx, tx, gaugesTask)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("elect the node reporting the database-wide gauges: %w", err)
	}
	return ok, nil
}
