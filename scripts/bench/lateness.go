package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// latenessConfig is the offered load of the lateness runs: Rate operations
// per second, their due times spread evenly over Seconds.
type latenessConfig struct {
	Rate    float64
	Seconds float64
	// KeyHeader, when set, is the pacer scopes' idempotency header (see
	// createBenchScopes).
	KeyHeader string
}

// ops is how many operations one lateness run sends.
func (c latenessConfig) ops() int {
	return int(math.Round(c.Rate * c.Seconds))
}

// latenessLead is how far after the start the first operation is due: enough
// to enqueue all n up front (2 s plus n at 5,000 per second).
func latenessLead(n int) time.Duration {
	return 2*time.Second + time.Duration(n)*time.Second/5000
}

// dueMs is when operation i of a run is due, in Unix ms: due0 + i/rate,
// truncated to whole milliseconds (pacer stores ms).
func dueMs(due0 int64, i int, rate float64) int64 {
	return due0 + int64(math.Floor(float64(i)*1000/rate))
}

// sleepUntil sleeps until Unix ms t or ctx ends.
func sleepUntil(ctx context.Context, t int64) {
	d := time.Until(time.UnixMilli(t))
	if d <= 0 {
		return
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
	case <-timer.C:
	}
}

// latenessRow is one system's lateness measurement.
type latenessRow struct {
	Name  string
	Rate  float64
	N     int
	Stats latenessStats
	Note  string
	Err   string
}

// runLateness clears the provider's lateness samples, runs one system's
// lateness measurement ("pacer-lateness" or "river-lateness"), and reads the
// provider's figures.
func runLateness(sys string, lc latenessConfig, workers int, providerURL, tmp, repo string, timeout time.Duration, pg *pgServer) latenessRow {
	row := latenessRow{Name: sys, Rate: lc.Rate, N: lc.ops()}
	if lc.Rate <= 0 || lc.Seconds <= 0 || row.N <= 0 {
		row.Err = "check flags: -lateness-rate and -lateness-seconds must be positive"
		return row
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	hc := &http.Client{Timeout: 10 * time.Second}
	if _, err := call(ctx, hc, http.MethodPost, providerURL+"/lateness/reset", "", http.StatusNoContent); err != nil {
		row.Err = fmt.Sprintf("reset provider lateness: %v", err)
		return row
	}
	var r result
	switch sys {
	case "pacer-lateness", "pg-pacer-lateness":
		var err error
		if r, err = runPacerLateness(ctx, sys, lc, workers, providerURL, tmp, repo, pg); err != nil {
			r.Err = err.Error()
		}
	case "river-lateness":
		dir := filepath.Join(tmp, sys)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			row.Err = fmt.Sprintf("make dir: %v", err)
			return row
		}
		r = runSelf(sys, latenessArgs{Rate: lc.Rate, N: row.N, Workers: workers, Provider: providerURL, Dir: dir, Timeout: timeout}, timeout)
	}
	row.Note = r.Note
	if r.Err != "" {
		row.Err = r.Err
		return row
	}
	out, err := call(ctx, hc, http.MethodGet, providerURL+"/lateness", "", http.StatusOK)
	if err != nil {
		row.Err = fmt.Sprintf("read provider lateness: %v", err)
		return row
	}
	if err := json.Unmarshal(out, &row.Stats); err != nil {
		row.Err = fmt.Sprintf("decode provider lateness %q: %v", out, err)
		return row
	}
	s := row.Stats
	if s.Count != row.N {
		row.Note += fmt.Sprintf("; PROVIDER SAW %d REQUESTS FOR %d OPERATIONS", s.Count, row.N)
	}
	if s.Dropped > 0 || s.Invalid > 0 {
		row.Note += fmt.Sprintf("; %d samples dropped, %d invalid", s.Dropped, s.Invalid)
	}
	if s.Early > 0 {
		fmt.Fprintf(os.Stderr, "%s: WARNING: %d of %d requests arrived BEFORE their due time (earliest %.3f ms early)\n", sys, s.Early, s.Count, -s.Min)
	}
	return row
}

