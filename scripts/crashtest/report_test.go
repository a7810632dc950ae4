package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"
)

// get sends n concurrent GETs to the stand-in, one per path, and waits
// for their answers.
func get(t *testing.T, url string, paths ...string) {
	t.Helper()
	var wg sync.WaitGroup
	for _, p := range paths {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Get(url + p)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
		}()
	}
	wg.Wait()
}

func TestStandInSeesAnOperationInFlightTwice(t *testing.T) {
	sim := newStandIn(1)
	srv := httptest.NewServer(sim)
	defer srv.Close()
	sim.armBurst() // holds both answers, so both requests are in flight together
	get(t, srv.URL, "/read-a/read-a-1", "/read-a/read-a-1")
	get(t, srv.URL, "/read-a/read-a-1") // after the others: not twice
	sim.mu.Lock()
	defer sim.mu.Unlock()
	if got := sim.twiceInFlight; len(got) != 1 || got[0] != "read-a-1" {
		t.Fatalf("twiceInFlight = %v, want [read-a-1]", got)
	}
	if sim.overCap != 0 {
		t.Fatalf("overCap = %d, want 0 (read-a allows 3)", sim.overCap)
	}
}

func TestStandInSeesAScopeOverItsCap(t *testing.T) {
	sim := newStandIn(1)
	srv := httptest.NewServer(sim)
	defer srv.Close()
	sim.armBurst()
	get(t, srv.URL, "/read-a/read-a-1", "/read-a/read-a-2", "/read-a/read-a-3", "/read-a/read-a-4")
	sim.mu.Lock()
	defer sim.mu.Unlock()
	if sim.overCap != 1 {
		t.Fatalf("overCap = %d, want 1 (4 in flight, read-a allows 3)", sim.overCap)
	}
}

func TestStandInDoesNotCountRequestsOfAKilledProcess(t *testing.T) {
	sim := newStandIn(1)
	now := time.Now()
	old := &flight{id: "read-a-1", arrived: now.Add(-time.Second)}
	if !sim.live(old, now) {
		t.Fatal("a request of a live process is not in flight")
	}
	sim.kills = append(sim.kills, kill{at: now.Add(-time.Millisecond)})
	if sim.live(old, now) {
		t.Fatal("a request sent before the last kill is still in flight")
	}
	sim.kills = nil
	late := &flight{id: "plain-mute-1", arrived: now.Add(-requestTimeout)}
	if sim.live(late, now.Add(time.Millisecond)) {
		t.Fatal("a request past pacer's request timeout is still in flight")
	}
}

// burstFixture is one kill right after a burst of minBurst plain mutations
// whose answers pacer had not recorded: their attempts were interrupted.
func burstFixture(state string, resent bool) (*standIn, map[string]opSpec, map[string]opView) {
	sim := newStandIn(1)
	ops, views := map[string]opSpec{}, map[string]opView{}
	t0 := time.Now().Truncate(time.Millisecond)
	k := burstKill{at: t0.Add(10 * time.Millisecond), last: t0.Add(8 * time.Millisecond)}
	for i := range minBurst {
		id := "plain-a-" + string(rune('a'+i))
		ops[id] = opSpec{id: id, scope: scopeSpec{name: "plain-a", kind: "plain", maxConcurrent: 3}}
		rec := &opRecord{keys: map[string]bool{}, effects: 1,
			requests: []request{{arrived: t0.Add(time.Millisecond), answered: t0.Add(8 * time.Millisecond), status: 201}}}
		if resent {
			rec.effects++
			rec.requests = append(rec.requests, request{arrived: t0.Add(time.Second), answered: t0.Add(time.Second), status: 201})
		}
		sim.ops[id] = rec
		k.answers = append(k.answers, burstAnswer{id: id, status: 201, arrived: t0.Add(time.Millisecond), answered: t0.Add(8 * time.Millisecond)})
		v := opView{State: state, Attempts: []attemptView{{Number: 1, StartedAt: t0, FinishedAt: t0.Add(time.Second), Reason: "interrupted"}}}
		views[id] = v
	}
	sim.kills = append(sim.kills, kill{at: k.at})
	sim.burstKills = append(sim.burstKills, k)
	return sim, ops, views
}

