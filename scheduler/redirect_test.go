package scheduler_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"pacer/providers"
	"pacer/scheduler"
)

// runAll passes until nothing is claimed (bounded).
func (h *harness) runAll() {
	h.t.Helper()
	for range 20 {
		if h.pass() == 0 {
			return
		}
	}
}

// lastAttempt is the operation's latest attempt.
func (h *harness) lastAttempt(id string) scheduler.Attempt {
	h.t.Helper()
	atts, err := h.svc.ListAttempts(context.Background(), id)
	if err != nil || len(atts) == 0 {
		h.t.Fatalf("attempts of %s: %v, %v", id, atts, err)
	}
	return atts[len(atts)-1]
}

// Design §12: every redirect status × a read and a mutation × the scope's
// own origin and another one. Reads follow all five within the origin; a
// mutation follows 307 and 308 with the same method, body and identity; a
// 303 after a mutation is a success (not fetched); a 301/302 after a
// mutation is held as an unknown outcome; nothing is followed to another
// origin, which is never contacted (so never sees the credentials), and
// the failure names the Location without its user information or query
// values.
func TestRedirectMatrix(t *testing.T) {
	h, prov := setupWithProvider(t)
	other := newProvider(t, h.clock)
	h.scope("a", prov.URL, "Idempotency-Key", 64)
	body := `{"name":"renamed"}`

	type tcase struct {
		id, from, to string
		status       int
		kind         scheduler.Kind
		method       string
		otherOrigin  bool
	}
	var cases []tcase
	for _, st := range []int{301, 302, 303, 307, 308} {
		for _, k := range []struct {
			kind   scheduler.Kind
			method string
		}{{scheduler.KindRead, "GET"}, {scheduler.KindMutation, "PATCH"}, {scheduler.KindMutation, "POST"}} {
			for _, oo := range []bool{false, true} {
				id := fmt.Sprintf("r%d-%s-%v", st, k.method, oo)
				c := tcase{id: id, from: "/from/" + id, to: "/to/" + id, status: st, kind: k.kind, method: k.method, otherOrigin: oo}
				loc := c.to // relative: resolved against the current URL
				if oo {
					loc = "http://bob:sekrit-pw@" + strings.TrimPrefix(other.URL, "http://") + c.to + "?token=sekrit-token"
				}
				prov.script(c.from, answer{status: st, headers: map[string]string{"Location": loc}, body: "moved"})
				prov.script(c.to, answer{status: 200, body: `{"at":"` + c.to + `"}`})
				other.script(c.to, answer{status: 200, body: `{"at":"other"}`})
				in := scheduler.OperationInput{ID: id, Scope: "a", Kind: c.kind, Method: c.method, Path: c.from, RequestIdentity: "intent-" + id}
				if c.method != "GET" {
					in.Body, in.ContentType = []byte(body), "application/json"
				}
				h.enqueue(in)
				cases = append(cases, c)
			}
		}
	}
	h.runAll()

	for _, c := range cases {
		t.Run(c.id, func(t *testing.T) {
			op := h.op(c.id)
			att := h.lastAttempt(c.id)
			tos := prov.requests(c.to)
			if got := len(other.requests(c.to)); got != 0 {
				t.Fatalf("another origin was contacted %d times", got)
			}
			if got := len(prov.requests(c.from)); got != 1 {
				t.Fatalf("first URL sent %d times, want 1", got)
			}
			mutation := c.kind == scheduler.KindMutation
			switch {
			case c.otherOrigin && !(mutation && c.status != 307 && c.status != 308):
				// Not followed: the attempt fails and names where it pointed.
				if op.State != scheduler.StateFailed || att.Reason != "redirect-other-origin" {
					t.Fatalf("state %s reason %q, want failed redirect-other-origin (%s)", op.State, att.Reason, att.Detail)
				}
				if want := other.URL + c.to; !strings.Contains(att.Detail, want) || !strings.Contains(op.LastOutcome.Detail, want) {
					t.Errorf("failure does not name %s: %q", want, att.Detail)
				}
				if strings.Contains(att.Detail, "sekrit") {
					t.Errorf("the Location's user information or query value is in the diagnostic: %q", att.Detail)
				}
			case !mutation || c.status == 307 || c.status == 308:
				// Followed within the origin.
				if op.State != scheduler.StateSucceeded || op.Result == nil || op.Result.Status != 200 || string(op.Result.Body) != `{"at":"`+c.to+`"}` {
					t.Fatalf("state %s result %+v, want the followed answer", op.State, op.Result)
				}
				if len(tos) != 1 {
					t.Fatalf("redirect target sent %d times, want 1", len(tos))
				}
				if tos[0].auth != "Bearer secret-a" {
					t.Errorf("credentials not kept on the same origin: %q", tos[0].auth)
				}
				if mutation && (tos[0].body != body || tos[0].key != "intent-"+c.id) {
					t.Errorf("followed mutation sent body %q key %q, want the same body and identity", tos[0].body, tos[0].key)
				}
				if !strings.Contains(att.Detail, fmt.Sprintf("followed 1 redirect(s): %d after %s → %s", c.status, c.method, prov.URL+c.to)) {
					t.Errorf("diagnostic does not list the hop: %q", att.Detail)
				}
			case c.status == 303:
				// The provider applied it and says where the result is.
				if op.State != scheduler.StateSucceeded || op.Result == nil || op.Result.Status != 303 {
					t.Fatalf("state %s result %+v, want a 303 success", op.State, op.Result)
				}
				if len(tos) != 0 {
					t.Errorf("a 303 after a mutation was fetched")
				}
			default: // 301/302 after a mutation, either origin
				if op.State == scheduler.StateSucceeded || op.State == scheduler.StateFailed {
					t.Fatalf("state %s, want held or resent with the key (unknown outcome)", op.State)
				}
				if att.Class != providers.ClassUnknownOutcome || att.Reason != "redirect-after-mutation" {
					t.Errorf("class %s reason %q, want unknownOutcome redirect-after-mutation", att.Class, att.Reason)
				}
				if len(tos) != 0 {
					t.Errorf("a %d after a mutation was followed", c.status)
				}
			}
		})
	}
	if got := other.requests(""); len(got) != 0 {
		t.Fatalf("the other origin saw %d requests (credentials %q)", len(got), got[0].auth)
	}
}

