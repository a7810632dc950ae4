package scheduler_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/benbjohnson/clock"

	"pacer/internal/pacertest"
	"pacer/scheduler"
)

// BenchmarkEndToEnd measures operations per second through the whole
// pipeline — enqueue, claim, send over loopback HTTP to a provider that
// answers 200 at once, classify, commit — on a real SQLite file with the
// real clock. Run: go test -run=^$ -bench=EndToEnd -benchtime=5000x ./scheduler/
// It stays on SQLite whatever PACER_TEST_STORE says: its figure is the
// SQLite store's, compared across commits (PostgreSQL's benchmarks are
// pgstore's and scripts/bench's).
func BenchmarkEndToEnd(b *testing.B) {
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"ok":true}`))
	}))
	defer provider.Close()
	store := pacertest.OpenStore(b)
	clk := clock.New()
	policy := scheduler.DefaultPolicy()
	s := newScheduler(b, store, clk, scheduler.Config{Policy: policy, Engine: scheduler.EngineConfig{Workers: 64}})
	eng, svc := s.Engine, s.Service
	ctx := context.Background()
	const scopes = 10
	for i := range scopes {
		if _, _, err := svc.PutScope(ctx, scheduler.ScopeInput{Name: fmt.Sprintf("s%d", i), Provider: "generic", BaseURL: provider.URL, MaxConcurrent: 16}, "bench"); err != nil {
			b.Fatal(err)
		}
	}
	batch := make([]scheduler.OperationInput, 0, scheduler.MaxBatch)
	flush := func() {
		if len(batch) == 0 {
			return
		}
		if _, err := svc.Enqueue(ctx, batch, func(int) string { return "" }); err != nil {
			b.Fatal(err)
		}
		batch = batch[:0]
	}
	for i := range b.N {
		batch = append(batch, scheduler.OperationInput{ID: fmt.Sprintf("op-%d", i), Scope: fmt.Sprintf("s%d", i%scopes), Method: "POST", Path: "/x", Body: []byte(`{"n":1}`), ContentType: "application/json"})
		if len(batch) == cap(batch) {
			flush()
		}
	}
	flush()
	b.ResetTimer()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- eng.Run(runCtx) }()
	for {
		n, err := countState(ctx, svc, scheduler.StateScheduled)
		if err != nil {
			b.Fatal(err)
		}
		r, err := countState(ctx, svc, scheduler.StateRunning)
		if err != nil {
			b.Fatal(err)
		}
		if n == 0 && r == 0 {
			break
		}
		clk.Sleep(20 * time.Millisecond)
	}
	b.StopTimer()
	stop()
	<-done
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// countState counts operations in a state with the public listing (at most
// one page is read: it only needs to know "none left").
func countState(ctx context.Context, svc *scheduler.Service, st scheduler.State) (int, error) {
	page, err := svc.ListOperations(ctx, scheduler.OperationFilter{State: st, Limit: 1})
	return len(page.Operations), err
}
