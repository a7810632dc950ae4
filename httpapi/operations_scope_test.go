package httpapi_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"pacer/httpapi"
	"pacer/providers"
	"pacer/scheduler"
)

// Design §11 "What the API says is what will happen": behind a paused
// scope an operation reads waitingForBudget at the pause end, in its
// creation answer, its resource and the filtered listing; behind a held
// scope it carries blockedBy "scopeHeld", and the support page says so.
func TestOperationsShowTheirScopesWait(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	enqueue(t, b, "first", "account-a")
	pauseEnd := b.svc.Now().Add(time.Hour)
	completeDue(t, b, 1, providers.Outcome{Class: providers.ClassRateLimited, Status: 429},
		scheduler.Decision{State: scheduler.StateWaitingForBudget, NextAttemptAt: pauseEnd, Reason: "rate limited",
			Scope: scheduler.ScopeEffect{PauseUntil: pauseEnd, PauseReason: "rate limited"}})
	pauseEnd = pauseEnd.Truncate(time.Millisecond)

	op := enqueue(t, b, "behind", "account-a")
	if op.State != "waitingForBudget" || op.NextAttemptAt == nil || !op.NextAttemptAt.Equal(pauseEnd) || op.BlockedBy != nil {
		t.Fatalf("created behind a pause: %s at %v blocked by %v, want waitingForBudget at %s", op.State, op.NextAttemptAt, op.BlockedBy, pauseEnd)
	}
	got := decodeAs[httpapi.Operation](t, b.do(http.MethodGet, opPath("behind", ""), ""), http.StatusOK)
	if got.State != "waitingForBudget" || !got.NextAttemptAt.Equal(pauseEnd) {
		t.Fatalf("GET behind: %s at %v", got.State, got.NextAttemptAt)
	}
	list := decodeAs[httpapi.OperationList](t, b.do(http.MethodGet, "/v1/operations?state=waitingForBudget", ""), http.StatusOK)
	if got, want := ids(list), "behind,first"; got != want {
		t.Fatalf("?state=waitingForBudget lists %s, want %s", got, want)
	}

	enqueue(t, b, "revoked", "account-b")
	completeDue(t, b, 1, providers.Outcome{Class: providers.ClassAuthRevoked, Status: 401},
		scheduler.Decision{State: scheduler.StateHeld, HoldReason: scheduler.HoldAuthRevoked, Reason: "credentials refused",
			Scope: scheduler.ScopeEffect{Hold: scheduler.HoldAuthRevoked}})
	held := enqueue(t, b, "behind-held", "account-b")
	if held.BlockedBy == nil || *held.BlockedBy != "scopeHeld" {
		t.Fatalf("created behind a held scope: blockedBy %v, want scopeHeld", held.BlockedBy)
	}
	res := b.do(http.MethodGet, opPath("behind-held", ""), "")
	if got := decodeAs[httpapi.Operation](t, res, http.StatusOK); got.BlockedBy == nil || *got.BlockedBy != "scopeHeld" {
		t.Fatalf("GET behind-held: blockedBy %v, want scopeHeld", got.BlockedBy)
	}
}

// The operation page shows an operation behind a held scope as blocked.
func TestUI_BlockedByHeldScope(t *testing.T) {
	t.Parallel()
	b := setupUI(t, uiOpts{})
	b.scope("acct")
	b.enqueue("acct", "auth-1")
	b.settle(providers.Outcome{Class: providers.ClassAuthRevoked, Status: 401},
		scheduler.Decision{State: scheduler.StateHeld, HoldReason: scheduler.HoldAuthRevoked, Reason: "credentials refused",
			Scope: scheduler.ScopeEffect{Hold: scheduler.HoldAuthRevoked}})
	b.enqueue("acct", "waiting-1")
	wantIn(t, b.get("/ui/operations/waiting-1"), http.StatusOK, "scope held", "Blocked by", "scopeHeld", "Waiting behind its scope, which is held")
	wantIn(t, b.get("/ui/scopes/acct"), http.StatusOK, "scope held")
}

// The scope page lists the budgets of the other resources the provider
// named (design §12), a spent one as paused with why, while the scope
// itself reads open.
func TestUI_ScopeShowsResourceBudgets(t *testing.T) {
	t.Parallel()
	b := setupUI(t, uiOpts{})
	b.scope("acct")
	b.enqueue("acct", "search-1")
	reset := b.clock.Now().Add(time.Hour)
	spent := &providers.Budget{Remaining: 0, Limit: 30, ResetAt: reset, Resource: "search"}
	b.settle(providers.Outcome{Class: providers.ClassRateLimited, Status: 403, Budget: spent},
		scheduler.Decision{State: scheduler.StateWaitingForBudget, NextAttemptAt: reset, Reason: "rate limited",
			Scope: scheduler.ScopeEffect{Resource: "search", ResourceKnown: true, Budget: spent, BudgetPauseUntil: reset, BudgetPauseReason: "rate limited: x-ratelimit-reset honoured"}})
	wantIn(t, b.get("/ui/scopes/acct"), http.StatusOK, "Other budgets the provider keeps", "<code>search</code>", "0 <span class=\"muted\">of 30</span>", "paused until", "x-ratelimit-reset honoured", "scope-open")
}

