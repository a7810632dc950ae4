// Command pacerbench measures, in one run on one machine, the throughput and
// cost of three ways to "claim, send, record" N operations against the same
// loopback provider running in a separate process:
//
//   - ceiling: a minimal claim(100) → 50 HTTP workers → batched record
//     pipeline on SQLite (modernc.org/sqlite, WAL, synchronous=NORMAL);
//   - river: River with its SQLite driver and tuned fetch settings, each job
//     doing the same HTTP call;
//   - pacer: the real pacer binary, built from the repository root, driven
//     through its HTTP API.
//
// A fourth row, loopback, measures the same HTTP calls with no database: the
// machine's own limit for the ceiling.
//
// Two lateness rows, pacer-lateness and river-lateness, offer a steady
// -lateness-rate operations per second for -lateness-seconds: all are
// enqueued up front (pacer: batch API with notBefore; River: InsertMany with
// ScheduledAt), each due at its own whole millisecond, and each request
// carries its due time in X-Bench-Due. The provider measures lateness
// (arrival − due) and early sends; a second table shows p50/p99/max.
//
// A scale run (-only scale; not in the default set: it fills a database of
// 1,100,000 operations first, ~45 s) starts the pacer binary on an empty
// database and on one holding 1,000,000 stored operations (succeeded with
// their attempts, scheduled a month ahead, and 1,000 running with expired
// leases) plus 100,000 due in a paused scope, and reports start-up time
// (lease recovery included), enqueue rate, mean claim transaction, peak RSS
// and bytes per stored operation for the same min(-n, 20000) operations.
//
// An idle run (-only idle; not in the default set, ~45 s) measures the CPU
// the pacer binary uses over 20 s with an empty database and with a scope
// held back only by its budget reserve (design §11 "Idle is idle").
//
// Usage: cd scripts/bench && go run . [-n 20000] [-only loopback,ceiling,river,pacer,pacer-lateness,river-lateness,enqueue-single,scale,idle] [-lateness-rate 500] [-lateness-seconds 10] [-baseline-repo DIR]
//
// An enqueue-single row has 32 concurrent clients enqueue -n operations
// through POST /v1/operations, one operation per request, each due an hour
// later (so nothing is sent): enqueues per second and the pacer process's
// CPU. With -baseline-repo (a checkout of an older commit, e.g. a git
// worktree), the row runs against that repository's binary first
// (enqueue-single@base) and the ratio is printed.
//
// The binary re-executes itself for the provider ("provider") and for the
// loopback, ceiling and River runs ("loopback", "ceiling", "river",
// "river-lateness"), so every system's CPU time and
// peak RSS are its own process's.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// result is what one measured run reports.
type result struct {
	Name    string  `json:"name"`
	Ops     int     `json:"ops"`
	Seconds float64 `json:"seconds"`
	CPUMs   float64 `json:"cpuMs"`
	RSSKiB  int64   `json:"rssKiB"`
	// ServerCPUMs is the PostgreSQL server's CPU over the run (the
	// PostgreSQL rows only).
	ServerCPUMs float64 `json:"serverCpuMs,omitempty"`
	Note        string  `json:"note,omitempty"`
	Err         string  `json:"err,omitempty"`
}

// opsPerSec is the run's throughput.
func (r result) opsPerSec() float64 {
	if r.Seconds <= 0 {
		return 0
	}
	return float64(r.Ops) / r.Seconds
}

