package pgstore_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/jackc/pgx/v5"

	"pacer/internal/pacertest"
	"pacer/internal/pgtest"
	"pacer/pgstore"
	"pacer/scheduler"
	"pacer/scheduler/storetest"
)

// Tests of several nodes on one database (design §10). Their times are
// the real clock's, as the database's clock bounds claims and recovery.

// openNode opens a store at url with opts (the test key added), closed
// when the test ends unless the test killed it.
func openNode(t *testing.T, url string, opts pgstore.Options) *pgstore.Store {
	t.Helper()
	opts.Key, opts.MaxConns = pacertest.Key(), 4
	s, err := pgstore.Open(context.Background(), url, opts)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// provider is a test provider: it answers 200 and records when each
// request arrived, by path.
type provider struct {
	*httptest.Server
	mu      sync.Mutex
	arrived map[string]time.Time
}

func newProvider(t *testing.T) *provider {
	p := &provider{arrived: map[string]time.Time{}}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		if _, ok := p.arrived[r.URL.Path]; !ok {
			p.arrived[r.URL.Path] = time.Now()
		}
		p.mu.Unlock()
		w.Write([]byte(`{}`))
	}))
	t.Cleanup(p.Close)
	return p
}

// arrival is when the request for path arrived; false before it has.
func (p *provider) arrival(path string) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	at, ok := p.arrived[path]
	return at, ok
}

// putScope creates scope "a" sending to p.
func putScope(t *testing.T, s scheduler.Store, p *provider) {
	t.Helper()
	_, _, err := s.PutScope(context.Background(), scheduler.ScopeConfig{
		Name: "a", Provider: "generic", BaseURL: p.URL, MaxConcurrent: 100,
	}, scheduler.Action{Actor: "test", At: time.Now(), Reason: "setup"})
	if err != nil {
		t.Fatal(err)
	}
}

// readOp is a read of scope "a" at /id, due at notBefore.
func readOp(id string, notBefore time.Time) scheduler.NewOperation {
	op := storetest.NewRequest(id, "a", "GET", "/"+id)
	op.NotBefore = notBefore
	return op
}

// runEngine runs a scheduler over s on the real clock, polling only every
// hour, until the test ends; it returns once the loop's first pass is over.
func runEngine(t *testing.T, s scheduler.Store) *scheduler.Scheduler {
	t.Helper()
	return runEngineOn(t, s, clock.New())
}

