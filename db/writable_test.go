package db_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"

	"pacer/httpapi"
	"pacer/scheduler"
)

// TestFullDatabaseAnswers503: with the database out of room (max_page_count
// on the writer, as a full disk), an enqueue through the API answers a 503
// problem (nothing half-written, nothing lost), Writable — what /readyz
// asks — fails until writes succeed again, and then everything works.
func TestFullDatabaseAnswers503(t *testing.T) {
	store, _ := newTestDB(t)
	clk := clock.NewMock()
	clk.Set(time.Date(2026, 9, 11, 2, 0, 0, 0, time.UTC))
	sched, err := scheduler.New(store, clk, scheduler.Config{})
	if err != nil {
		t.Fatal(err)
	}
	api, err := httpapi.New(httpapi.Config{Service: sched.Service, Ready: func(ctx context.Context) error { return store.Writable(ctx, clk.Now()) }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.Handler())
	defer srv.Close()
	call := func(method, path, body string) (*http.Response, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp, out
	}
	enqueue := func(id string) (*http.Response, map[string]any) {
		big := strings.Repeat("x", 200<<10) // needs pages the full database cannot add
		return call("POST", "/v1/operations", fmt.Sprintf(`{"operationId":%q,"providerScope":"acct","request":{"method":"POST","path":"/x","body":{"pad":%q}}}`, id, big))
	}
	readyz := func() int {
		t.Helper()
		resp, _ := call("GET", "/readyz", "")
		return resp.StatusCode
	}
	if resp, _ := call("PUT", "/v1/scopes/acct", `{"provider":"generic","baseURL":"https://api.example"}`); resp.StatusCode != 201 {
		t.Fatalf("put scope: %d", resp.StatusCode)
	}
	if resp, _ := enqueue("before-1"); resp.StatusCode != 201 {
		t.Fatalf("enqueue: %d", resp.StatusCode)
	}
	if st := readyz(); st != 200 {
		t.Fatalf("readyz with room: %d", st)
	}

	if _, err := store.SetMaxPageCount(1); err != nil { // clamped to the current size: no page can be added
		t.Fatal(err)
	}
	resp, p := enqueue("during-1")
	if resp.StatusCode != http.StatusServiceUnavailable || p["type"] != httpapi.ProblemTypeStoreUnavailable ||
		!strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("enqueue on a full database: %d %s %v (Retry-After %q), want a 503 problem", resp.StatusCode, resp.Header.Get("Content-Type"), p, resp.Header.Get("Retry-After"))
	}
	if st := readyz(); st != http.StatusServiceUnavailable {
		t.Fatalf("readyz on a full database: %d, want 503", st)
	}
	clk.Add(time.Minute)
	if st := readyz(); st != http.StatusServiceUnavailable {
		t.Fatalf("readyz still full, later: %d, want 503", st)
	}
	if err := store.Writable(context.Background(), clk.Now()); !errors.Is(err, scheduler.ErrStoreUnavailable) {
		t.Fatalf("Writable: %v, want ErrStoreUnavailable", err)
	}
	if _, err := sched.Service.GetOperation(context.Background(), "during-1"); !errors.Is(err, scheduler.ErrNotFound) {
		t.Fatalf("the refused enqueue left something: %v", err)
	}

	if _, err := store.SetMaxPageCount(0); err != nil { // room again
		t.Fatal(err)
	}
	if st := readyz(); st != 200 {
		t.Fatalf("readyz after room was made: %d, want 200", st)
	}
	if resp, _ := enqueue("after-1"); resp.StatusCode != 201 {
		t.Fatalf("enqueue after room was made: %d", resp.StatusCode)
	}
	for _, id := range []string{"before-1", "after-1"} {
		if _, err := sched.Service.GetOperation(context.Background(), id); err != nil {
			t.Fatalf("%s lost: %v", id, err)
		}
	}
}
