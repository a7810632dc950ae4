package scheduler_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"pacer/providers"
	"pacer/scheduler"
)

// absurdValues are far-future ways to write a time in each form: epoch
// seconds and milliseconds centuries ahead, huge deltas, HTTP and ISO dates
// in 9999.
func absurdValues(form string) []string {
	switch form {
	case "epoch-seconds":
		return []string{"99999999999", "9999999999"}
	case "epoch-millis":
		return []string{"99999999999999", "9999999999999"}
	case "auto":
		return []string{"99999999999", "99999999999999", "999999999"}
	case "delta-seconds":
		return []string{"999999999", "31536000000"}
	case "delta-millis":
		return []string{"999999999999"}
	case "iso8601":
		return []string{"9999-12-31T23:59:59Z", "9999-12-31T23:59Z", "2999-01-01T00:00:00+14:00"}
	case "retry-after":
		return []string{"999999999", "Fri, 31 Dec 9999 23:59:59 GMT"}
	case "http-date":
		return []string{"Fri, 31 Dec 9999 23:59:59 GMT"}
	case "duration":
		return []string{"999999999s", "87600h"}
	}
	return nil
}

// absurdCase is one provider answer carrying an absurd wait.
type absurdCase struct {
	name    string
	profile string
	status  int
	headers map[string]string
	body    string
}

// absurdCases builds, from every profile's own description (so a profile
// added later is covered), answers whose budget reset or timing hint lies
// absurdly far ahead: a 200 with the budget spent for each budget source
// that names a reset, and a 429 for each header hint source; plus the
// sources written in compound or body forms.
func absurdCases(t *testing.T) []absurdCase {
	var cases []absurdCase
	add := func(c absurdCase) {
		c.name = fmt.Sprintf("%s-%d", c.profile, len(cases))
		cases = append(cases, c)
	}
	for _, d := range providers.DescribeAll() {
		if d.Name == providers.CustomName {
			continue // a declarative profile reads the generic headers: covered by "generic"
		}
		for _, b := range d.Budget {
			plain := b.Reset != "" && b.Remaining != b.Reset && !strings.HasPrefix(b.Remaining, "body")
			if !plain {
				continue
			}
			for _, v := range absurdValues(b.ResetFormat) {
				h := map[string]string{b.Remaining: "0", b.Reset: v, "x-ratelimit-resource": "core"}
				if b.Limit != "" {
					h[b.Limit] = "5000"
				}
				add(absurdCase{profile: d.Name, status: 200, headers: h, body: `{"ok":true}`})
			}
		}
		hints := append([]providers.HintSource(nil), d.RateLimitHints...)
		for _, s := range d.Signals {
			hints = append(hints, s.Hints...)
		}
		for _, hs := range hints {
			if strings.HasPrefix(hs.Source, "body ") {
				continue // body sources: the cases below
			}
			for _, v := range absurdValues(hs.Format) {
				// A 429 with the hint, and the budget spent where the
				// profile reads one, so the hint applies.
				h := map[string]string{hs.Source: v, "x-ratelimit-remaining": "0", "x-rate-limit-remaining": "0", "x-app-limit-24hour-remaining": "0", "x-user-limit-24hour-remaining": "0"}
				add(absurdCase{profile: d.Name, status: 429, headers: h, body: `{"error":"rate limited"}`})
			}
		}
	}
	for _, p := range []string{"generic", "zendesk"} {
		add(absurdCase{profile: p, status: 200, headers: map[string]string{"RateLimit": `"default";r=0;t=999999999`, "RateLimit-Policy": `"default";q=100;w=60`}})
		add(absurdCase{profile: p, status: 200, headers: map[string]string{"RateLimit-Limit": "100", "RateLimit-Remaining": "0", "RateLimit-Reset": "999999999"}})
		add(absurdCase{profile: p, status: 429, headers: map[string]string{"RateLimit": `"default";r=0;t=31536000000`}})
	}
	add(absurdCase{profile: "jira", status: 200, headers: map[string]string{"Beta-RateLimit": `"default";r=0;t=999999999`, "Beta-RateLimit-Policy": `"default";q=100;w=60`}})
	add(absurdCase{profile: "zendesk", status: 200, headers: map[string]string{"Zendesk-RateLimit-Tickets-Index": "total=100; remaining=0; resets=999999999"}})
	add(absurdCase{profile: "zendesk", status: 429, headers: map[string]string{"Zendesk-RateLimit-Tickets-Index": "total=100; remaining=0; resets=999999999"}})
	add(absurdCase{profile: "google", status: 429, body: `{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"999999999s"}]}}`})
	add(absurdCase{profile: "shopify", status: 200, body: `{"errors":[{"message":"Throttled","extensions":{"code":"THROTTLED"}}],"extensions":{"cost":{"requestedQueryCost":1000,"actualQueryCost":null,"throttleStatus":{"maximumAvailable":1000,"currentlyAvailable":0,"restoreRate":0.000001}}}}`})
	add(absurdCase{profile: "hubspot", status: 429, headers: map[string]string{"X-HubSpot-RateLimit-Interval-Milliseconds": "999999999999", "X-HubSpot-RateLimit-Remaining": "0"}, body: `{"status":"error","errorType":"RATE_LIMIT","policyName":"TEN_SECONDLY_ROLLING"}`})
	add(absurdCase{profile: "slack", status: 429, headers: map[string]string{"Retry-After": "999999999"}, body: `{"ok":false,"error":"ratelimited"}`})
	add(absurdCase{profile: "stripe", status: 429, headers: map[string]string{"Retry-After": "Fri, 31 Dec 9999 23:59:59 GMT"}, body: `{"error":{"type":"rate_limit_error"}}`})

	covered := map[string]bool{}
	for _, c := range cases {
		covered[c.profile] = true
	}
	for _, name := range providers.Names() {
		if !covered[name] {
			t.Errorf("profile %s: no absurd answer built from its description", name)
		}
	}
	return cases
}

