package httpapi_test

import (
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
	b := setup(t, setupOpts{})
	putScope(t, b, "account-a")
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
		{"release", `{"reason":"retry it"}`, `operation "op-1": only held or failed operations can be released; this one is scheduled`},
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
			"Not possible now: only held or failed operations can be released; this one is scheduled."},
		{"/ui/operations/waits/resolve", url.Values{"reason": {"checked"}, "outcome": {"applied"}},
			"Not possible now: only operations held for unknownOutcome can be resolved; this one is scheduled."},
		{"/ui/operations/waits/resolve", url.Values{"reason": {"checked"}, "outcome": {"notApplied"}},
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
