// Command crashtest runs the real pacer binary against a provider stand-in
// and kills it with SIGKILL at random moments, restarting it each time on
// the same database. At the end it checks, from the stand-in's own log:
// no operation lost, no duplicated effect, the same idempotency key on
// every resend, no send before its time or during a pause, no scope over
// its concurrency cap, no operation in flight twice at once, no resend
// before the next attempt pacer recorded, and uncertain non-idempotent
// mutations held exactly when they were in flight at a kill or not
// answered within pacer's request timeout.
//
// Half the kills land right after a burst: the stand-in holds a dozen
// answers back, sends them at once and the kill follows within a few
// milliseconds, while pacer's committer is recording them; each answer of
// such a burst must then be recorded as answered or treated as
// interrupted (a read resent, a mutation resent with its key or held).
// Some mutations are applied and never answered (the stand-in holds the
// connection until pacer's request timeout): without idempotency keys they
// must end held/unknownOutcome, sent once; with keys they must be resent
// with the same key, deduplicated, and end succeeded.
//
// It prints the counts as a table and exits non-zero on any violation.
//
//	go run ./scripts/crashtest -ops 3000 -kills 8
//
// It talks only to 127.0.0.1 and stops by itself (-timeout).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

func main() {
	var cfg config
	flag.IntVar(&cfg.ops, "ops", 3000, "operations to enqueue")
	flag.IntVar(&cfg.kills, "kills", 8, "SIGKILLs during the run")
	flag.Uint64Var(&cfg.seed, "seed", uint64(time.Now().UnixNano()), "random seed")
	flag.DurationVar(&cfg.timeout, "timeout", 10*time.Minute, "give up after this long")
	flag.StringVar(&cfg.binary, "pacer", "", "pacer binary (default: build it from the module root)")
	flag.BoolVar(&cfg.verbose, "v", false, "print pacer's logs on failure")
	flag.Parse()
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "crashtest:", err)
		os.Exit(1)
	}
}

type config struct {
	ops, kills int
	seed       uint64
	timeout    time.Duration
	binary     string
	verbose    bool
}

// scopeSpec is one scope of the run and how its stand-in behaves.
type scopeSpec struct {
	name          string
	kind          string // "read", "keyed" (mutation, idempotency keys), "plain" (mutation, none)
	maxConcurrent int
	rateLimits    bool // answers some requests 429 Retry-After: 1 (then maxConcurrent is 1, so the pause is exact)
	uncertain     bool // answers some keyed mutations 502 after applying them
	delayed       bool // operations carry a notBefore in the future
	silent        bool // every silentEvery-th operation is applied and never answered
}

// silentEvery spaces the silent operations of a silent scope.
const silentEvery = 10

// requestTimeout is pacer's --request-timeout in the run: how long a
// silent request holds a worker.
const requestTimeout = 3 * time.Second

// scopeSpecs lists the run's scopes.
func scopeSpecs() []scopeSpec {
	return []scopeSpec{
		{name: "read-a", kind: "read", maxConcurrent: 3},
		{name: "read-rl", kind: "read", maxConcurrent: 1, rateLimits: true},
		{name: "read-later", kind: "read", maxConcurrent: 2, delayed: true},
		{name: "keyed-a", kind: "keyed", maxConcurrent: 3, uncertain: true},
		{name: "keyed-rl", kind: "keyed", maxConcurrent: 1, rateLimits: true, uncertain: true},
		{name: "keyed-later", kind: "keyed", maxConcurrent: 2, delayed: true},
		{name: "plain-a", kind: "plain", maxConcurrent: 3},
		{name: "plain-b", kind: "plain", maxConcurrent: 2},
		{name: "plain-rl", kind: "plain", maxConcurrent: 1, rateLimits: true},
		{name: "plain-later", kind: "plain", maxConcurrent: 2, delayed: true},
		{name: "plain-mute", kind: "plain", maxConcurrent: 4, silent: true},
		{name: "keyed-mute", kind: "keyed", maxConcurrent: 4, silent: true},
	}
}

