package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
)

// River's tuned fetch settings (defaults: 100 ms cooldown, 1 s poll).
const (
	riverFetchCooldown     = 2 * time.Millisecond
	riverFetchPollInterval = 20 * time.Millisecond
)

// benchArgs is the River job: one HTTP call to the provider.
type benchArgs struct{}

// Kind names the job kind.
func (benchArgs) Kind() string { return "bench" }

// benchWorker sends one request per job.
type benchWorker struct {
	river.WorkerDefaults[benchArgs]
	client *http.Client
	url    string
	done   *atomic.Int64
}

// Work does the job's HTTP call.
func (w *benchWorker) Work(ctx context.Context, _ *river.Job[benchArgs]) error {
	if err := sendOne(w.client, w.url, 0); err != nil {
		return err
	}
	w.done.Add(1)
	return nil
}

// runRiver measures River on SQLite: jobs inserted with InsertMany in batches
// of 1,000 while the client runs, until all N are completed in the database.
func runRiver(a childArgs) (result, error) {
	var r result
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var done atomic.Int64
	workers := river.NewWorkers()
	river.AddWorker(workers, &benchWorker{client: newHTTPClient(a.Workers), url: a.Provider, done: &done})
	db, client, err := newRiverClient(ctx, filepath.Join(a.Dir, "river.db"), workers, a.Workers)
	if err != nil {
		return r, err
	}
	defer db.Close()
	m := startMeter()
	if err := client.Start(ctx); err != nil {
		return r, fmt.Errorf("start river: %w", err)
	}
	for i := 0; i < a.N; i += 1000 {
		end := min(i+1000, a.N)
		params := make([]river.InsertManyParams, end-i)
		for j := range params {
			params[j] = river.InsertManyParams{Args: benchArgs{}}
		}
		if _, err := client.InsertMany(ctx, params); err != nil {
			return r, fmt.Errorf("insert river jobs: %w", err)
		}
	}
	for {
		if ctx.Err() != nil {
			return r, fmt.Errorf("wait for river (%d of %d worked): %w", done.Load(), a.N, ctx.Err())
		}
		time.Sleep(10 * time.Millisecond)
		if done.Load() < int64(a.N) {
			continue
		}
		var n int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM river_job WHERE state = 'completed'`).Scan(&n); err != nil {
			return r, fmt.Errorf("count completed: %w", err)
		}
		if n >= a.N {
			break
		}
	}
	m.stop(&r, a.N)
	r.Note = fmt.Sprintf("fetchCooldown=%s fetchPoll=%s", riverFetchCooldown, riverFetchPollInterval)
	stopCtx, stopCancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer stopCancel()
	_ = client.Stop(stopCtx)
	return r, nil
}

// newRiverClient opens a River database at path (one connection, as
// riversqlite's documentation asks), migrates it and makes a client with
// maxWorkers workers on the default queue and the tuned fetch settings. The
// caller closes db.
func newRiverClient(ctx context.Context, path string, workers *river.Workers, maxWorkers int) (*sql.DB, *river.Client[*sql.Tx], error) {
	db, err := sql.Open("sqlite", sqliteDSN(path))
	if err != nil {
		return nil, nil, fmt.Errorf("open db: %w", err)
	}
	db.SetMaxOpenConns(1)
	migrator, err := rivermigrate.New(riversqlite.New(db), nil)
	if err != nil {
		_ = db.Close()
		return nil, nil, fmt.Errorf("make migrator: %w", err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		_ = db.Close()
		return nil, nil, fmt.Errorf("migrate river: %w", err)
	}
	client, err := river.NewClient(riversqlite.New(db), &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: maxWorkers}},
		Workers:           workers,
		FetchCooldown:     riverFetchCooldown,
		FetchPollInterval: riverFetchPollInterval,
		Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
		JobTimeout:        30 * time.Second,
	})
	if err != nil {
		_ = db.Close()
		return nil, nil, fmt.Errorf("make river client: %w", err)
	}
	return db, client, nil
}
