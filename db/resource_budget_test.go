package db_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"pacer/providers"
	"pacer/scheduler"
	"pacer/scheduler/storetest"
)

// An answer that names another resource for a route moves the waiting
// operations of that route, and only those, to its budget; a whole path
// that disagrees with its first segment becomes an exception of its own;
// resume forgets the figures and pauses but keeps what was learned.
func TestRoutesLearnedFromAnswers(t *testing.T) {
	ctx := context.Background()
	d, path := newTestDB(t)
	raw := rawDB(t, path)
	storetest.PutScope(t, d, "gh", storetest.ScopeOpts{MaxConcurrent: 10})
	storetest.Enqueue(t, d, t0,
		storetest.NewRequest("s1", "gh", "GET", "/search/issues"),
		storetest.NewRequest("s2", "gh", "GET", "/search/issues?page=2"),
		storetest.NewRequest("code", "gh", "GET", "/search/code?q=x"),
		storetest.NewRequest("post", "gh", "POST", "/search/issues"),
		storetest.NewRequest("repo", "gh", "GET", "/repos/o/r"))
	resourceOf := func(id string) string {
		t.Helper()
		var res string
		if err := raw.QueryRow(`SELECT resource FROM operations WHERE operation_id = ?`, id).Scan(&res); err != nil {
			t.Fatal(err)
		}
		return res
	}
	cs := storetest.Claim(t, d, t0, 1) // s1, the oldest
	storetest.Answer(t, d, cs[0], t0, "search", &providers.Budget{Remaining: 10, Resource: "search"}, time.Time{}, true)
	for id, want := range map[string]string{"s1": "search", "s2": "search", "code": "search", "post": "", "repo": ""} {
		if got := resourceOf(id); got != want {
			t.Errorf("%s spends %q after GET /search was learned, want %q", id, got, want)
		}
	}
	// /search/code answers code_search: an exception to its segment.
	for _, c := range storetest.Claim(t, d, t0, 10) {
		res := map[string]string{"s1": "search", "s2": "search", "code": "code_search"}[c.Operation.ID]
		storetest.Answer(t, d, c, t0, res, &providers.Budget{Remaining: 9, Resource: res}, time.Time{}, false)
	}
	storetest.Enqueue(t, d, t0, storetest.NewRequest("code-2", "gh", "GET", "/search/code"), storetest.NewRequest("s3", "gh", "GET", "/search/users"))
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
	storetest.Enqueue(t, d, t0, storetest.NewRequest("s4", "gh", "GET", "/search/topics"))
	if got := resourceOf("s4"); got != "search" {
		t.Errorf("after resume a search spends %q, want search (routes are kept)", got)
	}
}

// A scope keeps at most scheduler.MaxExceptionRoutes whole-path routes: a
// provider naming a new resource for every path cannot grow it without
// bound.
func TestExceptionRoutesAreBounded(t *testing.T) {
	d, path := newTestDB(t)
	storetest.PutScope(t, d, "gh", storetest.ScopeOpts{MaxConcurrent: 10})
	storetest.Enqueue(t, d, t0, storetest.NewRequest("first", "gh", "GET", "/x/first"))
	storetest.Answer(t, d, storetest.Claim(t, d, t0, 1)[0], t0, "segment", &providers.Budget{Remaining: 10, Resource: "segment"}, time.Time{}, false)
	n := scheduler.MaxExceptionRoutes + 20
	for i := range n {
		id := fmt.Sprintf("p%d", i)
		storetest.Enqueue(t, d, t0, storetest.NewRequest(id, "gh", "GET", fmt.Sprintf("/x/%d", i)))
		storetest.Answer(t, d, storetest.Claim(t, d, t0.Add(time.Duration(i)*time.Millisecond), 1)[0], t0.Add(time.Duration(i)*time.Millisecond), fmt.Sprintf("r%d", i), nil, time.Time{}, false)
	}
	var routes int
	if err := rawDB(t, path).QueryRow(`SELECT COUNT(*) FROM scope_routes WHERE exception`).Scan(&routes); err != nil {
		t.Fatal(err)
	}
	if routes != scheduler.MaxExceptionRoutes {
		t.Fatalf("%d exception routes kept, want %d", routes, scheduler.MaxExceptionRoutes)
	}
}
