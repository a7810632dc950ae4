package main

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite"
)

// sqliteDSN opens path in WAL mode with synchronous=NORMAL.
func sqliteDSN(path string) string {
	return "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=busy_timeout(10000)&_txlock=immediate"
}

// ceilingClaim is how many rows one claim takes.
const ceilingClaim = 100

// runCeiling measures the minimal pipeline: an enqueuer inserting batches of
// 1,000, a claimer taking 100 due rows per transaction, HTTP workers, and a
// recorder completing whatever results are ready in one transaction.
func runCeiling(a childArgs) (result, error) {
	var r result
	db, err := sql.Open("sqlite", sqliteDSN(filepath.Join(a.Dir, "ceiling.db")))
	if err != nil {
		return r, fmt.Errorf("open db: %w", err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE TABLE job (id INTEGER PRIMARY KEY, state INTEGER NOT NULL, run_at INTEGER NOT NULL, lease INTEGER NOT NULL DEFAULT 0, body TEXT NOT NULL, status INTEGER, done_at INTEGER) STRICT;
		CREATE INDEX job_due ON job (state, run_at)`); err != nil {
		return r, fmt.Errorf("create schema: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	client := newHTTPClient(a.Workers)

	m := startMeter()
	var enqErr, claimErr, recErr error
	var wg sync.WaitGroup
	var enqueued atomic.Int64
	wg.Add(1)
	go func() { // enqueuer
		defer wg.Done()
		enqErr = ceilingEnqueue(ctx, db, a.N, &enqueued)
	}()

	jobs := make(chan int64, ceilingClaim)
	results := make(chan [2]int64, a.Workers*4)
	wg.Add(1)
	go func() { // claimer
		defer wg.Done()
		defer close(jobs)
		claimErr = ceilingClaimLoop(ctx, db, a.N, &enqueued, jobs)
	}()
	var wwg sync.WaitGroup
	var sendErrs atomic.Int64
	for range a.Workers {
		wwg.Add(1)
		go func() {
			defer wwg.Done()
			for id := range jobs {
				st := int64(200)
				if err := sendOne(client, a.Provider, 0); err != nil {
					sendErrs.Add(1)
					st = 0
				}
				results <- [2]int64{id, st}
			}
		}()
	}
	go func() { wwg.Wait(); close(results) }()
	recErr = ceilingRecord(ctx, db, results)
	wg.Wait()
	m.stop(&r, a.N)
	for _, e := range []error{enqErr, claimErr, recErr} {
		if e != nil {
			return r, e
		}
	}
	var done int
	if err := db.QueryRow(`SELECT count(*) FROM job WHERE state = 2 AND status = 200`).Scan(&done); err != nil {
		return r, fmt.Errorf("count done: %w", err)
	}
	if done != a.N {
		return r, fmt.Errorf("check ceiling: %d of %d done (%d send errors)", done, a.N, sendErrs.Load())
	}
	return r, nil
}

// ceilingEnqueue inserts n rows in transactions of 1,000.
func ceilingEnqueue(ctx context.Context, db *sql.DB, n int, enqueued *atomic.Int64) error {
	for i := 0; i < n; i += 1000 {
		end := min(i+1000, n)
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("begin enqueue: %w", err)
		}
		st, err := tx.Prepare(`INSERT INTO job (id, state, run_at, body) VALUES (?, 0, ?, ?)`)
		if err != nil {
			_ = tx.Rollback()
			return fmt.Errorf("prepare enqueue: %w", err)
		}
		now := time.Now().UnixMilli()
		for id := i + 1; id <= end; id++ {
			if _, err := st.Exec(id, now, `{"method":"POST","path":"/x","body":{"n":1}}`); err != nil {
				_ = tx.Rollback()
				return fmt.Errorf("insert job: %w", err)
			}
		}
		_ = st.Close()
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("commit enqueue: %w", err)
		}
		enqueued.Store(int64(end))
	}
	return nil
}

// ceilingClaimLoop claims up to 100 due rows per transaction until n have
// been claimed, handing their ids to the workers.
func ceilingClaimLoop(ctx context.Context, db *sql.DB, n int, enqueued *atomic.Int64, jobs chan<- int64) error {
	claimed := 0
	ids := make([]int64, 0, ceilingClaim)
	for claimed < n {
		if ctx.Err() != nil {
			return fmt.Errorf("claim: %w", ctx.Err())
		}
		ids = ids[:0]
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("begin claim: %w", err)
		}
		now := time.Now().UnixMilli()
		rows, err := tx.Query(`UPDATE job SET state = 1, lease = lease + 1 WHERE id IN (SELECT id FROM job WHERE state = 0 AND run_at <= ? ORDER BY run_at LIMIT ?) RETURNING id`, now, ceilingClaim)
		if err != nil {
			_ = tx.Rollback()
			return fmt.Errorf("claim: %w", err)
		}
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				_ = rows.Close()
				_ = tx.Rollback()
				return fmt.Errorf("scan claim: %w", err)
			}
			ids = append(ids, id)
		}
		_ = rows.Close()
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("commit claim: %w", err)
		}
		if len(ids) == 0 {
			time.Sleep(time.Millisecond)
			continue
		}
		claimed += len(ids)
		for _, id := range ids {
			jobs <- id
		}
	}
	return nil
}

// ceilingRecord completes whatever results are waiting in one transaction
// with one prepared statement, until results closes.
func ceilingRecord(ctx context.Context, db *sql.DB, results <-chan [2]int64) error {
	batch := make([][2]int64, 0, 256)
	for first := range results {
		batch = append(batch[:0], first)
	drain:
		for len(batch) < cap(batch) {
			select {
			case x, ok := <-results:
				if !ok {
					break drain
				}
				batch = append(batch, x)
			default:
				break drain
			}
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("begin record: %w", err)
		}
		st, err := tx.Prepare(`UPDATE job SET state = 2, status = ?, done_at = ? WHERE id = ? AND state = 1`)
		if err != nil {
			_ = tx.Rollback()
			return fmt.Errorf("prepare record: %w", err)
		}
		now := time.Now().UnixMilli()
		for _, x := range batch {
			if _, err := st.Exec(x[1], now, x[0]); err != nil {
				_ = tx.Rollback()
				return fmt.Errorf("record: %w", err)
			}
		}
		_ = st.Close()
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("commit record: %w", err)
		}
	}
	return nil
}
