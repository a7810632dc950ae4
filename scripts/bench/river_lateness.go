package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/riverqueue/river"
)

// latenessArgs is the JSON handed to the re-executed "river-lateness" child.
type latenessArgs struct {
	Rate     float64       `json:"rate"`
	N        int           `json:"n"`
	Workers  int           `json:"workers"`
	Provider string        `json:"provider"`
	Dir      string        `json:"dir"`
	Timeout  time.Duration `json:"timeout"`
}

// dueArgs is the River job of a lateness run: one HTTP call carrying its due
// time.
type dueArgs struct {
	Due int64 `json:"due"` // Unix ms, also the job's ScheduledAt
}

// Kind names the job kind.
func (dueArgs) Kind() string { return "bench_due" }

// dueWorker sends one request per job with the job's due time in dueHeader.
type dueWorker struct {
	river.WorkerDefaults[dueArgs]
	client *http.Client
	url    string
	done   *atomic.Int64
}

// Work does the job's HTTP call.
func (w *dueWorker) Work(ctx context.Context, job *river.Job[dueArgs]) error {
	if err := sendOne(w.client, w.url, job.Args.Due); err != nil {
		return err
	}
	w.done.Add(1)
	return nil
}

// runRiverLatenessChild is the "river-lateness" subcommand: it runs River's
// lateness measurement and prints its result as one JSON line.
func runRiverLatenessChild(argv []string) {
	var a latenessArgs
	if len(argv) != 1 || json.Unmarshal([]byte(argv[0]), &a) != nil || a.N <= 0 || a.Rate <= 0 {
		fmt.Fprintln(os.Stderr, "usage: pacerbench river-lateness '{json latenessArgs}'")
		os.Exit(2)
	}
	r, err := runRiverLateness(a)
	if err != nil {
		r.Err = err.Error()
	}
	b, _ := json.Marshal(r)
	fmt.Println(string(b))
}

// runRiverLateness starts a River client (as the throughput run sets it up),
// inserts all N jobs up front with InsertMany (1,000 per call), each with
// ScheduledAt at its due time, and waits until all are completed. While it
// waits it samples how many jobs are still in state scheduled, to show when
// River's job scheduler moves them to available.
func runRiverLateness(a latenessArgs) (result, error) {
	var r result
	ctx, cancel := context.WithTimeout(context.Background(), a.Timeout)
	defer cancel()
	var done atomic.Int64
	workers := river.NewWorkers()
	river.AddWorker(workers, &dueWorker{client: newHTTPClient(a.Workers), url: a.Provider, done: &done})
	db, client, err := newRiverClient(ctx, filepath.Join(a.Dir, "river.db"), workers, a.Workers)
	if err != nil {
		return r, err
	}
	defer db.Close()
	clientStart := time.Now()
	if err := client.Start(ctx); err != nil {
		return r, fmt.Errorf("start river: %w", err)
	}
	defer func() {
		stopCtx, stopCancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer stopCancel()
		_ = client.Stop(stopCtx)
	}()

	start := time.Now()
	due0 := start.Add(latenessLead(a.N)).UnixMilli()
	for i := 0; i < a.N; i += 1000 {
		params := make([]river.InsertManyParams, 0, 1000)
		for j := i; j < min(i+1000, a.N); j++ {
			due := dueMs(due0, j, a.Rate)
			params = append(params, river.InsertManyParams{Args: dueArgs{Due: due}, InsertOpts: &river.InsertOpts{ScheduledAt: time.UnixMilli(due)}})
		}
		if _, err := client.InsertMany(ctx, params); err != nil {
			return r, fmt.Errorf("insert river jobs: %w", err)
		}
	}
	enqueued := time.Now()
	if slack := time.UnixMilli(due0).Sub(enqueued); slack <= 0 {
		return r, fmt.Errorf("check lateness run: inserting took %s, %s past the first due time; lower -lateness-rate or -lateness-seconds", enqueued.Sub(start).Round(time.Millisecond), -slack)
	}
	scheduled0, err := countState(ctx, db, "scheduled")
	if err != nil {
		return r, err
	}
	moves := make(chan string, 1)
	samplerCtx, stopSampler := context.WithCancel(ctx)
	go func() { moves <- sampleScheduled(samplerCtx, db, scheduled0, due0) }()

	sleepUntil(ctx, dueMs(due0, a.N-1, a.Rate))
	for done.Load() < int64(a.N) {
		if ctx.Err() != nil {
			stopSampler()
			return r, fmt.Errorf("wait for river (%d of %d worked): %w", done.Load(), a.N, ctx.Err())
		}
		time.Sleep(10 * time.Millisecond)
	}
	stopSampler()
	moved := <-moves
	for {
		n, err := countState(ctx, db, "completed")
		if err != nil {
			return r, err
		}
		if n >= a.N {
			break
		}
		if ctx.Err() != nil {
			return r, fmt.Errorf("wait for river completions (%d of %d): %w", n, a.N, ctx.Err())
		}
		time.Sleep(10 * time.Millisecond)
	}
	r.Ops, r.Seconds = a.N, time.Since(start).Seconds()
	r.Note = fmt.Sprintf("ScheduledAt; client started %.2fs before the first due time; %d of %d inserted as scheduled (%.2fs, %.2fs before the first was due); "+
		"scheduled→available only by River's job scheduler (leader only, 5 s interval, 5 s look-ahead; a job due before the next pass waits for it): %s; then fetched by poll (%s)",
		time.UnixMilli(due0).Sub(clientStart).Seconds(), scheduled0, a.N, enqueued.Sub(start).Seconds(), time.UnixMilli(due0).Sub(enqueued).Seconds(), moved, riverFetchPollInterval)
	return r, nil
}

// countState counts River jobs in state.
func countState(ctx context.Context, db *sql.DB, state string) (int, error) {
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM river_job WHERE state = ?`, state).Scan(&n); err != nil {
		return 0, fmt.Errorf("count %s jobs: %w", state, err)
	}
	return n, nil
}

// sampleScheduled polls every 250 ms how many jobs are still scheduled, from
// scheduled0, until ctx ends or none is left, and describes each drop as
// "-Ns moved k" relative to the first due time due0 (Unix ms).
func sampleScheduled(ctx context.Context, db *sql.DB, scheduled0 int, due0 int64) string {
	var moves []string
	last := scheduled0
	for last > 0 && ctx.Err() == nil {
		n, err := countState(ctx, db, "scheduled")
		if err != nil {
			break
		}
		if n < last {
			at := time.Since(time.UnixMilli(due0)).Seconds()
			moves = append(moves, fmt.Sprintf("%d at %+.2fs", last-n, at))
			last = n
		}
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
	if len(moves) == 0 {
		return "no moves seen"
	}
	return "moved " + strings.Join(moves, ", ") + " (relative to the first due time, sampled every 250 ms)"
}
