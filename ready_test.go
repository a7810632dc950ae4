package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"

	"pacer/db"
	"pacer/httpapi"
	"pacer/scheduler"
)

// TestReadyzFailureModes serves /readyz with serve's readiness over a real
// store and engine on a mock clock: ready after a pass; 503 problem when
// the claim loop has not turned for too long; ready again after a pass;
// 503 once the database is unusable.
func TestReadyzFailureModes(t *testing.T) {
	t.Parallel()
	clk := clock.NewMock()
	clk.Set(time.Date(2026, 9, 11, 2, 0, 0, 0, time.UTC))
	store, err := db.Open(filepath.Join(t.TempDir(), "pacer.db"), db.Options{Key: []byte("0123456789abcdef0123456789abcdef")})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	sched, err := scheduler.New(store, clk, scheduler.Config{Engine: scheduler.EngineConfig{PollInterval: 5 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	engine := sched.Engine
	api, err := httpapi.New(httpapi.Config{Service: sched.Service, Ready: readiness(store, engine, clk.Now)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.Handler())
	defer srv.Close()
	readyz := func() int {
		t.Helper()
		resp, err := http.Get(srv.URL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var problem struct {
			Status int `json:"status"`
		}
		if resp.StatusCode != http.StatusOK {
			if err := json.NewDecoder(resp.Body).Decode(&problem); err != nil || problem.Status != resp.StatusCode ||
				!strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") {
				t.Errorf("not-ready answer is %s (%v), want a problem document", resp.Header.Get("Content-Type"), err)
			}
		}
		return resp.StatusCode
	}
	pass := func() {
		t.Helper()
		if _, err := engine.RunOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
	}

	if st := readyz(); st != http.StatusServiceUnavailable {
		t.Errorf("before the first pass: %d, want 503", st)
	}
	pass()
	if st := readyz(); st != http.StatusOK {
		t.Fatalf("after a pass: %d, want 200", st)
	}
	clk.Add(5*time.Second + scheduler.StallMargin) // exactly the limit: still fine
	if st := readyz(); st != http.StatusOK {
		t.Errorf("at the stall limit: %d, want 200", st)
	}
	clk.Add(time.Second) // the loop is stuck
	if st := readyz(); st != http.StatusServiceUnavailable {
		t.Errorf("claim loop stuck: %d, want 503", st)
	}
	pass()
	if st := readyz(); st != http.StatusOK {
		t.Errorf("after the loop turned again: %d, want 200", st)
	}
	store.Close() // the database becomes unusable
	if st := readyz(); st != http.StatusServiceUnavailable {
		t.Errorf("database closed: %d, want 503", st)
	}
}

func TestReadinessSaysWhy(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 9, 11, 2, 0, 0, 0, time.UTC)
	check := readiness(fakePinger{}, fakeLoop{}, func() time.Time { return now })
	if err := check(context.Background()); err != nil {
		t.Fatalf("healthy: %v", err)
	}
	check = readiness(fakePinger{err: context.DeadlineExceeded}, fakeLoop{}, func() time.Time { return now })
	if err := check(context.Background()); err == nil || !strings.HasPrefix(err.Error(), "database: ") {
		t.Errorf("database down: %v", err)
	}
	check = readiness(fakePinger{writeErr: scheduler.ErrStoreUnavailable}, fakeLoop{}, func() time.Time { return now })
	if err := check(context.Background()); err == nil || !strings.HasPrefix(err.Error(), "database does not accept writes: ") {
		t.Errorf("database rejects writes: %v", err)
	}
	check = readiness(fakePinger{}, fakeLoop{err: context.Canceled}, func() time.Time { return now })
	if err := check(context.Background()); err == nil || !strings.HasPrefix(err.Error(), "engine: ") {
		t.Errorf("loop stuck: %v", err)
	}
}

type fakePinger struct{ err, writeErr error }

func (f fakePinger) Ping(context.Context) error { return f.err }

func (f fakePinger) Writable(context.Context, time.Time) error { return f.writeErr }

type fakeLoop struct{ err error }

func (f fakeLoop) Stalled(time.Time) error { return f.err }
