package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// The PostgreSQL rows (-only pg-ceiling,pg-river,pg-pacer,pg-pacer2,
// pg-pacer-lateness, or -only pg for all of them) run on one throwaway
// PostgreSQL 15 server, started once per run by the pacer repository's
// internal/pgserver/cmd/pgserve (durable: synchronous_commit on; the
// throwaway server's fsync is off, the same for every system), with
// -pg-settings (default autovacuum_naptime=1s: the tables of a fresh
// database get statistics within seconds, as a long-running server's
// have them, rather than after the first minute, which these runs do
// not reach), each row on a database of its own:
//
//   - pg-ceiling: claim(100) with FOR UPDATE SKIP LOCKED → 50 HTTP workers
//     → batched record, raw pgx;
//   - pg-river: River on riverpgxv5, with the SQLite row's fetch settings;
//   - pg-pacer and pg-pacer2: the pacer binary with --db postgres://…, one
//     process, or two sharing the database and PACER_SECRET_KEY, the
//     enqueue batches alternating between them (CPU: both processes');
//   - pg-pacer-lateness: the pacer-lateness row on PostgreSQL.

// pgSystems are the PostgreSQL rows, in the order -only pg runs them.
var pgSystems = []string{"pg-ceiling", "pg-river", "pg-pacer", "pg-pacer2", "pg-pacer-lateness"}

// pgServer is the throwaway server: the pgserve process and its URL.
type pgServer struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	url   string
	key   string // the pacer processes' PACER_SECRET_KEY
	dbs   atomic.Int64
	mu    sync.Mutex
	made  []string // databases not yet dropped
}

// startPGServer builds pgserve from repo into dir, starts it with
// settings (comma-separated name=value server settings) and reads the URL
// it prints.
func startPGServer(ctx context.Context, repo, dir, settings string) (*pgServer, error) {
	repoAbs, err := filepath.Abs(repo)
	if err != nil {
		return nil, fmt.Errorf("resolve repo: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("make dir: %w", err)
	}
	bin := filepath.Join(dir, "pgserve")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./internal/pgserver/cmd/pgserve")
	build.Dir = repoAbs
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return nil, fmt.Errorf("build pgserve in %s: %w", repoAbs, err)
	}
	var args []string
	for _, set := range strings.Split(settings, ",") {
		if set = strings.TrimSpace(set); set != "" {
			args = append(args, "-set", set)
		}
	}
	cmd := exec.Command(bin, args...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("start pgserve: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("start pgserve: %w", err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start pgserve: %w", err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "postgres://") {
		_ = stdin.Close()
		_ = cmd.Wait()
		return nil, fmt.Errorf("start pgserve: read its URL: %q, %v", line, err)
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("make key: %w", err)
	}
	return &pgServer{cmd: cmd, stdin: stdin, url: strings.TrimSpace(line), key: base64.StdEncoding.EncodeToString(key)}, nil
}

// stop ends the server (pgserve stops it when its stdin closes).
func (s *pgServer) stop() {
	_ = s.stdin.Close()
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
}

// cpuMs is the server's CPU time so far (user+system, ms): the postmaster
// (pgserve's child) with its reaped children, and its live children
// (backends, background workers).
func (s *pgServer) cpuMs() (float64, error) {
	stats, err := procStats()
	if err != nil {
		return 0, err
	}
	var postmaster int
	for pid, st := range stats {
		if st.ppid == s.cmd.Process.Pid {
			postmaster = pid
		}
	}
	if postmaster == 0 {
		return 0, fmt.Errorf("find the postmaster under pgserve (pid %d)", s.cmd.Process.Pid)
	}
	sum := stats[postmaster].self + stats[postmaster].children
	for _, st := range stats {
		if st.ppid == postmaster {
			sum += st.self
		}
	}
	return sum, nil
}

// procStat is what procStats reads of a process: its parent, its own CPU
// (ms) and that of its reaped children.
type procStat struct {
	ppid           int
	self, children float64
}

// procStats reads every process's procStat from /proc.
func procStats() (map[int]procStat, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("read /proc: %w", err)
	}
	out := map[int]procStat{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // ended meanwhile
		}
		st := string(b)
		f := strings.Fields(st[strings.LastIndexByte(st, ')')+2:])
		if len(f) < 15 {
			continue
		}
		var v [5]float64
		for i, k := range []int{1, 11, 12, 13, 14} { // ppid, utime, stime, cutime, cstime
			v[i], _ = strconv.ParseFloat(f[k], 64)
		}
		out[pid] = procStat{ppid: int(v[0]), self: (v[1] + v[2]) * 1000 / clockTicks, children: (v[3] + v[4]) * 1000 / clockTicks}
	}
	return out, nil
}