// The scope page pauses a scope by hand until a time in UTC (design §14):
// the scope reads paused with the person's reason, the audit trail says
// so, and a bad time or a missing reason is said on the page with nothing
// changed.
func TestUI_PauseScope(t *testing.T) {
	t.Parallel()
	b := setupUI(t, uiOpts{})
	b.scope("acct")
	wantIn(t, b.get("/ui/scopes/acct"), http.StatusOK, `id="pause"`, "Pause the scope")

	p := b.post("/ui/scopes/acct/pause", url.Values{"until": {"soon"}, "reason": {" "}})
	wantIn(t, p, http.StatusUnprocessableEntity, "Nothing was changed", "Reason is required")
	past := b.svc.Now().Add(-time.Hour).UTC().Format("2006-01-02T15:04")
	wantIn(t, b.post("/ui/scopes/acct/pause", url.Values{"until": {past}, "reason": {"x"}}), http.StatusUnprocessableEntity, "future")
	if sc, _ := b.svc.GetScope(context.Background(), "acct"); sc.Status(b.svc.Now()) != scheduler.ScopeOpen {
		t.Fatalf("scope %s after refused pauses", sc.Status(b.svc.Now()))
	}

	until := b.svc.Now().Add(3 * time.Hour).UTC().Truncate(time.Minute)
	p = b.post("/ui/scopes/acct/pause", url.Values{"until": {until.Format("2006-01-02T15:04")}, "reason": {"provider maintenance window"}})
	wantIn(t, b.follow(p), http.StatusOK, "Paused: nothing of the scope is sent before "+until.Format("2006-01-02 15:04:05")+" UTC", "scope-paused", "provider maintenance window")
	sc, err := b.svc.GetScope(context.Background(), "acct")
	if err != nil || !sc.PausedUntil.Equal(until) {
		t.Fatalf("paused until %s (%v), want %s", sc.PausedUntil, err, until)
	}
}

// After a resume, a provider that refuses the credentials again holds the
// scope again: the page says what the resume did and when, and the re-hold
// is in the scope's audit trail as pacer's own entry (issue 14).
func TestUI_ResumeThenReheldIsAudited(t *testing.T) {
	t.Parallel()
	b := setupUI(t, uiOpts{})
	b.scope("acct")
	hold := func(id string) {
		b.enqueue("acct", id)
		b.settle(providers.Outcome{Class: providers.ClassAuthRevoked, Status: 401},
			scheduler.Decision{State: scheduler.StateHeld, HoldReason: scheduler.HoldAuthRevoked, Reason: "credentials refused: 401",
				Scope: scheduler.ScopeEffect{Hold: scheduler.HoldAuthRevoked}})
	}
	hold("auth-1")
	p := b.post("/ui/scopes/acct/resume", url.Values{"reason": {"token rotated"}})
	wantIn(t, b.follow(p), http.StatusOK, "Resumed at ", "its hold and pauses were lifted", "held or paused again")
	hold("auth-2")
	wantIn(t, b.get("/ui/scopes/acct"), http.StatusOK, "scope-held", scheduler.SystemActor, "open → held (authRevoked): credentials refused: 401")
	entries, err := b.svc.ListScopeAudit(context.Background(), "acct")
	if err != nil {
		t.Fatal(err)
	}
	var holds int
	for _, e := range entries {
		if e.Action == "hold" && e.Actor == scheduler.SystemActor {
			holds++
		}
	}
	if holds != 2 {
		t.Fatalf("%d automatic holds audited, want 2 (before and after the resume): %+v", holds, entries)
	}
}

