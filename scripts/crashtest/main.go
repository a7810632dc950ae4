// Command crashtest runs the real pacer binary against a provider stand-in
// and kills it with SIGKILL at random moments, restarting it each time on
// the same database. At the end it checks, from the stand-in's own log:
// no operation lost, no duplicated effect, the same idempotency key on
// every resend, no send before its time or during a pause, no scope over
// its concurrency cap, and uncertain non-idempotent mutations held exactly
// when they were in flight at a kill. It prints the counts as a table and
// exits non-zero on any violation.
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
	"sync"
	"syscall"
	"text/tabwriter"
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
}

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
		o := opSpec{id: id, scope: s}
		req := map[string]any{"method": "GET", "path": "/" + s.name + "/" + id}
		if s.kind != "read" {
			req = map[string]any{"method": "POST", "path": "/" + s.name + "/" + id, "body": map[string]any{"op": id}}
		}
		if s.delayed {
			o.notBefore = time.Now().Add(time.Duration(500+rng.IntN(20000)) * time.Millisecond).UTC().Truncate(time.Millisecond)
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
		time.Sleep(time.Duration(150+rng.IntN(1500)) * time.Millisecond)
		sim.markKill()
		p.kill()
		if err := p.start(ctx); err != nil {
			return fmt.Errorf("restart %d: %w", k+1, err)
		}
	}
	// Let it finish: every operation terminal or held.
	states, err := waitSettled(ctx, p, ops)
	if err != nil {
		if cfg.verbose {
			fmt.Fprintln(os.Stderr, p.logs.String())
		}
		return err
	}
	took := time.Since(started)
	p.stop()
	return report(cfg, sim, ops, states, took)
}

type opSpec struct {
	id        string
	scope     scopeSpec
	notBefore time.Time
}

// waitSettled polls the API until every operation has ended or is held,
// and returns each one's state.
func waitSettled(ctx context.Context, p *proc, ops map[string]opSpec) (map[string]string, error) {
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
	states := map[string]string{}
	for id := range ops {
		st, out, err := p.call(ctx, "GET", "/v1/operations/"+id, nil)
		if err != nil {
			return nil, err
		}
		if st != 200 {
			states[id] = "missing"
			continue
		}
		var op struct{ State string }
		_ = json.Unmarshal(out, &op)
		states[id] = op.State
	}
	return states, nil
}