// newDatabase creates a fresh database for one row and returns its URL.
func (s *pgServer) newDatabase(ctx context.Context, row string) (string, error) {
	name := fmt.Sprintf("bench_%s_%d", strings.ReplaceAll(row, "-", "_"), s.dbs.Add(1))
	conn, err := pgx.Connect(ctx, s.url)
	if err != nil {
		return "", fmt.Errorf("connect to postgres: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	s.mu.Lock()
	s.made = append(s.made, name)
	s.mu.Unlock()
	u, err := url.Parse(s.url)
	if err != nil {
		return "", fmt.Errorf("parse %s: %w", s.url, err)
	}
	u.Path = "/" + name
	return u.String(), nil
}

// dropDatabases drops the databases the rows so far made (their
// processes have ended), so that the server's autovacuum does not work on
// them during the next rows.
func (s *pgServer) dropDatabases(ctx context.Context) error {
	s.mu.Lock()
	names := s.made
	s.made = nil
	s.mu.Unlock()
	if len(names) == 0 {
		return nil
	}
	conn, err := pgx.Connect(ctx, s.url)
	if err != nil {
		return fmt.Errorf("connect to postgres: %w", err)
	}
	defer conn.Close(context.Background())
	for _, name := range names {
		if _, err := conn.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
			return fmt.Errorf("drop database %s: %w", name, err)
		}
	}
	return nil
}

// runPacerPG is the pacer row on PostgreSQL with procs processes: as
// runPacer, the enqueue batches alternating between the processes, CPU
// and peak RSS summed over them.
func runPacerPG(ctx context.Context, n, workers, procs int, provider, tmp, repo, keyHeader string, srv *pgServer) (result, error) {
	var r result
	db, err := srv.newDatabase(ctx, fmt.Sprintf("pacer%d", procs))
	if err != nil {
		return r, err
	}
	dir := filepath.Join(tmp, fmt.Sprintf("pg-pacer%d", procs))
	bin, err := buildPacer(ctx, repo, dir)
	if err != nil {
		return r, err
	}
	profileTo := os.Getenv("PACERBENCH_CPUPROFILE")
	var ps []*pacerProc
	var debug []string
	defer func() {
		for _, p := range ps {
			p.stop()
		}
	}()
	for i := range procs {
		var extra []string
		if profileTo != "" {
			addr, err := freeLoopbackAddr()
			if err != nil {
				return r, err
			}
			extra, debug = []string{"--debug-listen", addr}, append(debug, addr)
		}
		p, err := startPacerOn(ctx, bin, db, filepath.Join(dir, fmt.Sprintf("pacer-%d.log", i)), []string{"PACER_SECRET_KEY=" + srv.key}, workers, extra...)
		if err != nil {
			return r, err
		}
		ps = append(ps, p)
	}
	if err := createBenchScopes(ctx, ps[0].hc, ps[0].base, provider, keyHeader); err != nil {
		return r, err
	}
	cpu := func() (float64, error) {
		var sum float64
		for _, p := range ps {
			c, err := procCPUMs(p.cmd.Process.Pid)
			if err != nil {
				return 0, err
			}
			sum += c
		}
		return sum, nil
	}
	cpu0, err := cpu()
	if err != nil {
		return r, err
	}
	srv0, err := srv.cpuMs()
	if err != nil {
		return r, err
	}
	profiled := make([]chan error, len(debug))
	for i, addr := range debug {
		profiled[i] = make(chan error, 1)
		go func() { profiled[i] <- fetchProfile(ctx, addr, fmt.Sprintf("%s.pg-pacer%d-%d", profileTo, procs, i)) }()
	}
	if os.Getenv("PACERBENCH_PGSAMPLE") != "" {
		sampler, err := startPGSampler(db)
		if err != nil {
			return r, err
		}
		defer sampler.stop(os.Stderr, fmt.Sprintf("pg-pacer%d", procs))
	}
	start := time.Now()
	var b strings.Builder
	for i, k := 0, 0; i < n; i, k = i+1000, k+1 {
		b.Reset()
		b.WriteString(`{"operations":[`)
		for j := i; j < min(i+1000, n); j++ {
			if j > i {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"operationId":"op-%d","providerScope":"bench-%d","request":{"method":"POST","path":"/x","body":{"n":1}}}`, j, j%pacerScopes)
		}
		b.WriteString(`]}`)
		p := ps[k%len(ps)]
		if err := enqueueBatch(ctx, p.hc, p.base, b.String()); err != nil {
			return r, err
		}
	}
	enqSecs := time.Since(start).Seconds()
	if err := waitPacerDone(ctx, ps[0].hc, ps[0].base); err != nil {
		return r, err
	}
	r.Seconds = time.Since(start).Seconds()
	cpu1, err := cpu()
	if err != nil {
		return r, err
	}
	r.CPUMs = cpu1 - cpu0
	srv1, err := srv.cpuMs()
	if err != nil {
		return r, err
	}
	r.ServerCPUMs = srv1 - srv0
	var claims float64
	for _, p := range ps {
		rss, _ := procHWM(p.cmd.Process.Pid)
		r.RSSKiB += rss
		c, _ := claimCount(ctx, p.hc, p.base)
		claims += c
	}
	r.Ops = n
	r.Note = fmt.Sprintf("%d process(es); enqueue %.2fs", procs, enqSecs)
	if claims > 0 {
		r.Note += fmt.Sprintf("; %.0f claims (%.1f ops each)", claims, float64(n)/claims)
	}
	for _, c := range profiled {
		if err := <-c; err != nil {
			return r, err
		}
	}
	return r, nil
}

// openPGPool opens a pool of size conns on the database at url.
func openPGPool(ctx context.Context, dbURL string, conns int32) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", dbURL, err)
	}
	cfg.MaxConns = conns
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	return pool, nil
}

// runCeilingPG is the ceiling on PostgreSQL: an enqueuer inserting
// batches of 1,000 (one statement each), a claimer taking 100 due rows per
// transaction (FOR UPDATE SKIP LOCKED), HTTP workers, and a recorder
// completing whatever results are ready in one statement.
func runCeilingPG(a childArgs) (result, error) {
	var r result
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	pool, err := openPGPool(ctx, a.DB, 4)
	if err != nil {
		return r, err
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `CREATE TABLE job (id BIGINT PRIMARY KEY, state INTEGER NOT NULL, run_at BIGINT NOT NULL,
		lease INTEGER NOT NULL DEFAULT 0, body TEXT NOT NULL, status INTEGER, done_at BIGINT);
		CREATE INDEX job_due ON job (state, run_at)`); err != nil {
		return r, fmt.Errorf("create schema: %w", err)
	}
	client := newHTTPClient(a.Workers)

	m := startMeter()
	var enqErr, claimErr, recErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // enqueuer
		defer wg.Done()
		for i := 0; i < a.N && enqErr == nil; i += 1000 {
			ids := make([]int64, 0, 1000)
			for id := i + 1; id <= min(i+1000, a.N); id++ {
				ids = append(ids, int64(id))
			}
			_, err := pool.Exec(ctx, `INSERT INTO job (id, state, run_at, body)
				SELECT id, 0, $2, $3 FROM unnest($1::bigint[]) AS id`, ids, time.Now().UnixMilli(), `{"method":"POST","path":"/x","body":{"n":1}}`)
			if err != nil {
				enqErr = fmt.Errorf("insert jobs: %w", err)
			}
		}
	}()
	jobs := make(chan int64, ceilingClaim)
	results := make(chan [2]int64, a.Workers*4)
	wg.Add(1)
	go func() { // claimer
		defer wg.Done()
		defer close(jobs)
		for claimed := 0; claimed < a.N; {
			if ctx.Err() != nil {
				claimErr = fmt.Errorf("claim: %w", ctx.Err())
				return
			}
			rows, err := pool.Query(ctx, `UPDATE job SET state = 1, lease = lease + 1 WHERE id IN (
				SELECT id FROM job WHERE state = 0 AND run_at <= $1 ORDER BY run_at LIMIT $2 FOR UPDATE SKIP LOCKED) RETURNING id`,
				time.Now().UnixMilli(), ceilingClaim)
			if err != nil {
				claimErr = fmt.Errorf("claim: %w", err)
				return
			}
			ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
			if err != nil {
				claimErr = fmt.Errorf("claim: %w", err)
				return
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
	ids, sts := make([]int64, 0, 256), make([]int64, 0, 256)
	for first := range results {
		ids, sts = append(ids[:0], first[0]), append(sts[:0], first[1])
	drain:
		for len(ids) < 256 {
			select {
			case x, ok := <-results:
				if !ok {
					break drain
				}
				ids, sts = append(ids, x[0]), append(sts, x[1])
			default:
				break drain
			}
		}
		if recErr != nil {
			continue
		}
		if _, err := pool.Exec(ctx, `UPDATE job SET state = 2, status = u.st, done_at = $3
			FROM unnest($1::bigint[], $2::bigint[]) AS u (id, st) WHERE job.id = u.id AND job.state = 1`,
			ids, sts, time.Now().UnixMilli()); err != nil {
			recErr = fmt.Errorf("record: %w", err)
		}
	}
	wg.Wait()
	m.stop(&r, a.N)
	for _, e := range []error{enqErr, claimErr, recErr} {
		if e != nil {
			return r, e
		}
	}
	var done int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM job WHERE state = 2 AND status = 200`).Scan(&done); err != nil {
		return r, fmt.Errorf("count done: %w", err)
	}
	if done != a.N {
		return r, fmt.Errorf("check ceiling: %d of %d done (%d send errors)", done, a.N, sendErrs.Load())
	}
	return r, nil
}