// runPacerLateness builds and serves pacer (with scale.go's helpers; for
// pg-pacer-lateness on a database of pg's), enqueues n operations through
// the batch API (1,000 per call, round-robin over the scopes) with notBefore
// spread evenly from due0 at the offered rate, each request carrying its due
// time in dueHeader, and waits until none is pending.
func runPacerLateness(ctx context.Context, sys string, lc latenessConfig, workers int, provider, tmp, repo string, pg *pgServer) (result, error) {
	var r result
	n := lc.ops()
	dir := filepath.Join(tmp, sys)
	bin, err := buildPacer(ctx, repo, dir)
	if err != nil {
		return r, err
	}
	db, logPath, env := filepath.Join(dir, "pacer.db"), filepath.Join(dir, "pacer.db.log"), []string(nil)
	if sys == "pg-pacer-lateness" {
		if db, err = pg.newDatabase(ctx, sys); err != nil {
			return r, err
		}
		logPath, env = filepath.Join(dir, "pacer.log"), []string{"PACER_SECRET_KEY=" + pg.key}
	}
	p, err := startPacerOn(ctx, bin, db, logPath, env, workers)
	if err != nil {
		return r, err
	}
	if sys == "pg-pacer-lateness" && os.Getenv("PACERBENCH_PGSAMPLE") != "" {
		sampler, err := startPGSampler(db)
		if err != nil {
			return r, err
		}
		defer sampler.stop(os.Stderr, sys)
	}
	defer p.stop()
	if err := createBenchScopes(ctx, p.hc, p.base, provider, lc.KeyHeader); err != nil {
		return r, err
	}

	start := time.Now()
	due0 := start.Add(latenessLead(n)).UnixMilli()
	err = enqueueAll(ctx, p.hc, p.base, n, func(j int) string {
		due := dueMs(due0, j, lc.Rate)
		return fmt.Sprintf(`{"operationId":"late-%d","providerScope":"bench-%d","request":{"method":"POST","path":"/x","headers":{%q:"%d"},"body":{"n":1}},"notBefore":%q}`,
			j, j%pacerScopes, dueHeader, due, time.UnixMilli(due).UTC().Format(time.RFC3339Nano))
	})
	if err != nil {
		return r, err
	}
	enqueued := time.Now()
	if slack := time.UnixMilli(due0).Sub(enqueued); slack <= 0 {
		return r, fmt.Errorf("check lateness run: enqueueing took %s, %s past the first due time; lower -lateness-rate or -lateness-seconds", enqueued.Sub(start).Round(time.Millisecond), -slack)
	}
	sleepUntil(ctx, dueMs(due0, n-1, lc.Rate))
	if err := waitPacerDone(ctx, p.hc, p.base); err != nil {
		return r, err
	}
	r.Ops, r.Seconds = n, time.Since(start).Seconds()
	r.Note = fmt.Sprintf("notBefore in ms; %d ops enqueued in %.2fs, %.2fs before the first was due", n,
		enqueued.Sub(start).Seconds(), time.UnixMilli(due0).Sub(enqueued).Seconds())
	return r, nil
}

// printLatenessTable writes the lateness rows and the pacer/River ratios as
// a Markdown table.
func printLatenessTable(w io.Writer, rows []latenessRow) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w, "\nLateness: send time at the provider minus the operation's due time (notBefore / ScheduledAt), due times spread evenly at the offered rate")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| system | offered ops/s | n | lateness p50 ms | p99 ms | max ms | early sends | note |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
	byName := map[string]latenessRow{}
	for _, r := range rows {
		if r.Err != "" {
			fmt.Fprintf(w, "| %s | %.0f | %d | error | | | | %s |\n", r.Name, r.Rate, r.N, r.Err)
			continue
		}
		byName[r.Name] = r
		s := r.Stats
		fmt.Fprintf(w, "| %s | %.0f | %d | %.1f | %.1f | %.1f | %d | %s |\n", r.Name, r.Rate, s.Count, s.P50, s.P99, s.Max, s.Early, r.Note)
	}
	p, ok1 := byName["pacer-lateness"]
	o, ok2 := byName["river-lateness"]
	if !ok1 || !ok2 {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| ratio | lateness p50 | p99 | max |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: |")
	fmt.Fprintf(w, "| pacer/river | %.2f× | %.2f× | %.2f× |\n",
		ratio(p.Stats.P50, o.Stats.P50), ratio(p.Stats.P99, o.Stats.P99), ratio(p.Stats.Max, o.Stats.Max))
}
