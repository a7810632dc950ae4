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
	"strconv"
	"strings"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/urfave/cli/v2"

	"pacer/db"
	"pacer/httpapi"
	"pacer/metrics"
	"pacer/scheduler"
)

// serveCommand runs the service: API, engine and store in one process.
func serveCommand() *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "run the pacer service",
		Flags: append([]cli.Flag{
			dbFlag(),
			&cli.StringFlag{Name: "listen", Value: "127.0.0.1:8080", EnvVars: []string{"PACER_LISTEN"}, Usage: "address for the HTTP API"},
			&cli.StringFlag{Name: "api-token", EnvVars: []string{"PACER_API_TOKEN"}, Usage: "bearer token the API requires; without one only loopback addresses are allowed"},
			&cli.StringFlag{Name: "secret-key", EnvVars: []string{"PACER_SECRET_KEY"}, Usage: "base64 32-byte key that encrypts scope credentials"},
			&cli.StringFlag{Name: "secret-key-file", EnvVars: []string{"PACER_SECRET_KEY_FILE"}, Usage: "file holding the base64 key (default: DB.key beside the database, created if missing)"},
			&cli.IntFlag{Name: "workers", Value: scheduler.DefaultWorkers, EnvVars: []string{"PACER_WORKERS"}, Usage: "requests in flight at once"},
			&cli.DurationFlag{Name: "request-timeout", Value: scheduler.DefaultRequestTimeout, EnvVars: []string{"PACER_REQUEST_TIMEOUT"}, Usage: "bound on one provider request"},
			&cli.DurationFlag{Name: "lease", Value: scheduler.DefaultLeaseDuration, EnvVars: []string{"PACER_LEASE"}, Usage: "lease of a claimed operation; at least request-timeout + 5s"},
			&cli.DurationFlag{Name: "shutdown-grace", Value: scheduler.DefaultShutdownGrace, EnvVars: []string{"PACER_SHUTDOWN_GRACE"}, Usage: "time in-flight requests may finish at shutdown"},
			&cli.StringFlag{Name: "result-limit", Value: "1MiB", EnvVars: []string{"PACER_RESULT_LIMIT"}, Usage: "bound on a stored answer body (a result, a failed operation's last answer): bytes, or with KiB or MiB; 1KiB..64MiB"},
			&cli.StringFlag{Name: "log-level", Value: "info", EnvVars: []string{"PACER_LOG_LEVEL"}, Usage: "debug, info, warn or error"},
			&cli.StringFlag{Name: "debug-listen", EnvVars: []string{"PACER_DEBUG_LISTEN"}, Usage: "loopback address for Go's profiling endpoints (/debug/pprof/); empty serves none"},
			&cli.DurationFlag{Name: "retention", Value: scheduler.DefaultRetention, EnvVars: []string{"PACER_RETENTION"}, Usage: "age after which succeeded and canceled operations and old changes are removed; 0 keeps everything"},
		}, demoFlags()...),
		Action: runServe,
	}
}

func dbFlag() cli.Flag {
	return &cli.StringFlag{Name: "db", Value: "./pacer.db", EnvVars: []string{"PACER_DB"}, Usage: "SQLite database file"}
}