// The search box on every page (design §14): an exact operation ID opens
// the operation, a prefix lists what starts with it, and nothing found or
// a query past the bound says so.
func TestUI_FindOperation(t *testing.T) {
	t.Parallel()
	b := setupUI(t, uiOpts{})
	b.scope("acct")
	b.enqueue("acct", "sync-1", "sync-10", "sync-2", "other")
	for _, path := range []string{"/ui/", "/ui/scopes/acct", "/ui/operations/other"} {
		wantIn(t, b.get(path), http.StatusOK, `role="search"`, `name="q"`)
	}
	p := b.get("/ui/?q=sync-10")
	if p.Status != http.StatusSeeOther || p.Header.Get("Location") != "/ui/operations/sync-10" {
		t.Fatalf("exact match: %d to %q, want 303 to the operation", p.Status, p.Header.Get("Location"))
	}
	wantIn(t, b.get("/ui/?q=sync-"), http.StatusOK, "Operations whose ID starts with", `href="/ui/operations/sync-1"`, `href="/ui/operations/sync-10"`, `href="/ui/operations/sync-2"`)
	body := b.get("/ui/?q=sync-").Body
	if _, rest, ok := strings.Cut(body, `id="search"`); !ok || strings.Contains(strings.SplitN(rest, "</section>", 2)[0], "/ui/operations/other") {
		t.Error("the matches list an operation that does not start with the prefix")
	}
	wantIn(t, b.get("/ui/?q=nothing-like-it"), http.StatusOK, "No operation has an ID that is or starts with")
	wantIn(t, b.get("/ui/?q="+strings.Repeat("x", scheduler.MaxSearch+1)), http.StatusBadRequest, "at most 256 bytes")
}

// The list, operation and scope pages keep themselves current (design
// §14): a reload that works without JavaScript, and say when they were
// made; an error page and the sign-in page do not reload.
func TestUI_PagesRefreshThemselves(t *testing.T) {
	t.Parallel()
	b := setupUI(t, uiOpts{})
	b.scope("acct")
	b.enqueue("acct", "op-1")
	for _, path := range []string{"/ui/", "/ui/operations/op-1", "/ui/scopes/acct"} {
		wantIn(t, b.get(path), http.StatusOK, `<noscript><meta http-equiv="refresh" content="30"></noscript>`, `data-refresh="30"`, "updated <time", "refreshes itself every 30 s")
	}
	if p := b.get("/ui/operations/missing"); strings.Contains(p.Body, "data-refresh") {
		t.Error("an error page reloads itself")
	}
}

// A scheduled release can be changed or undone on the page before it runs
// (design §14): a mistyped time no longer needs a cancel.
func TestUI_ChangeOrUndoRelease(t *testing.T) {
	t.Parallel()
	b := setupUI(t, uiOpts{})
	b.scope("acct")
	b.enqueue("acct", "rel")
	b.holdUnknown()
	at := func(d time.Duration) string { return b.svc.Now().Add(d).UTC().Format("2006-01-02T15:04") }
	p := b.post("/ui/operations/rel/release", url.Values{"reason": {"after the window"}, "when": {"at"}, "at": {at(48 * time.Hour)}})
	wantIn(t, b.follow(p), http.StatusOK, "Change the release", "Released from held (unknownOutcome) and not sent yet", `id="unrelease"`)
	p = b.post("/ui/operations/rel/release", url.Values{"reason": {"typo: today"}, "when": {"at"}, "at": {at(3 * time.Hour)}})
	wantIn(t, b.follow(p), http.StatusOK, "Released: it will be sent again at")
	if op := b.op("rel"); op.State != scheduler.StateScheduled || op.ReleasedFrom == nil {
		t.Fatalf("changed release: %s from %+v", op.State, op.ReleasedFrom)
	}
	wantIn(t, b.post("/ui/operations/rel/unrelease", url.Values{"reason": {" "}}), http.StatusUnprocessableEntity, "Reason is required")
	p = b.post("/ui/operations/rel/unrelease", url.Values{"reason": {"the customer will retry themselves"}})
	wantIn(t, b.follow(p), http.StatusOK, "Release undone: it is held (unknownOutcome) again and will not be sent.")
	if op := b.op("rel"); op.State != scheduler.StateHeld || op.HoldReason != scheduler.HoldUnknownOutcome {
		t.Fatalf("after undo: %s/%s", op.State, op.HoldReason)
	}
	wantIn(t, b.post("/ui/operations/rel/unrelease", url.Values{"reason": {"again"}}), http.StatusConflict, "only a release not sent yet can be undone")
}

