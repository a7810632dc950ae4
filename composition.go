package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/urfave/cli/v2"

	"pacer/db"
	"pacer/httpapi"
	"pacer/metrics"
	"pacer/pgstore"
	"pacer/scheduler"
)

// httpShutdownTimeout bounds how long the API's shutdown waits for the
// requests in progress.
const httpShutdownTimeout = 10 * time.Second

// ServeConfig is what Main runs: serve's flags (runServe), --demo's, or a
// test's options, mapped onto one config. Zero fields take defaults.
type ServeConfig struct {
	// DBPath is the database: a SQLite file, or a postgres:// URL of a
	// PostgreSQL database that several processes share (design §10). With
	// Demo, empty means a throwaway SQLite database in a temporary
	// directory, removed by Close.
	DBPath string
	// Listen is the API's address; port 0 picks a free one (see Addr).
	Listen string
	// Token is the bearer token the API requires; without one only a
	// loopback Listen address is allowed.
	Token string
	// SecretKey is the base64 key that encrypts scope credentials; empty
	// reads KeyFile.
	SecretKey string
	// KeyFile holds the key; empty means DB.key beside a SQLite database,
	// created on first start. On PostgreSQL SecretKey or KeyFile is
	// required (the same key on every process), and no key is created.
	KeyFile string
	// Scheduler shapes the service, the engine and retention. Its
	// Engine.Observer is the metrics registry; Main sets it.
	Scheduler scheduler.Config
	// Checkpoints shapes the WAL checkpoint loop (SQLite only).
	Checkpoints checkpointConfig
	// DebugListen, when set, serves Go's profiling endpoints there (a
	// loopback address only).
	DebugListen string
	// Demo also runs a simulated provider on loopback with demo scopes,
	// operations and traffic; DemoForce lets it onto a database that
	// already has scopes.
	Demo, DemoForce bool
	// Clock is the scheduler's clock; nil means the real one. On
	// PostgreSQL the scheduler reads the database's time, measured on it
	// (pgstore.Store.Clock), so that every node's times agree.
	Clock clock.Clock
	// Logger receives every log; nil discards.
	Logger *slog.Logger
}

// Main is the composition root of a pacer service: Open builds it in
// order — the database (on SQLite: process lock, credentials key, store,
// checkpointer; on PostgreSQL: the required key and the store, shared
// with other processes), metrics, scheduler, HTTP API (and the demo) —
// Run runs it until its context ends, and Close releases what Open took,
// in the reverse order. Its errors are cli.ExitCoder errors carrying
// serve's exit codes (2 bad configuration, 3 database locked, 1
// otherwise).
type Main struct {
	// Config is what to run; set it before Open.
	Config ServeConfig

	dbPath string
	store  serviceStore
	shared bool // the store is PostgreSQL's, shared with other processes
	// clock is the scheduler's: Config.Clock, or on PostgreSQL the
	// database's time measured on it.
	clock clock.Clock
	// throttle counts failed sign-ins in the database other processes
	// share; nil (SQLite) means the API's own, in memory.
	throttle httpapi.SignInThrottle
	sched    *scheduler.Scheduler
	ckpt     *checkpointer // SQLite's WAL checkpoints; nil on PostgreSQL
	ln       net.Listener
	srv      *http.Server
	demo     *demoRun
	closers  []func() // what Open acquired, released by Close last first
	closed   sync.Once
}

// NewMain returns a Main that runs cfg.
func NewMain(cfg ServeConfig) *Main { return &Main{Config: cfg} }

// Addr is the address the API listens on, once Open succeeded.
func (m *Main) Addr() string { return m.ln.Addr().String() }

// DBPath is the database in use (--db), once Open succeeded.
func (m *Main) DBPath() string { return m.dbPath }

// Store is the store, once Open succeeded.
func (m *Main) Store() serviceStore { return m.store }

// Scheduler is the scheduler, once Open succeeded.
func (m *Main) Scheduler() *scheduler.Scheduler { return m.sched }

// onClose makes Close call fn, before whatever was acquired earlier.
func (m *Main) onClose(fn func()) { m.closers = append(m.closers, fn) }

