// Command pgserve runs a throwaway PostgreSQL (package pgserver) for
// tools outside this module, such as scripts/bench: it starts a durable
// server (synchronous_commit on) in a new temporary directory, prints its
// URL as one line on stdout, and stops it, removing the directory, on
// SIGTERM or SIGINT or when its standard input closes (its parent ended).
//
// Usage: go run ./internal/pgserver/cmd/pgserve
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
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

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	srv, err := pgserver.Start(ctx, pgserver.Options{Durable: true})
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
