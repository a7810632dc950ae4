// Command pgserve runs a throwaway PostgreSQL (package pgserver) for
// tools outside this module, such as scripts/bench: it starts a durable
// server (synchronous_commit on) in a new temporary directory, prints its
// URL as one line on stdout, and stops it, removing the directory, on
// SIGTERM or SIGINT or when its standard input closes (its parent ended).
//
// Each -set name=value is one more server setting (postgres -c), e.g.
// -set autovacuum_naptime=1s.
//
// Usage: go run ./internal/pgserver/cmd/pgserve [-set name=value]…
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"pacer/internal/pgserver"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "pgserve:", err)
		os.Exit(1)
	}
}

// settings collects the -set flags.
type settings []string

// String implements flag.Value.
func (s *settings) String() string { return strings.Join(*s, ",") }

// Set implements flag.Value: one name=value.
func (s *settings) Set(v string) error {
	if name, _, ok := strings.Cut(v, "="); !ok || name == "" {
		return fmt.Errorf("want name=value, got %q", v)
	}
	*s = append(*s, v)
	return nil
}

func run() error {
	var set settings
	flag.Var(&set, "set", "a server setting, name=value (repeatable)")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	srv, err := pgserver.Start(ctx, pgserver.Options{Durable: true, Settings: set})
	cancel()
	if err != nil {
		return err
	}
	fmt.Println(srv.URL())
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	closed := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(closed)
	}()
	select {
	case <-stop:
	case <-closed:
	}
	if err := srv.Stop(); err != nil {
		return fmt.Errorf("stop: %w", err)
	}
	return nil
}
