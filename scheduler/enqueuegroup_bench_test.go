package scheduler_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"

	"pacer/internal/pacertest"
	"pacer/scheduler"
)

// countingStore counts Enqueue transactions.
type countingStore struct {
	scheduler.Store
	enqueues atomic.Int64
}

func (s *countingStore) Enqueue(ctx context.Context, ops []scheduler.NewOperation, now time.Time) ([]scheduler.EnqueueResult, error) {
	s.enqueues.Add(1)
	return s.Store.Enqueue(ctx, ops, now)
}

// BenchmarkConcurrentSingleEnqueues has 32 goroutines call Service.Enqueue
// with one operation each (as POST /v1/operations does), on a real SQLite
// file with the real clock; the engine does not run. One op is one call;
// ops/tx is how many calls shared a transaction. Run:
//
//	go test -run='^$' -bench=ConcurrentSingleEnqueues -benchtime=20000x ./scheduler/
//
// It stays on SQLite whatever PACER_TEST_STORE says: its figure is the
// SQLite store's, whose single writer the grouping keeps short.
func BenchmarkConcurrentSingleEnqueues(b *testing.B) {
	store := &countingStore{Store: pacertest.OpenStore(b)}
	svc := newScheduler(b, store, clock.New(), scheduler.Config{}).Service
	ctx := context.Background()
	const scopes, clients = 10, 32
	for i := range scopes {
		if _, _, err := svc.PutScope(ctx, scheduler.ScopeInput{Name: fmt.Sprintf("s%d", i), Provider: "generic", BaseURL: "https://example.com"}, "bench"); err != nil {
			b.Fatal(err)
		}
	}
	later := time.Now().Add(time.Hour)
	before := store.enqueues.Load()
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for range clients {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= b.N {
					return
				}
				in := scheduler.OperationInput{ID: fmt.Sprintf("op-%d", i), Scope: fmt.Sprintf("s%d", i%scopes), Method: "POST", Path: "/x",
					Body: []byte(`{"n":1}`), ContentType: "application/json", NotBefore: &later}
				res, err := svc.Enqueue(ctx, []scheduler.OperationInput{in}, func(int) string { return "" })
				if err != nil || res[0].Err != nil || !res[0].Created {
					b.Errorf("enqueue %d: %v %+v", i, err, res)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/float64(store.enqueues.Load()-before), "ops/tx")
}