// runEngineOn is runEngine with the scheduler's clock clk.
func runEngineOn(t *testing.T, s scheduler.Store, clk clock.Clock) *scheduler.Scheduler {
	t.Helper()
	sched, err := scheduler.New(s, clk, scheduler.Config{
		Engine: scheduler.EngineConfig{Workers: 4, PollInterval: time.Hour},
		Pruner: scheduler.PrunerConfig{KeepForever: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); sched.Engine.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	for deadline := time.Now().Add(5 * time.Second); sched.Engine.LastPass().IsZero(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the engine made no pass")
		}
	}
	return sched
}

// claimOne claims the one due operation on s at now, for an hour.
func claimOne(t *testing.T, s scheduler.Store, now time.Time) scheduler.Claim {
	t.Helper()
	cs, err := s.ClaimDue(context.Background(), scheduler.ClaimParams{Now: now, Limit: 1, LeaseFor: time.Hour})
	if err != nil || len(cs) != 1 {
		t.Fatalf("claim: %d claims, %v; want 1", len(cs), err)
	}
	return cs[0]
}

// stillLeased reports whether the operation of c still runs under c's lease.
func stillLeased(t *testing.T, s scheduler.Store, c scheduler.Claim) bool {
	t.Helper()
	op := storetest.GetOp(t, s, c.Operation.ID)
	return op.State == scheduler.StateRunning && op.LeaseToken == c.Operation.LeaseToken
}

// awaitRecovery waits until the operation of c no longer runs under c's
// lease, as s reads it, and returns how long that took; it fails the test
// after 3 s.
func awaitRecovery(t *testing.T, s scheduler.Store, c scheduler.Claim) time.Duration {
	t.Helper()
	start := time.Now()
	for stillLeased(t, s, c) {
		if time.Since(start) > 3*time.Second {
			t.Fatalf("the lease of %s was not recovered within 3 s", c.Operation.ID)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}

// A node killed with its leases (its connections closed at once) has them
// recovered by a surviving node within a second; a live node's leases are
// never taken, by a running node nor by one starting.
func TestKilledNodesLeasesAreRecoveredWithinASecond(t *testing.T) {
	url := pgtest.URLFrom(t, migrated)
	p := newProvider(t)
	killed, live := openNode(t, url, pgstore.Options{}), openNode(t, url, pgstore.Options{})
	survivor := openNode(t, url, pgstore.Options{})
	survivor.SetRestartMargin(0) // its session is old enough
	putScope(t, killed, p)
	storetest.Enqueue(t, killed, time.Now(), readOp("killed", time.Now()))
	lost := claimOne(t, killed, time.Now())
	storetest.Enqueue(t, live, time.Now(), readOp("live", time.Now()))
	kept := claimOne(t, live, time.Now())
	runEngine(t, survivor)

	killed.Kill()
	took := awaitRecovery(t, survivor, lost)
	t.Logf("killed node's lease recovered %s after its connections closed", took.Round(time.Millisecond))
	if took > time.Second {
		t.Errorf("recovered after %s, want within a second", took)
	}
	// Recovered, sent again by the survivor.
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, ok := p.arrival("/killed"); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the recovered read was not sent again")
		}
	}

	// A starting node never takes the live node's lease either.
	starting := openNode(t, url, pgstore.Options{})
	starting.SetRestartMargin(0)
	startSched := runEngine(t, starting)
	if n, err := startSched.Engine.Recover(context.Background()); err != nil || n != 0 {
		t.Fatalf("a starting node's recovery took %d leases (%v); want none", n, err)
	}
	time.Sleep(time.Second) // several watches of both running nodes
	if !stillLeased(t, live, kept) {
		t.Fatal("the live node's lease was recovered")
	}
}

// A node whose dedicated session is gone claims nothing, though it has
// not noticed yet: the claim checks the node's lock in its transaction.
func TestNodeWithoutItsSessionClaimsNothing(t *testing.T) {
	url := pgtest.URLFrom(t, migrated)
	s := openNode(t, url, pgstore.Options{})
	storetest.PutScope(t, s, "a", storetest.ScopeOpts{})
	storetest.Enqueue(t, s, time.Now(), storetest.NewOp("due", "a", time.Now()))
	s.CutSession()
	// The server ends the session once it reads the closed socket.
	for deadline := time.Now().Add(2 * time.Second); nodeLocked(t, url, s.NodeID()); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the node's lock is still held")
		}
	}
	if !s.Holds() {
		t.Fatal("the node noticed; the test wants it not to")
	}
	cs, err := s.ClaimDue(context.Background(), scheduler.ClaimParams{Now: time.Now(), Limit: 1, LeaseFor: time.Hour})
	if err != nil || len(cs) != 0 {
		t.Fatalf("claimed %d (%v) without the node's lock; want none", len(cs), err)
	}
}

