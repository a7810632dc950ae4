// Package metrics exposes pacer's Prometheus metrics: it implements
// scheduler.Observer for the engine's measurements and computes the
// operation and scope gauges from the store at scrape time. Everything
// lives in a registry of its own (never the global default one), served by
// Handler at /metrics.
//
// No label carries an operation or a scope: label values are bounded sets
// (states, scope statuses, provider profile names, outcome classes).
//
//	pacer_operations{state}                        gauge, at scrape time (database-wide)
//	pacer_scopes{status}                           gauge, at scrape time (open, paused, held; database-wide)
//	pacer_feed_backlog                             gauge, at scrape time (database-wide; PostgreSQL only): changes not numbered yet
//	pacer_attempts_total{provider,class}           counter
//	pacer_attempt_duration_seconds                 histogram
//	pacer_dispatch_lateness_seconds                histogram: claim time − eligibility
//	pacer_claim_duration_seconds                   histogram: one claim transaction (with the completions it commits)
//	pacer_claimed_operations_total                 counter
//	pacer_requests_in_flight                       gauge
//	pacer_token_refreshes_total{provider,result}   counter: renewing grants' refreshes (ok, revoked, backoff)
//	pacer_tokens_expiring_soon                     gauge, at scrape time: scopes whose token expires within 5 minutes
//	pacer_build_info{version}                      gauge, always 1
//
// plus the Go runtime (go_*) and process (process_*) collectors.
//
// The database-wide gauges count the whole database, not the process. On
// a database several processes share (a SharedCounter: PostgreSQL) only
// the process the database elects reports them, at each scrape; the
// others leave them out. So a sum across processes is the database's
// figure, as every other metric is the process's own and sums too.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"pacer/providers"
	"pacer/scheduler"
)

// DefaultScrapeTimeout bounds the store query a scrape makes.
const DefaultScrapeTimeout = 5 * time.Second

// Counter is the store query behind the state gauges (scheduler.Store has
// it).
type Counter interface {
	CountByState(ctx context.Context, now time.Time) (scheduler.Counts, error)
}

// SharedCounter is the Counter of a database several processes share: it
// says which one process reports the database-wide gauges, and counts
// the change feed's backlog (pgstore.Store implements it).
type SharedCounter interface {
	Counter
	// ReportsDatabaseGauges reports whether this process reports the
	// database-wide gauges now (winning or renewing its term): at any
	// moment at most one process sharing the database does.
	ReportsDatabaseGauges(ctx context.Context) (bool, error)
	// FeedBacklog counts the changes of the feed not numbered yet.
	FeedBacklog(ctx context.Context) (int, error)
}

// Config holds what Metrics needs.
type Config struct {
	// Counts answers the state gauges at scrape time. Required. When it
	// is a SharedCounter, they are reported only while it says so.
	Counts Counter
	// Clock is the scheduler's clock (a scope's pause is judged at its
	// now). Required.
	Clock clock.Clock
	// Version is reported by pacer_build_info.
	Version string
	// ScrapeTimeout bounds the store query of one scrape (default
	// DefaultScrapeTimeout).
	ScrapeTimeout time.Duration
	// Logger receives scrape errors; nil discards.
	Logger *slog.Logger
}

// Metrics is pacer's Prometheus registry and the engine's Observer. It is
// safe for concurrent use.
type Metrics struct {
	reg             *prometheus.Registry
	handler         http.Handler
	attempts        *prometheus.CounterVec
	attemptDuration prometheus.Histogram
	lateness        prometheus.Histogram
	claimDuration   prometheus.Histogram
	claimed         prometheus.Counter
	inFlight        prometheus.Gauge
	refreshes       *prometheus.CounterVec
}

var _ scheduler.Observer = (*Metrics)(nil)

// New builds the registry with every metric registered.
func New(cfg Config) (*Metrics, error) {
	if cfg.Counts == nil || cfg.Clock == nil {
		return nil, errors.New("metrics: config needs a store to count and a clock")
	}
	if cfg.ScrapeTimeout <= 0 {
		cfg.ScrapeTimeout = DefaultScrapeTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pacer_attempts_total",
			Help: "Attempts finished, by provider profile and outcome class of the answer.",
		}, []string{"provider", "class"}),
		attemptDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "pacer_attempt_duration_seconds",
			Help:    "Time from sending a request to its classified answer (or transport error).",
			Buckets: prometheus.ExponentialBuckets(0.01, 2.5, 10), // 10ms … 38s
		}),
		lateness: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "pacer_dispatch_lateness_seconds",
			Help:    "Claim time minus the time the operation became eligible: its nextAttemptAt, or its scope's ready time (pause end, budget reset, rate slot) when later.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 12), // 1ms … 70min
		}),
		claimDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "pacer_claim_duration_seconds",
			Help:    "Duration of one claim transaction, the finished attempts it commits included (the engine completes and claims in one transaction).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14), // 0.5ms … 4s
		}),
		claimed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pacer_claimed_operations_total",
			Help: "Operations leased by the claim loop.",
		}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pacer_requests_in_flight", Help: "Requests to providers being sent right now.",
		}),
		refreshes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pacer_token_refreshes_total",
			Help: "Refreshes of renewing grants' access tokens that asked the token endpoint, by provider profile and result: ok, revoked (refused for good: the scope is held), backoff (429, 5xx or no answer: the scope pauses).",
		}, []string{"provider", "result"}),
	}
	cs := []prometheus.Collector{
		m.attempts, m.attemptDuration, m.lateness, m.claimDuration, m.claimed, m.inFlight, m.refreshes,
		newStateCollector(cfg.Counts, cfg.Clock, cfg.ScrapeTimeout),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "pacer_build_info", Help: "Always 1; the label names the running version.",
			ConstLabels: prometheus.Labels{"version": cfg.Version},
		}, func() float64 { return 1 }),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	}
	for _, c := range cs {
		if err := m.reg.Register(c); err != nil {
			return nil, fmt.Errorf("metrics: register: %w", err)
		}
	}
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		// A failing store query spoils only the state gauges, not the scrape.
		ErrorHandling: promhttp.ContinueOnError,
		ErrorLog:      slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
		Timeout:       cfg.ScrapeTimeout + time.Second,
	})
	return m, nil
}