func report(cfg config, sim *standIn, ops map[string]opSpec, states map[string]string, took time.Duration) error {
	sim.mu.Lock()
	defer sim.mu.Unlock()
	var rows [][2]string
	violations := 0
	check := func(name string, n int, ok bool) {
		mark := "ok"
		if !ok {
			mark = "VIOLATION"
			violations++
		}
		rows = append(rows, [2]string{name, fmt.Sprintf("%d\t%s", n, mark)})
	}
	byState := map[string]int{}
	lost := 0
	for _, st := range states {
		byState[st]++
		switch st {
		case "succeeded", "failed", "canceled", "held":
		default:
			lost++
		}
	}
	check("operations accepted", len(ops), true)
	for _, st := range []string{"succeeded", "held", "failed", "canceled"} {
		check("  "+st, byState[st], true)
	}
	check("lost (not terminal or held)", lost, lost == 0)
	check("kills (SIGKILL + restart)", len(sim.kills), true)
	check("requests seen by the provider", sim.total, true)

	dupEffects, keyChanged, heldNotPlain, heldResent := 0, 0, 0, 0
	for id, o := range ops {
		rec := sim.ops[id]
		switch o.scope.kind {
		case "keyed":
			if rec != nil && len(rec.keys) > 1 {
				keyChanged++
			}
			if rec != nil && rec.effects > 1 {
				dupEffects++
			}
		case "plain":
			if rec != nil && rec.effects > 1 {
				dupEffects++
			}
		}
		if states[id] == "held" {
			if o.scope.kind != "plain" {
				heldNotPlain++
			}
			if rec != nil && rec.effects > 1 {
				heldResent++
			}
		}
	}
	check("duplicate effects", dupEffects, dupEffects == 0)
	check("resends with a different key", keyChanged, keyChanged == 0)
	check("sends before notBefore", sim.early, sim.early == 0)
	check("sends during a scope pause", sim.duringPause, sim.duringPause == 0)
	check("scope concurrency cap exceeded", sim.overCap, sim.overCap == 0)
	check("held other than uncertain non-idempotent", heldNotPlain, heldNotPlain == 0)
	check("held operations sent more than once", heldResent, heldResent == 0)

	// Held uncertain mutations are exactly those in flight at a kill: every
	// request cut by a kill is held, and every held one was cut or answered
	// just before a kill (pacer died before recording the answer).
	cut, cutNotHeld, heldUnexplained, heldAnswered, heldUnsent := 0, 0, 0, 0, 0
	for id, rec := range sim.ops {
		if rec.cut && ops[id].scope.kind == "plain" {
			cut++
			if states[id] != "held" && ops[id].scope.kind == "plain" {
				cutNotHeld++
			}
		}
	}
	for id, st := range states {
		if st != "held" {
			continue
		}
		rec := sim.ops[id]
		switch {
		case rec == nil:
			heldUnsent++ // leased (intent written), killed before the request left
		case rec.cut:
		case sim.inFlightAtKill(rec):
			heldAnswered++
		default:
			heldUnexplained++
			fmt.Printf("held but not in flight at a kill: %s arrived %s answered %s kills %v\n", id,
				rec.arrivedAt.Format(time.StampMilli), rec.answeredAt.Format(time.StampMilli), sim.kills)
		}
	}
	check("non-idempotent mutations cut by a kill", cut, true)
	check("  of them not held", cutNotHeld, cutNotHeld == 0)
	check("held: answered around a kill, not yet recorded", heldAnswered, true)
	check("held: leased, not yet sent at a kill", heldUnsent, true)
	check("held: not in flight at any kill", heldUnexplained, heldUnexplained == 0)

	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "check\tcount\tresult")
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t%s\n", r[0], r[1])
	}
	w.Flush()
	fmt.Printf("settled %s after the first kill\n", took.Round(time.Millisecond))
	// The closing line in the form test runners print.
	fmt.Printf("crashtest: %d passed, %d failed\n", len(rows)-violations, violations)
	if violations > 0 {
		return fmt.Errorf("%d violation(s) (seed %d)", violations, cfg.seed)
	}
	return nil
}

// standIn is the provider: it applies effects, answers by scope behaviour
// and checks every request against what it told pacer.
type standIn struct {
	mu          sync.Mutex
	rng         *rand.Rand
	ops         map[string]*opRecord
	inFlight    map[string]int
	pausedUntil map[string]time.Time // scope → end of the pause it announced
	pausedAt    map[string]time.Time // scope → when it announced it
	scopes      []scopeSpec
	kills       []time.Time
	total       int
	early       int
	duringPause int
	overCap     int
}

type opRecord struct {
	keys       map[string]bool
	effects    int
	cut        bool
	arrivedAt  time.Time // the last request's arrival
	answeredAt time.Time // when its answer left; zero if none did
}

func newStandIn(seed uint64) *standIn {
	return &standIn{rng: rand.New(rand.NewPCG(seed+1, seed+2)), ops: map[string]*opRecord{},
		inFlight: map[string]int{}, pausedUntil: map[string]time.Time{}, pausedAt: map[string]time.Time{}, scopes: scopeSpecs()}
}

func (s *standIn) markKill() {
	s.mu.Lock()
	s.kills = append(s.kills, time.Now())
	s.mu.Unlock()
}

// killedSince reports whether pacer was killed after t: then it may have
// died before recording what it was told at t.
func (s *standIn) killedSince(t time.Time) bool {
	return len(s.kills) > 0 && s.kills[len(s.kills)-1].After(t)
}

// answerToRecord bounds the time pacer may take from reading an answer to
// committing it (generous: CI machines are shared and loaded).
const answerToRecord = 2 * time.Second