func run(cfg config) error {
	ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
	defer cancel()
	work, err := os.MkdirTemp("", "pacer-crashtest-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	if cfg.binary == "" {
		cfg.binary = filepath.Join(work, "pacer")
		build := exec.CommandContext(ctx, "go", "build", "-o", cfg.binary, ".")
		build.Dir, build.Stdout, build.Stderr = moduleRoot(), os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("build pacer: %w", err)
		}
	}
	rng := rand.New(rand.NewPCG(cfg.seed, cfg.seed^0x9e3779b97f4a7c15))
	fmt.Printf("crashtest: %d operations, %d kills, seed %d\n", cfg.ops, cfg.kills, cfg.seed)

	sim := newStandIn(cfg.seed)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	provider := &http.Server{Handler: sim}
	go provider.Serve(ln)
	defer provider.Close()

	p := &proc{binary: cfg.binary, db: filepath.Join(work, "pacer.db"), addr: freeAddr(), client: http.Client{Timeout: 10 * time.Second}}
	defer p.stop()
	if err := p.start(ctx); err != nil {
		return err
	}
	baseURL := "http://" + ln.Addr().String()
	scopes := scopeSpecs()
	for _, s := range scopes {
		body := map[string]any{"provider": "generic", "baseURL": baseURL, "maxConcurrent": s.maxConcurrent,
			"credentials": map[string]any{"type": "bearer", "token": "crash-" + s.name}}
		if s.kind == "keyed" {
			body["idempotencyHeader"] = "Idempotency-Key"
		}
		if st, out, err := p.call(ctx, "PUT", "/v1/scopes/"+s.name, body); err != nil || st >= 300 {
			return fmt.Errorf("put scope %s: %d %s %v", s.name, st, out, err)
		}
	}

	// Enqueue everything in batches, then kill at random moments.
	ops := make(map[string]opSpec, cfg.ops)
	var batch []map[string]any
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		st, out, err := p.call(ctx, "POST", "/v1/operations/batch", map[string]any{"operations": batch})
		if err != nil || st != 200 {
			return fmt.Errorf("enqueue batch: %d %s %v", st, out, err)
		}
		batch = batch[:0]
		return nil
	}
	for i := range cfg.ops {
		s := scopes[i%len(scopes)]
		id := fmt.Sprintf("%s-%05d", s.name, i)
		o := opSpec{id: id, scope: s, silent: s.silent && (i/len(scopes))%silentEvery == 0}
		if o.silent {
			sim.silence(id)
		}
		req := map[string]any{"method": "GET", "path": "/" + s.name + "/" + id}
		if s.kind != "read" {
			req = map[string]any{"method": "POST", "path": "/" + s.name + "/" + id, "body": map[string]any{"op": id}}
		}
		var after time.Duration
		switch {
		case s.delayed:
			after = time.Duration(500+rng.IntN(20000)) * time.Millisecond
		case o.silent && (i/len(scopes)/silentEvery)%2 == 1:
			// Half the silent ones leave after the kills, mostly: then
			// pacer's own request timeout ends them, not a kill.
			after = time.Duration(12000+rng.IntN(12000)) * time.Millisecond
		}
		if after > 0 {
			o.notBefore = time.Now().Add(after).UTC().Truncate(time.Millisecond)
			req["headers"] = map[string]string{"X-Not-Before": o.notBefore.Format(time.RFC3339Nano)}
		}
		item := map[string]any{"operationId": id, "providerScope": s.name, "request": req,
			"requestIdentity": "intent-" + id, "retry": map[string]any{"maxAttempts": 100, "maxElapsed": "2h"}}
		if !o.notBefore.IsZero() {
			item["notBefore"] = o.notBefore.Format(time.RFC3339Nano)
		}
		ops[id] = o
		batch = append(batch, item)
		if len(batch) == 500 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	started := time.Now()
	for k := range cfg.kills {
		if k%2 == 1 {
			// Right after a burst of answers, while pacer commits them.
			time.Sleep(time.Duration(150+rng.IntN(600)) * time.Millisecond)
			sim.killAfterBurst(sim.armBurst(), time.Duration(rng.IntN(4000))*time.Microsecond)
		} else {
			time.Sleep(time.Duration(150+rng.IntN(1500)) * time.Millisecond)
			sim.markKill()
		}
		p.kill()
		if err := p.start(ctx); err != nil {
			return fmt.Errorf("restart %d: %w", k+1, err)
		}
	}
	// Let it finish: every operation terminal or held.
	views, err := waitSettled(ctx, p, ops)
	if err != nil {
		if cfg.verbose {
			fmt.Fprintln(os.Stderr, p.logs.String())
		}
		return err
	}
	took := time.Since(started)
	p.stop()
	return report(cfg, sim, ops, views, took)
}

