package pgstore_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/jackc/pgx/v5"

	"pacer/internal/pacertest"
	"pacer/internal/pgtest"
	"pacer/pgstore"
	"pacer/providers"
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
	start := time.Now()
	for stillLeased(t, survivor, lost) {
		if time.Since(start) > 3*time.Second {
			t.Fatal("the killed node's lease was not recovered within 3 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	took := time.Since(start)
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

// skewed is a clock running ahead of the real one.
type skewed struct {
	clock.Clock
	by time.Duration
}

func (c skewed) Now() time.Time { return c.Clock.Now().Add(c.by) }

// A node whose clock is 5 s ahead never claims early, nor takes a lease
// before it expired: the claim admits by the earlier of its clock and the
// database's. Its Clock reads the database's time.
func TestSkewedNodeNeverClaimsEarly(t *testing.T) {
	const skew = 5 * time.Second
	url := pgtest.URLFrom(t, migrated)
	fast := skewed{Clock: clock.New(), by: skew}
	s := openNode(t, url, pgstore.Options{Clock: fast})
	storetest.PutScope(t, s, "a", storetest.ScopeOpts{})
	due := time.Now().Add(2 * time.Second).Truncate(time.Millisecond)
	storetest.Enqueue(t, s, time.Now(), storetest.NewOp("later", "a", due))

	claim := func() []scheduler.Claim {
		cs, err := s.ClaimDue(context.Background(), scheduler.ClaimParams{Now: fast.Now(), Limit: 1, LeaseFor: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	if cs := claim(); len(cs) != 0 {
		t.Fatalf("a node 5 s ahead claimed an operation due in 2 s")
	}
	var c scheduler.Claim
	for {
		cs := claim()
		if len(cs) == 1 {
			c = cs[0]
			break
		}
		if time.Now().After(due.Add(2 * time.Second)) {
			t.Fatal("never claimed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if sent := c.Operation.FirstSentAt; sent.Before(due) {
		t.Fatalf("claimed at %s, before it was due at %s", sent, due)
	}
	// Its lease (1 s) has not expired by the database's clock.
	if running, err := s.ListRunning(context.Background(), fast.Now(), 0); err != nil || len(running) != 0 {
		t.Fatalf("a clock 5 s ahead found %d expired leases (%v); want none", len(running), err)
	}
	// Store.Clock corrects the skew.
	if off := s.ClockOffset(); off > -skew+200*time.Millisecond || off < -skew-200*time.Millisecond {
		t.Fatalf("offset %s, want about %s", off, -skew)
	}
	if d := s.Clock(fast).Now().Sub(time.Now()); d > 200*time.Millisecond || d < -200*time.Millisecond {
		t.Fatalf("the database's clock read %s off", d)
	}
}

// An enqueue on one node wakes another node's claim loop, which polls
// only every hour, within 100 ms.
func TestEnqueueOnOneNodeWakesAnother(t *testing.T) {
	url := pgtest.URLFrom(t, migrated)
	p := newProvider(t)
	a, b := openNode(t, url, pgstore.Options{}), openNode(t, url, pgstore.Options{})
	putScope(t, a, p)
	runEngine(t, b)
	var took []time.Duration
	for i := range 10 {
		id := fmt.Sprintf("op-%d", i)
		enqueued := time.Now()
		storetest.Enqueue(t, a, enqueued, readOp(id, enqueued))
		for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(time.Millisecond) {
			if at, ok := p.arrival("/" + id); ok {
				took = append(took, at.Sub(enqueued))
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the other node did not send it within 2 s", id)
			}
		}
		time.Sleep(20 * time.Millisecond) // beyond the debounce: each enqueue notifies
	}
	slices.Sort(took)
	t.Logf("enqueue on A to send by B: median %s, max %s", took[len(took)/2], took[len(took)-1])
	if max := took[len(took)-1]; max > 100*time.Millisecond {
		t.Fatalf("slowest wake-up across nodes took %s, want within 100 ms", max)
	}
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

// Retention runs on one node: another's PruneFinished removes nothing
// until the elected node is gone.
func TestRetentionRunsOnOneNode(t *testing.T) {
	url := pgtest.URLFrom(t, migrated)
	first, second := openNode(t, url, pgstore.Options{}), openNode(t, url, pgstore.Options{})
	second.SetRestartMargin(0)
	storetest.PutScope(t, first, "a", storetest.ScopeOpts{})
	ctx := context.Background()
	finish := func(id string) {
		t.Helper()
		storetest.Enqueue(t, first, storetest.T0, storetest.NewOp(id, "a", storetest.T0))
		c := storetest.Claim(t, first, storetest.T0, 1)[0]
		storetest.Complete(t, first, c, storetest.T0, scheduler.Decision{State: scheduler.StateSucceeded}, providers.Outcome{Class: providers.ClassSuccess, Status: 200})
	}
	prune := func(s *pgstore.Store) int {
		t.Helper()
		res, err := s.PruneFinished(ctx, scheduler.PruneParams{Before: storetest.T0.Add(time.Hour), Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		return res.Operations
	}
	finish("one")
	if n := prune(first); n != 1 {
		t.Fatalf("the first node pruned %d, want 1", n)
	}
	finish("two")
	if n := prune(second); n != 0 {
		t.Fatalf("a second node pruned %d while the first is elected", n)
	}
	first.Kill()
	for deadline := time.Now().Add(5 * time.Second); prune(second) == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the second node never took over retention")
		}
	}
}

// The feed's backlog counts the changes the sequencer has not numbered.
func TestFeedBacklogCountsUnnumberedChanges(t *testing.T) {
	s := openStore(t)
	storetest.PutScope(t, s, "a", storetest.ScopeOpts{})
	storetest.Enqueue(t, s, storetest.T0, storetest.NewOp("x", "a", storetest.T0), storetest.NewOp("y", "a", storetest.T0))
	ctx := context.Background()
	if n, err := s.FeedBacklog(ctx); err != nil || n != 2 {
		t.Fatalf("backlog %d (%v), want 2", n, err)
	}
	storetest.AllChanges(t, s)
	if n, err := s.FeedBacklog(ctx); err != nil || n != 0 {
		t.Fatalf("backlog %d (%v) after a read, want 0", n, err)
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

// A claim loop on a node whose clock is 5 s ahead, reading the database's
// time through Store.Clock, sends an operation neither early nor late, and
// does not spin on claims that admit nothing while it waits.
func TestSkewedNodesEngineSendsOnTime(t *testing.T) {
	url := pgtest.URLFrom(t, migrated)
	fast := skewed{Clock: clock.New(), by: 5 * time.Second}
	p := newProvider(t)
	s := openNode(t, url, pgstore.Options{Clock: fast})
	putScope(t, s, p)
	var claims atomic.Int64
	s.OnClaimCommitting(func([]scheduler.Claim, string) { claims.Add(1) })
	sched := runEngineOn(t, s, s.Clock(fast))
	due := time.Now().Add(time.Second).Truncate(time.Millisecond)
	storetest.Enqueue(t, s, s.Clock(fast).Now(), readOp("soon", due))
	sched.Engine.WakeFor(due) // as the Service does after an enqueue
	for deadline := due.Add(3 * time.Second); ; time.Sleep(time.Millisecond) {
		if at, ok := p.arrival("/soon"); ok {
			t.Logf("sent %s after it was due, %d claim transactions", at.Sub(due), claims.Load())
			if at.Before(due) || at.Sub(due) > 100*time.Millisecond {
				t.Fatalf("sent at %s, due at %s: want within 100 ms after", at, due)
			}
			if n := claims.Load(); n > 10 {
				t.Fatalf("%d claim transactions for one operation: the loop spun, its clock ahead of the database's", n)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("never sent")
		}
	}
}

// Wake-ups are debounced: a burst of enqueues on one node sends at most
// one NOTIFY per debounce interval (5 ms), and claims and completions send
// none (a NOTIFY serializes the commits of every notifying transaction).
func TestWakeUpsAreDebouncedAndClaimsSendNone(t *testing.T) {
	const writers, each = 4, 50
	url := pgtest.URLFrom(t, migrated)
	a, b := openNode(t, url, pgstore.Options{}), openNode(t, url, pgstore.Options{})
	var wakes atomic.Int64
	b.OnWake(func() { wakes.Add(1) })
	storetest.PutScope(t, a, "a", storetest.ScopeOpts{MaxConcurrent: 1000})
	time.Sleep(50 * time.Millisecond)
	wakes.Store(0)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				storetest.Enqueue(t, a, storetest.T0, storetest.NewOp(fmt.Sprintf("w%d-%d", w, i), "a", storetest.T0))
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	time.Sleep(50 * time.Millisecond)
	n := wakes.Load()
	t.Logf("%d enqueues in %s woke the other node %d times", writers*each, took.Round(time.Millisecond), n)
	if limit := int64(took/(5*time.Millisecond)) + 2; n > limit || n == 0 {
		t.Fatalf("%d wake-ups for %d enqueues in %s; want 1..%d", n, writers*each, took, limit)
	}
	wakes.Store(0)
	for claimed := 0; claimed < writers*each; {
		cs := storetest.Claim(t, a, storetest.T0, 100)
		var done []scheduler.Completion
		for _, c := range cs {
			done = append(done, storetest.CompletionOf(c, storetest.T0, scheduler.Decision{State: scheduler.StateSucceeded}, providers.Outcome{Class: providers.ClassSuccess, Status: 200}))
		}
		if _, err := a.Complete(context.Background(), done); err != nil {
			t.Fatal(err)
		}
		claimed += len(cs)
	}
	time.Sleep(50 * time.Millisecond)
	if n := wakes.Load(); n != 0 {
		t.Fatalf("claims and completions woke the other node %d times; want none", n)
	}
}