// Design §11 "No answer freezes a scope beyond the policy's bounds": for
// every profile, one answer with an absurd budget reset or timing hint
// (epoch seconds and milliseconds centuries ahead, huge deltas, HTTP and
// ISO dates in 9999) makes its scope wait at most the policy's maximum
// honoured hint: the scope's pause, an operation enqueued behind it and
// the engine's next wake-up all lie within it, and at that time the
// scope sends again. Through the engine, an httptest provider and the
// store teststore selects.
func TestAbsurdWaitsAreBoundedForEveryProfile(t *testing.T) {
	// Every first request in one pass: a shared limit (X's app cap)
	// answered early must not keep another scope's first request unsent.
	h := setup(t, scheduler.EngineConfig{Workers: 1000})
	policy := scheduler.DefaultPolicy()
	cases := absurdCases(t)
	byScope := map[string]absurdCase{}
	var (
		mu   sync.Mutex
		sent = map[string]int{} // request path → count
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		scope, what, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		mu.Lock()
		sent[r.URL.Path]++
		mu.Unlock()
		w.Header().Set("Date", h.clock.Now().UTC().Format(http.TimeFormat))
		c, ok := byScope[scope]
		if !ok || what != "first" {
			w.WriteHeader(200)
			io.WriteString(w, `{"ok":true}`)
			return
		}
		for k, v := range c.headers {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(c.status)
		io.WriteString(w, c.body)
	}))
	t.Cleanup(srv.Close)

	for _, c := range cases {
		byScope[c.name] = c
		_, _, err := h.svc.PutScope(context.Background(), scheduler.ScopeInput{Name: c.name, Provider: c.profile, BaseURL: srv.URL + "/" + c.name, MaxConcurrent: 1}, "test")
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		h.enqueue(scheduler.OperationInput{ID: c.name + "-first", Scope: c.name, Method: "GET", Path: "/first"})
	}
	answered := h.clock.Now()
	for h.pass() > 0 {
	}
	bound := answered.Add(policy.MaxHint)
	for _, c := range cases {
		h.enqueue(scheduler.OperationInput{ID: c.name + "-probe", Scope: c.name, Method: "GET", Path: "/probe"})
	}
	for _, c := range cases {
		what := fmt.Sprintf("%s (%d %v %s)", c.name, c.status, c.headers, c.body)
		sc, err := h.svc.GetScope(context.Background(), c.name)
		if err != nil {
			t.Fatal(err)
		}
		if sc.PauseEnds.After(bound) || sc.PausedUntil.After(bound) {
			t.Errorf("%s: scope paused until %s / %s, beyond the %s bound %s", what, sc.PauseEnds, sc.PausedUntil, policy.MaxHint, bound)
		}
		if b := sc.Budget; b != nil && b.ResetAt.After(bound) {
			t.Errorf("%s: learned budget resets at %s, beyond the bound %s", what, b.ResetAt, bound)
		}
		// The answer must have taught a long wait, or the case proves
		// nothing: the pause reaches the bound (clamped).
		if !sc.PauseEnds.Equal(bound) && h.op(c.name+"-first").State != scheduler.StateFailed {
			t.Errorf("%s: scope pause ends %s, want clamped to the bound %s", what, sc.PauseEnds, bound)
		}
		first := h.op(c.name + "-first")
		if first.State.Due() && first.NextAttemptAt.After(bound.Add(policy.Spread)) {
			t.Errorf("%s: first operation waits until %s, beyond the bound %s (+ spread)", what, first.NextAttemptAt, bound)
		}
		probe := h.op(c.name + "-probe")
		if !probe.State.Due() || probe.NextAttemptAt.After(bound) {
			t.Errorf("%s: probe is %s until %s, want due by the bound %s", what, probe.State, probe.NextAttemptAt, bound)
		}
	}
	if at, ok, err := h.store.NextWake(context.Background()); err != nil || !ok || at.After(bound.Add(policy.Spread)) {
		t.Errorf("next wake %s, %v, %v: want by the bound %s (+ spread)", at, ok, err, bound)
	}

	h.clock.Set(bound)
	for h.pass() > 0 {
	}
	var stuck []string
	mu.Lock()
	for _, c := range cases {
		if sent["/"+c.name+"/probe"] == 0 {
			stuck = append(stuck, fmt.Sprintf("%s (%d %v %s)", c.name, c.status, c.headers, c.body))
		}
	}
	mu.Unlock()
	sort.Strings(stuck)
	if len(stuck) > 0 {
		t.Errorf("%d scopes still send nothing at the bound %s:\n%s", len(stuck), bound, strings.Join(stuck, "\n"))
	}
	t.Logf("%d absurd answers over %d profiles", len(cases), len(providers.Names()))
}

