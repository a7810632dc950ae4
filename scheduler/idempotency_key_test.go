package scheduler_test

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"pacer/scheduler"
)

// The caller's own idempotency key (design §12) is what the provider
// receives, once, on every attempt: pacer never replaces it with its own.
func TestEngine_SendsCallersIdempotencyKey(t *testing.T) {
	h := setup(t, scheduler.EngineConfig{})
	var (
		mu   sync.Mutex
		seen [][]string
	)
	prov := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Values("Idempotency-Key"))
		n := len(seen)
		mu.Unlock()
		if n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable) // resent with the same key
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	defer prov.Close()
	h.scope("pay", prov.URL, "Idempotency-Key", 1)
	h.enqueue(scheduler.OperationInput{ID: "op-1", Scope: "pay", Method: "POST", Path: "/charges",
		Headers: map[string]string{"idempotency-key": "caller-key-1"}})
	if got := h.op("op-1").RequestIdentity; got != "caller-key-1" {
		t.Fatalf("requestIdentity: got %q, want the caller's key", got)
	}
	h.pass()
	h.clock.Add(h.op("op-1").NextAttemptAt.Sub(h.clock.Now()))
	h.pass()
	h.wantState("op-1", scheduler.StateSucceeded)
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 {
		t.Fatalf("attempts: got %d, want 2", len(seen))
	}
	for i, keys := range seen {
		if len(keys) != 1 || keys[0] != "caller-key-1" {
			t.Fatalf("attempt %d sent Idempotency-Key %q, want the caller's key once", i+1, keys)
		}
	}
}
