package main

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"pacer/db"
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
			&cli.StringFlag{Name: "secret-key-file", EnvVars: []string{"PACER_SECRET_KEY_FILE"}, Usage: "file holding the base64 key (default: DB.key beside a SQLite database, created if missing; on PostgreSQL this or --secret-key is required)"},
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
	return &cli.StringFlag{Name: "db", Value: "./pacer.db", EnvVars: []string{"PACER_DB"}, Usage: "SQLite database file, or a postgres:// (postgresql://) URL of a PostgreSQL database shared by several processes"}
}

// runServe maps serve's flags onto a ServeConfig and runs Main until a
// signal.
func runServe(c *cli.Context) error {
	logger, err := newLogger(c.App.ErrWriter, c.String("log-level"))
	if err != nil {
		return cli.Exit(err.Error(), 2)
	}
	retention := c.Duration("retention")
	if retention != 0 && retention < scheduler.MinRetention {
		return cli.Exit(fmt.Sprintf("--retention %s is too short: at least %s, or 0 to keep everything", retention, scheduler.MinRetention), 2)
	}
	resultLimit, err := parseResultLimit(c.String("result-limit"))
	if err != nil {
		return cli.Exit(err.Error(), 2)
	}
	cfg := ServeConfig{
		DBPath: c.String("db"), Listen: c.String("listen"), Token: c.String("api-token"),
		SecretKey: c.String("secret-key"), KeyFile: c.String("secret-key-file"),
		Scheduler: scheduler.Config{
			Engine: scheduler.EngineConfig{
				Workers:        c.Int("workers"),
				LeaseDuration:  c.Duration("lease"),
				RequestTimeout: c.Duration("request-timeout"),
				ShutdownGrace:  c.Duration("shutdown-grace"),
				ResultLimit:    resultLimit,
			},
			Pruner: scheduler.PrunerConfig{Retention: retention, KeepForever: retention == 0},
		},
		DebugListen: c.String("debug-listen"),
		Demo:        c.Bool("demo"), DemoForce: c.Bool("demo-force"),
		Logger: logger,
	}
	if cfg.Demo && !c.IsSet("db") {
		cfg.DBPath = "" // a throwaway database
	}
	m := NewMain(cfg)
	defer m.Close()
	if err := m.Open(c.Context); err != nil {
		return err
	}
	return m.Run(c.Context)
}

// loadKey finds the credentials key: secret (--secret-key), the file
// keyFile (--secret-key-file), or a key file beside the database, created
// on first start.
//
// created is the key file it made, "" when it made none: the caller
// removes it when the database refuses the key, so that a wrong key
// leaves no new key file behind.
func loadKey(secret, keyFile, dbPath string, logger *slog.Logger) (key []byte, created string, err error) {
	if secret != "" {
		key, err = db.ParseKey(secret)
		return key, "", err
	}
	path := keyFile
	if path == "" {
		path = defaultKeyPath(dbPath)
	}
	key, made, err := db.LoadOrCreateKeyFile(path)
	if err != nil {
		return nil, "", err
	}
	if made {
		abs, _ := filepath.Abs(path)
		logger.Warn("created a new secret key file for scope credentials; back it up with the database", "file", abs)
		created = path
	}
	return key, created, nil
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

// newLogger returns a slog logger writing to w (standard error): text on
// a terminal, JSON otherwise.
func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %q is not debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: l}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			return slog.New(slog.NewTextHandler(w, opts)), nil
		}
	}
	return slog.New(slog.NewJSONHandler(w, opts)), nil
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
