package scheduler_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"pacer/providers"
	"pacer/scheduler"
)

// ignoreDeadline sends requests without their context: it stands for a
// request deadline that (on the monotonic clock) has not passed while the
// wall clock jumped far ahead.
type ignoreDeadline struct{}

func (ignoreDeadline) RoundTrip(r *http.Request) (*http.Response, error) {
	return http.DefaultTransport.RoundTrip(r.WithContext(context.Background()))
}

// §11 "A live worker's lease is never recovered by its own process": a
// wall-clock step far past the lease while the request still runs neither
// recovers the lease nor sends again, and the real answer is recorded.
func TestOwnLiveLeaseIsNotRecovered(t *testing.T) {
	h := setup(t, scheduler.EngineConfig{
		RequestTimeout: 20 * time.Second, LeaseDuration: 30 * time.Second,
		Client: &http.Client{Transport: ignoreDeadline{}},
	})
	prov := newProvider(t, h.clock)
	release := make(chan struct{})
	var once sync.Once
	answer := func() { once.Do(func() { close(release) }) }
	t.Cleanup(answer) // before the provider closes, also when the test fails
	prov.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		prov.serve(httptest.NewRecorder(), r) // record it
		<-release
		w.WriteHeader(200)
		io.WriteString(w, `{"real":"answer"}`)
	})
	h.scope("a", prov.URL, "", 4)
	h.enqueue(scheduler.OperationInput{ID: "r", Scope: "a", Method: "GET", Path: "/slow"})
	if n, err := h.engine.RunOnce(context.Background()); err != nil || n != 1 {
		t.Fatalf("claim: %d, %v", n, err)
	}
	waitFor(t, func() bool { return len(prov.requests("/slow")) == 1 })
	claimed := h.op("r")

	h.clock.Add(10 * time.Minute) // the wall clock steps far past the lease
	for range 3 {
		if _, err := h.engine.RunOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if op := h.op("r"); op.State != scheduler.StateRunning || op.LeaseToken != claimed.LeaseToken {
		t.Errorf("after the clock step: %s with lease token %d (claimed with %d): the engine recovered its own live worker's lease", op.State, op.LeaseToken, claimed.LeaseToken)
	}
	answer()
	h.engine.Wait()
	op := h.wantState("r", scheduler.StateSucceeded)
	if n := len(prov.requests("/slow")); n != 1 {
		t.Errorf("provider received %d requests, want 1", n)
	}
	if op.Result == nil || !strings.Contains(string(op.Result.Body), "real") {
		t.Errorf("result = %+v, want the real answer", op.Result)
	}
	atts, err := h.svc.ListAttempts(context.Background(), "r")
	if err != nil {
		t.Fatal(err)
	}
	if len(atts) != 1 || atts[0].Stale || atts[0].Status != 200 {
		t.Errorf("attempts = %+v, want one, answered 200", atts)
	}
}

// finishesWhileListed is a store on which the operation finishing completes
// (as its worker would) right after ListRunning listed it: the listing the
// recovery works from is stale for it.
type finishesWhileListed struct {
	scheduler.Store
	finishing string
}

func (s finishesWhileListed) ListRunning(ctx context.Context, expiredBy time.Time, limit int) ([]scheduler.Claim, error) {
	claims, err := s.Store.ListRunning(ctx, expiredBy, limit)
	for _, c := range claims {
		if c.Operation.ID != s.finishing {
			continue
		}
		op := c.Operation
		if _, err := s.Store.Complete(ctx, []scheduler.Completion{{
			OperationID: op.ID, LeaseToken: op.LeaseToken, Attempt: op.Attempt, FinishedAt: expiredBy,
			Outcome:  providers.Outcome{Class: providers.ClassSuccess, Status: 200},
			Decision: scheduler.Decision{State: scheduler.StateSucceeded, Reason: "answered"},
		}}); err != nil {
			return nil, err
		}
	}
	return claims, err
}

// recordLog is a slog handler that calls seen for each record.
type recordLog struct {
	mu   sync.Mutex
	seen func(slog.Record)
}

func (l *recordLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *recordLog) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen(r)
	return nil
}
func (l *recordLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *recordLog) WithGroup(string) slog.Handler      { return l }

// "lease recovered" is logged after the recovery committed, and only for
// the leases it actually recovered (not one the fence kept because its
// worker completed first).
func TestLeaseRecoveredLoggedAfterCommit(t *testing.T) {
	h := setup(t, scheduler.EngineConfig{})
	h.scope("a", "http://127.0.0.1:1", "", 4)
	h.enqueue(scheduler.OperationInput{ID: "gone", Scope: "a", Method: "GET", Path: "/x"})
	h.enqueue(scheduler.OperationInput{ID: "finishing", Scope: "a", Method: "GET", Path: "/y"})
	// Another process's claims (this engine holds neither lease).
	claims, err := h.store.ClaimDue(context.Background(), scheduler.ClaimParams{Now: h.clock.Now(), Limit: 2, LeaseFor: 30 * time.Second})
	if err != nil || len(claims) != 2 {
		t.Fatalf("claim: %d, %v", len(claims), err)
	}

	var logged []string
	log := &recordLog{seen: func(r slog.Record) {
		if r.Message != "lease recovered" {
			return
		}
		var id string
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "operation" {
				id = a.Value.String()
			}
			return true
		})
		logged = append(logged, id)
		// Logged after the commit: the recovery is visible already.
		if op, err := h.store.GetOperation(context.Background(), id); err != nil || op.State == scheduler.StateRunning {
			t.Errorf("%q logged as recovered while it is still %s (%v)", id, op.State, err)
		}
	}}
	store := finishesWhileListed{Store: h.store, finishing: "finishing"}
	eng := newScheduler(t, store, h.clock, scheduler.Config{Engine: scheduler.EngineConfig{Random: half, Logger: slog.New(log)}}).Engine
	h.clock.Add(time.Minute)
	if _, err := eng.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	eng.Wait()
	h.wantState("finishing", scheduler.StateSucceeded)
	if op := h.op("gone"); op.State == scheduler.StateRunning {
		t.Fatalf("gone was not recovered")
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	if len(logged) != 1 || logged[0] != "gone" {
		t.Errorf("logged as recovered: %q, want only gone", logged)
	}
}