// runServe wires the store, engine and API, and runs them until a signal.
func runServe(c *cli.Context) error {
	logger, err := newLogger(c.String("log-level"))
	if err != nil {
		return cli.Exit(err.Error(), 2)
	}
	listen, token := c.String("listen"), c.String("api-token")
	if token == "" && !loopback(listen) {
		return cli.Exit(fmt.Sprintf("refusing to listen on %s without --api-token (PACER_API_TOKEN): without a token only loopback addresses are allowed", listen), 2)
	}
	retention := c.Duration("retention")
	if retention != 0 && retention < scheduler.MinRetention {
		return cli.Exit(fmt.Sprintf("--retention %s is too short: at least %s, or 0 to keep everything", retention, scheduler.MinRetention), 2)
	}
	resultLimit, err := parseResultLimit(c.String("result-limit"))
	if err != nil {
		return cli.Exit(err.Error(), 2)
	}
	dbPath := c.String("db")
	if c.Bool("demo") {
		path, cleanup, err := demoDatabase(c)
		if err != nil {
			return cli.Exit(err.Error(), 1)
		}
		defer cleanup()
		dbPath = path
	}
	lock, err := db.Lock(dbPath)
	if err != nil {
		return cli.Exit(err.Error(), 3)
	}
	defer lock.Release()

	if err := db.RefuseForeign(dbPath); err != nil { // before a key file is made beside it
		return cli.Exit(err.Error(), 1)
	}
	key, err := loadKey(c, dbPath, logger)
	if err != nil {
		return cli.Exit(err.Error(), 2)
	}
	store, err := db.Open(dbPath, db.Options{Key: key})
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}
	defer store.Close()
	clk := clock.New()
	if err := store.Writable(c.Context, clk.Now()); err != nil {
		return cli.Exit(fmt.Sprintf("database %s does not accept writes (%v): check the file's owner and mode and the disk's free space", dbPath, err), 1)
	}
	if c.Bool("demo") {
		if err := refuseDemoOnRealData(c.Context, store, dbPath, c.Bool("demo-force")); err != nil {
			return cli.Exit(err.Error(), 2)
		}
	}

	var engine *scheduler.Engine
	meter, err := metrics.New(metrics.Config{Counts: store, Clock: clk, InFlight: func() int { return engine.InFlight() }, Version: version, Logger: logger})
	if err != nil {
		return err
	}
	policy := scheduler.DefaultPolicy()
	engine, err = scheduler.NewEngine(store, clk, policy, scheduler.EngineConfig{
		Workers:        c.Int("workers"),
		LeaseDuration:  c.Duration("lease"),
		RequestTimeout: c.Duration("request-timeout"),
		ShutdownGrace:  c.Duration("shutdown-grace"),
		ResultLimit:    resultLimit,
		Logger:         logger,
		UserAgent:      "pacer/" + version,
		Observer:       meter,
	})
	if err != nil {
		return cli.Exit(err.Error(), 2)
	}
	ctx := c.Context
	if n, err := engine.Recover(ctx); err != nil {
		return err // the engine names it: "recover leases: …"
	} else if n > 0 {
		logger.Warn("recovered leases left by an earlier process", "count", n)
	}
	service := scheduler.NewService(store, clk, policy, engine.Wake)
	engine.NotifyChanges(service.Notifier()) // claims and completions wake GET /v1/changes
	api, err := httpapi.New(httpapi.Config{Service: service, Token: token, Logger: logger,
		Ready: readiness(store, engine, clk.Now), Metrics: meter.Handler(),
		Users: store}) // staff accounts of the support page (/ui): pacer users add
	if err != nil {
		return err
	}
	var pruner *scheduler.Pruner
	if retention > 0 {
		if pruner, err = scheduler.NewPruner(store, clk, scheduler.PrunerConfig{Retention: retention, Logger: logger}); err != nil {
			return cli.Exit(err.Error(), 2)
		}
	}
	if addr := c.String("debug-listen"); addr != "" {
		stopDebug, err := startDebugServer(addr, logger)
		if err != nil {
			return cli.Exit(err.Error(), 2)
		}
		defer stopDebug()
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return cli.Exit(fmt.Sprintf("listen on %s: %v", listen, err), 1)
	}
	ln = httpapi.ProblemListener(ln) // net/http's own 400s are problems too
	stopDemo, closeDemo := func() {}, func() {}
	if c.Bool("demo") {
		if stopDemo, closeDemo, err = startDemo(ctx, service, clk, logger, "http://"+ln.Addr().String()); err != nil {
			ln.Close()
			return cli.Exit(fmt.Sprintf("start the demo: %v", err), 1)
		}
	}
	defer closeDemo() // after the engine has drained: requests may be in flight to it
	srv := &http.Server{Handler: api.Handler(), ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	srv.RegisterOnShutdown(service.Notifier().Close) // long-polls answer at once instead of holding up shutdown
	logger.Info("pacer serving", "listen", ln.Addr().String(), "db", dbPath, "version", version, "auth", token != "")

	engineCtx, stopEngine := context.WithCancel(context.Background())
	engineDone := make(chan error, 1)
	go func() { engineDone <- engine.Run(engineCtx) }()
	httpDone := make(chan error, 1)
	go func() { httpDone <- srv.Serve(ln) }()
	checkpointsDone := make(chan struct{})
	go func() { runCheckpoints(engineCtx, store, clk, checkpointInterval, logger); close(checkpointsDone) }()
	pruneDone := make(chan error, 1)
	if pruner != nil {
		go func() { pruneDone <- pruner.Run(engineCtx) }()
	} else {
		logger.Info("retention off: finished operations are kept forever")
		pruneDone <- nil
	}

	select {
	case <-ctx.Done():
		logger.Info("shutting down")
	case err := <-httpDone:
		stopDemo()
		stopEngine()
		<-engineDone
		<-pruneDone
		<-checkpointsDone
		return fmt.Errorf("http server: %w", err)
	}
	stopDemo()
	// Order: stop taking requests, then drain the engine, then close the store.
	shutCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		logger.Warn("http shutdown", "err", err)
	}
	stopEngine()
	if err := <-engineDone; err != nil {
		logger.Warn("engine shutdown", "err", err)
	}
	<-pruneDone
	<-checkpointsDone
	logger.Info("stopped")
	return nil
}

