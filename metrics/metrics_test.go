package metrics_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"

	"pacer/db"
	"pacer/httpapi"
	"pacer/internal/pacertest"
	"pacer/metrics"
	"pacer/scheduler"
)

var t0 = time.Date(2026, 9, 11, 2, 0, 0, 0, time.UTC)

const token = "metrics-test-token"

type bundle struct {
	clock  *clock.Mock
	store  *db.DB
	svc    *scheduler.Service
	engine *scheduler.Engine
	api    *httptest.Server
}

func setup(t *testing.T) *bundle {
	t.Helper()
	clk := clock.NewMock()
	clk.Set(t0)
	store := pacertest.OpenStore(t)
	b := &bundle{clock: clk, store: store}
	m, err := metrics.New(metrics.Config{Counts: store, Clock: clk, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	sched, err := scheduler.New(store, clk, scheduler.Config{Engine: scheduler.EngineConfig{Observer: m, Random: func() float64 { return 0.5 }}})
	if err != nil {
		t.Fatal(err)
	}
	b.engine, b.svc = sched.Engine, sched.Service
	srv, err := httpapi.New(httpapi.Config{Service: b.svc, Token: token, Metrics: m.Handler()})
	if err != nil {
		t.Fatal(err)
	}
	b.api = httptest.NewServer(srv.Handler())
	t.Cleanup(b.api.Close)
	return b
}

func (b *bundle) enqueue(t *testing.T, scope, path string, ids ...string) {
	t.Helper()
	var ins []scheduler.OperationInput
	for _, id := range ids {
		ins = append(ins, scheduler.OperationInput{ID: id, Scope: scope, Method: "GET", Path: path})
	}
	res, err := b.svc.Enqueue(context.Background(), ins, func(int) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
}

func (b *bundle) pass(t *testing.T) {
	t.Helper()
	if _, err := b.engine.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	b.engine.Wait()
}

// scrape GETs /metrics with the token and returns its samples, keyed by
// the sample's name and labels as exposed (`name{a="x",b="y"}`).
func (b *bundle) scrape(t *testing.T) map[string]float64 {
	t.Helper()
	req, _ := http.NewRequest("GET", b.api.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET /metrics: %d %s", resp.StatusCode, body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type %q, want the text exposition format", ct)
	}
	samples := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("unparsable sample %q", line)
		}
		samples[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return samples
}

func want(t *testing.T, s map[string]float64, key string, v float64) {
	t.Helper()
	got, ok := s[key]
	if !ok {
		t.Errorf("%s missing from /metrics", key)
	} else if got != v {
		t.Errorf("%s = %v, want %v", key, got, v)
	}
}

// TestMetricsExposedAndMoving enqueues work, runs the engine and scrapes
// /metrics between steps: the gauges follow the store, the counters and
// histograms grow, and no label names a scope or an operation.
func TestMetricsExposedAndMoving(t *testing.T) {
	b := setup(t)
	prov := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/limited") {
			w.Header().Set("Retry-After", "30")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		fmt.Fprint(w, `{"ok":true}`)
	}))
	defer prov.Close()
	for _, name := range []string{"acct-a", "acct-b"} {
		if _, _, err := b.svc.PutScope(context.Background(), scheduler.ScopeInput{Name: name, Provider: "generic", BaseURL: prov.URL}, "test"); err != nil {
			t.Fatal(err)
		}
	}
	b.enqueue(t, "acct-a", "/ok", "op-1", "op-2", "op-3")
	b.clock.Add(2 * time.Second) // each will be claimed 2 s after it became due

	s1 := b.scrape(t)
	want(t, s1, `pacer_operations{state="scheduled"}`, 3)
	want(t, s1, `pacer_operations{state="succeeded"}`, 0)
	want(t, s1, `pacer_scopes{status="open"}`, 2)
	want(t, s1, `pacer_requests_in_flight`, 0)
	want(t, s1, `pacer_build_info{version="test"}`, 1)
	want(t, s1, `pacer_dispatch_lateness_seconds_count`, 0)

	b.pass(t)
	s2 := b.scrape(t)
	want(t, s2, `pacer_operations{state="scheduled"}`, 0)
	want(t, s2, `pacer_operations{state="succeeded"}`, 3)
	want(t, s2, `pacer_attempts_total{class="success",provider="generic"}`, 3)
	want(t, s2, `pacer_dispatch_lateness_seconds_count`, 3)
	want(t, s2, `pacer_dispatch_lateness_seconds_sum`, 6)
	want(t, s2, `pacer_dispatch_lateness_seconds_bucket{le="1.024"}`, 0)
	want(t, s2, `pacer_dispatch_lateness_seconds_bucket{le="4.096"}`, 3)
	want(t, s2, `pacer_claimed_operations_total`, 3)
	want(t, s2, `pacer_attempt_duration_seconds_count`, 3)
	if s2[`pacer_claim_duration_seconds_count`] < 1 {
		t.Errorf("claim duration count %v, want at least one claim", s2[`pacer_claim_duration_seconds_count`])
	}

	b.enqueue(t, "acct-b", "/limited", "op-4")
	b.enqueue(t, "acct-a", "/ok", "op-5")
	b.pass(t)
	s3 := b.scrape(t)
	want(t, s3, `pacer_attempts_total{class="success",provider="generic"}`, 4)
	want(t, s3, `pacer_attempts_total{class="rateLimited",provider="generic"}`, 1)
	want(t, s3, `pacer_operations{state="waitingForBudget"}`, 1)
	want(t, s3, `pacer_scopes{status="paused"}`, 1)
	want(t, s3, `pacer_scopes{status="open"}`, 1)
	want(t, s3, `pacer_claimed_operations_total`, 5)
	for key := range s3 {
		for _, leak := range []string{"acct-", "op-"} {
			if strings.Contains(key, leak) {
				t.Errorf("sample %s carries a scope or operation label", key)
			}
		}
	}
	if s3[`go_goroutines`] == 0 || s3[`process_start_time_seconds`] == 0 {
		t.Error("runtime and process collectors missing")
	}
}

func TestMetricsNeedTheToken(t *testing.T) {
	b := setup(t)
	resp, err := http.Get(b.api.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") {
		t.Errorf("GET /metrics without the token: %d %s, want a 401 problem", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

// TestMetricsSurviveAStoreFailure closes the store: the state gauges go,
// the rest of the scrape stays.
func TestMetricsSurviveAStoreFailure(t *testing.T) {
	b := setup(t)
	b.store.Close()
	s := b.scrape(t)
	if _, ok := s[`pacer_operations{state="scheduled"}`]; ok {
		t.Error("state gauge reported from a closed store")
	}
	want(t, s, `pacer_requests_in_flight`, 0)
	want(t, s, `pacer_build_info{version="test"}`, 1)
}
