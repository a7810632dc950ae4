package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// pacerScopes is how many scopes the operations are spread over.
const pacerScopes = 10

// pacerPending are the states an operation is not yet done in.
var pacerPending = []string{"scheduled", "waitingForBudget", "running", "held"}

// runPacer builds the pacer binary, serves it on a temp database and a free
// loopback port, enqueues n operations over 10 scopes through the batch API
// and waits until none is pending. CPU and peak RSS are the pacer process's
// own, over the window from the first enqueue to the last completion.
func runPacer(ctx context.Context, n, workers int, provider, tmp, repo, keyHeader string) result {
	r, err := runPacerErr(ctx, n, workers, provider, tmp, repo, keyHeader)
	if err != nil {
		r.Err = err.Error()
	}
	return r
}

func runPacerErr(ctx context.Context, n, workers int, provider, tmp, repo, keyHeader string) (result, error) {
	var r result
	p, profile, err := startProfiledPacer(ctx, repo, filepath.Join(tmp, "pacer"), workers)
	if err != nil {
		return r, err
	}
	defer p.stop()
	if err := createBenchScopes(ctx, p.hc, p.base, provider, keyHeader); err != nil {
		return r, err
	}

	pid := p.cmd.Process.Pid
	cpu0, err := procCPUMs(pid)
	if err != nil {
		return r, err
	}
	selfCPU0, _ := selfUsage()
	profiled := profile(ctx, "pacer")
	start := time.Now()
	err = enqueueAll(ctx, p.hc, p.base, n, func(j int) string {
		return fmt.Sprintf(`{"operationId":"op-%d","providerScope":"bench-%d","request":{"method":"POST","path":"/x","body":{"n":1}}}`, j, j%pacerScopes)
	})
	if err != nil {
		return r, err
	}
	enqSecs := time.Since(start).Seconds()
	if err := waitPacerDone(ctx, p.hc, p.base); err != nil {
		return r, err
	}
	r.Seconds = time.Since(start).Seconds()
	cpu1, err := procCPUMs(pid)
	if err != nil {
		return r, err
	}
	selfCPU1, _ := selfUsage()
	r.CPUMs = cpu1 - cpu0
	r.RSSKiB, _ = procHWM(pid)
	r.Ops = n
	r.Note = fmt.Sprintf("enqueue %.2fs; bench client CPU %.0f ms", enqSecs, selfCPU1-selfCPU0)
	if claims, err := claimCount(ctx, p.hc, p.base); err == nil && claims > 0 {
		r.Note += fmt.Sprintf("; %.0f claims (%.1f ops each)", claims, float64(n)/claims)
	}
	if err := <-profiled; err != nil {
		return r, err
	}
	return r, nil
}

// freeLoopbackAddr finds a free 127.0.0.1 port.
func freeLoopbackAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find free port: %w", err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr, nil
}

// statesEmpty reports whether no operation is in any of states (of scope,
// when not empty).
func statesEmpty(ctx context.Context, hc *http.Client, base, scope string, states []string) (bool, error) {
	filter := ""
	if scope != "" {
		filter = "&providerScope=" + url.QueryEscape(scope)
	}
	for _, st := range states {
		out, err := call(ctx, hc, http.MethodGet, base+"/v1/operations?limit=1&state="+st+filter, "", http.StatusOK)
		if err != nil {
			return false, fmt.Errorf("list %s operations: %w", st, err)
		}
		var l struct {
			Operations []json.RawMessage `json:"operations"`
		}
		if err := json.Unmarshal(out, &l); err != nil {
			return false, fmt.Errorf("decode operation list: %w", err)
		}
		if len(l.Operations) > 0 {
			return false, nil
		}
	}
	return true, nil
}

// call does one API request and checks its status.
func call(ctx context.Context, hc *http.Client, method, url, body string, want ...int) ([]byte, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return nil, fmt.Errorf("make request: %w", err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, url, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("read %s %s: %w", method, url, err)
	}
	for _, w := range want {
		if resp.StatusCode == w {
			return out, nil
		}
	}
	return nil, fmt.Errorf("%s %s: status %d: %.300s", method, url, resp.StatusCode, out)
}

// stopProcess sends SIGTERM, waits up to 20 s, then kills.
func stopProcess(cmd *exec.Cmd) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// clockTicks is Linux's USER_HZ, the unit of /proc/<pid>/stat times.
const clockTicks = 100

// procCPUMs is a process's user+system CPU time so far, from /proc.
func procCPUMs(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("read process stat: %w", err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	// After the command: state is field 3; utime and stime are fields 14, 15.
	ut, err1 := strconv.ParseFloat(f[11], 64)
	st, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("parse process stat %q", s)
	}
	return (ut + st) * 1000 / clockTicks, nil
}

// procHWM is a process's peak resident set size (VmHWM) in KiB.
func procHWM(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("read process status: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				return strconv.ParseInt(f[0], 10, 64)
			}
		}
	}
	return 0, fmt.Errorf("no VmHWM in process status")
}

// fetchProfile records a CPU profile of the pacer process through its
// --debug-listen endpoint for PACERBENCH_PROFILE_SECONDS (default 10) and
// writes it to path.
// startProfiledPacer builds pacer from repo into dir and starts it with
// workers. When PACERBENCH_CPUPROFILE is set it serves pprof on loopback,
// and profile(ctx, name) fetches a CPU profile of it into that path plus
// "."+name in the background, its result on the channel; otherwise the
// channel holds nil at once.
func startProfiledPacer(ctx context.Context, repo, dir string, workers int) (*pacerProc, func(context.Context, string) <-chan error, error) {
	bin, err := buildPacer(ctx, repo, dir)
	if err != nil {
		return nil, nil, err
	}
	profileTo := os.Getenv("PACERBENCH_CPUPROFILE")
	var debugAddr string
	var extra []string
	if profileTo != "" {
		if debugAddr, err = freeLoopbackAddr(); err != nil {
			return nil, nil, err
		}
		extra = []string{"--debug-listen", debugAddr}
	}
	p, err := startPacer(ctx, bin, filepath.Join(dir, "pacer.db"), workers, extra...)
	if err != nil {
		return nil, nil, err
	}
	profile := func(ctx context.Context, name string) <-chan error {
		done := make(chan error, 1)
		if profileTo == "" {
			done <- nil
			return done
		}
		go func() { done <- fetchProfile(ctx, debugAddr, profileTo+"."+name) }()
		return done
	}
	return p, profile, nil
}

func fetchProfile(ctx context.Context, debugAddr, path string) error {
	secs := 10
	if v, err := strconv.Atoi(os.Getenv("PACERBENCH_PROFILE_SECONDS")); err == nil && v > 0 {
		secs = v
	}
	url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", debugAddr, secs)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("profile pacer: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("profile pacer: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return fmt.Errorf("profile pacer: status %d: %v", resp.StatusCode, err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("profile pacer: %w", err)
	}
	fmt.Fprintf(os.Stderr, "pacer CPU profile (%d s) written to %s\n", secs, path)
	return nil
}

// claimCount reads how many claim transactions pacer ran from its /metrics
// (the count of pacer_claim_duration_seconds).
func claimCount(ctx context.Context, hc *http.Client, base string) (float64, error) {
	out, err := call(ctx, hc, http.MethodGet, base+"/metrics", "", http.StatusOK)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "pacer_claim_duration_seconds_count "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("no pacer_claim_duration_seconds_count in /metrics")
}
