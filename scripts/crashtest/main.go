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
// A follower reads the change feed all along, through each process in
// turn: seq must grow strictly, and every operation's last change must be
// the state it ends in.
//
// With -db postgres (a throwaway durable PostgreSQL) or -db postgres://…
// (a new database on that server) it runs -procs serve processes on one
// database (2 by default), spreads the enqueues and the API calls over
// them and kills either at random. On the throwaway server it first stops
// PostgreSQL as a crash would, while the processes send, kills one of
// them while it is down, and restarts it: answers that left meanwhile
// must be recorded or treated as after a kill. A serve that exits by itself (on losing its database, say) is
// restarted and counted. The stand-in tells the processes' requests apart
// by their connections, so a kill ends only its own process's requests.
//
// It prints the counts as a table and exits non-zero on any violation.
//
//	go run ./scripts/crashtest -ops 3000 -kills 8
//	go run ./scripts/crashtest -db postgres -procs 2 -ops 3000 -kills 8
//
// It talks only to 127.0.0.1 and stops by itself (-timeout).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
	flag.StringVar(&cfg.db, "db", "", `database: empty for SQLite, "postgres" for a throwaway PostgreSQL, or a postgres:// URL of a server to make a database on`)
	flag.IntVar(&cfg.procs, "procs", 0, "serve processes on the database (default 1 on SQLite, 2 on PostgreSQL; several need PostgreSQL)")
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
	db         string
	procs      int
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
	switch {
	case cfg.procs == 0 && isPostgres(cfg.db):
		cfg.procs = 2
	case cfg.procs == 0:
		cfg.procs = 1
	case cfg.procs < 1 || cfg.procs > 8:
		return fmt.Errorf("-procs %d: want 1 to 8", cfg.procs)
	case cfg.procs > 1 && !isPostgres(cfg.db):
		return fmt.Errorf("-procs %d: several processes need -db postgres", cfg.procs)
	}
	rng := rand.New(rand.NewPCG(cfg.seed, cfg.seed^0x9e3779b97f4a7c15))
	fmt.Printf("crashtest: %d operations, %d kills, seed %d\n", cfg.ops, cfg.kills, cfg.seed)
	db, err := openDatabase(ctx, cfg.db, work, cfg.seed)
	if err != nil {
		return err
	}
	defer db.close()
	switch {
	case db.srv != nil:
		fmt.Printf("crashtest: %d serve processes on a throwaway PostgreSQL, crashed and restarted once\n", cfg.procs)
	case isPostgres(cfg.db):
		fmt.Printf("crashtest: %d serve processes on a new database of the -db server (no database crash: not a throwaway server)\n", cfg.procs)
	}

	sim := newStandIn(cfg.seed)
	f := newFleet(cfg.binary, db.url, db.env, cfg.procs)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	provider := &http.Server{Handler: sim}
	if cfg.procs > 1 {
		sim.whose, provider.ConnContext = ownerOf(f.pids), withConnOwner
	}
	go provider.Serve(ln)
	defer provider.Close()

	defer f.stop()
	if err := f.startAll(ctx); err != nil {
		return err
	}
	stopFeed := make(chan struct{})
	type feedResult struct {
		log *feedLog
		err error
	}
	feedDone := make(chan feedResult, 1)
	go func() {
		log, err := follow(ctx, f, stopFeed)
		feedDone <- feedResult{log, err}
	}()
	baseURL := "http://" + ln.Addr().String()
	scopes := scopeSpecs()
	for _, s := range scopes {
		body := map[string]any{"provider": "generic", "baseURL": baseURL, "maxConcurrent": s.maxConcurrent,
			"credentials": map[string]any{"type": "bearer", "token": "crash-" + s.name}}
		if s.kind == "keyed" {
			body["idempotencyHeader"] = "Idempotency-Key"
		}
		if st, out, err := f.call(ctx, "PUT", "/v1/scopes/"+s.name, body); err != nil || st >= 300 {
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
		// Each batch to the next process.
		st, out, err := f.call(ctx, "POST", "/v1/operations/batch", map[string]any{"operations": batch})
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
	var dbRestarts int
	if db.srv != nil {
		// The database crashes and comes back while both processes send
		// (before the kills leave leases to recover): every session drops.
		// Halfway through the outage one process is killed too; it starts
		// again once the database is back.
		time.Sleep(time.Duration(500+rng.IntN(1500)) * time.Millisecond)
		down, outage, victim := time.Now(), time.Duration(500+rng.IntN(1500))*time.Millisecond, rng.IntN(f.size())
		err := db.restart(ctx, func() {
			time.Sleep(outage / 2)
			sim.markKill(victim)
			f.procs[victim].kill()
			time.Sleep(outage / 2)
		})
		if err != nil {
			return err
		}
		sim.markOutage(down, time.Now())
		dbRestarts++
		fmt.Printf("postgres down for %s, process %d killed meanwhile\n", time.Since(down).Round(time.Millisecond), victim)
		if err := f.procs[victim].start(ctx); err != nil {
			return fmt.Errorf("restart of process %d after the database's: %w", victim, err)
		}
		if err := f.revive(ctx, sim); err != nil {
			return err
		}
	}
	for k := range cfg.kills {
		slot := 0
		if k%2 == 1 {
			// Right after a burst of answers, while pacer commits them.
			time.Sleep(time.Duration(150+rng.IntN(600)) * time.Millisecond)
			if isPostgres(cfg.db) {
				// On PostgreSQL a killed node's leases hold their scopes
				// until a node whose session is old enough recovers them
				// (design §10): wait for answers to flow again, so that
				// the burst has some.
				sim.awaitTraffic(burstSize, 300*time.Millisecond, 15*time.Second)
			}
			slot = sim.killAfterBurst(sim.armBurst(), time.Duration(rng.IntN(4000))*time.Microsecond, f.size())
		} else {
			time.Sleep(time.Duration(150+rng.IntN(1500)) * time.Millisecond)
			if f.size() > 1 {
				slot = rng.IntN(f.size())
			}
			sim.markKill(slot)
		}
		if err := f.killAndRestart(ctx, slot); err != nil {
			return fmt.Errorf("kill %d: %w", k+1, err)
		}
		if err := f.revive(ctx, sim); err != nil {
			return err
		}
	}
	// Let it finish: every operation terminal or held.
	views, err := waitSettled(ctx, f, sim, ops)
	if err != nil {
		if cfg.verbose {
			fmt.Fprintln(os.Stderr, f.logs())
		}
		return err
	}
	took := time.Since(started)
	close(stopFeed)
	feed := <-feedDone
	if feed.err != nil {
		return feed.err
	}
	f.stop()
	return report(cfg, sim, ops, views, took, runInfo{feed: feed.log, exits: f.exits, dbRestarts: dbRestarts, procs: f.size()})
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
// and returns what pacer recorded about each one. A process that exits by
// itself meanwhile is restarted.
func waitSettled(ctx context.Context, f *fleet, sim *standIn, ops map[string]opSpec) (map[string]opView, error) {
	for {
		if err := f.revive(ctx, sim); err != nil {
			return nil, err
		}
		settled := true
		for _, st := range []string{"scheduled", "waitingForBudget", "running"} {
			code, out, err := f.call(ctx, "GET", "/v1/operations?limit=1&state="+st, nil)
			if err != nil {
				return nil, err
			}
			if code != 200 {
				settled = false // a process that cannot read its database yet
				continue
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
		st, out, err := f.call(ctx, "GET", "/v1/operations/"+id, nil)
		for try := 0; err == nil && st >= 500 && try < 50; try++ {
			time.Sleep(100 * time.Millisecond)
			st, out, err = f.call(ctx, "GET", "/v1/operations/"+id, nil)
		}
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
		st, out, err = f.call(ctx, "GET", "/v1/operations/"+id+"/attempts", nil)
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