// Open opens the database (openSQLite: process lock, credentials key,
// store, checkpointer; or openPostgres), builds the metrics, the
// scheduler (recovering the leases of an earlier process, on SQLite only)
// and the HTTP API, and listens. On an error it releases what it took
// already.
func (m *Main) Open(ctx context.Context) (err error) {
	cfg := &m.Config
	if cfg.Clock == nil {
		cfg.Clock = clock.New()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	logger := cfg.Logger
	m.clock = cfg.Clock
	defer func() {
		if err != nil {
			m.Close()
		}
	}()
	if cfg.Token == "" && !loopback(cfg.Listen) {
		return cli.Exit(fmt.Sprintf("refusing to listen on %s without --api-token (PACER_API_TOKEN): without a token only loopback addresses are allowed", cfg.Listen), 2)
	}
	m.dbPath = cfg.DBPath
	if cfg.Demo && m.dbPath == "" {
		dir, err := os.MkdirTemp("", "pacer-demo-")
		if err != nil {
			return cli.Exit(fmt.Sprintf("create the demo database directory: %v", err), 1)
		}
		m.onClose(func() { os.RemoveAll(dir) })
		m.dbPath = filepath.Join(dir, "pacer.db")
	}

	if pgstore.IsURL(m.dbPath) {
		err = m.openPostgres(ctx)
	} else {
		err = m.openSQLite(ctx)
	}
	if err != nil {
		return err
	}
	clk := m.clock
	if cfg.Demo {
		if err := refuseDemoOnRealData(ctx, m.store, dbName(m.dbPath), cfg.DemoForce); err != nil {
			return cli.Exit(err.Error(), 2)
		}
	}

	meter, err := metrics.New(metrics.Config{Counts: m.store, Clock: clk, Version: version, Logger: logger})
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}
	sc := cfg.Scheduler
	sc.Engine.Observer = meter
	if sc.Engine.UserAgent == "" {
		sc.Engine.UserAgent = "pacer/" + version
	}
	if sc.Logger == nil {
		sc.Logger = logger
	}
	if m.sched, err = scheduler.New(m.store, clk, sc); err != nil {
		return cli.Exit(err.Error(), 2)
	}
	if err := m.sched.Recover(ctx); err != nil { // before the API shows their operations (on PostgreSQL only dead nodes')
		return cli.Exit(err.Error(), 1)
	}
	api, err := httpapi.New(httpapi.Config{Service: m.sched.Service, Token: cfg.Token, Logger: logger,
		Ready: readiness(m.store, m.sched.Engine, clk.Now), Metrics: meter.Handler(),
		Users: m.store, Throttle: m.throttle}) // staff accounts of the support page (/ui): pacer users add
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}

	if cfg.DebugListen != "" {
		stopDebug, err := startDebugServer(cfg.DebugListen, logger)
		if err != nil {
			return cli.Exit(err.Error(), 2)
		}
		m.onClose(stopDebug)
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return cli.Exit(fmt.Sprintf("listen on %s: %v", cfg.Listen, err), 1)
	}
	m.ln = httpapi.ProblemListener(ln) // net/http's own 400s are problems too
	m.onClose(func() { m.ln.Close() }) // when Run never served it
	if cfg.Demo {
		if m.demo, err = startDemo(ctx, m.sched.Service, clk, logger, "http://"+m.Addr()); err != nil {
			return cli.Exit(fmt.Sprintf("start the demo: %v", err), 1)
		}
		m.onClose(m.demo.closeProvider) // after the engine has drained: requests may be in flight to it
	}
	m.srv = &http.Server{Handler: api.Handler(), ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	m.srv.RegisterOnShutdown(m.sched.Changes.Close) // long-polls answer at once instead of holding up shutdown
	return nil
}