// inFlightAtKill reports whether the operation's last request was in
// flight at a kill from pacer's side: it arrived before the kill and its
// answer left after the kill (the server noticed the dead connection too
// late to count it as cut) or so shortly before it that pacer may have
// died before recording it.
func (s *standIn) inFlightAtKill(rec *opRecord) bool {
	for _, k := range s.kills {
		if !rec.arrivedAt.After(k) && (rec.answeredAt.IsZero() || k.Sub(rec.answeredAt) < answerToRecord) {
			return true
		}
	}
	return false
}

func (s *standIn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if len(parts) != 2 {
		http.NotFound(w, r)
		return
	}
	var spec scopeSpec
	for _, sc := range s.scopes {
		if sc.name == parts[0] {
			spec = sc
		}
	}
	id := parts[1]
	// Read the body first: only then does the server notice a client that
	// goes away (a kill) and cancel the request's context.
	if _, err := io.Copy(io.Discard, r.Body); err != nil {
		return
	}
	now := time.Now()
	key := r.Header.Get("Idempotency-Key")

	s.mu.Lock()
	s.total++
	rec := s.ops[id]
	if rec == nil {
		rec = &opRecord{keys: map[string]bool{}}
		s.ops[id] = rec
	}
	if key != "" {
		rec.keys[key] = true
	}
	rec.arrivedAt, rec.answeredAt = now, time.Time{}
	if nb := r.Header.Get("X-Not-Before"); nb != "" {
		if t, err := time.Parse(time.RFC3339Nano, nb); err == nil && now.Before(t) {
			s.early++
		}
	}
	if now.Before(s.pausedUntil[spec.name]) && !s.killedSince(s.pausedAt[spec.name]) {
		s.duringPause++ // pacer had recorded the 429 (no kill since) yet sent
	}
	s.inFlight[spec.name]++
	if s.inFlight[spec.name] > spec.maxConcurrent {
		s.overCap++
	}
	roll := s.rng.IntN(100)
	latency := time.Duration(s.rng.IntN(120)) * time.Millisecond
	status := http.StatusOK
	applies := false
	switch {
	case spec.rateLimits && roll < 4:
		status = http.StatusTooManyRequests
	case spec.kind == "read" && roll < 8:
		status = http.StatusServiceUnavailable
	case spec.kind == "read":
	case spec.kind == "keyed":
		status = http.StatusCreated
		applies = !rec.keysApplied(key)
		if spec.uncertain && roll < 10 {
			status = http.StatusBadGateway // applied, but the answer is lost
		}
	default: // plain
		status, applies = http.StatusCreated, true
	}
	if applies {
		rec.effects++
	}
	s.mu.Unlock()

	defer func() {
		s.mu.Lock()
		s.inFlight[spec.name]--
		s.mu.Unlock()
	}()
	select {
	case <-time.After(latency):
	case <-r.Context().Done():
		s.mu.Lock()
		rec.cut = true
		s.mu.Unlock()
		return
	}
	if status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"id":%q}`, id)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	s.mu.Lock()
	if status == http.StatusTooManyRequests {
		// The pause counts from the moment the answer left.
		s.pausedAt[spec.name] = time.Now()
		s.pausedUntil[spec.name] = s.pausedAt[spec.name].Add(time.Second)
	}
	rec.answeredAt = time.Now()
	s.mu.Unlock()
}

// keysApplied reports whether an effect was already applied under key.
func (r *opRecord) keysApplied(key string) bool { return r.effects > 0 && key != "" }

// proc is one pacer serve process, restarted on the same database.
type proc struct {
	binary, db, addr string
	cmd              *exec.Cmd
	logs             bytes.Buffer
	client           http.Client
}

func (p *proc) start(ctx context.Context) error {
	p.cmd = exec.Command(p.binary, "serve", "--db", p.db, "--listen", p.addr, "--workers", "16",
		"--request-timeout", "5s", "--lease", "15s", "--log-level", "warn")
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