// A 301 or 302 after a mutation to a provider without idempotency keys is
// held for a person at once: it may have applied (post-redirect-get).
func TestRedirectAfterMutationHeld(t *testing.T) {
	h, prov := setupWithProvider(t)
	h.scope("a", prov.URL, "", 4)
	for _, st := range []int{301, 302} {
		p := fmt.Sprintf("/m%d", st)
		prov.script(p, answer{status: st, headers: map[string]string{"Location": "/elsewhere"}})
		h.enqueue(scheduler.OperationInput{ID: p[1:], Scope: "a", Method: "POST", Path: p, Body: []byte(`{}`), ContentType: "application/json"})
	}
	h.runAll()
	for _, id := range []string{"m301", "m302"} {
		op := h.wantState(id, scheduler.StateHeld)
		if op.HoldReason != scheduler.HoldUnknownOutcome {
			t.Errorf("%s hold %q", id, op.HoldReason)
		}
	}
	if n := len(prov.requests("/elsewhere")); n != 0 {
		t.Errorf("followed %d times", n)
	}
}

// At most 5 redirects are followed: a chain of 5 succeeds (each hop's
// Location relative to the current URL), a loop ends after 5 with a clear
// failure.
func TestRedirectHopLimit(t *testing.T) {
	h, prov := setupWithProvider(t)
	h.scope("a", prov.URL, "", 4)
	for i := range 5 {
		// h0 → h1 → … → h5, in a directory, with paths relative to it.
		prov.script(fmt.Sprintf("/chain/h%d", i), answer{status: 307, headers: map[string]string{"Location": fmt.Sprintf("h%d", i+1)}})
	}
	prov.script("/chain/h5", answer{status: 200, body: "end"})
	prov.script("/loop", answer{status: 302, headers: map[string]string{"Location": "/loop"}})

	h.enqueue(scheduler.OperationInput{ID: "chain", Scope: "a", Method: "GET", Path: "/chain/h0"})
	h.enqueue(scheduler.OperationInput{ID: "loop", Scope: "a", Method: "GET", Path: "/loop"})
	h.runAll()

	op := h.wantState("chain", scheduler.StateSucceeded)
	if string(op.Result.Body) != "end" || len(prov.requests("/chain/h5")) != 1 {
		t.Errorf("chain of 5 not followed to its end: %+v", op.Result)
	}
	if d := h.lastAttempt("chain").Detail; !strings.Contains(d, "followed 5 redirect(s)") || !strings.Contains(d, prov.URL+"/chain/h5") {
		t.Errorf("diagnostic %q", d)
	}

	h.wantState("loop", scheduler.StateFailed)
	if got := len(prov.requests("/loop")); got != 6 {
		t.Errorf("loop sent %d requests, want 6 (the first and 5 redirects)", got)
	}
	if att := h.lastAttempt("loop"); att.Reason != "redirect-limit" || !strings.Contains(att.Detail, "more than 5 redirects") {
		t.Errorf("loop attempt reason %q detail %q", att.Reason, att.Detail)
	}
}