// Run serves the API and runs the scheduler's loops and the checkpoints
// until ctx ends or the HTTP server fails. Then it stops in the reverse
// order of Open: the demo's traffic, the API (requests in progress may
// finish), then the loops (the engine lets in-flight requests finish
// within its shutdown grace). It returns the HTTP server's failure, if
// that is what ended it. Call Close afterwards.
func (m *Main) Run(ctx context.Context) error {
	logger := m.Config.Logger
	logger.Info("pacer serving", "listen", m.Addr(), "db", dbName(m.dbPath), "version", version, "auth", m.Config.Token != "", "postgres", pgstore.IsURL(m.dbPath))
	loopsCtx, stopLoops := context.WithCancel(context.WithoutCancel(ctx))
	defer stopLoops()
	var loops sync.WaitGroup
	runs := map[string]func(context.Context) error{"scheduler": m.sched.Run}
	if m.ckpt != nil {
		runs["checkpoints"] = m.ckpt.Run
	}
	for name, run := range runs {
		loops.Add(1)
		go func() {
			defer loops.Done()
			if err := run(loopsCtx); err != nil {
				logger.Warn(name+" shutdown", "err", err)
			}
		}()
	}
	httpDone := make(chan error, 1)
	go func() { httpDone <- m.srv.Serve(m.ln) }()

	var failed error
	select {
	case <-ctx.Done():
		logger.Info("shutting down")
	case err := <-httpDone:
		failed = fmt.Errorf("http server: %w", err)
	}
	m.demo.stop()
	if failed == nil {
		shutCtx, cancel := context.WithTimeout(context.Background(), httpShutdownTimeout)
		defer cancel()
		if err := m.srv.Shutdown(shutCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Warn("http shutdown", "err", err)
		}
	}
	stopLoops()
	loops.Wait()
	if failed != nil {
		return failed
	}
	logger.Info("stopped")
	return nil
}

// Close releases what Open took, the last taken first: the demo's
// provider, the listener, the profiling server, the store, the process
// lock (SQLite) and a throwaway demo database. It is safe to call more than once.
func (m *Main) Close() {
	m.closed.Do(func() {
		for i := len(m.closers) - 1; i >= 0; i-- {
			m.closers[i]()
		}
	})
}

// openSQLite opens the SQLite database file for serve: it takes the
// process lock next to it (exit 3 when another process holds it), refuses
// another application's file, loads or creates the credentials key beside
// it, opens (creating or migrating) the store, checks that it accepts
// writes and builds the WAL checkpointer.
func (m *Main) openSQLite(ctx context.Context) error {
	cfg := &m.Config
	lock, err := db.Lock(m.dbPath)
	if err != nil {
		return cli.Exit(err.Error(), 3)
	}
	m.onClose(func() { lock.Release() })
	if err := db.RefuseForeign(m.dbPath); err != nil { // before a key file is made beside it
		return cli.Exit(err.Error(), 1)
	}
	key, createdKey, err := loadKey(cfg.SecretKey, cfg.KeyFile, m.dbPath, cfg.Logger)
	if err != nil {
		return cli.Exit(err.Error(), 2)
	}
	store, err := db.Open(m.dbPath, db.Options{Key: key})
	if err != nil {
		if createdKey != "" {
			os.Remove(createdKey) // a key the database refused is no key of it
		}
		return cli.Exit(err.Error(), 1)
	}
	m.store = store
	m.onClose(func() { store.Close() })
	if err := store.Writable(ctx, cfg.Clock.Now()); err != nil {
		return cli.Exit(fmt.Sprintf("database %s does not accept writes (%v): check the file's owner and mode and the disk's free space", m.dbPath, err), 1)
	}
	ckpt := cfg.Checkpoints
	if ckpt.Logger == nil {
		ckpt.Logger = cfg.Logger
	}
	m.ckpt = newCheckpointer(store, cfg.Clock, ckpt)
	return nil
}

// openPostgres opens the PostgreSQL database for serve (design §10): no
// file lock (other processes share it) and no key file (the key is
// required, exit 2 without one); the store migrates the schema under an
// advisory lock, refuses a key that does not open the stored credentials
// (exit 1) and registers this process as a node, whose requests last at
// most the engine's request timeout. Start-up recovery (Scheduler.Recover)
// then takes only the leases of nodes known dead, never a live one's. The
// scheduler's clock is the database's (Store.Clock): the leases it writes
// and the expiry it recovers them by are database time, whatever this
// machine's clock says. The sign-in throttle is the database's, so its
// limits hold across processes. No checkpointer: PostgreSQL checkpoints
// itself.
func (m *Main) openPostgres(ctx context.Context) error {
	cfg := &m.Config
	store, err := openPostgres(ctx, m.dbPath, cfg.SecretKey, cfg.KeyFile,
		pgstore.Options{Clock: cfg.Clock, RequestTimeout: cfg.Scheduler.Engine.RequestTimeout})
	if err != nil {
		return err
	}
	m.store, m.throttle, m.clock = store, store, store.Clock(cfg.Clock)
	m.onClose(func() { store.Close() })
	if err := store.Writable(ctx, m.clock.Now()); err != nil {
		return cli.Exit(fmt.Sprintf("database %s does not accept writes: %s", pgstore.Redact(m.dbPath), errLine(err)), 1)
	}
	return nil
}
