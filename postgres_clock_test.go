package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"

	"pacer/internal/pgtest"
	"pacer/scheduler"
)

// skewedClock is the real clock of a machine whose clock is off by off.
type skewedClock struct {
	clock.Clock
	off time.Duration
}

// Now is the real time plus the skew.
func (c skewedClock) Now() time.Time { return c.Clock.Now().Add(c.off) }

// Since is measured from the skewed Now.
func (c skewedClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// Until is measured from the skewed Now.
func (c skewedClock) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }

// WithDeadline reads d on the skewed clock.
func (c skewedClock) WithDeadline(ctx context.Context, d time.Time) (context.Context, context.CancelFunc) {
	return c.Clock.WithDeadline(ctx, d.Add(-c.off))
}

// ignoreDeadline sends requests without their context: a request that
// outlives its lease, as on a machine whose clock stepped.
type ignoreDeadline struct{}

func (ignoreDeadline) RoundTrip(r *http.Request) (*http.Response, error) {
	return http.DefaultTransport.RoundTrip(r.WithContext(context.Background()))
}

// Design §10 "One clock decides": leases and their expiry are database
// time. A node whose clock is 5 s behind the database's claims an
// operation whose request never answers; a node whose clock is 5 s ahead
// recovers the lease only once it has run out by the database's clock
// (here the real one), not 5 s early, as it would if the first node's
// lease were written in its own time.
func TestPostgresSkewedNodesRecoverNoLeaseEarly(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	const timeout, lease = time.Second, 6 * time.Second
	var (
		mu      sync.Mutex
		arrived []time.Time
	)
	release := make(chan struct{})
	var once sync.Once
	prov := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		arrived = append(arrived, time.Now())
		mu.Unlock()
		select { // never answers while the test runs
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(prov.Close)
	arrivals := func() []time.Time {
		mu.Lock()
		defer mu.Unlock()
		return append([]time.Time(nil), arrived...)
	}
	start := func(off time.Duration) *Main {
		t.Helper()
		m := NewMain(ServeConfig{DBPath: url, Listen: "127.0.0.1:0", SecretKey: pgKey(), Clock: skewedClock{clock.New(), off},
			Scheduler: scheduler.Config{Engine: scheduler.EngineConfig{RequestTimeout: timeout, LeaseDuration: lease,
				Client: &http.Client{Transport: ignoreDeadline{}}}}})
		if err := m.Open(context.Background()); err != nil {
			t.Fatalf("open the node %s off: %v", off, err)
		}
		ctx, stop := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- m.Run(ctx) }()
		t.Cleanup(func() { stop(); <-done; m.Close() })
		t.Cleanup(func() { once.Do(func() { close(release) }) }) // first: the requests end
		return m
	}
	waitArrivals := func(n int, within time.Duration) []time.Time {
		t.Helper()
		for deadline := time.Now().Add(within); ; time.Sleep(20 * time.Millisecond) {
			if a := arrivals(); len(a) >= n {
				return a
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d requests within %s, want %d", len(arrivals()), within, n)
			}
		}
	}

	behind := start(-5 * time.Second)
	svc := behind.Scheduler().Service
	ctx := context.Background()
	if _, _, err := svc.PutScope(ctx, scheduler.ScopeInput{Name: "a", Provider: "generic", BaseURL: prov.URL, MaxConcurrent: 1}, "test"); err != nil {
		t.Fatal(err)
	}
	res, err := svc.Enqueue(ctx, []scheduler.OperationInput{{ID: "r", Scope: "a", Method: "GET", Path: "/r"}}, func(int) string { return "" })
	if err != nil || res[0].Err != nil {
		t.Fatalf("enqueue: %v %v", err, res[0].Err)
	}
	first := waitArrivals(1, 10*time.Second)[0]
	claimed, err := svc.GetOperation(ctx, "r")
	if err != nil || claimed.State != scheduler.StateRunning {
		t.Fatalf("after the first request: %s, %v; want running", claimed.State, err)
	}
	start(5 * time.Second) // a node ahead, which recovers the lease once it expired
	var recovered time.Time
	for deadline := time.Now().Add(lease + 10*time.Second); recovered.IsZero(); time.Sleep(20 * time.Millisecond) {
		op, err := svc.GetOperation(ctx, "r")
		if err != nil {
			t.Fatal(err)
		}
		if op.State != scheduler.StateRunning || op.LeaseToken != claimed.LeaseToken {
			recovered = time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("the lease was not recovered within %s of its expiry", lease+10*time.Second)
		}
	}
	if gap := recovered.Sub(first); gap < lease-250*time.Millisecond {
		t.Fatalf("lease recovered %s after the request left, before its %s ran out by the database's clock", gap, lease)
	}
}
