package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"
)

// Main in this process: an Open that fails (here at listening, its last
// step) releases what it took, so the next Open on the same database
// gets its lock; Run serves until its context ends, and after Close the
// database is free again.
func TestMainOpenRunClose(t *testing.T) {
	t.Parallel()
	dbPath := filepath.Join(t.TempDir(), "pacer.db")
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	ctx := context.Background()

	failed := NewMain(ServeConfig{DBPath: dbPath, Listen: taken.Addr().String()})
	err = failed.Open(ctx)
	var exit cli.ExitCoder
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(err.Error(), "listen on") {
		t.Fatalf("Open on a taken address: %v, want exit 1 naming the address", err)
	}

	for round := range 2 { // the second finds the database the first closed
		m := NewMain(ServeConfig{DBPath: dbPath, Listen: "127.0.0.1:0"})
		if err := m.Open(ctx); err != nil {
			t.Fatalf("round %d: Open after a failed Open: %v", round, err)
		}
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- m.Run(runCtx) }()
		var resp *http.Response
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if resp, err = http.Get("http://" + m.Addr() + "/readyz"); err == nil && resp.StatusCode == 200 {
				resp.Body.Close()
				break
			} else if err == nil {
				resp.Body.Close()
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: not ready within 10 s: %v", round, err)
			}
		}
		stop()
		if err := <-done; err != nil {
			t.Fatalf("round %d: Run: %v", round, err)
		}
		m.Close()
		if _, err := http.Get("http://" + m.Addr() + "/healthz"); err == nil {
			t.Fatalf("round %d: still serving after Run returned", round)
		}
	}
	failed.Close() // after a failed Open, Close has nothing left to do
}