// Policy.Decide bounds what every answer teaches its scope, whatever the
// class: the pause and the learned budget's reset end within MaxHint, and
// the provider's figures (the outcome kept for diagnostics) are left as
// they were.
func TestDecideBoundsLearnedWaits(t *testing.T) {
	p := scheduler.DefaultPolicy()
	far := t0.Add(providers.MaxHintAhead)
	op := scheduler.Operation{ID: "op", Kind: scheduler.KindMutation, Request: scheduler.Request{Method: "POST"},
		Attempt: 1, BudgetAttempts: 1, Retry: scheduler.Retry{MaxAttempts: 5, MaxElapsed: 30 * 24 * time.Hour},
		Deadline: t0.Add(30 * 24 * time.Hour), FirstSentAt: t0}
	for _, class := range []providers.Class{providers.ClassSuccess, providers.ClassRateLimited, providers.ClassTransient,
		providers.ClassPermanent, providers.ClassAuthRevoked, providers.ClassUnknownOutcome} {
		budget := &providers.Budget{Remaining: 0, Limit: 100, ResetAt: far}
		out := providers.Outcome{Class: class, Status: 429, Budget: budget, Hint: providers.Hint{Source: "x-ratelimit-reset", Raw: "99999999999", At: far}}
		d := p.Decide(op, providers.Idempotency{}, out, t0, half)
		bound := t0.Add(p.MaxHint)
		if d.Scope.PauseUntil.After(bound) {
			t.Errorf("%s: pause until %s, beyond %s", class, d.Scope.PauseUntil, bound)
		}
		if b := d.Scope.Budget; b == nil || !b.ResetAt.Equal(bound) || b.Remaining != 0 || b.Limit != 100 {
			t.Errorf("%s: learned budget %+v, want its reset clamped to %s", class, b, bound)
		}
		if !budget.ResetAt.Equal(far) {
			t.Errorf("%s: the outcome's own budget was changed to %s", class, budget.ResetAt)
		}
		if d.State.Due() && d.NextAttemptAt.After(bound.Add(p.Spread)) {
			t.Errorf("%s: next attempt %s beyond %s", class, d.NextAttemptAt, bound)
		}
	}
}
