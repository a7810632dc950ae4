package main

import (
	"context"
	"fmt"
	"log/slog"
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

// demoRun is a running demo: its simulated provider and its traffic.
type demoRun struct {
	stopTraffic func()
	prov        *demo.Provider
	logger      *slog.Logger
}

// startDemo starts the simulated provider, seeds the demo and starts its
// traffic.
func startDemo(ctx context.Context, svc *scheduler.Service, clk clock.Clock, logger *slog.Logger, base string) (*demoRun, error) {
	prov, err := demo.Start(clk)
	if err != nil {
		return nil, err
	}
	seeded, err := demo.Seed(ctx, svc, prov.URL())
	if err != nil {
		prov.Close()
		return nil, err
	}
	trafficCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		demo.Traffic(trafficCtx, svc, clk, demoTrafficEvery, logger)
	}()
	logger.Info("demo running: a simulated provider on loopback, demo scopes and operations; watch them change over the next minute",
		"provider", prov.URL(), "scopes", len(seeded.Scopes), "operations", seeded.Operations,
		"page", base+"/ui/", "try", base+"/v1/operations?state=held", "metrics", base+"/metrics")
	return &demoRun{stopTraffic: func() { cancel(); <-done }, prov: prov, logger: logger}, nil
}

// stop ends the traffic at once; a nil demoRun (no demo) does nothing.
func (d *demoRun) stop() {
	if d != nil {
		d.stopTraffic()
	}
}

// closeProvider stops the simulated provider: after the engine has
// drained, as requests may be in flight to it.
func (d *demoRun) closeProvider() {
	if err := d.prov.Close(); err != nil {
		d.logger.Warn("demo provider shutdown", "err", err)
	}
}
