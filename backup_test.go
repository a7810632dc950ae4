package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"pacer/db"
	"pacer/scheduler"
)

// runPacerCmd runs the pacer binary to completion and returns its combined
// output and exit code.
func runPacerCmd(t *testing.T, args ...string) (string, int) {
	t.Helper()
	out, err := exec.Command(pacerBin(t), args...).CombinedOutput()
	if err != nil {
		exit, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("run pacer %v: %v", args, err)
		}
		return string(out), exit.ExitCode()
	}
	return string(out), 0
}

// TestBackupOfLiveDatabase backs up the database of a running pacer while
// operations are being enqueued and the engine sends them; `pacer check`
// passes on the copy, and the copy opens with every operation that was
// acknowledged before the backup began.
func TestBackupOfLiveDatabase(t *testing.T) {
	t.Parallel()
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
	}))
	defer provider.Close()
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "pacer.db")
	p := startPacer(t, dbPath, freeAddr(t))
	putScope(t, p, "live", provider.URL, "")

	var (
		mu      sync.Mutex
		acked   []string
		errs    []string
		stop    = make(chan struct{})
		stopped = make(chan struct{})
	)
	go func() { // enqueue without pause until stopped (bounded)
		defer close(stopped)
		for i := 0; i < 100_000; i++ {
			select {
			case <-stop:
				return
			default:
			}
			id := fmt.Sprintf("live-%d", i)
			body, _ := json.Marshal(map[string]any{"operationId": id, "providerScope": "live",
				"request": map[string]any{"method": "POST", "path": "/things", "body": map[string]any{"n": i}}})
			resp, err := http.Post(p.base+"/v1/operations", "application/json", bytes.NewReader(body))
			if err != nil {
				mu.Lock()
				errs = append(errs, err.Error())
				mu.Unlock()
				return
			}
			resp.Body.Close()
			mu.Lock()
			if resp.StatusCode == http.StatusCreated {
				acked = append(acked, id)
			} else {
				errs = append(errs, fmt.Sprintf("%s: status %d", id, resp.StatusCode))
			}
			mu.Unlock()
		}
	}()
	ackedCount := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	for i := 0; ackedCount() < 100; i++ {
		if i == 2000 {
			t.Fatalf("only %d operations acknowledged", ackedCount())
		}
		time.Sleep(5 * time.Millisecond)
	}

	mu.Lock()
	before := append([]string(nil), acked...)
	mu.Unlock()
	copyPath := filepath.Join(dir, "backup", "copy.db")
	if err := os.MkdirAll(filepath.Dir(copyPath), 0o700); err != nil {
		t.Fatal(err)
	}
	out, code := runPacerCmd(t, "backup", "--db", dbPath, "--to", copyPath)
	if code != 0 || !strings.Contains(out, "backed up") {
		t.Fatalf("pacer backup of a live database: exit %d\n%s", code, out)
	}
	for i := 0; ackedCount() < len(before)+20; i++ { // writes go on after the backup
		if i == 2000 {
			t.Fatalf("enqueues stopped after the backup: %d acknowledged", ackedCount())
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(stop)
	<-stopped
	if len(errs) > 0 {
		t.Fatalf("enqueue failed during the backup: %v", errs[:min(len(errs), 5)])
	}

	t.Logf("backup taken with %d operations acknowledged; %d acknowledged by the end", len(before), ackedCount())
	out, code = runPacerCmd(t, "check", "--db", copyPath)
	if code != 0 || !strings.HasPrefix(out, "ok: ") || strings.Count(out, "\n") != 1 {
		t.Fatalf("pacer check on the copy: exit %d\n%s", code, out)
	}
	if out, code := runPacerCmd(t, "check", "--db", dbPath); code != 0 { // and on the live one
		t.Fatalf("pacer check on the live database: exit %d\n%s", code, out)
	}

	key, _, err := db.LoadOrCreateKeyFile(dbPath + ".key")
	if err != nil {
		t.Fatal(err)
	}
	restored, err := db.Open(copyPath, db.Options{Key: key})
	if err != nil {
		t.Fatalf("open the copy: %v", err)
	}
	defer restored.Close()
	for _, id := range before {
		if _, err := restored.GetOperation(context.Background(), id); err != nil {
			t.Fatalf("operation %s acknowledged before the backup is not in the copy: %v", id, err)
		}
	}
	// The credentials open with the key file: a claim of the copy carries
	// them (one leased when the copy was taken, or a new one).
	ctx, now := context.Background(), time.Now()
	claims, err := restored.ListRunning(ctx, time.Time{}, 1)
	if err == nil && len(claims) == 0 {
		_, err = restored.Enqueue(ctx, []scheduler.NewOperation{{
			ID: "after-restore", Scope: "live", Kind: scheduler.KindMutation, Request: scheduler.Request{Method: "POST", Path: "/things"},
			RequestIdentity: "after-restore", Retry: scheduler.Retry{MaxAttempts: 1, MaxElapsed: time.Hour}, ContentHash: "after-restore",
		}}, now)
		if err == nil {
			claims, err = restored.ClaimDue(ctx, scheduler.ClaimParams{Now: now, Limit: 1, LeaseFor: time.Minute})
		}
	}
	if err != nil || len(claims) != 1 || claims[0].Scope.Name != "live" || claims[0].Scope.Credentials.Token != "tok-live" {
		t.Errorf("claim of scope live in the copy: %d claims, %v; credentials readable with the key file: %v",
			len(claims), err, len(claims) == 1 && claims[0].Scope.Credentials.Token == "tok-live")
	}
}

func TestBackupAndCheckErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.db")
	if err := os.WriteFile(junk, bytes.Repeat([]byte("garbage "), 1024), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"BackupNeedsTo", []string{"backup", "--db", junk}, 2, "--to"},
		{"BackupMissingDB", []string{"backup", "--db", filepath.Join(dir, "none.db"), "--to", filepath.Join(dir, "c.db")}, 1, "no database file"},
		{"CheckMissingDB", []string{"check", "--db", filepath.Join(dir, "none.db")}, 1, "no database file"},
		{"CheckNotADatabase", []string{"check", "--db", junk}, 1, "not a database"},
		{"CheckNoArgs", []string{"check", "--db", junk, "extra"}, 2, "no arguments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, code := runPacerCmd(t, tc.args...)
			if code != tc.code || !strings.Contains(out, tc.msg) {
				t.Errorf("pacer %v: exit %d, output %q; want exit %d mentioning %q", tc.args, code, out, tc.code, tc.msg)
			}
			if strings.Count(strings.TrimSpace(out), "\n") != 0 {
				t.Errorf("pacer %v: message is not one line:\n%s", tc.args, out)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "none.db")); err == nil {
		t.Error("check or backup created the missing database")
	}
}