type opSpec struct {
	id        string
	scope     scopeSpec
	notBefore time.Time
	silent    bool
}

// opView is what pacer recorded about an operation.
type opView struct {
	State         string
	HoldReason    string
	FailureReason string
	Attempts      []attemptView
}

// attemptView is one recorded attempt (GET …/attempts).
type attemptView struct {
	Number     int
	StartedAt  time.Time
	FinishedAt time.Time
	Status     int
	Class      string
	Reason     string
	Decision   struct {
		State string
		At    time.Time
	}
}

// waitSettled polls the API until every operation has ended or is held,
// and returns what pacer recorded about each one.
func waitSettled(ctx context.Context, p *proc, ops map[string]opSpec) (map[string]opView, error) {
	for {
		settled := true
		for _, st := range []string{"scheduled", "waitingForBudget", "running"} {
			_, out, err := p.call(ctx, "GET", "/v1/operations?limit=1&state="+st, nil)
			if err != nil {
				return nil, err
			}
			var page struct{ Operations []json.RawMessage }
			if err := json.Unmarshal(out, &page); err != nil {
				return nil, fmt.Errorf("list %s: %w (%s)", st, err, out)
			}
			if len(page.Operations) > 0 {
				settled = false
			}
		}
		if settled {
			break
		}
		select {
		case <-ctx.Done():
			return nil, errors.New("operations still open at the timeout")
		case <-time.After(200 * time.Millisecond):
		}
	}
	views := map[string]opView{}
	for id := range ops {
		st, out, err := p.call(ctx, "GET", "/v1/operations/"+id, nil)
		if err != nil {
			return nil, err
		}
		if st != 200 {
			views[id] = opView{State: "missing"}
			continue
		}
		var v opView
		if err := json.Unmarshal(out, &v); err != nil {
			return nil, fmt.Errorf("operation %s: %w (%s)", id, err, out)
		}
		st, out, err = p.call(ctx, "GET", "/v1/operations/"+id+"/attempts", nil)
		if err != nil {
			return nil, err
		}
		var list struct{ Attempts []attemptView }
		if err := json.Unmarshal(out, &list); st != 200 || err != nil {
			return nil, fmt.Errorf("attempts of %s: %d %v (%s)", id, st, err, out)
		}
		v.Attempts = list.Attempts
		views[id] = v
	}
	return views, nil
}

// proc is one pacer serve process, restarted on the same database.
type proc struct {
	binary, db, addr string
	cmd              *exec.Cmd
	logs             bytes.Buffer
	client           http.Client
}

func (p *proc) start(ctx context.Context) error {
	p.cmd = exec.Command(p.binary, "serve", "--db", p.db, "--listen", p.addr, "--workers", "16",
		"--request-timeout", requestTimeout.String(), "--lease", (requestTimeout + 7*time.Second).String(), "--log-level", "warn")
	p.cmd.Stdout, p.cmd.Stderr = &p.logs, &p.logs
	if err := p.cmd.Start(); err != nil {
		return err
	}
	for i := 0; i < 500; i++ {
		if st, _, err := p.call(ctx, "GET", "/healthz", nil); err == nil && st == 200 {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("pacer did not start:\n%s", p.logs.String())
}

func (p *proc) kill() {
	if p.cmd != nil && p.cmd.Process != nil {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		_ = p.cmd.Wait()
	}
}

func (p *proc) stop() {
	if p.cmd != nil && p.cmd.ProcessState == nil && p.cmd.Process != nil {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = p.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			p.kill()
		}
	}
}

func (p *proc) call(ctx context.Context, method, path string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+p.addr+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}

func freeAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// moduleRoot is the directory of pacer's go.mod.
func moduleRoot() string {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "."
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}
