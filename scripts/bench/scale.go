package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The scale run's database: scaleFinished succeeded operations (each with
// its attempt and outcome), scaleFuture scheduled a month ahead,
// scalePausedDue due now in a paused scope, and scaleExpired left running
// with expired leases (recovered at start-up).
const (
	scaleFinished  = 899_000
	scaleFuture    = 100_000
	scalePausedDue = 100_000
	scaleExpired   = 1_000
)

// scaleResult is one pacer start on one database.
type scaleResult struct {
	label       string
	stored      int     // operations in the database before the run
	startup     float64 // seconds from exec to answering /healthz (lease recovery included)
	recovered   string  // what the start-up log says it recovered
	enqueueRate float64 // operations/s through POST /v1/operations/batch
	claimMeanMs float64 // mean claim transaction, from /metrics
	claims      float64
	ops         int
	rssMiB      float64
	bytesPerOp  float64 // database file size / stored operations, after the run
}

// runScale measures pacer on an empty database and on one with
// 1,000,000+ stored operations and 100,000 due in a paused scope: start-up
// time, enqueue rate, claim latency for the same work (n operations in an
// open scope), peak RSS and bytes per stored operation.
func runScale(ctx context.Context, n, workers int, provider, tmp, repo string) ([]scaleResult, error) {
	dir := filepath.Join(tmp, "scale")
	bin, err := buildPacer(ctx, repo, dir)
	if err != nil {
		return nil, err
	}
	var out []scaleResult
	for _, loaded := range []bool{false, true} {
		label, path := "empty", filepath.Join(dir, "empty.db")
		if loaded {
			label, path = "1M stored + 100k paused", filepath.Join(dir, "loaded.db")
		}
		stored := 0
		if loaded {
			fmt.Fprintf(os.Stderr, "scale: filling %s …\n", path)
			start := time.Now()
			if err := prepareScaleDB(ctx, bin, path, provider); err != nil {
				return nil, err
			}
			if err := fillScaleDB(ctx, path); err != nil {
				return nil, err
			}
			stored = scaleFinished + scaleFuture + scalePausedDue + scaleExpired
			fmt.Fprintf(os.Stderr, "scale: filled %d operations in %.0fs\n", stored, time.Since(start).Seconds())
		} else if err := prepareScaleDB(ctx, bin, path, provider); err != nil {
			return nil, err
		}
		r, err := scaleRun(ctx, bin, path, n, workers)
		if err != nil {
			return nil, fmt.Errorf("scale run on %s database: %w", label, err)
		}
		r.label, r.stored = label, stored
		if fi, err := os.Stat(path); err == nil && stored > 0 {
			r.bytesPerOp = float64(fi.Size()) / float64(stored+n)
		}
		out = append(out, r)
	}
	return out, nil
}

// prepareScaleDB creates the database with pacer's own schema and the
// scopes of the scale run ("open", "bulk" and "paused"), by starting the
// binary once and using its API.
func prepareScaleDB(ctx context.Context, bin, path, provider string) error {
	p, err := startPacer(ctx, bin, path, 8)
	if err != nil {
		return err
	}
	defer p.stop()
	for _, name := range []string{"open", "bulk", "paused"} {
		body := fmt.Sprintf(`{"provider":"generic","baseURL":%q,"maxConcurrent":64}`, provider)
		if _, err := call(ctx, p.hc, http.MethodPut, p.base+"/v1/scopes/"+name, body, http.StatusOK, http.StatusCreated); err != nil {
			return fmt.Errorf("create scope %s: %w", name, err)
		}
	}
	return nil
}

