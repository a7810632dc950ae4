package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"time"
)

// idleResult is the CPU a pacer process spends while every scope waits.
type idleResult struct {
	Case    string
	Seconds float64
	CPUMs   float64
}

// share is the process's CPU time as a fraction of one core.
func (r idleResult) share() float64 { return r.CPUMs / (r.Seconds * 1000) }

// runIdle measures design §11 "Idle is idle" on the real binary: the CPU
// time pacer uses over seconds, first with an empty database, then with a
// scope held back only by its budget reserve (its provider answers
// 5 remaining, reserve 10, reset 600 s ahead) and operations due. Before
// the fix of issue 11 the second case spun at ~15 % of a core.
func runIdle(ctx context.Context, tmp, repo string, seconds time.Duration) ([]idleResult, error) {
	bin, err := buildPacer(ctx, repo, filepath.Join(tmp, "idle-bin"))
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	reserveProvider := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("X-RateLimit-Limit", "100")
		w.Header().Set("X-RateLimit-Remaining", "5")
		w.Header().Set("X-RateLimit-Reset", "600")
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
	})}
	go func() { _ = reserveProvider.Serve(ln) }()
	defer reserveProvider.Close()

	var out []idleResult
	for _, c := range []string{"empty", "reserve-blocked"} {
		p, err := startPacer(ctx, bin, filepath.Join(tmp, "idle-"+c+".db"), 8)
		if err != nil {
			return out, err
		}
		r, err := idleCase(ctx, p, c, "http://"+ln.Addr().String(), seconds)
		p.stop()
		if err != nil {
			return out, fmt.Errorf("idle %s: %w", c, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// idleCase prepares one case on a running pacer and measures its CPU time.
func idleCase(ctx context.Context, p *pacerProc, name, provider string, seconds time.Duration) (idleResult, error) {
	if name == "reserve-blocked" {
		scope := fmt.Sprintf(`{"provider":"generic","baseURL":%q,"maxConcurrent":1,"budgetReserve":10}`, provider)
		if _, err := call(ctx, p.hc, http.MethodPut, p.base+"/v1/scopes/acct", scope, http.StatusOK, http.StatusCreated); err != nil {
			return idleResult{}, err
		}
		for i := range 3 {
			op := fmt.Sprintf(`{"operationId":"idle-%d","providerScope":"acct","request":{"method":"GET","path":"/x"}}`, i)
			if _, err := call(ctx, p.hc, http.MethodPost, p.base+"/v1/operations", op, http.StatusCreated); err != nil {
				return idleResult{}, err
			}
		}
		// The first send learns 5 remaining, below the reserve: from then
		// on the scope waits for the provider's reset.
		time.Sleep(2 * time.Second)
	}
	pid := p.cmd.Process.Pid
	before, err := procCPUMs(pid)
	if err != nil {
		return idleResult{}, err
	}
	start := time.Now()
	select {
	case <-time.After(seconds):
	case <-ctx.Done():
		return idleResult{}, ctx.Err()
	}
	after, err := procCPUMs(pid)
	if err != nil {
		return idleResult{}, err
	}
	return idleResult{Case: name, Seconds: time.Since(start).Seconds(), CPUMs: after - before}, nil
}

// printIdle writes the idle table.
func printIdle(w io.Writer, rs []idleResult) {
	fmt.Fprintf(w, "\nidle (design §11 \"Idle is idle\")\n| case | seconds | CPU ms | share of a core |\n| --- | ---: | ---: | ---: |\n")
	for _, r := range rs {
		fmt.Fprintf(w, "| %s | %.1f | %.0f | %.2f %% |\n", r.Case, r.Seconds, r.CPUMs, 100*r.share())
	}
}