// loadKey finds the credentials key: --secret-key, --secret-key-file, or a
// key file beside the database, created on first start.
func loadKey(c *cli.Context, dbPath string, logger *slog.Logger) ([]byte, error) {
	if k := c.String("secret-key"); k != "" {
		return db.ParseKey(k)
	}
	path := c.String("secret-key-file")
	if path == "" {
		path = defaultKeyPath(dbPath)
	}
	key, created, err := db.LoadOrCreateKeyFile(path)
	if err != nil {
		return nil, err
	}
	if created {
		abs, _ := filepath.Abs(path)
		logger.Warn("created a new secret key file for scope credentials; back it up with the database", "file", abs)
	}
	return key, nil
}

// defaultKeyPath is where the credentials key of the database at dbPath
// lives without --secret-key-file: beside the database file itself, so
// that a link to it or another spelling of its path finds the same key
// instead of making a second one; a key file already beside the name
// given is kept.
func defaultKeyPath(dbPath string) string {
	given := dbPath + ".key"
	if _, err := os.Stat(given); err == nil {
		return given
	}
	if real, err := filepath.EvalSymlinks(dbPath); err == nil {
		return real + ".key"
	}
	return given
}

// loopback reports whether addr listens only on a loopback address.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// newLogger returns a slog logger: text on a terminal, JSON otherwise.
func newLogger(level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %q is not debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: l}
	if fi, err := os.Stderr.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
}

// parseResultLimit reads --result-limit: a number of bytes, or one of KiB
// or MiB ("512KiB", "1MiB"), within the engine's bounds.
func parseResultLimit(s string) (int, error) {
	num, unit := strings.TrimSpace(s), 1
	if n, ok := strings.CutSuffix(num, "KiB"); ok {
		num, unit = strings.TrimSpace(n), 1<<10
	} else if n, ok := strings.CutSuffix(num, "MiB"); ok {
		num, unit = strings.TrimSpace(n), 1<<20
	}
	n, err := strconv.Atoi(num)
	if err != nil || n <= 0 || n > scheduler.MaxResultLimit/unit {
		return 0, fmt.Errorf("--result-limit %q: want a positive size such as 1048576, 512KiB or 1MiB, at most 64MiB", s)
	}
	if err := scheduler.CheckResultLimit(n * unit); err != nil {
		return 0, fmt.Errorf("--result-limit %q: %w", s, err)
	}
	return n * unit, nil
}
