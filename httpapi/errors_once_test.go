package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"

	"pacer/httpapi"
	"pacer/scheduler"
)

// fieldsOf lists a problem's fields, sorted.
func fieldsOf(p httpapi.Problem) string {
	var fs []string
	for _, f := range p.Errors {
		fs = append(fs, f.Field)
	}
	sort.Strings(fs)
	return fmt.Sprint(fs)
}

// TestEnqueue_EveryFaultAtOnce: one answer names every field at fault,
// those the API cannot parse and those the scheduler refuses alike, with
// item indexes in a batch; nothing is stored.
func TestEnqueue_EveryFaultAtOnce(t *testing.T) {
	t.Parallel()
	b := setupWithScope(t)
	// notBefore and maxElapsed do not parse; the method is refused.
	bad := strings.NewReplacer(`"POST"`, `"BREW"`, `"24h"`, `"forever"`,
		`"requestIdentity"`, `"notBefore": "tomorrow", "requestIdentity"`).Replace(operationBody("op-1", "account-a"))
	p := problemOf(t, b.do(http.MethodPost, "/v1/operations", bad), http.StatusUnprocessableEntity)
	if got, want := fieldsOf(p), "[notBefore request.method retry.maxElapsed]"; got != want {
		t.Fatalf("fields: got %s, want %s", got, want)
	}
	for _, f := range []string{"notBefore", "request.method", "retry.maxElapsed"} {
		if !strings.Contains(p.Detail, f) {
			t.Fatalf("detail %q does not name %s", p.Detail, f)
		}
	}
	assertNoOperations(t, b)

	method := strings.Replace(operationBody("op-2", "account-a"), `"POST"`, `"BREW"`, 1)
	body := `{"operations":[` + operationBody("op-0", "account-a") + `,` + bad + `,` + method + `]}`
	p = problemOf(t, b.do(http.MethodPost, "/v1/operations/batch", body), http.StatusUnprocessableEntity)
	if got, want := fieldsOf(p), "[operations[1].notBefore operations[1].request.method operations[1].retry.maxElapsed operations[2].request.method]"; got != want {
		t.Fatalf("batch fields: got %s, want %s", got, want)
	}
	assertNoOperations(t, b)

	// A scope: a duration that does not parse and a refused URL at once.
	scope := strings.NewReplacer(`"1h"`, `"hourly"`, `"https://api.github.com"`, `"ftp://api.github.com"`).Replace(scopeBody)
	p = problemOf(t, b.do(http.MethodPut, "/v1/scopes/account-b", scope), http.StatusUnprocessableEntity)
	if got, want := fieldsOf(p), "[baseURL rateLimit.per]"; got != want {
		t.Fatalf("scope fields: got %s, want %s", got, want)
	}
	problemOf(t, b.do(http.MethodGet, "/v1/scopes/account-b", ""), http.StatusNotFound)
}

