package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestRedirectsEndToEnd runs the real binary (design §12): a 307 on a
// mutation is followed with the same method, body and request identity;
// a 308 to another origin is not followed, that origin never hears from
// pacer (so never sees the credentials), and the failure names where it
// pointed.
func TestRedirectsEndToEnd(t *testing.T) {
	t.Parallel()
	type seen struct{ method, path, key, auth, body string }
	var mu sync.Mutex
	var got []seen
	var otherHits int
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		otherHits++
		mu.Unlock()
	}))
	defer other.Close()
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, seen{r.Method, r.URL.Path, r.Header.Get("Idempotency-Key"), r.Header.Get("Authorization"), string(b)})
		mu.Unlock()
		switch r.URL.Path {
		case "/repos/old/name":
			w.Header().Set("Location", "/repos/new/name")
			w.WriteHeader(http.StatusTemporaryRedirect)
		case "/repos/new/name":
			w.WriteHeader(http.StatusOK)
			fmt.Fprint(w, `{"renamed":true}`)
		case "/away":
			w.Header().Set("Location", other.URL+"/stolen")
			w.WriteHeader(http.StatusPermanentRedirect)
		}
	}))
	defer provider.Close()
	p := startPacer(t, filepath.Join(t.TempDir(), "pacer.db"), freeAddr(t))
	putScope(t, p, "gh", provider.URL, "Idempotency-Key")
	for _, op := range []map[string]any{
		{"operationId": "rename", "providerScope": "gh", "requestIdentity": "intent-rename",
			"request": map[string]any{"method": "PATCH", "path": "/repos/old/name", "body": map[string]any{"name": "new"}}},
		{"operationId": "away", "providerScope": "gh", "request": map[string]any{"method": "POST", "path": "/away", "body": map[string]any{"x": 1}}},
	} {
		if st, body := p.call(t, "POST", "/v1/operations", op); st != 201 {
			t.Fatalf("enqueue: %d %v", st, body)
		}
	}
	op := p.waitState(t, "rename", "succeeded")
	if res, _ := op["result"].(map[string]any); res == nil || res["status"] != float64(200) {
		t.Errorf("result %v", op["result"])
	}
	failed := p.waitState(t, "away", "failed")
	lo, _ := failed["lastOutcome"].(map[string]any)
	if lo == nil || lo["reason"] != "redirect-other-origin" || !strings.Contains(fmt.Sprint(lo["detail"]), other.URL+"/stolen") {
		t.Errorf("lastOutcome %v, want redirect-other-origin naming %s/stolen", lo, other.URL)
	}
	mu.Lock()
	defer mu.Unlock()
	if otherHits != 0 {
		t.Errorf("the other origin was contacted %d times", otherHits)
	}
	var first, moved *seen
	for i := range got {
		switch got[i].path {
		case "/repos/old/name":
			first = &got[i]
		case "/repos/new/name":
			moved = &got[i]
		}
	}
	if first == nil || moved == nil {
		t.Fatalf("requests %+v", got)
	}
	if *moved != (seen{"PATCH", "/repos/new/name", "intent-rename", first.auth, first.body}) || first.key != "intent-rename" || first.auth == "" {
		t.Errorf("followed request %+v, first %+v: want the same method, body, identity and credentials", *moved, *first)
	}
}