// One deadline covers the whole chain: time spent before a redirect counts
// against the request that follows it, which still ends before the lease.
func TestRedirectChainSharesOneDeadline(t *testing.T) {
	h := setup(t, scheduler.EngineConfig{RequestTimeout: 20 * time.Second, LeaseDuration: 30 * time.Second})
	var hung atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/slow" {
			h.clock.Add(15 * time.Second) // the first hop takes 15 s
			w.Header().Set("Location", "/hang")
			w.WriteHeader(http.StatusTemporaryRedirect)
			return
		}
		hung.Store(true)
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	h.scope("a", srv.URL, "", 1)
	h.enqueue(scheduler.OperationInput{ID: "r", Scope: "a", Method: "GET", Path: "/slow"})
	if n, err := h.engine.RunOnce(context.Background()); err != nil || n != 1 {
		t.Fatalf("claim: %d, %v", n, err)
	}
	claimed := h.op("r")
	waitFor(t, hung.Load)
	h.clock.Add(5 * time.Second) // 20 s since the claim: the one deadline
	done := make(chan struct{})
	go func() { h.engine.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second): // real time: the deadline, not the transport's own timeout, must end it
		t.Fatal("the followed request did not end at the chain's deadline")
	}
	h.wantState("r", scheduler.StateScheduled)
	att := h.lastAttempt("r")
	if !att.FinishedAt.Equal(t0.Add(20*time.Second)) || !att.FinishedAt.Before(claimed.LeaseExpiresAt) {
		t.Errorf("attempt finished at %s, want %s (before the lease %s)", att.FinishedAt, t0.Add(20*time.Second), claimed.LeaseExpiresAt)
	}
	if !strings.Contains(att.Detail, "followed 1 redirect(s): 307 after GET → "+srv.URL+"/hang") {
		t.Errorf("diagnostic %q", att.Detail)
	}
}

// A redirect without a usable Location fails the attempt and does not echo
// what may be a secret in it.
func TestRedirectWithoutLocation(t *testing.T) {
	h, prov := setupWithProvider(t)
	h.scope("a", prov.URL, "", 4)
	prov.script("/none", answer{status: 307})
	prov.script("/ftp", answer{status: 308, headers: map[string]string{"Location": "ftp://files.example/x?sig=sekrit"}})
	prov.script("/user", answer{status: 308, headers: map[string]string{"Location": "ftp://bob:sekrit@files.example/x"}})
	for _, id := range []string{"none", "ftp", "user"} {
		h.enqueue(scheduler.OperationInput{ID: id, Scope: "a", Method: "PUT", Path: "/" + id, Body: []byte(`{}`), ContentType: "application/json"})
	}
	h.runAll()
	for _, id := range []string{"none", "ftp", "user"} {
		h.wantState(id, scheduler.StateFailed)
		att := h.lastAttempt(id)
		if att.Reason != "redirect-without-location" || strings.Contains(att.Detail, "sekrit") {
			t.Errorf("%s: reason %q detail %q", id, att.Reason, att.Detail)
		}
	}
	if d := h.lastAttempt("ftp").Detail; !strings.Contains(d, "ftp://files.example/x") {
		t.Errorf("ftp detail %q does not say where it pointed", d)
	}
}

// User information in a same-origin Location is not sent: the followed
// request carries the scope's credentials only (here a custom header, so
// net/http would otherwise add Basic auth from the URL).
func TestRedirectDropsLocationUserinfo(t *testing.T) {
	h, prov := setupWithProvider(t)
	if _, _, err := h.svc.PutScope(context.Background(), scheduler.ScopeInput{
		Name: "hdr", Provider: "generic", BaseURL: prov.URL, MaxConcurrent: 1,
		Credentials: scheduler.Credentials{Type: scheduler.CredentialHeader, Name: "X-Api-Key", Value: "secret-hdr"},
	}, "test"); err != nil {
		t.Fatal(err)
	}
	prov.script("/a", answer{status: 302, headers: map[string]string{"Location": "http://eve:pw@" + strings.TrimPrefix(prov.URL, "http://") + "/b"}})
	h.enqueue(scheduler.OperationInput{ID: "r", Scope: "hdr", Method: "GET", Path: "/a"})
	h.runAll()
	h.wantState("r", scheduler.StateSucceeded)
	if bs := prov.requests("/b"); len(bs) != 1 || bs[0].auth != "" {
		t.Errorf("followed request %+v: want one, without an Authorization header", bs)
	}
}