// Handler serves the registry in the Prometheus exposition formats.
func (m *Metrics) Handler() http.Handler { return m.handler }

// Registry is the registry behind Handler, for tests and extra collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// ObserveClaim implements scheduler.Observer.
func (m *Metrics) ObserveClaim(took time.Duration, claimed int) {
	m.claimDuration.Observe(took.Seconds())
	m.claimed.Add(float64(claimed))
}

// ObserveDispatch implements scheduler.Observer.
func (m *Metrics) ObserveDispatch(_ string, lateness time.Duration) {
	m.lateness.Observe(lateness.Seconds())
}

// ObserveAttempt implements scheduler.Observer.
func (m *Metrics) ObserveAttempt(provider string, class providers.Class, took time.Duration) {
	m.attempts.WithLabelValues(provider, string(class)).Inc()
	m.attemptDuration.Observe(took.Seconds())
}

// ObserveInFlight implements scheduler.Observer.
func (m *Metrics) ObserveInFlight(delta int) { m.inFlight.Add(float64(delta)) }

// ObserveTokenRefresh implements scheduler.Observer.
func (m *Metrics) ObserveTokenRefresh(provider, result string) {
	m.refreshes.WithLabelValues(provider, result).Inc()
}

// stateCollector reports the database-wide gauges (operations, scopes,
// scopes whose token expires soon, the feed's backlog) from one store
// query per scrape, or, on a shared database, from the process elected to
// report them only. Every state and status is reported, zero included, so
// series do not appear and vanish on the process that reports them.
type stateCollector struct {
	counts     Counter
	shared     SharedCounter // counts, when it is one
	clock      clock.Clock
	timeout    time.Duration
	operations *prometheus.Desc
	scopes     *prometheus.Desc
	expiring   *prometheus.Desc
	backlog    *prometheus.Desc
}

func newStateCollector(counts Counter, clk clock.Clock, timeout time.Duration) *stateCollector {
	shared, _ := counts.(SharedCounter)
	return &stateCollector{
		counts: counts, shared: shared, clock: clk, timeout: timeout,
		operations: prometheus.NewDesc("pacer_operations", "Operations by state, counted at scrape time in the whole database (on a shared database by one process only).", []string{"state"}, nil),
		scopes:     prometheus.NewDesc("pacer_scopes", "Provider scopes by status (open, paused, held), counted at scrape time in the whole database (on a shared database by one process only).", []string{"status"}, nil),
		expiring:   prometheus.NewDesc("pacer_tokens_expiring_soon", "Scopes whose renewing grant's access token expires within 5 minutes (or has expired), counted at scrape time in the whole database (on a shared database by one process only).", nil, nil),
		backlog:    prometheus.NewDesc("pacer_feed_backlog", "Changes of the feed not numbered yet (PostgreSQL, by one process only): a figure that keeps growing means a long transaction holds the feed back.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.operations
	ch <- c.scopes
	ch <- c.expiring
	if c.shared != nil {
		ch <- c.backlog
	}
}

// Collect implements prometheus.Collector.
func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	descs := []*prometheus.Desc{c.operations, c.scopes, c.expiring}
	if c.shared != nil {
		descs = append(descs, c.backlog)
	}
	invalid := func(err error) {
		for _, d := range descs {
			ch <- prometheus.NewInvalidMetric(d, err)
		}
	}
	if c.shared != nil {
		reports, err := c.shared.ReportsDatabaseGauges(ctx)
		if err != nil {
			invalid(fmt.Errorf("elect the process reporting the database-wide gauges: %w", err))
			return
		}
		if !reports {
			return // another process reports them
		}
	}
	counts, err := c.counts.CountByState(ctx, c.clock.Now().UTC())
	if err != nil {
		invalid(fmt.Errorf("count operations and scopes: %w", err))
		return
	}
	for _, s := range scheduler.AllStates {
		ch <- prometheus.MustNewConstMetric(c.operations, prometheus.GaugeValue, float64(counts.Operations[s]), string(s))
	}
	for _, s := range []scheduler.ScopeStatus{scheduler.ScopeOpen, scheduler.ScopePaused, scheduler.ScopeHeld} {
		ch <- prometheus.MustNewConstMetric(c.scopes, prometheus.GaugeValue, float64(counts.Scopes[s]), string(s))
	}
	ch <- prometheus.MustNewConstMetric(c.expiring, prometheus.GaugeValue, float64(counts.TokensExpiring))
	if c.shared != nil {
		n, err := c.shared.FeedBacklog(ctx)
		if err != nil {
			ch <- prometheus.NewInvalidMetric(c.backlog, err)
			return
		}
		ch <- prometheus.MustNewConstMetric(c.backlog, prometheus.GaugeValue, float64(n))
	}
}
