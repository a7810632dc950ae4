package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// enqueueClients is how many clients the enqueue-single row runs at once.
const enqueueClients = 32

// runEnqueueSingle builds the pacer binary of repo, serves it on a temp
// database and has enqueueClients concurrent clients enqueue n operations
// through POST /v1/operations, one operation per request, over loopback
// (keep-alive connections, one per client). Each operation is due an hour
// later, so the engine sends nothing and the row measures the enqueue
// path alone. CPU and peak RSS are the pacer process's own, over the
// window from the first request to the last answer; the note gives the
// request latency's p50 and p99 as the clients saw it. With
// PACERBENCH_CPUPROFILE set, a CPU profile of the pacer process is written
// to that path plus "."+label (see fetchProfile).
func runEnqueueSingle(ctx context.Context, n int, provider, tmp, repo, label string) result {
	r, err := runEnqueueSingleErr(ctx, n, provider, tmp, repo, label)
	if err != nil {
		r.Err = err.Error()
	}
	return r
}

func runEnqueueSingleErr(ctx context.Context, n int, provider, tmp, repo, label string) (result, error) {
	var r result
	p, profile, err := startProfiledPacer(ctx, repo, filepath.Join(tmp, label), 50)
	if err != nil {
		return r, err
	}
	defer p.stop()
	if err := createBenchScopes(ctx, p.hc, p.base, provider, ""); err != nil {
		return r, err
	}
	hc := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: enqueueClients}}
	due := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	body := func(j int) string {
		return fmt.Sprintf(`{"operationId":"single-%d","providerScope":"bench-%d","notBefore":%q,"request":{"method":"POST","path":"/x","body":{"n":1}}}`, j, j%pacerScopes, due)
	}
	// A warm-up of one request per client opens the connections.
	if err := enqueueSingles(ctx, hc, p.base, enqueueClients, func(j int) string { return body(n + j) }, nil); err != nil {
		return r, err
	}

	pid := p.cmd.Process.Pid
	cpu0, err := procCPUMs(pid)
	if err != nil {
		return r, err
	}
	self0, _ := selfUsage()
	profiled := profile(ctx, label)
	took := make([]time.Duration, n)
	start := time.Now()
	if err := enqueueSingles(ctx, hc, p.base, n, body, took); err != nil {
		return r, err
	}
	r.Seconds = time.Since(start).Seconds()
	cpu1, err := procCPUMs(pid)
	if err != nil {
		return r, err
	}
	self1, _ := selfUsage()
	r.CPUMs = cpu1 - cpu0
	r.RSSKiB, _ = procHWM(pid)
	r.Ops = n
	slices.Sort(took)
	r.Note = fmt.Sprintf("%d clients, one op per POST /v1/operations; latency p50 %.2f ms, p99 %.2f ms; bench client CPU %.0f ms",
		enqueueClients, ms(took[n/2]), ms(took[n*99/100]), self1-self0)
	return r, <-profiled
}

// enqueueSingles posts operations 0…n-1 (body(j) is operation j's
// request) from enqueueClients goroutines, each taking the next index,
// and checks that each was created (201); took[j], when took is not nil,
// is request j's latency.
func enqueueSingles(ctx context.Context, hc *http.Client, base string, n int, body func(j int) string, took []time.Duration) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, enqueueClients)
	for range enqueueClients {
		wg.Go(func() {
			for {
				j := int(next.Add(1) - 1)
				if j >= n || ctx.Err() != nil {
					return
				}
				t := time.Now()
				if err := postSingle(ctx, hc, base, body(j)); err != nil {
					errs <- err
					return
				}
				if took != nil {
					took[j] = time.Since(t)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// postSingle posts one operation and checks it was created.
func postSingle(ctx context.Context, hc *http.Client, base, body string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/operations", strings.NewReader(body))
	if err != nil {
		return fmt.Errorf("make request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("enqueue: %w", err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("enqueue: read answer: %w", err)
	}
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("enqueue: status %d: %.300s", resp.StatusCode, out)
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
