package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/benbjohnson/clock"

	"pacer/internal/pgtest"
	"pacer/metrics"
	"pacer/pgstore"
	"pacer/scheduler"
	"pacer/scheduler/storetest"
)

// gauges scrapes m: the database-wide gauges it reports, by series
// ("pacer_operations/scheduled", "pacer_feed_backlog"), and whether it
// reported any.
func gauges(t *testing.T, m *metrics.Metrics) (map[string]float64, bool) {
	t.Helper()
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]float64{}
	for _, f := range families {
		switch f.GetName() {
		case "pacer_operations", "pacer_scopes", "pacer_feed_backlog":
		default:
			continue
		}
		for _, m := range f.GetMetric() {
			key := f.GetName()
			for _, l := range m.GetLabel() {
				key += "/" + l.GetValue()
			}
			out[key] = m.GetGauge().GetValue()
		}
	}
	return out, len(out) > 0
}

// The gauges that count the whole database are reported by one node at a
// time, so their sum across nodes is the database's figure: the feed's
// backlog among them. When that node closes, another reports them at its
// next scrape.
func TestDatabaseGaugesReportedByOneNode(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URLFrom(t, migrated)
	nodes := []*pgstore.Store{openNode(t, url, pgstore.Options{}), openNode(t, url, pgstore.Options{})}
	meters := make([]*metrics.Metrics, len(nodes))
	for i, n := range nodes {
		m, err := metrics.New(metrics.Config{Counts: n, Clock: clock.New()})
		if err != nil {
			t.Fatal(err)
		}
		meters[i] = m
	}
	now := time.Now()
	storetest.PutScope(t, nodes[0], "a", storetest.ScopeOpts{})
	storetest.Enqueue(t, nodes[1], now, storetest.NewRequest("r1", "a", "GET", "/1"), storetest.NewRequest("r2", "a", "GET", "/2"))
	storetest.Enqueue(t, nodes[0], now, storetest.NewRequest("r3", "a", "GET", "/3"))

	// scrapeAll scrapes every meter of alive and returns the summed
	// series and which one reported.
	scrapeAll := func(alive []int) (map[string]float64, []int) {
		sum, reporters := map[string]float64{}, []int(nil)
		for _, i := range alive {
			g, reported := gauges(t, meters[i])
			if reported {
				reporters = append(reporters, i)
			}
			for k, v := range g {
				sum[k] += v
			}
		}
		return sum, reporters
	}
	var first int
	for round := range 3 {
		sum, reporters := scrapeAll([]int{0, 1})
		if len(reporters) != 1 {
			t.Fatalf("round %d: %d nodes reported the database-wide gauges, want 1", round, len(reporters))
		}
		if round == 0 {
			first = reporters[0]
		} else if reporters[0] != first {
			t.Errorf("round %d: node %d reported, then node %d: the reporter changed while both live", round, first, reporters[0])
		}
		if got := sum["pacer_operations/"+string(scheduler.StateScheduled)]; got != 3 {
			t.Errorf("round %d: scheduled summed over the nodes: %v, want 3", round, got)
		}
		if got := sum["pacer_scopes/"+string(scheduler.ScopeOpen)]; got != 1 {
			t.Errorf("round %d: open scopes summed over the nodes: %v, want 1", round, got)
		}
		// No one read the feed: the three enqueues' changes wait for their numbers.
		if got := sum["pacer_feed_backlog"]; got != 3 {
			t.Errorf("round %d: feed backlog summed over the nodes: %v, want 3", round, got)
		}
	}
	if _, err := nodes[0].ListChanges(ctx, scheduler.ChangeFilter{Limit: 10}); err != nil { // numbers them
		t.Fatal(err)
	}

	nodes[first].Close()
	other := 1 - first
	sum, reporters := scrapeAll([]int{other})
	if len(reporters) != 1 {
		t.Fatalf("after the reporting node closed, the other did not report the database-wide gauges")
	}
	if got := sum["pacer_operations/"+string(scheduler.StateScheduled)]; got != 3 {
		t.Errorf("scheduled after the handover: %v, want 3", got)
	}
	if got, ok := sum["pacer_feed_backlog"]; !ok || got != 0 {
		t.Errorf("feed backlog after a read of the feed: %v (reported %v), want 0", got, ok)
	}
}