// A node whose dedicated session alone was cut (its other connections
// live) is alive, and may have requests in flight: no node recovers its
// leases on lock evidence, so none of them is sent a second time at once.
// Once the node is gone with all its connections, they are recovered
// within a second.
func TestCutSessionAloneRecoversNothing(t *testing.T) {
	url := pgtest.URLFrom(t, migrated)
	p := newProvider(t)
	cut, survivor := openNode(t, url, pgstore.Options{}), openNode(t, url, pgstore.Options{})
	survivor.SetRestartMargin(0) // its session is old enough
	putScope(t, cut, p)
	storetest.Enqueue(t, cut, time.Now(), readOp("in-flight", time.Now()))
	inFlight := claimOne(t, cut, time.Now())
	runEngine(t, survivor)

	cut.CutSession()
	for deadline := time.Now().Add(2 * time.Second); nodeLocked(t, url, cut.NodeID()); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the node's lock is still held")
		}
	}
	time.Sleep(time.Second) // several watches of the survivor
	if claims, err := survivor.ListOrphaned(context.Background(), 10); err != nil || len(claims) != 0 {
		t.Fatalf("listed %v (%v) for recovery while the node's pool is connected; want none", storetest.ClaimedIDs(claims), err)
	}
	if !stillLeased(t, survivor, inFlight) {
		t.Fatal("the lease of a node whose dedicated session alone was cut was recovered")
	}
	if _, ok := p.arrival("/in-flight"); ok {
		t.Fatal("the survivor sent the operation in flight on the cut node")
	}

	cut.Kill()
	took := awaitRecovery(t, survivor, inFlight)
	t.Logf("lease recovered %s after the node's last connection closed", took.Round(time.Millisecond))
}

// nodeLocked reports whether some session holds node id's lock.
func nodeLocked(t *testing.T, url string, id int64) bool {
	t.Helper()
	var held bool
	withConn(t, url, func(conn *pgx.Conn) {
		err := conn.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM pg_locks
			WHERE locktype = 'advisory' AND classid = $1 AND objid = $2 AND objsubid = 2 AND granted)`,
			int64(0x706e6f64), id).Scan(&held)
		if err != nil {
			t.Fatal(err)
		}
	})
	return held
}

// withConn runs fn with a connection of its own to url.
func withConn(t *testing.T, url string, fn func(*pgx.Conn)) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	fn(conn)
}

// After every session of the database dropped at once (a restart), no
// node recovers another's leases on lock evidence before the request
// timeout plus the lease margin has passed since its own reconnect.
func TestRestartRecoversNothingBeforeTheMargin(t *testing.T) {
	const requestTimeout = 200 * time.Millisecond
	margin := requestTimeout + scheduler.LeaseMargin
	url := pgtest.URLFrom(t, migrated)
	gone := openNode(t, url, pgstore.Options{RequestTimeout: requestTimeout})
	survivor := openNode(t, url, pgstore.Options{RequestTimeout: requestTimeout})
	back := openNode(t, url, pgstore.Options{RequestTimeout: requestTimeout})
	storetest.PutScope(t, gone, "a", storetest.ScopeOpts{})
	storetest.Enqueue(t, gone, time.Now(), storetest.NewOp("in-flight", "a", time.Now()))
	lost := claimOne(t, gone, time.Now())
	storetest.Enqueue(t, back, time.Now(), storetest.NewOp("comes-back", "a", time.Now()))
	kept := claimOne(t, back, time.Now())
	backID := back.NodeID()
	time.Sleep(margin) // the survivor's first session is old enough

	withConn(t, url, func(conn *pgx.Conn) {
		if _, err := conn.Exec(context.Background(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid()`); err != nil {
			t.Fatal(err)
		}
	})
	restarted := time.Now()
	gone.Kill() // it does not come back
	var recovered time.Duration
	for {
		claims, err := survivor.ListOrphaned(context.Background(), 10)
		if err == nil && len(claims) > 0 {
			recovered = time.Since(restarted)
			if claims[0].Operation.ID != lost.Operation.ID {
				t.Fatalf("listed %s", claims[0].Operation.ID)
			}
			break
		}
		if time.Since(restarted) > margin+3*time.Second {
			t.Fatalf("not recovered %s after the restart", margin+3*time.Second)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("lease of the node gone listed for recovery %s after every session dropped (margin %s)", recovered.Round(time.Millisecond), margin)
	if recovered < margin {
		t.Fatalf("recovered %s after the restart, before the margin %s", recovered, margin)
	}
	// The node that came back took its own lock again: its lease stays.
	if !back.Holds() || back.NodeID() != backID || !stillLeased(t, back, kept) {
		t.Fatalf("the node that came back: holds %v, id %d (was %d), lease kept %v", back.Holds(), back.NodeID(), backID, stillLeased(t, back, kept))
	}
	time.Sleep(600 * time.Millisecond) // the survivor's watch looks again
	if claims, err := survivor.ListOrphaned(context.Background(), 10); err != nil || len(claims) > 1 || len(claims) == 1 && claims[0].Operation.ID != lost.Operation.ID {
		t.Fatalf("listed %v (%v) for recovery; want only the lease of the node gone", storetest.ClaimedIDs(claims), err)
	}
}

// A node whose registration lapsed (alive but cut off: its heartbeats did
// not land) has its leases recovered though its lock is held, claims
// nothing meanwhile, and registers anew.
func TestLapsedNodesLeasesAreRecoveredAndItRegistersAnew(t *testing.T) {
	url := pgtest.URLFrom(t, migrated)
	cutOff, survivor := openNode(t, url, pgstore.Options{}), openNode(t, url, pgstore.Options{})
	storetest.PutScope(t, cutOff, "a", storetest.ScopeOpts{})
	storetest.Enqueue(t, cutOff, time.Now(), storetest.NewOp("leased", "a", time.Now()), storetest.NewOp("next", "a", time.Now()))
	lost := claimOne(t, cutOff, time.Now())
	old := cutOff.NodeID()
	withConn(t, url, func(conn *pgx.Conn) {
		if _, err := conn.Exec(context.Background(), `UPDATE nodes SET expires_at = 0 WHERE id = $1`, old); err != nil {
			t.Fatal(err)
		}
	})
	if cs, err := cutOff.ClaimDue(context.Background(), scheduler.ClaimParams{Now: time.Now(), Limit: 1, LeaseFor: time.Hour}); err != nil || len(cs) != 0 {
		t.Fatalf("a lapsed node claimed %d (%v)", len(cs), err)
	}
	var orphans []scheduler.Claim
	for deadline := time.Now().Add(3 * time.Second); len(orphans) == 0; time.Sleep(20 * time.Millisecond) {
		var err error
		if orphans, err = survivor.ListOrphaned(context.Background(), 10); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the lapsed node's lease was not listed for recovery")
		}
	}
	if orphans[0].Operation.ID != lost.Operation.ID {
		t.Fatalf("listed %s", orphans[0].Operation.ID)
	}
	for deadline := time.Now().Add(3 * time.Second); cutOff.NodeID() == old || !cutOff.Holds(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the lapsed node did not register anew")
		}
	}
	claimOne(t, cutOff, time.Now())
}

