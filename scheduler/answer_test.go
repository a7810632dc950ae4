package scheduler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"pacer/httpapi"
	"pacer/scheduler"
)

// TestFailedOperationKeepsLastAnswer (design §12 "What the provider
// answered is kept"): an operation that did not succeed keeps its last
// answer's status, headers and body, redacted, in lastOutcome.response,
// and each attempt a copy bounded to scheduler.AttemptAnswerLimit. Here a
// GitHub-style 422 already_exists (what go-github reads into its error
// list) echoes the scope's token, and a 500 puts the token where the
// attempt's bound falls.
func TestFailedOperationKeepsLastAnswer(t *testing.T) {
	h := setup(t, scheduler.EngineConfig{})
	secret := scheduler.TestSecret
	var succeed atomic.Bool
	prov := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		switch {
		case succeed.Load():
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, `{"id":1}`)
		case r.URL.Path == "/repos/acme/app/labels":
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			w.Header().Set("X-GitHub-Request-Id", "CAFE:1234")
			w.Header().Set("X-Echo", token)
			w.WriteHeader(http.StatusUnprocessableEntity)
			fmt.Fprintf(w, `{"message":"Validation Failed","errors":[{"resource":"Label","code":"already_exists","field":"name"}],"documentation_url":"https://docs.github.com/rest/issues/labels#create-a-label","echo":%q}`, token)
		default:
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, strings.Repeat("x", scheduler.AttemptAnswerLimit-4)+token+" after")
		}
	}))
	defer prov.Close()
	ctx := context.Background()
	if _, _, err := h.svc.PutScope(ctx, scheduler.ScopeInput{Name: "gh", Provider: "generic", BaseURL: prov.URL,
		Credentials: scheduler.Credentials{Type: scheduler.CredentialBearer, Token: secret}}, "test"); err != nil {
		t.Fatal(err)
	}
	h.enqueue(scheduler.OperationInput{ID: "label", Scope: "gh", Method: "POST", Path: "/repos/acme/app/labels",
		Body: []byte(`{"name":"bug"}`), ContentType: "application/json"})
	h.enqueue(scheduler.OperationInput{ID: "busy", Scope: "gh", Method: "GET", Path: "/busy"})
	h.pass()

	op := h.wantState("label", scheduler.StateFailed)
	attempts, err := h.store.ListAttempts(ctx, "label")
	if err != nil || len(attempts) != 1 {
		t.Fatalf("attempts: %v, %v", attempts, err)
	}
	for label, res := range map[string]*scheduler.Result{"lastOutcome": op.LastOutcome.Response, "attempt": attempts[0].Response} {
		if res == nil || res.Status != http.StatusUnprocessableEntity || res.Headers["X-Github-Request-Id"] != "CAFE:1234" || res.Truncated {
			t.Fatalf("%s response: got %+v, want the 422 with its headers, whole", label, res)
		}
		var body struct {
			Errors []struct{ Code string }
			Echo   string
		}
		if err := json.Unmarshal(res.Body, &body); err != nil || len(body.Errors) != 1 || body.Errors[0].Code != "already_exists" {
			t.Fatalf("%s body: got %s (%v), want the provider's error list", label, res.Body, err)
		}
		if body.Echo != "[redacted]" || res.Headers["X-Echo"] != "[redacted]" {
			t.Fatalf("%s: the echoed token is not redacted: body %q, header %q", label, body.Echo, res.Headers["X-Echo"])
		}
	}

	// The operation keeps the whole answer (up to the result limit); the
	// attempt keeps its bound, never cutting into the secret.
	busy := h.op("busy")
	full := busy.LastOutcome.Response
	if full == nil || full.Status != 500 || full.Truncated || !strings.HasSuffix(string(full.Body), "[redacted] after") {
		t.Fatalf("busy lastOutcome response: got %+v", full)
	}
	attempts, err = h.store.ListAttempts(ctx, "busy")
	if err != nil || len(attempts) != 1 {
		t.Fatalf("attempts: %v, %v", attempts, err)
	}
	cut := attempts[0].Response
	if cut == nil || !cut.Truncated || len(cut.Body) > scheduler.AttemptAnswerLimit || len(cut.Body) < scheduler.AttemptAnswerLimit-10 {
		t.Fatalf("busy attempt response: got truncated=%v, %d bytes, want cut to %d", cut != nil && cut.Truncated, len(cut.Body), scheduler.AttemptAnswerLimit)
	}
	if tail := strings.TrimLeft(string(cut.Body), "x"); !strings.HasPrefix("[redacted]", tail) {
		t.Fatalf("the attempt's cut keeps more than the redaction mark: %q", tail)
	}

	// Listings leave the whole answer out: it may be as large as the
	// result limit, on every operation of a page.
	page, err := h.svc.ListOperations(ctx, scheduler.OperationFilter{Scope: "gh"})
	if err != nil || len(page.Operations) != 2 {
		t.Fatalf("list: %+v, %v", page, err)
	}
	for _, o := range page.Operations {
		if o.LastOutcome == nil || o.LastOutcome.Response != nil {
			t.Fatalf("listed %s: lastOutcome %+v, want its summary without the response", o.ID, o.LastOutcome)
		}
	}

	// The API serves the body as JSON, as it serves a result.
	api, err := httpapi.New(httpapi.Config{Service: h.svc})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.Handler())
	defer srv.Close()
	for _, path := range []string{"/v1/operations/label", "/v1/operations/label/attempts"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(raw), `"body":{"message":"Validation Failed","errors":[{"resource":"Label","code":"already_exists","field":"name"}]`) {
			t.Fatalf("GET %s: the provider's JSON error is not served as JSON: %s", path, raw)
		}
		if strings.Contains(string(raw), secret[:8]) {
			t.Fatalf("GET %s serves the secret", path)
		}
	}

	// A success afterwards: the result holds the answer, and nothing of
	// the old error is shown as the last one; the first attempt keeps its own.
	succeed.Store(true)
	if rel, err := h.svc.Release(ctx, "label", nil, "label removed", "ann"); err != nil {
		t.Fatal(err)
	} else if rel.LastOutcome.Response == nil || rel.LastOutcome.Response.Status != http.StatusUnprocessableEntity {
		t.Fatalf("the released operation does not show its last answer: %+v", rel.LastOutcome)
	}
	h.pass()
	op = h.wantState("label", scheduler.StateSucceeded)
	if op.LastOutcome.Response != nil || op.Result == nil || op.Result.Status != http.StatusCreated {
		t.Fatalf("after success: lastOutcome.response %+v, result %+v", op.LastOutcome.Response, op.Result)
	}
	attempts, err = h.store.ListAttempts(ctx, "label")
	if err != nil || len(attempts) != 2 || attempts[0].Response == nil || attempts[1].Response != nil {
		t.Fatalf("attempts after success: %+v, %v", attempts, err)
	}
}