// cpuPer1k is the run's CPU time per 1,000 operations, in milliseconds.
func (r result) cpuPer1k() float64 {
	if r.Ops == 0 {
		return 0
	}
	return r.CPUMs / float64(r.Ops) * 1000
}

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "provider":
			runProvider()
			return
		case "loopback", "ceiling", "river", "pg-ceiling", "pg-river":
			runChild(os.Args[1], os.Args[2:])
			return
		case "river-lateness":
			runRiverLatenessChild(os.Args[2:])
			return
		}
	}
	n := flag.Int("n", 20000, "operations per system")
	only := flag.String("only", "loopback,ceiling,river,pacer,pacer-lateness,river-lateness,enqueue-single", "comma-separated systems to run (loopback: HTTP calls alone, a reference; pg: the PostgreSQL rows pg-ceiling, pg-river, pg-pacer, pg-pacer2 (two processes), pg-pacer-lateness, not in the default set; *-lateness: send time versus due time; enqueue-single: 32 clients each posting one operation per request; scale: 1M stored vs empty, not in the default set; idle: CPU while every scope waits, not in the default set)")
	workers := flag.Int("workers", 50, "HTTP workers for every system (pacer --workers)")
	timeout := flag.Duration("timeout", 5*time.Minute, "bound on each system's run")
	repo := flag.String("repo", "../..", "pacer repository root (for go build)")
	baseline := flag.String("baseline-repo", "", "a second pacer repository root (an older commit's worktree): the enqueue-single row also runs against it, first, and prints the ratio")
	pgSettings := flag.String("pg-settings", "autovacuum_naptime=1s", "comma-separated name=value settings of the PostgreSQL rows' server (pgserve -set)")
	var lc latenessConfig
	flag.Float64Var(&lc.Rate, "lateness-rate", 500, "operations per second offered in the lateness runs (due times spread evenly)")
	flag.Float64Var(&lc.Seconds, "lateness-seconds", 10, "seconds of due times in the lateness runs")
	flag.StringVar(&lc.KeyHeader, "idempotency-header", "", "the pacer scopes' idempotency header (e.g. Idempotency-Key): their mutations then need no sync before they leave; empty: every claim batch is synced (design §11)")
	flag.Parse()
	if err := run(*n, *only, *workers, *timeout, *repo, *baseline, *pgSettings, lc); err != nil {
		fmt.Fprintln(os.Stderr, "pacerbench:", err)
		os.Exit(1)
	}
}