// Work a dead node had scheduled for later without telling anyone (a
// retry its completion set) is sent on time by a surviving node that
// polls only every hour: forgetting the dead node wakes its claim loop.
func TestDeadNodesScheduledWorkIsSentOnTime(t *testing.T) {
	url := pgtest.URLFrom(t, migrated)
	p := newProvider(t)
	dead, survivor := openNode(t, url, pgstore.Options{}), openNode(t, url, pgstore.Options{})
	putScope(t, dead, p)
	storetest.Enqueue(t, dead, time.Now(), readOp("retry", time.Now().Add(time.Hour)))
	runEngine(t, survivor)
	time.Sleep(1500 * time.Millisecond) // past the wake-ups of the setup: it sleeps for the hour
	due := time.Now().Add(1500 * time.Millisecond).Truncate(time.Millisecond)
	withConn(t, url, func(conn *pgx.Conn) { // as the dead node's completion would: no wake-up
		if _, err := conn.Exec(context.Background(), `UPDATE operations SET next_attempt_at = $1`, due.UnixMilli()); err != nil {
			t.Fatal(err)
		}
	})
	dead.Kill()
	for deadline := due.Add(3 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if at, ok := p.arrival("/retry"); ok {
			if at.Before(due) || at.Sub(due) > 500*time.Millisecond {
				t.Fatalf("sent at %s, due at %s", at, due)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the dead node's scheduled work was not sent")
		}
	}
}
