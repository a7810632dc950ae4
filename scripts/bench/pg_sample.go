package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgSampler is a sampling profile of the PostgreSQL server by statement
// (PACERBENCH_PGSAMPLE=1): every millisecond it reads which statements the
// server's other sessions are running (pg_stat_activity, state active),
// and counts each statement's samples, so that where the server spends
// its time shows without pg_stat_statements (not loaded on the throwaway
// server).
type pgSampler struct {
	counts  map[string]int
	samples int
	done    chan struct{}
	cancel  context.CancelFunc
}

// startPGSampler samples the server at url until stop.
func startPGSampler(url string) (*pgSampler, error) {
	ctx, cancel := context.WithCancel(context.Background())
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("connect the sampler: %w", err)
	}
	s := &pgSampler{counts: map[string]int{}, done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(s.done)
		defer conn.Close(context.Background())
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			rows, err := conn.Query(ctx, `SELECT query FROM pg_stat_activity
				WHERE state = 'active' AND pid <> pg_backend_pid() AND backend_type = 'client backend'`)
			if err != nil {
				return
			}
			qs, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				return
			}
			s.samples++
			for _, q := range qs {
				s.counts[strings.Join(strings.Fields(q), " ")]++
			}
		}
	}()
	return s, nil
}

// stop ends the sampling and writes the statements seen most often, with
// their share of the samples (a share above 100 % means several sessions
// ran statements at once).
func (s *pgSampler) stop(w io.Writer, name string) {
	s.cancel()
	<-s.done
	type entry struct {
		q string
		n int
	}
	var es []entry
	for q, n := range s.counts {
		es = append(es, entry{q, n})
	}
	sort.Slice(es, func(i, j int) bool { return es[i].n > es[j].n })
	fmt.Fprintf(w, "%s: PostgreSQL statements in %d samples of pg_stat_activity (1 ms apart):\n", name, s.samples)
	for i, e := range es {
		if i == 15 {
			break
		}
		q := e.q
		if len(q) > 160 {
			q = q[:160] + "…"
		}
		fmt.Fprintf(w, "  %5.1f%%  %s\n", 100*float64(e.n)/float64(max(s.samples, 1)), q)
	}
}