// runRiverPG is the River row on PostgreSQL (riverpgxv5): as runRiver,
// jobs inserted with InsertMany in batches of 1,000 while the client runs,
// until all N are completed in the database.
func runRiverPG(a childArgs) (result, error) {
	var r result
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	pool, err := openPGPool(ctx, a.DB, 20)
	if err != nil {
		return r, err
	}
	defer pool.Close()
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return r, fmt.Errorf("make migrator: %w", err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return r, fmt.Errorf("migrate river: %w", err)
	}
	var done atomic.Int64
	workers := river.NewWorkers()
	river.AddWorker(workers, &benchWorker{client: newHTTPClient(a.Workers), url: a.Provider, done: &done})
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: a.Workers}},
		Workers:           workers,
		FetchCooldown:     riverFetchCooldown,
		FetchPollInterval: riverFetchPollInterval,
		Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
		JobTimeout:        30 * time.Second,
	})
	if err != nil {
		return r, fmt.Errorf("make river client: %w", err)
	}
	m := startMeter()
	if err := client.Start(ctx); err != nil {
		return r, fmt.Errorf("start river: %w", err)
	}
	for i := 0; i < a.N; i += 1000 {
		params := make([]river.InsertManyParams, min(i+1000, a.N)-i)
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
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE state = 'completed'`).Scan(&n); err != nil {
			return r, fmt.Errorf("count completed: %w", err)
		}
		if n >= a.N {
			break
		}
	}
	m.stop(&r, a.N)
	r.Note = fmt.Sprintf("riverpgxv5; fetchCooldown=%s fetchPoll=%s", riverFetchCooldown, riverFetchPollInterval)
	stopCtx, stopCancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer stopCancel()
	_ = client.Stop(stopCtx)
	return r, nil
}