func TestBurstKillsAcceptInterruptedPlainMutationsThatAreHeld(t *testing.T) {
	sim, ops, views := burstFixture("held", false)
	var c checks
	burstKills(&c, config{kills: 8}, sim, ops, views)
	if c.violations != 0 {
		t.Fatalf("violations = %d, want 0: %v", c.violations, c.rows)
	}
}

func TestBurstKillsFlagInterruptedPlainMutationsThatAreResent(t *testing.T) {
	sim, ops, views := burstFixture("succeeded", true)
	var c checks
	burstKills(&c, config{kills: 8}, sim, ops, views)
	if c.violations != 1 {
		t.Fatalf("violations = %d, want 1 (the resent ones): %v", c.violations, c.rows)
	}
}

func TestBurstKillsFlagAnAnswerRecordedAsAnother(t *testing.T) {
	sim, ops, views := burstFixture("held", false)
	for id, v := range views {
		v.Attempts[0].Status, v.Attempts[0].Reason = 502, "unexpected-status"
		views[id] = v
		break
	}
	var c checks
	burstKills(&c, config{kills: 8}, sim, ops, views)
	if c.violations != 1 {
		t.Fatalf("violations = %d, want 1: %v", c.violations, c.rows)
	}
}

func TestSilentOpsFlagAPlainMutationThatFailed(t *testing.T) {
	sim := newStandIn(1)
	plain := scopeSpec{name: "plain-mute", kind: "plain", maxConcurrent: 4, silent: true}
	keyed := scopeSpec{name: "keyed-mute", kind: "keyed", maxConcurrent: 4, silent: true}
	ops := map[string]opSpec{
		"p1": {id: "p1", scope: plain, silent: true},
		"p2": {id: "p2", scope: plain, silent: true},
		"k1": {id: "k1", scope: keyed, silent: true},
	}
	one := []request{{arrived: time.Now()}}
	sim.ops["p1"] = &opRecord{keys: map[string]bool{}, effects: 1, silenced: true, timedOut: true, requests: one}
	sim.ops["p2"] = &opRecord{keys: map[string]bool{}, effects: 1, silenced: true, timedOut: true, requests: one}
	sim.ops["k1"] = &opRecord{keys: map[string]bool{"intent-k1": true}, effects: 1, silenced: true, timedOut: true,
		requests: append(one, request{arrived: time.Now(), status: 201})}
	views := map[string]opView{
		"p1": {State: "held", HoldReason: "unknownOutcome"},
		"p2": {State: "failed", FailureReason: "retryBudgetExhausted"},
		"k1": {State: "succeeded"},
	}
	var c checks
	silentOps(&c, sim, ops, views)
	if c.violations != 1 {
		t.Fatalf("violations = %d, want 1 (p2 failed): %v", c.violations, c.rows)
	}
}

func TestSendsBeforeNextAttemptCountsAnEarlyResend(t *testing.T) {
	sim := newStandIn(1)
	t0 := time.Now().Truncate(time.Millisecond)
	sim.ops["read-a-1"] = &opRecord{keys: map[string]bool{}, requests: []request{
		{arrived: t0.Add(-50 * time.Millisecond)}, // the attempt's own request
		{arrived: t0.Add(200 * time.Millisecond)}, // 300 ms early
		{arrived: t0.Add(600 * time.Millisecond)}, // on time
	}}
	a := attemptView{Number: 1, StartedAt: t0.Add(-60 * time.Millisecond), FinishedAt: t0, Status: 503}
	a.Decision.State, a.Decision.At = "scheduled", t0.Add(500*time.Millisecond)
	views := map[string]opView{"read-a-1": {State: "succeeded", Attempts: []attemptView{a}}}
	if got := sendsBeforeNextAttempt(sim, views); got != 1 {
		t.Fatalf("sendsBeforeNextAttempt = %d, want 1", got)
	}
}

