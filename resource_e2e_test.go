package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestResourceBudgetsEndToEnd runs the real binary against a stand-in for
// GitHub (design §12): a search answered with its spent primary limit
// (x-ratelimit-resource: search) holds back only the searches, so a REST
// write of the same scope goes at once and the scope stays open, showing
// the search budget paused; a GraphQL 200 with errors[].type RATE_LIMITED
// is a rate limit, not a success: a secondary one pauses the whole scope,
// a write included.
func TestResourceBudgetsEndToEnd(t *testing.T) {
	reset := time.Now().Add(time.Hour).Unix()
	var mu sync.Mutex
	hits := map[string]int{}
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.Method+" "+r.URL.Path]++
		mu.Unlock()
		h := w.Header()
		h.Set("Date", time.Now().UTC().Format(http.TimeFormat))
		h.Set("X-RateLimit-Limit", "5000")
		h.Set("X-RateLimit-Reset", strconv.FormatInt(reset, 10))
		switch r.Method + " " + r.URL.Path {
		case "GET /search/issues": // GitHub docs' primary limit, on the search resource
			h.Set("X-RateLimit-Resource", "search")
			h.Set("X-RateLimit-Remaining", "0")
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprint(w, `{"message":"API rate limit exceeded for user ID 1.","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"}`)
		case "POST /graphql": // GitHub docs: a secondary limit inside a 200
			h.Set("X-RateLimit-Resource", "graphql")
			h.Set("X-RateLimit-Remaining", "4000")
			fmt.Fprint(w, `{"errors":[{"type":"RATE_LIMITED","message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again."}]}`)
		default:
			h.Set("X-RateLimit-Resource", "core")
			h.Set("X-RateLimit-Remaining", "4999")
			fmt.Fprint(w, `{"number":1}`)
		}
	}))
	defer provider.Close()
	p := startPacer(t, filepath.Join(t.TempDir(), "pacer.db"), freeAddr(t))
	for _, name := range []string{"gh", "gh-graphql"} {
		body := map[string]any{"provider": "github", "baseURL": provider.URL, "maxConcurrent": 4,
			"credentials": map[string]any{"type": "bearer", "token": "tok-" + name}}
		if st, out := p.call(t, "PUT", "/v1/scopes/"+name, body); st != 201 {
			t.Fatalf("put scope %s: %d %v", name, st, out)
		}
	}
	op := func(id, scope, method, path string) map[string]any {
		return map[string]any{"operationId": id, "providerScope": scope, "request": map[string]any{"method": method, "path": path}}
	}
	waitAttempt := func(id, state string) map[string]any {
		t.Helper()
		for range 300 {
			_, got := p.call(t, "GET", "/v1/operations/"+id, nil)
			if got["state"] == state && got["attempt"] == float64(1) {
				return got
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("operation %s never reached %s after one attempt", id, state)
		return nil
	}

	enqueue(t, p, op("search", "gh", "GET", "/search/issues?q=is:open"))
	waitAttempt("search", "waitingForBudget")
	enqueue(t, p, op("search-2", "gh", "GET", "/search/issues?q=is:closed"))
	enqueue(t, p, op("patch", "gh", "PATCH", "/repos/o/r/issues/1"))
	p.waitState(t, "patch", "succeeded")
	_, s2 := p.call(t, "GET", "/v1/operations/search-2", nil)
	if s2["state"] != "waitingForBudget" {
		t.Errorf("search-2 %v, want waitingForBudget behind the spent search budget", s2["state"])
	}
	_, scope := p.call(t, "GET", "/v1/scopes/gh", nil)
	if scope["status"] != "open" {
		t.Errorf("scope gh %v, want open: only its search budget is spent", scope["status"])
	}
	res, _ := scope["resources"].([]any)
	if len(res) != 1 || res[0].(map[string]any)["resource"] != "search" || res[0].(map[string]any)["status"] != "paused" {
		t.Errorf("scope gh resources %v, want search paused", scope["resources"])
	}

	// The CLI shows the named budget too.
	cli, code := runPacerCmd(t, "scopes", "show", "--server", p.base, "gh")
	if code != 0 {
		t.Fatalf("pacer scopes show gh: exit %d: %s", code, cli)
	}
	if !strings.Contains(cli, "budget search") || !strings.Contains(cli, "paused until") {
		t.Errorf("pacer scopes show gh:\n%s\nwant the search budget paused", cli)
	}

	enqueue(t, p, op("query", "gh-graphql", "POST", "/graphql"))
	lo := waitAttempt("query", "waitingForBudget")["lastOutcome"].(map[string]any)
	if lo["class"] != "rateLimited" || lo["reason"] != "secondary-rate-limit" {
		t.Errorf("GraphQL 200 lastOutcome %v, want rateLimited/secondary-rate-limit", lo)
	}
	enqueue(t, p, op("write", "gh-graphql", "PATCH", "/repos/o/r"))
	_, scope = p.call(t, "GET", "/v1/scopes/gh-graphql", nil)
	if scope["status"] != "paused" {
		t.Errorf("scope gh-graphql %v, want paused by the secondary limit", scope["status"])
	}
	time.Sleep(300 * time.Millisecond) // the engine had its chance to send the write
	_, w := p.call(t, "GET", "/v1/operations/write", nil)
	if w["state"] != "waitingForBudget" {
		t.Errorf("write %v, want waitingForBudget while the scope is paused", w["state"])
	}

	mu.Lock()
	defer mu.Unlock()
	if n := hits["GET /search/issues"]; n != 1 {
		t.Errorf("the search endpoint heard %d requests, want 1 (nothing premature)", n)
	}
	if n := hits["PATCH /repos/o/r"]; n != 0 {
		t.Errorf("the paused scope sent its write %d times", n)
	}
}
