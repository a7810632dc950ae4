package pgstore_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"

	"pacer/internal/pacertest"
	"pacer/internal/pgtest"
	"pacer/scheduler"
	"pacer/scheduler/storetest"
)

// Design §13 across processes: two schedulers, each with its own store
// (its own pool, as two serve processes have), share one database and one
// scope whose 3-second tokens renew at a stand-in endpoint that rotates
// refresh tokens (so two refreshes at once would spend the same refresh
// token, and one would fail). Over a few seconds of sends from both the
// endpoint never answers two requests at once, every refresh succeeds, and
// every request reaches the provider with a current token.
func TestTokenRefreshOncePerScopeAcrossProcesses(t *testing.T) {
	clk := clock.New()
	ts := pacertest.NewTokenServer(t, clk, "client-1", "client-secret-1234", 3*time.Second)
	ts.Hold = 30 * time.Millisecond // requests at once would overlap
	var invalid, sent atomic.Int64
	prov := httptest.NewServer(ts.Resource(func(_ *http.Request, _ string, valid bool) {
		sent.Add(1)
		if !valid {
			invalid.Add(1)
		}
	}))
	t.Cleanup(prov.Close)

	url := pgtest.URLFrom(t, migrated)
	stores := []*pgStoreT{{s: openStoreAt(t, url)}, {s: openStoreAt(t, url)}}
	_, _, err := stores[0].s.PutScope(context.Background(), scheduler.ScopeConfig{
		Name: "acct", Provider: "generic", BaseURL: prov.URL, MaxConcurrent: 8,
		Credentials: scheduler.Credentials{Type: scheduler.CredentialOAuth2, TokenURL: ts.TokenURL(),
			ClientID: ts.ClientID, ClientSecret: ts.ClientSecret, RefreshToken: ts.IssueRefreshToken()},
	}, scheduler.Action{Actor: "test", At: clk.Now(), Reason: "setup"})
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range stores {
		st.sched, err = scheduler.New(st.s, clk, scheduler.Config{
			Engine: scheduler.EngineConfig{Workers: 4, RequestTimeout: time.Second, LeaseDuration: 10 * time.Second},
			Pruner: scheduler.PrunerConfig{KeepForever: true},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	end := time.Now().Add(5 * time.Second)
	var wg sync.WaitGroup
	for i, st := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; time.Now().Before(end); n++ {
				op := storetest.NewRequest(fmt.Sprintf("p%d-%d", i, n), "acct", "GET", "/items")
				op.NotBefore = clk.Now()
				if _, err := st.s.Enqueue(context.Background(), []scheduler.NewOperation{op}, clk.Now()); err != nil {
					t.Error(err)
					return
				}
				if _, err := st.sched.Engine.RunOnce(context.Background()); err != nil {
					t.Error(err)
					return
				}
				st.sched.Engine.Wait()
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	calls := ts.Calls()
	for _, c := range calls {
		if c.Status != 200 {
			t.Errorf("a refresh failed (%d): two refreshes spent one refresh token; calls %+v", c.Status, calls)
		}
	}
	if n := ts.MaxInFlight(); n != 1 {
		t.Errorf("the token endpoint answered %d requests at once, want 1", n)
	}
	if invalid.Load() != 0 || sent.Load() < 50 {
		t.Errorf("%d of %d requests carried an invalid token", invalid.Load(), sent.Load())
	}
	// 5 s of 3 s tokens renewed about 1.3 s ahead: a handful of refreshes.
	if len(calls) < 2 || len(calls) > 8 {
		t.Errorf("%d token requests over 5 s of 3 s tokens", len(calls))
	}
	t.Logf("%d sends, %d token requests", sent.Load(), len(calls))
}

type pgStoreT struct {
	s     scheduler.Store
	sched *scheduler.Scheduler
}