func TestStandInRecordsARequestPacerGaveUpOnAsUnanswered(t *testing.T) {
	sim := newStandIn(1)
	srv := httptest.NewServer(sim)
	defer srv.Close()
	b := sim.armBurst() // holds the answer past the client's timeout
	client := http.Client{Timeout: 50 * time.Millisecond}
	if resp, err := client.Post(srv.URL+"/plain-a/plain-a-1", "application/json", nil); err == nil {
		resp.Body.Close()
		t.Fatal("answered before the client's timeout")
	}
	<-b.release
	b.flushing.Wait()
	sim.mu.Lock()
	defer sim.mu.Unlock()
	rec := sim.ops["plain-a-1"]
	if rec == nil || !rec.timedOut || rec.cut || !rec.answeredAt.IsZero() {
		t.Fatalf("record = %+v, want timed out, not cut, not answered", rec)
	}
}

func TestStandInEndsOnlyTheKilledProcessesRequests(t *testing.T) {
	sim := newStandIn(1)
	now := time.Now()
	mine := &flight{id: "read-a-1", arrived: now.Add(-time.Second), slot: 0}
	theirs := &flight{id: "read-a-2", arrived: now.Add(-time.Second), slot: 1}
	sim.kills = append(sim.kills, kill{at: now.Add(-time.Millisecond), slot: 1})
	if !sim.live(mine, now) {
		t.Fatal("a kill of process 1 ended a request of process 0")
	}
	if sim.live(theirs, now) {
		t.Fatal("a request of process 1 sent before its kill is still in flight")
	}
	if sim.live(&flight{id: "read-a-3", arrived: now, slot: -1}, now) {
		t.Fatal("a request of a process gone before it was looked up is in flight")
	}
	rec := &opRecord{arrivedAt: now.Add(-time.Second), slot: 0}
	if sim.inFlightAtKill(rec) {
		t.Fatal("a request of process 0 counts as in flight at a kill of process 1")
	}
	rec.slot = 1
	if !sim.inFlightAtKill(rec) {
		t.Fatal("a request of process 1 does not count as in flight at its kill")
	}
}

func TestKillAfterBurstKillsTheProcessMostAnswersWentTo(t *testing.T) {
	sim := newStandIn(1)
	b := &burst{release: make(chan struct{})}
	close(b.release)
	t0 := time.Now()
	for i, slot := range []int{0, 1, 1, 1} {
		b.answers = append(b.answers, burstAnswer{id: string(rune('a' + i)), status: 200, slot: slot,
			arrived: t0, answered: t0.Add(time.Duration(i) * time.Millisecond)})
	}
	if got := sim.killAfterBurst(b, 0, 2); got != 1 {
		t.Fatalf("killed process %d, want 1", got)
	}
	k := sim.burstKills[0]
	if len(k.answers) != 3 || k.slot != 1 || !k.last.Equal(t0.Add(3*time.Millisecond)) {
		t.Fatalf("burst kill = %+v, want process 1's 3 answers, the last at +3ms", k)
	}
	if len(sim.kills) != 1 || sim.kills[0].slot != 1 {
		t.Fatalf("kills = %v, want one of process 1", sim.kills)
	}
}

func TestOwnerOfFindsTheProcessHoldingTheConnection(t *testing.T) {
	for _, tc := range []struct {
		pids []int
		want int
	}{
		{[]int{0, os.Getpid()}, 1},
		{[]int{0, 0}, -1},
	} {
		got := make(chan int, 1)
		whose := ownerOf(func() []int { return tc.pids })
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got <- whose(r) }))
		srv.Config.ConnContext = withConnOwner
		srv.Start()
		resp, err := http.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		srv.Close()
		if g := <-got; g != tc.want {
			t.Errorf("pids %v: slot %d, want %d", tc.pids, g, tc.want)
		}
	}
}

// feedFixture is a feed that shows every operation's final state, read
// through two processes.
func feedFixture() (*feedLog, map[string]opView) {
	feed := &feedLog{pages: []int{2, 1}, changes: []feedChange{
		{1, "a", "scheduled"}, {2, "b", "scheduled"}, {3, "a", "running"},
		{4, "a", "succeeded"}, {5, "b", "running"}, {7, "b", "held"},
	}}
	views := map[string]opView{"a": {State: "succeeded"}, "b": {State: "held"}}
	return feed, views
}

func TestFeedChecksPassAFeedWithEveryFinalStateInOrder(t *testing.T) {
	feed, views := feedFixture()
	var c checks
	feedChecks(&c, feed, views)
	if c.violations != 0 {
		t.Fatalf("violations = %d, want 0: %v", c.violations, c.rows)
	}
}