// run starts the provider, measures each selected system and prints the table.
func run(n int, only string, workers int, timeout time.Duration, repo, baseline, pgSettings string, lc latenessConfig) error {
	if n <= 0 {
		return fmt.Errorf("check flags: -n must be positive")
	}
	tmp, err := os.MkdirTemp("", "pacerbench-")
	if err != nil {
		return fmt.Errorf("make temp dir: %w", err)
	}
	defer os.RemoveAll(tmp)
	prov, err := startProvider()
	if err != nil {
		return err
	}
	defer prov.stop()
	fmt.Fprintf(os.Stderr, "provider at %s (pid %d), n=%d, workers=%d\n", prov.url, prov.cmd.Process.Pid, n, workers)

	var systems []string
	for _, sys := range strings.Split(only, ",") {
		if sys = strings.TrimSpace(sys); sys == "pg" {
			systems = append(systems, pgSystems...)
		} else {
			systems = append(systems, sys)
		}
	}
	var pg *pgServer
	if slices.ContainsFunc(systems, func(s string) bool { return strings.HasPrefix(s, "pg-") }) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		pg, err = startPGServer(ctx, repo, filepath.Join(tmp, "pgserve"), pgSettings)
		cancel()
		if err != nil {
			return err
		}
		defer pg.stop()
		fmt.Fprintf(os.Stderr, "postgres at %s\n", pg.url)
	}

	var results []result
	var lateness []latenessRow
	var scale []scaleResult
	var idle []idleResult
	for _, sys := range systems {
		var r result
		switch sys {
		case "loopback", "ceiling", "river":
			r = runInChild(sys, n, workers, prov.url, tmp, timeout)
		case "pg-ceiling", "pg-river":
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			db, err := pg.newDatabase(ctx, sys)
			cancel()
			if err != nil {
				r.Err = err.Error()
				break
			}
			srv0, err := pg.cpuMs()
			if err != nil {
				r.Err = err.Error()
				break
			}
			r = runInChildOn(sys, n, workers, prov.url, tmp, db, timeout)
			if srv1, err := pg.cpuMs(); err == nil {
				r.ServerCPUMs = srv1 - srv0
			}
		case "pg-pacer", "pg-pacer2":
			procs := 1
			if sys == "pg-pacer2" {
				procs = 2
			}
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			var err error
			if r, err = runPacerPG(ctx, n, workers, procs, prov.url, tmp, repo, lc.KeyHeader, pg); err != nil {
				r.Err = err.Error()
			}
			cancel()
		case "pacer":
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			r = runPacer(ctx, n, workers, prov.url, tmp, repo, lc.KeyHeader)
			cancel()
		case "enqueue-single":
			if baseline != "" {
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				b := runEnqueueSingle(ctx, n, prov.url, tmp, baseline, "enqueue-single-base")
				cancel()
				b.Name = "enqueue-single@base"
				reportRun(b)
				results = append(results, b)
			}
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			r = runEnqueueSingle(ctx, n, prov.url, tmp, repo, "enqueue-single")
			cancel()
		case "scale":
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			rs, err := runScale(ctx, min(n, 20000), workers, prov.url, tmp, repo)
			cancel()
			if err != nil {
				fmt.Fprintf(os.Stderr, "scale: error: %v\n", err)
				continue
			}
			scale = rs
			continue
		case "idle":
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			rs, err := runIdle(ctx, tmp, repo, 20*time.Second)
			cancel()
			if err != nil {
				fmt.Fprintf(os.Stderr, "idle: error: %v\n", err)
			}
			idle = rs
			continue
		case "pacer-lateness", "river-lateness", "pg-pacer-lateness":
			lr := runLateness(sys, lc, workers, prov.url, tmp, repo, timeout, pg)
			if lr.Err != "" {
				fmt.Fprintf(os.Stderr, "%s: error: %s\n", sys, lr.Err)
			} else {
				fmt.Fprintf(os.Stderr, "%s: %d ops, lateness p50 %.1f ms, p99 %.1f ms\n", sys, lr.Stats.Count, lr.Stats.P50, lr.Stats.P99)
			}
			lateness = append(lateness, lr)
			if pg != nil {
				dropPGDatabases(pg, timeout)
			}
			continue
		case "":
			continue
		default:
			return fmt.Errorf("check flags: unknown system %q", sys)
		}
		if pg != nil {
			dropPGDatabases(pg, timeout)
		}
		r.Name = sys
		reportRun(r)
		results = append(results, r)
	}
	printTable(os.Stdout, results, n, workers)
	printLatenessTable(os.Stdout, lateness)
	if scale != nil {
		printScale(os.Stdout, scale)
	}
	if idle != nil {
		printIdle(os.Stdout, idle)
	}
	return nil
}

// dropPGDatabases drops the PostgreSQL rows' databases after a row,
// reporting a failure on stderr.
func dropPGDatabases(pg *pgServer, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := pg.dropDatabases(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "pacerbench:", err)
	}
}

// reportRun writes one run's outcome to stderr as it ends.
func reportRun(r result) {
	if r.Err != "" {
		fmt.Fprintf(os.Stderr, "%s: error: %s\n", r.Name, r.Err)
	} else {
		fmt.Fprintf(os.Stderr, "%s: %d ops in %.2fs\n", r.Name, r.Ops, r.Seconds)
	}
}

// childArgs is the JSON handed to a re-executed ceiling or river child.
type childArgs struct {
	N        int    `json:"n"`
	Workers  int    `json:"workers"`
	Provider string `json:"provider"`
	Dir      string `json:"dir"`
	// DB is the PostgreSQL rows' database URL.
	DB string `json:"db,omitempty"`
}

// decodeResult parses a child's JSON result line.
func decodeResult(b []byte) (result, error) {
	var r result
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil {
		return r, fmt.Errorf("decode child result %q: %w", string(b), err)
	}
	return r, nil
}
