package db_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"pacer/db"
	"pacer/providers"
	"pacer/scheduler"
)

// newRequest is an operation of scope sending method path.
func newRequest(id, scope, method, path string) scheduler.NewOperation {
	op := newOp(id, scope, t0)
	op.Request.Method, op.Request.Path = method, path
	if method == "GET" {
		op.Kind = scheduler.KindRead
	}
	return op
}

// answer completes claim c at at as the provider's answer naming resource
// with budget b (nil: none), rescheduled to retry at once when retry is
// set, succeeded otherwise; pause, when not zero, pauses that budget.
func answer(t *testing.T, d *db.DB, c scheduler.Claim, at time.Time, resource string, b *providers.Budget, pause time.Time, retry bool) {
	t.Helper()
	dec := scheduler.Decision{State: scheduler.StateSucceeded, Reason: "ok",
		Scope: scheduler.ScopeEffect{Resource: resource, ResourceKnown: true, Budget: b, BudgetPauseUntil: pause, BudgetPauseReason: "rate limited: test"}}
	class := providers.ClassSuccess
	if retry {
		dec.State, dec.NextAttemptAt, class = scheduler.StateWaitingForBudget, at, providers.ClassRateLimited
	}
	applied, err := d.Complete(context.Background(), []scheduler.Completion{{
		OperationID: c.Operation.ID, LeaseToken: c.Operation.LeaseToken, Attempt: c.Operation.Attempt, FinishedAt: at,
		Outcome: providers.Outcome{Class: class, Status: 200, Budget: b, Resource: resource}, Decision: dec,
	}})
	if err != nil || !applied[0] {
		t.Fatalf("complete %s: %v %v", c.Operation.ID, applied, err)
	}
}

// sortedIDs lists the operation IDs of claims, sorted.
func sortedIDs(cs []scheduler.Claim) []string {
	ids := claimedIDs(cs)
	slices.Sort(ids)
	return ids
}

// Design §12 "Separate budgets where the provider keeps them": a spent
// search budget holds back only the requests learned to spend it; a REST
// write of the same scope goes at once, and the scope stays open.
func TestSpentResourceBudgetHoldsOnlyItsRequests(t *testing.T) {
	ctx := context.Background()
	d, _ := newTestDB(t)
	putScope(t, d, "gh", scopeOpts{MaxConcurrent: 10})
	enqueue(t, d, t0, newRequest("search-1", "gh", "GET", "/search/issues?q=a"))
	reset := t0.Add(time.Minute)
	// The provider answers the search: its budget is spent until reset.
	cs := claim(t, d, t0, 10)
	answer(t, d, cs[0], t0, "search", &providers.Budget{Remaining: 0, Limit: 30, ResetAt: reset, Resource: "search"}, reset, true)

	// A second search learns its route at enqueue; a REST write spends
	// the default budget.
	enqueue(t, d, t0, newRequest("search-2", "gh", "GET", "/search/commits?q=b"), newRequest("patch", "gh", "PATCH", "/repos/o/r/issues/1"))
	for _, id := range []string{"search-1", "search-2"} {
		if op := getOp(t, d, id); op.State != scheduler.StateWaitingForBudget || !op.NextAttemptAt.Equal(reset) {
			t.Errorf("%s: %s until %s, want waitingForBudget until the search reset %s", id, op.State, op.NextAttemptAt, reset)
		}
	}
	if op := getOp(t, d, "patch"); op.State != scheduler.StateScheduled {
		t.Errorf("patch: %s, want scheduled (the search budget is not its)", op.State)
	}
	if got := sortedIDs(claim(t, d, t0, 10)); !slices.Equal(got, []string{"patch"}) {
		t.Fatalf("claimed %v while search is spent, want [patch]", got)
	}
	s, err := d.GetScope(ctx, "gh")
	if err != nil {
		t.Fatal(err)
	}
	if st := s.Status(t0); st != scheduler.ScopeOpen {
		t.Errorf("scope %s, want open: only its search budget is spent", st)
	}
	if len(s.Resources) != 1 || s.Resources[0].Resource != "search" || !s.Resources[0].PauseEnds.Equal(reset) {
		t.Fatalf("resources %+v, want search paused until %s", s.Resources, reset)
	}
	// The claim wakes for the search reset, and admits both then.
	at, ok, err := d.NextWake(ctx)
	if err != nil || !ok || !at.Equal(reset) {
		t.Fatalf("next wake %s %v %v, want the search reset %s", at, ok, err, reset)
	}
	if got := sortedIDs(claim(t, d, reset, 10)); !slices.Equal(got, []string{"search-1", "search-2"}) {
		t.Fatalf("claimed %v at the reset, want both searches", got)
	}
}