func TestFeedChecksFlagASeqThatDoesNotGrow(t *testing.T) {
	feed, views := feedFixture()
	feed.changes[2].Seq = 2 // the same as the one before
	var c checks
	feedChecks(&c, feed, views)
	if c.violations != 1 {
		t.Fatalf("violations = %d, want 1: %v", c.violations, c.rows)
	}
}

func TestFeedChecksFlagAFinalStateMissingFromTheFeed(t *testing.T) {
	feed, views := feedFixture()
	feed.changes = feed.changes[:len(feed.changes)-1] // b's held
	var c checks
	feedChecks(&c, feed, views)
	if c.violations != 1 {
		t.Fatalf("violations = %d, want 1: %v", c.violations, c.rows)
	}
	feed, views = feedFixture()
	views["a"] = opView{State: "failed"} // a's last change says succeeded
	c = checks{}
	feedChecks(&c, feed, views)
	if c.violations != 1 {
		t.Fatalf("violations = %d, want 1: %v", c.violations, c.rows)
	}
}

func TestFeedChecksFlagAProcessNeverRead(t *testing.T) {
	feed, views := feedFixture()
	feed.pages[1] = 0
	var c checks
	feedChecks(&c, feed, views)
	if c.violations != 1 {
		t.Fatalf("violations = %d, want 1: %v", c.violations, c.rows)
	}
}

// outageFixture is one plain mutation answered while the database was
// down, its attempt interrupted, the operation in state.
func outageFixture(state string, resent bool) (*standIn, map[string]opSpec, map[string]opView) {
	sim := newStandIn(1)
	t0 := time.Now().Truncate(time.Millisecond)
	sim.markOutage(t0, t0.Add(time.Second))
	id := "plain-a-1"
	ops := map[string]opSpec{id: {id: id, scope: scopeSpec{name: "plain-a", kind: "plain", maxConcurrent: 3}}}
	rec := &opRecord{keys: map[string]bool{}, effects: 1, arrivedAt: t0.Add(-50 * time.Millisecond), answeredAt: t0.Add(500 * time.Millisecond),
		requests: []request{{arrived: t0.Add(-50 * time.Millisecond), answered: t0.Add(500 * time.Millisecond), status: 201}}}
	if resent {
		rec.effects++
		rec.requests = append(rec.requests, request{arrived: t0.Add(10 * time.Second), answered: t0.Add(10 * time.Second), status: 201})
		rec.arrivedAt, rec.answeredAt = t0.Add(10*time.Second), t0.Add(10*time.Second)
	}
	sim.ops[id] = rec
	views := map[string]opView{id: {State: state, Attempts: []attemptView{{Number: 1, StartedAt: t0.Add(-60 * time.Millisecond), FinishedAt: t0.Add(2 * time.Second), Reason: "interrupted"}}}}
	return sim, ops, views
}

func TestOutageAnswersAcceptAnInterruptedMutationThatIsHeld(t *testing.T) {
	sim, ops, views := outageFixture("held", false)
	var c checks
	outageAnswers(&c, sim, ops, views)
	heldAtKills(&c, sim, ops, views)
	if c.violations != 0 {
		t.Fatalf("violations = %d, want 0: %v", c.violations, c.rows)
	}
}

func TestOutageAnswersFlagAnInterruptedMutationThatIsResent(t *testing.T) {
	sim, ops, views := outageFixture("succeeded", true)
	var c checks
	outageAnswers(&c, sim, ops, views)
	if c.violations != 1 {
		t.Fatalf("violations = %d, want 1: %v", c.violations, c.rows)
	}
}

func TestHeldAtKillsFlagsAHoldNeitherAKillNorTheOutageExplains(t *testing.T) {
	sim, ops, views := outageFixture("held", false)
	sim.outages[0].down = sim.outages[0].down.Add(time.Hour) // long after the answer
	sim.outages[0].up = sim.outages[0].down.Add(time.Second)
	var c checks
	heldAtKills(&c, sim, ops, views)
	if c.violations != 1 {
		t.Fatalf("violations = %d, want 1: %v", c.violations, c.rows)
	}
}