// fillScaleDB writes the stored operations straight into the stopped
// database with SQL (a recursive CTE per kind of row), shaped as pacer
// stores them: finished rows with a request and an answered attempt.
func fillScaleDB(ctx context.Context, path string) error {
	db, err := sql.Open("sqlite", sqliteDSN(path)+"&_pragma=foreign_keys(1)")
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	now := time.Now().UnixMilli()
	hour := int64(time.Hour / time.Millisecond)
	const insert = `
		WITH RECURSIVE seq(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM seq WHERE i < ?1)
		INSERT INTO operations (operation_id, scope_id, state, attempt, budget_attempts, next_attempt_at, answered_attempt,
			created_at, updated_at, deadline, lease_token, lease_expires_at, first_sent_at)
		SELECT ?2 || i, (SELECT id FROM scopes WHERE name = ?3), ?4, ?5, ?5, ?6, ?7,
			?8, ?8, ?8 + 86400000, ?5, ?9, ?10
		FROM seq`
	// The requests of the rows just inserted (row ID ?1 on).
	const insertRequests = `
		INSERT INTO operation_requests (id, kind, method, path, headers, body, content_type,
			request_identity, content_hash, max_attempts, max_elapsed_ms)
		SELECT id, 'mutation', 'POST', '/v1/things', '{"Accept":"application/json"}',
			CAST('{"n":' || id || '}' AS BLOB), 'application/json', 'pacer-' || operation_id, 'sha256-' || operation_id, 5, 86400000
		FROM operations WHERE id >= ?1`
	result := `{"status":200,"headers":{"Content-Type":"application/json"},"body":"eyJvayI6dHJ1ZX0="}`
	batches := []struct {
		n                   int
		prefix, scope, st   string
		attempt             int
		next, lease, sentAt any
		answered            any
	}{
		{scaleFinished, "done-", "bulk", "succeeded", 1, nil, nil, now - hour, 1},
		{scaleFuture, "later-", "bulk", "scheduled", 0, now + 30*24*hour, nil, nil, nil},
		{scalePausedDue, "paused-", "paused", "scheduled", 0, now - hour, nil, nil, nil},
		{scaleExpired, "expired-", "bulk", "running", 1, nil, now - hour, now - 2*hour, nil},
	}
	for _, b := range batches {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("fill %s: %w", b.prefix, err)
		}
		var firstID int64
		if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(id), 0) + 1 FROM operations`).Scan(&firstID); err != nil {
			tx.Rollback()
			return fmt.Errorf("fill %s: %w", b.prefix, err)
		}
		_, err = tx.ExecContext(ctx, insert, b.n, b.prefix, b.scope, b.st, b.attempt, b.next, b.answered,
			now-2*hour, b.lease, b.sentAt)
		if err == nil {
			_, err = tx.ExecContext(ctx, insertRequests, firstID)
		}
		if err == nil && b.attempt > 0 {
			// One attempt per sent operation: finished, with the
			// operation's outcome and result, for the succeeded; an open
			// intent for the running.
			_, err = tx.ExecContext(ctx, `
				INSERT INTO attempts (operation_id, number, lease_token, started_at, finished_at, class, status, reason, answer, decided_state, decision)
				SELECT id, 1, 1, first_sent_at,
					CASE WHEN state = 'succeeded' THEN first_sent_at + 120 END,
					CASE WHEN state = 'succeeded' THEN 'success' END,
					CASE WHEN state = 'succeeded' THEN 200 END,
					CASE WHEN state = 'succeeded' THEN '2xx' ELSE '' END,
					CASE WHEN state = 'succeeded' THEN ?2 END,
					CASE WHEN state = 'succeeded' THEN 'succeeded' END,
					CASE WHEN state = 'succeeded' THEN 'succeeded' ELSE '' END
				FROM operations WHERE id >= ?1`, firstID, result)
		}
		if err != nil {
			tx.Rollback()
			return fmt.Errorf("fill %s: %w", b.prefix, err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("fill %s: %w", b.prefix, err)
		}
	}
	if _, err := db.ExecContext(ctx, `UPDATE scopes SET paused_until = ?, pause_reason = 'scale run: paused for a day' WHERE name = 'paused'`, now+24*hour); err != nil {
		return fmt.Errorf("pause scope: %w", err)
	}
	if _, err := db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// scaleRun starts pacer on path, measures its start-up, enqueues n
// operations due now in the open scope, waits until they are done and
// reads the claim figures from /metrics.
func scaleRun(ctx context.Context, bin, path string, n, workers int) (scaleResult, error) {
	var r scaleResult
	start := time.Now()
	p, err := startPacer(ctx, bin, path, workers)
	if err != nil {
		return r, err
	}
	defer p.stop()
	r.startup = time.Since(start).Seconds()
	r.recovered = p.recoveredNote()

	before, _, err := claimMetrics(ctx, p.hc, p.base)
	if err != nil {
		return r, err
	}
	enqStart := time.Now()
	err = enqueueAll(ctx, p.hc, p.base, n, func(j int) string {
		return fmt.Sprintf(`{"operationId":"new-%d","providerScope":"open","request":{"method":"POST","path":"/x","body":{"n":1}}}`, j)
	})
	if err != nil {
		return r, err
	}
	r.enqueueRate = float64(n) / time.Since(enqStart).Seconds()
	for {
		if err := ctx.Err(); err != nil {
			return r, err
		}
		// Done when no operation of the open scope is due or running.
		if empty, err := statesEmpty(ctx, p.hc, p.base, "open", []string{"scheduled", "waitingForBudget", "running"}); err != nil {
			return r, err
		} else if empty {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	after, claims, err := claimMetrics(ctx, p.hc, p.base)
	if err != nil {
		return r, err
	}
	r.claims = claims
	if claims > 0 {
		r.claimMeanMs = (after - before) / claims * 1000
	}
	r.ops = n
	if hwm, err := procHWM(p.cmd.Process.Pid); err == nil {
		r.rssMiB = float64(hwm) / 1024
	}
	return r, nil
}

// claimMetrics reads the sum (seconds) and count of
// pacer_claim_duration_seconds from /metrics.
func claimMetrics(ctx context.Context, hc *http.Client, base string) (sum, count float64, err error) {
	out, err := call(ctx, hc, http.MethodGet, base+"/metrics", "", http.StatusOK)
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "pacer_claim_duration_seconds_sum "); ok {
			sum, _ = strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
		if v, ok := strings.CutPrefix(line, "pacer_claim_duration_seconds_count "); ok {
			count, _ = strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return sum, count, nil
}

// pacerProc is a running pacer serve with its log.
type pacerProc struct {
	cmd     *exec.Cmd
	base    string
	hc      *http.Client
	logPath string
}

// startPacer starts `pacer serve` on the database at path and a free
// loopback port, with extra flags, and returns once it answers /healthz
// (polled every 2 ms).
func startPacer(ctx context.Context, bin, path string, workers int, extra ...string) (*pacerProc, error) {
	return startPacerOn(ctx, bin, path, path+".log", nil, workers, extra...)
}

// startPacerOn is startPacer on the database db (a SQLite path or a
// postgres:// URL), logging to logPath, with env added to the process's
// environment.
func startPacerOn(ctx context.Context, bin, db, logPath string, env []string, workers int, extra ...string) (*pacerProc, error) {
	path := db
	addr, err := freeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create log: %w", err)
	}
	defer logf.Close()
	args := append([]string{"serve", "--db", path, "--listen", addr, "--workers", strconv.Itoa(workers),
		"--log-level", "info", "--retention", "0"}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start pacer: %w", err)
	}
	p := &pacerProc{cmd: cmd, base: "http://" + addr, hc: &http.Client{Timeout: 60 * time.Second}, logPath: logPath}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if resp, err := p.hc.Get(p.base + "/healthz"); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, nil
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	stopProcess(cmd)
	return nil, fmt.Errorf("pacer did not answer /healthz within 60s (log: %s)", logPath)
}

// stop ends the process gracefully.
func (p *pacerProc) stop() { stopProcess(p.cmd) }

// recoveredNote returns the start-up log's count of recovered leases.
func (p *pacerProc) recoveredNote() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, "recovered leases") {
			if i := strings.Index(line, `"count":`); i >= 0 {
				return "recovered " + strings.TrimRight(strings.Fields(line[i+8:] + " ")[0], ",}") + " leases"
			}
			return "recovered leases"
		}
	}
	return ""
}

// buildPacer builds the pacer binary from the repository root into dir,
// creating dir.
func buildPacer(ctx context.Context, repo, dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("make dir: %w", err)
	}
	repoAbs, err := filepath.Abs(repo)
	if err != nil {
		return "", fmt.Errorf("resolve repo: %w", err)
	}
	bin := filepath.Join(dir, "pacer")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	build.Dir = repoAbs
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("build pacer in %s: %w", repoAbs, err)
	}
	return bin, nil
}

// printScale writes the scale results and the loaded/empty ratios.
func printScale(w io.Writer, rs []scaleResult) {
	fmt.Fprintln(w, "\n| database | stored ops | start-up s | enqueue ops/s | claim mean ms | claims | peak RSS MiB | bytes/op | note |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
	for _, r := range rs {
		perOp := "—"
		if r.bytesPerOp > 0 {
			perOp = fmt.Sprintf("%.0f", r.bytesPerOp)
		}
		fmt.Fprintf(w, "| %s | %d | %.3f | %.0f | %.3f | %.0f | %.1f | %s | %s |\n", r.label, r.stored, r.startup, r.enqueueRate, r.claimMeanMs, r.claims, r.rssMiB, perOp, r.recovered)
	}
	if len(rs) == 2 {
		e, l := rs[0], rs[1]
		fmt.Fprintf(w, "\nloaded/empty: claim latency %.2f×, enqueue rate %.2f×, start-up %.2f×, peak RSS %.2f×\n",
			ratio(l.claimMeanMs, e.claimMeanMs), ratio(l.enqueueRate, e.enqueueRate), ratio(l.startup, e.startup), ratio(l.rssMiB, e.rssMiB))
	}
}
