package scheduler_test

import (
	"maps"
	"slices"
	"testing"

	"pacer/scheduler"
)

func TestRouteKeys(t *testing.T) {
	for _, tc := range []struct{ method, path, prefix, whole string }{
		{"GET", "/search/issues?q=a", "GET /search", "GET /search/issues"},
		{"POST", "/graphql", "POST /graphql", "POST /graphql"},
		{"GET", "/", "GET /", "GET /"},
		{"PATCH", "/repos/o/r/issues/1#x", "PATCH /repos", "PATCH /repos/o/r/issues/1"},
		{"GET", "/search/?q=1", "GET /search", "GET /search/"},
	} {
		prefix, whole := scheduler.RouteKeys(tc.method, tc.path)
		if prefix != tc.prefix || whole != tc.whole {
			t.Errorf("RouteKeys(%s %s) = %q, %q; want %q, %q", tc.method, tc.path, prefix, whole, tc.prefix, tc.whole)
		}
	}
}

// Learning a route makes Resource say what the answer named, touching
// as little as it can: the first answer under a segment teaches the
// segment; a disagreeing one an exception for its whole path.
func TestRoutesLearn(t *testing.T) {
	apply := func(r scheduler.Routes, method, path, resource string) scheduler.Routes {
		t.Helper()
		set, del := r.Learn(method, path, resource)
		next := maps.Clone(r)
		for _, k := range del {
			delete(next, k)
		}
		maps.Copy(next, set)
		if got := next.Resource(method, path); got != resource {
			t.Fatalf("after learning %s %s → %q, Resource says %q (routes %v)", method, path, resource, got, next)
		}
		return next
	}
	r := scheduler.Routes{}
	if set, del := r.Learn("GET", "/repos/o/r", ""); set != nil || del != nil {
		t.Fatalf("learning the default for an unknown route changed %v %v", set, del)
	}
	r = apply(r, "GET", "/search/issues", "search")
	if !maps.Equal(r, scheduler.Routes{"GET /search": "search"}) {
		t.Fatalf("routes %v, want the segment only", r)
	}
	if r.Resource("GET", "/search/users?q=1") != "search" || r.Resource("POST", "/search/issues") != "" {
		t.Fatal("the segment's route must cover its method's paths under it, and only its method")
	}
	r = apply(r, "GET", "/search/code?q=x", "code_search")
	if !maps.Equal(r, scheduler.Routes{"GET /search": "search", "GET /search/code": "code_search"}) {
		t.Fatalf("routes %v, want an exception for /search/code", r)
	}
	r = apply(r, "GET", "/search/code", "search") // the exception is forgotten
	if !maps.Equal(r, scheduler.Routes{"GET /search": "search"}) {
		t.Fatalf("routes %v, want the exception gone", r)
	}
	r = apply(r, "POST", "/graphql", "graphql")
	r = apply(r, "POST", "/graphql", "") // a one-segment route says the default itself
	if got := r["POST /graphql"]; got != "" || !slices.Contains(slices.Collect(maps.Keys(r)), "POST /graphql") {
		t.Fatalf("routes %v, want POST /graphql → default", r)
	}
}
