package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/urfave/cli/v2"

	"pacer/demo"
	"pacer/scheduler"
)

// demoTrafficEvery is how often a running demo enqueues fresh operations.
const demoTrafficEvery = 15 * time.Second

// demoFlags are serve's flags for the demo.
func demoFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "demo", EnvVars: []string{"PACER_DEMO"}, Usage: "also run a simulated provider on loopback with demo scopes and operations; without --db it uses a throwaway database"},
		&cli.BoolFlag{Name: "demo-force", EnvVars: []string{"PACER_DEMO_FORCE"}, Usage: "let --demo add its scopes and operations to a database that already has scopes"},
	}
}

// demoDatabase returns the database a --demo serve uses: --db (or
// PACER_DB) when given, else a new database in a temporary directory that
// cleanup removes.
func demoDatabase(c *cli.Context) (path string, cleanup func(), err error) {
	if c.IsSet("db") {
		return c.String("db"), func() {}, nil
	}
	dir, err := os.MkdirTemp("", "pacer-demo-")
	if err != nil {
		return "", nil, fmt.Errorf("create the demo database directory: %w", err)
	}
	return filepath.Join(dir, "pacer.db"), func() { os.RemoveAll(dir) }, nil
}

// refuseDemoOnRealData keeps the demo out of a database in use: it fails
// when the database already has scopes, unless force.
func refuseDemoOnRealData(ctx context.Context, store scheduler.Store, path string, force bool) error {
	if force {
		return nil
	}
	scopes, err := store.ListScopes(ctx)
	if err != nil {
		return fmt.Errorf("look for scopes before the demo: %w", err)
	}
	if len(scopes) > 0 {
		return fmt.Errorf("refusing --demo on %s: it already has %d scopes, and the demo would add its own scopes and operations; run --demo without --db for a throwaway database, or add --demo-force", path, len(scopes))
	}
	return nil
}

// startDemo starts the simulated provider, seeds the demo and starts its
// traffic. stop ends the traffic at once; closeProvider stops the
// provider (after the engine has drained, as requests may be in flight).
func startDemo(ctx context.Context, svc *scheduler.Service, clk clock.Clock, logger *slog.Logger, base string) (stop, closeProvider func(), err error) {
	prov, err := demo.Start(clk)
	if err != nil {
		return nil, nil, err
	}
	seeded, err := demo.Seed(ctx, svc, prov.URL())
	if err != nil {
		prov.Close()
		return nil, nil, err
	}
	trafficCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		demo.Traffic(trafficCtx, svc, clk, demoTrafficEvery, logger)
	}()
	logger.Info("demo running: a simulated provider on loopback, demo scopes and operations; watch them change over the next minute",
		"provider", prov.URL(), "scopes", len(seeded.Scopes), "operations", seeded.Operations,
		"try", base+"/v1/operations?state=held", "metrics", base+"/metrics")
	stop = func() { cancel(); <-done }
	closeProvider = func() {
		if err := prov.Close(); err != nil {
			logger.Warn("demo provider shutdown", "err", err)
		}
	}
	return stop, closeProvider, nil
}