// A viewer sees everything a support person sees and can act on nothing
// (design §14): the pages show no action forms, and the server refuses
// every action it is sent anyway, changing nothing.
func TestUI_ViewerLooksAndDoesNotAct(t *testing.T) {
	t.Parallel()
	b := setupUI(t, uiOpts{Users: []string{"olga"}, Viewers: []string{"vic"}})
	b.scope("acct")
	b.enqueue("acct", "op-1")
	b.holdUnknown()
	b.signIn("vic")
	wantIn(t, b.get("/ui/"), http.StatusOK, "op-1", "Signed in as <strong>vic</strong> (viewer)")
	page := b.get("/ui/operations/op-1")
	wantIn(t, page, http.StatusOK, "held", "signed in as a viewer")
	for _, form := range []string{`id="resolve"`, `id="release"`, `id="cancel"`} {
		if strings.Contains(page.Body, form) {
			t.Errorf("a viewer's operation page shows the form %s", form)
		}
	}
	if sp := b.get("/ui/scopes/acct"); strings.Contains(sp.Body, `id="pause"`) {
		t.Error("a viewer's scope page shows the pause form")
	}
	for path, form := range map[string]url.Values{
		"/ui/operations/op-1/resolve": {"reason": {"x"}, "outcome": {"succeeded"}},
		"/ui/operations/op-1/release": {"reason": {"x"}, "when": {"now"}},
		"/ui/operations/op-1/cancel":  {"reason": {"x"}},
		"/ui/scopes/acct/pause":       {"reason": {"x"}, "until": {b.svc.Now().Add(time.Hour).UTC().Format("2006-01-02T15:04")}},
		"/ui/scopes/acct/resume":      {"reason": {"x"}},
	} {
		wantIn(t, b.post(path, form), http.StatusForbidden, "Viewers cannot act")
	}
	if op := b.op("op-1"); op.State != scheduler.StateHeld {
		t.Fatalf("a viewer's refused actions changed op-1 to %s", op.State)
	}
	if sc, _ := b.svc.GetScope(context.Background(), "acct"); sc.Status(b.svc.Now()) != scheduler.ScopeOpen {
		t.Fatalf("a viewer's refused pause changed the scope to %s", sc.Status(b.svc.Now()))
	}
	// Signing out is not an action on anything.
	if p := b.post("/ui/signout", url.Values{}); p.Status != http.StatusSeeOther {
		t.Fatalf("viewer sign-out: status %d", p.Status)
	}
}

// The operation page shows what was sent (design §14): a JSON request body
// pretty-printed, escaped, and other text cut at the first KiB.
func TestUI_OperationShowsRequestBody(t *testing.T) {
	t.Parallel()
	b := setupUI(t, uiOpts{})
	b.scope("acct")
	ctx := context.Background()
	for id, body := range map[string]struct {
		data []byte
		typ  string
	}{
		"json-1": {[]byte(`{"amount":4200,"customer":"cus_9","title":"<script>x</script>"}`), "application/json"},
		"text-1": {[]byte(strings.Repeat("a", 1500) + "tail-marker-7c"), "text/plain"},
	} {
		if _, err := b.svc.Enqueue(ctx, []scheduler.OperationInput{{ID: id, Scope: "acct", Method: "POST", Path: "/charges", Body: body.data, ContentType: body.typ}}, func(int) string { return "" }); err != nil {
			t.Fatal(err)
		}
	}
	p := b.get("/ui/operations/json-1")
	wantIn(t, p, http.StatusOK, `class="request-body answer-json"`, `&#34;amount&#34;: 4200`, `&#34;customer&#34;: &#34;cus_9&#34;`, "&lt;script&gt;")
	if strings.Contains(p.Body, "<script>x</script>") {
		t.Fatal("the request body is not escaped")
	}
	p = b.get("/ui/operations/text-1")
	wantIn(t, p, http.StatusOK, `class="request-body"`, "Only the first 1,024 bytes are shown here")
	if strings.Contains(p.Body, "tail-marker-7c") {
		t.Fatal("the page shows more than the first KiB of a text body")
	}
}

// The list acts on everything matching its filters (design §14), after a
// confirmation that shows the count, and says what it did.
func TestUI_BulkActionWithConfirmation(t *testing.T) {
	t.Parallel()
	b := setupUI(t, uiOpts{})
	b.scope("acct")
	b.enqueue("acct", "h-1", "h-2", "h-3")
	b.holdUnknown()
	wantIn(t, b.get("/ui/?scope=acct&state=held"), http.StatusOK, "Act on all 3 matching", `name="confirm" value="3"`)
	if p := b.get("/ui/"); strings.Contains(p.Body, `id="bulk"`) {
		t.Error("the unfiltered list offers an action on everything")
	}
	form := url.Values{"scope": {"acct"}, "state": {"held"}, "action": {"release"}, "reason": {"provider confirmed nothing was applied"}}
	p := b.post("/ui/operations/bulk", form)
	wantIn(t, b.follow(p), http.StatusOK, "Nothing was changed: tick the confirmation")
	if op := b.op("h-1"); op.State != scheduler.StateHeld {
		t.Fatalf("h-1 %s without a confirmation", op.State)
	}
	form.Set("confirm", "3")
	p = b.post("/ui/operations/bulk", form)
	wantIn(t, b.follow(p), http.StatusOK, "Released 3 operations.")
	for _, id := range []string{"h-1", "h-2", "h-3"} {
		if op := b.op(id); op.State != scheduler.StateScheduled {
			t.Fatalf("%s %s after the bulk release", id, op.State)
		}
	}
	form.Set("reason", " ")
	wantIn(t, b.follow(b.post("/ui/operations/bulk", form)), http.StatusOK, "Reason is required")
}
