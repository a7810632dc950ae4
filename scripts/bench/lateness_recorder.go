package main

import (
	"encoding/json"
	"math"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
)

// dueHeader carries an operation's due time (Unix ms) on a lateness run's
// requests; the provider measures each such request's lateness against it.
const dueHeader = "X-Bench-Due"

// maxLatenessSamples bounds the samples the provider keeps (8 MiB); one
// lateness run at the default flags sends 5,000.
const maxLatenessSamples = 1 << 20

// latenessStats is the provider's GET /lateness answer. Times are in ms;
// lateness is arrival (at the top of the provider's handler) minus due.
type latenessStats struct {
	Count   int     `json:"count"`             // requests carrying dueHeader
	P50     float64 `json:"p50"`               // median lateness
	P99     float64 `json:"p99"`               // 99th percentile (nearest rank)
	Max     float64 `json:"max"`               // largest lateness
	Min     float64 `json:"min"`               // smallest (negative: early)
	Early   int     `json:"early"`             // arrivals before due
	Dropped int     `json:"dropped,omitempty"` // beyond maxLatenessSamples, not in the percentiles
	Invalid int     `json:"invalid,omitempty"` // dueHeader not an integer
}

// latenessRecorder collects the lateness of requests carrying dueHeader.
// It is safe for concurrent use.
type latenessRecorder struct {
	mu      sync.Mutex
	samples []float64
	count   int
	early   int
	dropped int
	invalid int
}

// observe records a request that arrived at arrival with dueHeader value due
// ("" when absent: nothing is recorded).
func (l *latenessRecorder) observe(arrival time.Time, due string) {
	if due == "" {
		return
	}
	dueMs, err := strconv.ParseInt(due, 10, 64)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.invalid++
		return
	}
	late := float64(arrival.UnixNano())/1e6 - float64(dueMs)
	l.count++
	if late < 0 {
		l.early++
	}
	if len(l.samples) >= maxLatenessSamples {
		l.dropped++
		return
	}
	l.samples = append(l.samples, late)
}

// stats summarises the samples recorded since the last reset.
func (l *latenessRecorder) stats() latenessStats {
	l.mu.Lock()
	s := latenessStats{Count: l.count, Early: l.early, Dropped: l.dropped, Invalid: l.invalid}
	sorted := slices.Clone(l.samples)
	l.mu.Unlock()
	if len(sorted) == 0 {
		return s
	}
	slices.Sort(sorted)
	s.P50, s.P99 = nearestRank(sorted, 0.50), nearestRank(sorted, 0.99)
	s.Min, s.Max = sorted[0], sorted[len(sorted)-1]
	return s
}

// reset forgets every sample.
func (l *latenessRecorder) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.samples, l.count, l.early, l.dropped, l.invalid = nil, 0, 0, 0, 0
}

// serve answers GET /lateness and POST /lateness/reset and reports whether
// r was one of them.
func (l *latenessRecorder) serve(w http.ResponseWriter, r *http.Request) bool {
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/lateness":
		b, _ := json.Marshal(l.stats())
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	case r.Method == http.MethodPost && r.URL.Path == "/lateness/reset":
		l.reset()
		w.WriteHeader(http.StatusNoContent)
	default:
		return false
	}
	return true
}

// nearestRank is the q-quantile of sorted (nearest-rank method).
func nearestRank(sorted []float64, q float64) float64 {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}