// The default budget spent does not hold a named resource's requests
// either, and a spent budget's requests report their own reset.
func TestSpentDefaultBudgetHoldsOnlyItsRequests(t *testing.T) {
	d, _ := newTestDB(t)
	putScope(t, d, "gh", scopeOpts{MaxConcurrent: 10})
	enqueue(t, d, t0, newRequest("graphql", "gh", "POST", "/graphql"), newRequest("patch", "gh", "PATCH", "/repos/o/r"))
	cs := claim(t, d, t0, 10)
	reset := t0.Add(time.Hour)
	for _, c := range cs {
		switch c.Operation.ID {
		case "graphql":
			answer(t, d, c, t0, "graphql", &providers.Budget{Remaining: 4000, Limit: 5000, ResetAt: reset, Resource: "graphql"}, time.Time{}, true)
		case "patch":
			answer(t, d, c, t0, "", &providers.Budget{Remaining: 0, Limit: 5000, ResetAt: reset}, reset, true)
		}
	}
	if got := sortedIDs(claim(t, d, t0, 10)); !slices.Equal(got, []string{"graphql"}) {
		t.Fatalf("claimed %v with the core budget spent, want [graphql]", got)
	}
	if op := getOp(t, d, "patch"); op.State != scheduler.StateWaitingForBudget || !op.NextAttemptAt.Equal(reset) {
		t.Errorf("patch: %s until %s, want waitingForBudget until %s", op.State, op.NextAttemptAt, reset)
	}
	s, _ := d.GetScope(context.Background(), "gh")
	if st := s.Status(t0); st != scheduler.ScopePaused {
		t.Errorf("scope %s, want paused: its default budget is spent", st)
	}
}

// An answer that names another resource for a route moves the waiting
// operations of that route, and only those, to its budget; a whole path
// that disagrees with its first segment becomes an exception of its own;
// resume forgets the figures and pauses but keeps what was learned.
func TestRoutesLearnedFromAnswers(t *testing.T) {
	ctx := context.Background()
	d, path := newTestDB(t)
	raw := rawDB(t, path)
	putScope(t, d, "gh", scopeOpts{MaxConcurrent: 10})
	enqueue(t, d, t0,
		newRequest("s1", "gh", "GET", "/search/issues"),
		newRequest("s2", "gh", "GET", "/search/issues?page=2"),
		newRequest("code", "gh", "GET", "/search/code?q=x"),
		newRequest("post", "gh", "POST", "/search/issues"),
		newRequest("repo", "gh", "GET", "/repos/o/r"))
	resourceOf := func(id string) string {
		t.Helper()
		var res string
		if err := raw.QueryRow(`SELECT resource FROM operations WHERE operation_id = ?`, id).Scan(&res); err != nil {
			t.Fatal(err)
		}
		return res
	}
	cs := claim(t, d, t0, 1) // s1, the oldest
	answer(t, d, cs[0], t0, "search", &providers.Budget{Remaining: 10, Resource: "search"}, time.Time{}, true)
	for id, want := range map[string]string{"s1": "search", "s2": "search", "code": "search", "post": "", "repo": ""} {
		if got := resourceOf(id); got != want {
			t.Errorf("%s spends %q after GET /search was learned, want %q", id, got, want)
		}
	}
	// /search/code answers code_search: an exception to its segment.
	for _, c := range claim(t, d, t0, 10) {
		res := map[string]string{"s1": "search", "s2": "search", "code": "code_search"}[c.Operation.ID]
		answer(t, d, c, t0, res, &providers.Budget{Remaining: 9, Resource: res}, time.Time{}, false)
	}
	enqueue(t, d, t0, newRequest("code-2", "gh", "GET", "/search/code"), newRequest("s3", "gh", "GET", "/search/users"))
	if a, b := resourceOf("code-2"), resourceOf("s3"); a != "code_search" || b != "search" {
		t.Errorf("new operations spend %q and %q, want code_search and search", a, b)
	}
	if _, err := d.ResumeScope(ctx, "gh", scheduler.Action{Actor: "staff", At: t0, Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	s, _ := d.GetScope(ctx, "gh")
	if len(s.Resources) != 2 {
		t.Errorf("resources %+v, want code_search and search", s.Resources)
	}
	for _, r := range s.Resources {
		if r.Budget != nil || !r.PauseEnds.IsZero() {
			t.Errorf("after resume %s still has %+v", r.Resource, r)
		}
	}
	enqueue(t, d, t0, newRequest("s4", "gh", "GET", "/search/topics"))
	if got := resourceOf("s4"); got != "search" {
		t.Errorf("after resume a search spends %q, want search (routes are kept)", got)
	}
}

// A scope keeps at most scheduler.MaxExceptionRoutes whole-path routes: a
// provider naming a new resource for every path cannot grow it without
// bound.
func TestExceptionRoutesAreBounded(t *testing.T) {
	d, path := newTestDB(t)
	putScope(t, d, "gh", scopeOpts{MaxConcurrent: 10})
	enqueue(t, d, t0, newRequest("first", "gh", "GET", "/x/first"))
	answer(t, d, claim(t, d, t0, 1)[0], t0, "segment", &providers.Budget{Remaining: 10, Resource: "segment"}, time.Time{}, false)
	n := scheduler.MaxExceptionRoutes + 20
	for i := range n {
		id := fmt.Sprintf("p%d", i)
		enqueue(t, d, t0, newRequest(id, "gh", "GET", fmt.Sprintf("/x/%d", i)))
		answer(t, d, claim(t, d, t0.Add(time.Duration(i)*time.Millisecond), 1)[0], t0.Add(time.Duration(i)*time.Millisecond), fmt.Sprintf("r%d", i), nil, time.Time{}, false)
	}
	var routes int
	if err := rawDB(t, path).QueryRow(`SELECT COUNT(*) FROM scope_routes WHERE exception`).Scan(&routes); err != nil {
		t.Fatal(err)
	}
	if routes != scheduler.MaxExceptionRoutes {
		t.Fatalf("%d exception routes kept, want %d", routes, scheduler.MaxExceptionRoutes)
	}
}