// TestManualActions_RefusalReadsOnce: a refused action's detail says the
// rule and the state once, as the TransitionError makes it, on the API
// (the CLI prints this detail) and on the page.
func TestManualActions_RefusalReadsOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	enqueue(t, b, "op-1", "account-a")
	for _, tt := range []struct{ action, body, want string }{
		{"release", `{"reason":"retry it"}`, `operation "op-1": only held or failed operations, and released ones not sent yet, can be released; this one is scheduled`},
		{"resolve", `{"outcome":"succeeded","reason":"checked"}`, `operation "op-1": only operations held for unknownOutcome can be resolved; this one is scheduled`},
	} {
		p := problemOf(t, b.do(http.MethodPost, opPath("op-1", "/"+tt.action), tt.body), http.StatusConflict)
		if p.Type != httpapi.ProblemTypeInvalidTransition || p.Detail != tt.want {
			t.Fatalf("%s: got %s %q, want %q", tt.action, p.Type, p.Detail, tt.want)
		}
	}
	decodeAs[httpapi.Operation](t, b.do(http.MethodPost, opPath("op-1", "/cancel"), `{"reason":"stop"}`), http.StatusOK)
	p := problemOf(t, b.do(http.MethodPost, opPath("op-1", "/cancel"), `{"reason":"again"}`), http.StatusConflict)
	if want := `operation "op-1": only scheduled, waitingForBudget, held or failed operations can be canceled; this one is canceled`; p.Detail != want {
		t.Fatalf("cancel twice: got %q, want %q", p.Detail, want)
	}

	u := setupUI(t, uiOpts{Users: []string{"alice"}})
	u.scope("acct")
	u.enqueue("acct", "waits", "held")
	u.signIn("alice")
	for _, tt := range []struct {
		path string
		form url.Values
		want string
	}{
		{"/ui/operations/waits/release", url.Values{"reason": {"again"}, "when": {"now"}},
			"Not possible now: only held or failed operations, and released ones not sent yet, can be released; this one is scheduled."},
		{"/ui/operations/waits/resolve", url.Values{"reason": {"checked"}, "outcome": {"succeeded"}},
			"Not possible now: only operations held for unknownOutcome can be resolved; this one is scheduled."},
		{"/ui/operations/waits/resolve", url.Values{"reason": {"checked"}, "outcome": {"release"}},
			"Not possible now: only operations held for unknownOutcome can be resolved; this one is scheduled."},
	} {
		pg := u.post(tt.path, tt.form)
		wantIn(t, pg, http.StatusConflict, tt.want)
		_, flash, _ := strings.Cut(pg.Body, `role="alert">`)
		flash, _, _ = strings.Cut(flash, "</div>")
		if flash != "Nothing was changed. "+tt.want || strings.Contains(pg.Body, "invalid transition") {
			t.Fatalf("%s: the page says %q, want it once: %q", tt.path, flash, tt.want)
		}
	}
	if op := u.op("waits"); op.State != scheduler.StateScheduled || op.Attempt != 0 {
		t.Fatalf("refused actions changed the operation: %+v", op)
	}
}

// Design §14: an unknown outcome resolves three ways, with the same words
// in the API and on the page, each audited as a resolve: succeeded; not
// applied and sent again with the same identity (release); not applied and
// not sent (failed, resolvedFailed).
func TestResolveThreeWays(t *testing.T) {
	t.Parallel()
	b := setupUI(t, uiOpts{Users: []string{"alice"}})
	b.scope("acct")
	b.enqueue("acct", "api-applied", "api-resend", "api-not", "page-not")
	b.holdUnknown()
	b.signIn("alice")
	ctx := context.Background()
	for id, want := range map[string]struct {
		outcome, state, failure string
	}{
		"api-applied": {"succeeded", "succeeded", ""},
		"api-resend":  {"release", "scheduled", ""},
		"api-not":     {"failed", "failed", "resolvedFailed"},
	} {
		op, err := b.svc.Resolve(ctx, id, scheduler.Resolution(want.outcome), "checked the provider", "api")
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if string(op.State) != want.state || string(op.FailureReason) != want.failure || op.RequestIdentity != id {
			t.Errorf("%s resolved %s: %s/%s, want %s/%s with its identity", id, want.outcome, op.State, op.FailureReason, want.state, want.failure)
		}
		entries, _ := b.svc.ListAudit(ctx, id)
		if len(entries) == 0 || entries[len(entries)-1].Action != "resolve" {
			t.Errorf("%s: audit %+v, want a resolve", id, entries)
		}
	}
	// The page offers the same three, in the same words, and the third ends
	// the operation failed without sending it.
	page := b.get("/ui/operations/page-not")
	for _, r := range scheduler.Resolutions {
		wantIn(t, page, http.StatusOK, `value="`+string(r)+`"`, capitalizeFirst(r.Words()))
	}
	p := b.post("/ui/operations/page-not/resolve", url.Values{"reason": {"the customer cancelled"}, "outcome": {"failed"}})
	wantIn(t, b.follow(p), http.StatusOK, "Resolved as not applied: it is marked failed (resolvedFailed) and will not be sent.")
	if op := b.op("page-not"); op.State != scheduler.StateFailed || op.FailureReason != scheduler.FailureResolvedFailed {
		t.Fatalf("page-not: %s/%s, want failed/resolvedFailed", op.State, op.FailureReason)
	}
	if p := b.post("/ui/operations/api-resend/resolve", url.Values{"reason": {"x"}, "outcome": {"maybe"}}); p.Status != http.StatusUnprocessableEntity {
		t.Fatalf("an unknown outcome on the page: status %d", p.Status)
	}
}

// capitalizeFirst upper-cases the first letter, as the page shows a choice.
func capitalizeFirst(s string) string { return strings.ToUpper(s[:1]) + s[1:] }
