package httpapi_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"golang.org/x/crypto/bcrypt"

	"pacer/db"
	"pacer/httpapi"
	"pacer/providers"
	"pacer/scheduler"
)

// uiPassword is the password of every test staff account.
const uiPassword = "staff-password-8d1e"

// uiOpts shape one support-page test server.
type uiOpts struct {
	// Token is the API token; empty runs without one.
	Token string
	// Users are staff accounts to create (password uiPassword), and
	// Viewers accounts that may look and not act.
	Users, Viewers []string
	// WrapUsers, when set, wraps the store the server checks passwords
	// with (to count or slow the checks).
	WrapUsers func(httpapi.UserStore) httpapi.UserStore
}

// uiBundle is a running server with the support page over a real store,
// and a browser-like client (cookie jar, no redirect following).
type uiBundle struct {
	t       *testing.T
	url     string
	clock   *clock.Mock
	store   *db.DB
	svc     *scheduler.Service
	client  *http.Client
	logs    *syncBuffer
	secrets []string
	// claimed are the claims settle took last.
	claimed []scheduler.Claim
}

// setupUI starts a server with the support page for one test.
func setupUI(t *testing.T, opts uiOpts) *uiBundle {
	t.Helper()
	store, mock, svc := newService(t)
	for _, name := range opts.Users {
		if err := store.AddUser(context.Background(), db.NewUser{Name: name, Password: uiPassword, Cost: bcrypt.MinCost}, testNow); err != nil {
			t.Fatalf("add user: %v", err)
		}
	}
	for _, name := range opts.Viewers {
		if err := store.AddUser(context.Background(), db.NewUser{Name: name, Password: uiPassword, Cost: bcrypt.MinCost, Role: scheduler.RoleViewer}, testNow); err != nil {
			t.Fatalf("add viewer: %v", err)
		}
	}
	b := &uiBundle{
		t: t, clock: mock, store: store, svc: svc, logs: &syncBuffer{},
		secrets: []string{secretBearer, secretHeader, secretPassword, testToken, uiPassword},
	}
	var users httpapi.UserStore = store
	if opts.WrapUsers != nil {
		users = opts.WrapUsers(store)
	}
	b.url = startServer(t, store, httpapi.Config{
		Service: svc, Token: opts.Token, Users: users,
		Logger: slog.New(slog.NewTextHandler(b.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}, b.logs, b.secrets)
	jar, _ := cookiejar.New(nil)
	b.client = &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return b
}

// page is a finished exchange with the support page.
type page struct {
	Status int
	Header http.Header
	Body   string
}

// send runs req with the bundle's client and checks that no secret is in
// the answer.
func (b *uiBundle) send(req *http.Request) page {
	b.t.Helper()
	res, body := roundTrip(b.t, b.client, req, b.secrets)
	return page{Status: res.StatusCode, Header: res.Header, Body: string(body)}
}

// get fetches path.
func (b *uiBundle) get(path string) page {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodGet, b.url+path, nil)
	if err != nil {
		b.t.Fatal(err)
	}
	return b.send(req)
}

// post sends a form to path as a same-origin browser would, with extra
// headers (which may override Sec-Fetch-Site).
func (b *uiBundle) post(path string, form url.Values, headers ...string) page {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.url+path, strings.NewReader(form.Encode()))
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.Header.Set("Origin", b.url)
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "" {
			req.Header.Del(headers[i])
		} else {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	return b.send(req)
}

// follow fetches the Location of a redirect.
func (b *uiBundle) follow(p page) page {
	b.t.Helper()
	if p.Status != http.StatusSeeOther && p.Status != http.StatusFound {
		b.t.Fatalf("status %d, want a redirect; body: %s", p.Status, excerpt(p.Body))
	}
	return b.get(p.Header.Get("Location"))
}

// signIn signs name in and checks where it lands.
func (b *uiBundle) signIn(name string) page {
	b.t.Helper()
	p := b.post("/ui/signin", url.Values{"name": {name}, "password": {uiPassword}})
	if p.Status != http.StatusSeeOther {
		b.t.Fatalf("sign in: status %d; body: %s", p.Status, excerpt(p.Body))
	}
	return b.follow(p)
}

// scope creates a generic scope with bearer credentials.
func (b *uiBundle) scope(name string) {
	b.t.Helper()
	_, _, err := b.svc.PutScope(context.Background(), scheduler.ScopeInput{
		Name: name, Provider: "generic", BaseURL: "https://api.example.com",
		Credentials: scheduler.Credentials{Type: scheduler.CredentialBearer, Token: secretBearer},
	}, "test")
	if err != nil {
		b.t.Fatalf("put scope: %v", err)
	}
}

// enqueue stores POST operations of scope, one clock second apart.
func (b *uiBundle) enqueue(scope string, ids ...string) {
	b.t.Helper()
	for _, id := range ids {
		res, err := b.svc.Enqueue(context.Background(), []scheduler.OperationInput{{
			ID: id, Scope: scope, Method: "POST", Path: "/things?access_token=tok-in-path-3c1f&page=2",
			Headers: map[string]string{"Accept": "application/json", "X-Tenant": "tenant-value"},
			Body:    []byte(`{"n":1}`), ContentType: "application/json",
		}}, func(int) string { return "" })
		if err != nil || res[0].Err != nil {
			b.t.Fatalf("enqueue %s: %v %v", id, err, res)
		}
		b.clock.Add(time.Second)
	}
}

// settle claims every due operation and completes each with out and dec.
func (b *uiBundle) settle(out providers.Outcome, dec scheduler.Decision) {
	b.t.Helper()
	ctx := context.Background()
	for range 100 {
		claims, err := b.store.ClaimDue(ctx, scheduler.ClaimParams{Now: b.svc.Now(), Limit: 100, LeaseFor: time.Minute})
		if err != nil {
			b.t.Fatalf("claim: %v", err)
		}
		if len(claims) == 0 {
			return
		}
		b.claimed = claims
		cs := make([]scheduler.Completion, len(claims))
		for i, c := range claims {
			cs[i] = scheduler.Completion{
				OperationID: c.Operation.ID, LeaseToken: c.Operation.LeaseToken, Attempt: c.Operation.Attempt,
				FinishedAt: b.svc.Now(), Outcome: out, Decision: dec,
			}
		}
		if _, err := b.store.Complete(ctx, cs); err != nil {
			b.t.Fatalf("complete: %v", err)
		}
	}
	b.t.Fatal("settle: operations never stop being due")
}

// holdUnknown holds every due operation with an unknown outcome.
func (b *uiBundle) holdUnknown() {
	b.t.Helper()
	b.settle(providers.Outcome{
		Class: providers.ClassUnknownOutcome, Status: 502, Reason: "server-error",
		Detail: "bad gateway from https://api.example.com/things?access_token=tok-in-path-3c1f&page=2",
		Hint:   providers.Hint{Source: "retry-after", Raw: "soon", Note: "not a number or date"},
	}, scheduler.Decision{State: scheduler.StateHeld, HoldReason: scheduler.HoldUnknownOutcome, Reason: "outcome unknown: no idempotency key", MaybeApplied: true})
}

// op reads an operation.
func (b *uiBundle) op(id string) scheduler.Operation {
	b.t.Helper()
	op, err := b.svc.GetOperation(context.Background(), id)
	if err != nil {
		b.t.Fatalf("get %s: %v", id, err)
	}
	return op
}

// excerpt shortens a page body for a failure message.
func excerpt(s string) string {
	if i := strings.Index(s, "<main"); i >= 0 {
		s = s[i:]
	}
	if len(s) > 1500 {
		s = s[:1500] + "…"
	}
	return s
}

// wantIn fails unless p has status and its body holds every one of texts.
func wantIn(t *testing.T, p page, status int, texts ...string) {
	t.Helper()
	if p.Status != status {
		t.Fatalf("status %d, want %d; body: %s", p.Status, status, excerpt(p.Body))
	}
	for _, s := range texts {
		if !strings.Contains(p.Body, s) {
			t.Fatalf("page lacks %q; body: %s", s, excerpt(p.Body))
		}
	}
}

func TestUI_OpenWithoutUsers(t *testing.T) {
	t.Parallel()
	t.Run("LoopbackWithoutToken", func(t *testing.T) {
		b := setupUI(t, uiOpts{})
		p := b.get("/ui/")
		wantIn(t, p, http.StatusOK, "Open for local development", "pacer users add NAME")
		if got := p.Header.Get("Content-Type"); got != "text/html; charset=utf-8" {
			t.Fatalf("content type %q", got)
		}
		b.scope("acct")
		b.enqueue("acct", "op-1")
		b.holdUnknown()
		p = b.post("/ui/operations/op-1/cancel", url.Values{"reason": {"duplicate"}})
		wantIn(t, b.follow(p), http.StatusOK, "Canceled: it will not be sent.", "<strong>local</strong>")
	})
	t.Run("TokenConfigured", func(t *testing.T) {
		b := setupUI(t, uiOpts{Token: testToken})
		wantIn(t, b.get("/ui/"), http.StatusForbidden, "No staff account yet", "pacer users add NAME")
	})
	t.Run("RootRedirects", func(t *testing.T) {
		b := setupUI(t, uiOpts{})
		if p := b.get("/"); p.Status != http.StatusFound || p.Header.Get("Location") != "/ui/" {
			t.Fatalf("GET / = %d → %q", p.Status, p.Header.Get("Location"))
		}
	})
}

func TestUI_AuthRequired(t *testing.T) {
	t.Parallel()
	b := setupUI(t, uiOpts{Users: []string{"alice"}})
	b.scope("acct")
	b.enqueue("acct", "op-1")
	b.holdUnknown()

	t.Run("PagesRedirectToSignIn", func(t *testing.T) {
		for _, path := range []string{"/ui/", "/ui/operations/op-1", "/ui/scopes/acct"} {
			p := b.get(path)
			loc := p.Header.Get("Location")
			if p.Status != http.StatusSeeOther || !strings.HasPrefix(loc, "/ui/signin") {
				t.Fatalf("GET %s = %d → %q, want the sign-in page", path, p.Status, loc)
			}
			if strings.Contains(p.Body, "<main") {
				t.Fatalf("GET %s shows a page before sign-in", path)
			}
		}
		if loc := b.get("/ui/operations/op-1").Header.Get("Location"); loc != "/ui/signin?next=%2Fui%2Foperations%2Fop-1" {
			t.Fatalf("redirect %q does not come back to the page", loc)
		}
	})
	t.Run("ActionsRefused", func(t *testing.T) {
		p := b.post("/ui/operations/op-1/cancel", url.Values{"reason": {"x"}})
		if p.Status != http.StatusSeeOther || !strings.HasPrefix(p.Header.Get("Location"), "/ui/signin") {
			t.Fatalf("POST without session = %d → %q", p.Status, p.Header.Get("Location"))
		}
		if op := b.op("op-1"); op.State != scheduler.StateHeld {
			t.Fatalf("state %s after a refused action", op.State)
		}
	})
	t.Run("WrongPassword", func(t *testing.T) {
		p := b.post("/ui/signin", url.Values{"name": {"alice"}, "password": {"not-the-password"}})
		wantIn(t, p, http.StatusUnauthorized, "The name or the password is wrong.")
		if len(p.Header.Values("Set-Cookie")) != 0 && strings.Contains(strings.Join(p.Header.Values("Set-Cookie"), ";"), "pacer_session=") {
			t.Fatal("a failed sign-in set a session cookie")
		}
	})
	t.Run("SignInAndOut", func(t *testing.T) {
		p := b.post("/ui/signin", url.Values{"name": {"alice"}, "password": {uiPassword}, "next": {"/ui/operations/op-1"}})
		if p.Status != http.StatusSeeOther || p.Header.Get("Location") != "/ui/operations/op-1" {
			t.Fatalf("sign in = %d → %q", p.Status, p.Header.Get("Location"))
		}
		var session *http.Cookie
		for _, c := range (&http.Response{Header: p.Header}).Cookies() {
			if c.Name == "pacer_session" {
				session = c
			}
		}
		if session == nil || !session.HttpOnly || session.SameSite != http.SameSiteLaxMode || session.Secure || session.Path != "/ui" || len(session.Value) < 40 {
			t.Fatalf("session cookie %+v: want HttpOnly, SameSite=Lax, Path=/ui, not Secure over plain HTTP", session)
		}
		wantIn(t, b.follow(p), http.StatusOK, "Signed in as <strong>alice</strong>", "Signed in as alice.", "op-1")
		wantIn(t, b.get("/ui/"), http.StatusOK, "Needs attention")

		p = b.post("/ui/signout", nil)
		wantIn(t, b.follow(p), http.StatusOK, "Signed out.")
		if p := b.get("/ui/"); p.Status != http.StatusSeeOther {
			t.Fatalf("after sign-out GET /ui/ = %d, want the sign-in redirect", p.Status)
		}
		// The old token is dead even if a client kept it.
		req, _ := http.NewRequest(http.MethodGet, b.url+"/ui/", nil)
		req.AddCookie(&http.Cookie{Name: "pacer_session", Value: session.Value})
		if res, err := http.DefaultClient.Do(req); err != nil || res.Request.URL.Path != "/ui/signin" {
			t.Fatalf("old session still works: %v", err)
		}
	})
	t.Run("SecureBehindTLS", func(t *testing.T) {
		p := b.post("/ui/signin", url.Values{"name": {"alice"}, "password": {uiPassword}}, "X-Forwarded-Proto", "https")
		if c := p.Header.Get("Set-Cookie"); !strings.Contains(c, "Secure") {
			t.Fatalf("cookie %q lacks Secure behind TLS", c)
		}
	})
	t.Run("NextStaysOnSite", func(t *testing.T) {
		for _, next := range []string{"https://evil.example/", "//evil.example/ui/", "/v1/scopes", "/ui/\\evil"} {
			p := b.post("/ui/signin", url.Values{"name": {"alice"}, "password": {uiPassword}, "next": {next}})
			if loc := p.Header.Get("Location"); loc != "/ui/" {
				t.Fatalf("next %q → %q, want /ui/", next, loc)
			}
		}
	})
}

func TestUI_SignInThrottle(t *testing.T) {
	t.Parallel()
	users := []string{"alice", "bob", "carol", "dave", "erin"}
	b := setupUI(t, uiOpts{Users: users})
	fail := func(name string) page {
		return b.post("/ui/signin", url.Values{"name": {name}, "password": {"wrong-password"}})
	}

	t.Run("PerUser", func(t *testing.T) {
		for i := range httpapi.SignInFailuresPerUser {
			if p := fail("alice"); p.Status != http.StatusUnauthorized {
				t.Fatalf("failure %d: status %d", i+1, p.Status)
			}
		}
		// Blocked, even with the right password: it is not even checked.
		p := b.post("/ui/signin", url.Values{"name": {"alice"}, "password": {uiPassword}})
		wantIn(t, p, http.StatusTooManyRequests, "Too many failed sign-ins")
		if ra := p.Header.Get("Retry-After"); ra != "900" {
			t.Fatalf("Retry-After %q, want 900", ra)
		}
		// Another account is not blocked by alice's failures.
		if p := b.post("/ui/signin", url.Values{"name": {"bob"}, "password": {uiPassword}}); p.Status != http.StatusSeeOther {
			t.Fatalf("bob: status %d", p.Status)
		}
		// Five failures in a row lock the account itself (design §14):
		// after the window it is still refused, with the right password,
		// until an administrator unlocks it.
		b.clock.Add(httpapi.SignInWindow)
		wantIn(t, b.post("/ui/signin", url.Values{"name": {"alice"}, "password": {uiPassword}}), http.StatusForbidden,
			"locked after 5 failed sign-ins", "pacer users unlock alice")
		if err := b.store.UnlockUser(context.Background(), "alice"); err != nil {
			t.Fatal(err)
		}
		if p := b.post("/ui/signin", url.Values{"name": {"alice"}, "password": {uiPassword}}); p.Status != http.StatusSeeOther {
			t.Fatalf("alice after unlock: status %d", p.Status)
		}
	})
	t.Run("PerClient", func(t *testing.T) {
		b.clock.Add(httpapi.SignInWindow)
		n := 0
		for _, name := range users[:4] {
			for range httpapi.SignInFailuresPerUser {
				if n == httpapi.SignInFailuresPerClient {
					break
				}
				fail(name)
				n++
			}
		}
		p := b.post("/ui/signin", url.Values{"name": {"erin"}, "password": {uiPassword}})
		wantIn(t, p, http.StatusTooManyRequests, "Too many failed sign-ins")
	})
}

// Behind a local reverse proxy every connection is loopback: without a
// staff account the page stays closed to a request that came through one.
func TestUI_NoAccountBehindProxy(t *testing.T) {
	t.Parallel()
	b := setupUI(t, uiOpts{})
	if p := b.get("/ui/"); p.Status != http.StatusOK {
		t.Fatalf("local page without accounts: status %d", p.Status)
	}
	for _, h := range []string{"Forwarded", "X-Forwarded-For"} {
		req, _ := http.NewRequest(http.MethodGet, b.url+"/ui/", nil)
		req.Header.Set(h, "203.0.113.7")
		wantIn(t, b.send(req), http.StatusForbidden, "came through a proxy")
	}
}

// countingUsers counts password checks and makes each one slow, as
// bcrypt is, so that concurrent sign-ins overlap.
type countingUsers struct {
	httpapi.UserStore
	checks atomic.Int64
}

func (c *countingUsers) CheckPassword(ctx context.Context, name, password string) (bool, error) {
	c.checks.Add(1)
	time.Sleep(20 * time.Millisecond)
	return c.UserStore.CheckPassword(ctx, name, password)
}

// TestUI_SignInThrottleConcurrent: 100 wrong passwords at once, for one
// account or from one address, get no more password checks than the limit.
func TestUI_SignInThrottleConcurrent(t *testing.T) {
	t.Parallel()
	counter := &countingUsers{}
	users := []string{"alice"}
	b := setupUI(t, uiOpts{Users: users, WrapUsers: func(u httpapi.UserStore) httpapi.UserStore {
		counter.UserStore = u
		return counter
	}})
	burst := func(name func(i int) string) map[int]int {
		var mu sync.Mutex
		statuses := map[int]int{}
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range 100 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				req, _ := http.NewRequest(http.MethodPost, b.url+"/ui/signin", strings.NewReader(url.Values{"name": {name(i)}, "password": {"wrong-password"}}.Encode()))
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				req.Header.Set("Sec-Fetch-Site", "same-origin")
				req.Header.Set("Origin", b.url)
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				mu.Lock()
				statuses[res.StatusCode]++
				mu.Unlock()
			}()
		}
		close(start)
		wg.Wait()
		return statuses
	}
	t.Run("PerAccount", func(t *testing.T) {
		st := burst(func(int) string { return "alice" })
		if n := counter.checks.Load(); n > httpapi.SignInFailuresPerUser {
			t.Fatalf("%d passwords checked for one account, want at most %d (statuses %v)", n, httpapi.SignInFailuresPerUser, st)
		}
		if st[http.StatusUnauthorized] != httpapi.SignInFailuresPerUser || st[http.StatusTooManyRequests] != 100-httpapi.SignInFailuresPerUser {
			t.Fatalf("statuses %v", st)
		}
	})
	t.Run("PerClient", func(t *testing.T) {
		b.clock.Add(httpapi.SignInWindow)
		counter.checks.Store(0)
		st := burst(func(i int) string { return fmt.Sprintf("guess-%d", i) })
		if n := counter.checks.Load(); n > httpapi.SignInFailuresPerClient {
			t.Fatalf("%d passwords checked from one address, want at most %d (statuses %v)", n, httpapi.SignInFailuresPerClient, st)
		}
		if st[http.StatusUnauthorized] != httpapi.SignInFailuresPerClient {
			t.Fatalf("statuses %v", st)
		}
	})
}

func TestUI_CrossOriginRefused(t *testing.T) {
	t.Parallel()
	b := setupUI(t, uiOpts{Users: []string{"alice"}})
	b.scope("acct")
	b.enqueue("acct", "op-1")
	b.holdUnknown()
	b.signIn("alice")
	form := url.Values{"reason": {"attacker says so"}}
	for _, tc := range []struct {
		name    string
		headers []string
	}{
		{"SecFetchSite", []string{"Sec-Fetch-Site", "cross-site", "Origin", "https://evil.example"}},
		{"OriginOnly", []string{"Sec-Fetch-Site", "", "Origin", "https://evil.example"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := b.post("/ui/operations/op-1/cancel", form, tc.headers...)
			wantIn(t, p, http.StatusForbidden, "cross-site request")
			if op := b.op("op-1"); op.State != scheduler.StateHeld {
				t.Fatalf("state %s after a cross-site POST", op.State)
			}
			p = b.post("/ui/signin", url.Values{"name": {"alice"}, "password": {uiPassword}}, tc.headers...)
			wantIn(t, p, http.StatusForbidden, "cross-site request")
		})
	}
	t.Run("SameOriginWorks", func(t *testing.T) {
		if p := b.post("/ui/operations/op-1/cancel", url.Values{"reason": {"duplicate"}}); p.Status != http.StatusSeeOther {
			t.Fatalf("same-origin POST: status %d; body %s", p.Status, excerpt(p.Body))
		}
		if op := b.op("op-1"); op.State != scheduler.StateCanceled {
			t.Fatalf("state %s, want canceled", op.State)
		}
	})
}

func TestUI_Actions(t *testing.T) {
	t.Parallel()
	b := setupUI(t, uiOpts{Users: []string{"alice"}})
	b.scope("acct")
	b.enqueue("acct", "rel-now", "rel-later", "res-applied", "res-not", "cancel-me", "bulk-1", "bulk-2", "far-1")
	b.holdUnknown()
	b.signIn("alice")
	audit := func(id string) scheduler.AuditEntry {
		t.Helper()
		entries, err := b.svc.ListAudit(context.Background(), id)
		if err != nil || len(entries) == 0 {
			t.Fatalf("audit of %s: %v, %v", id, entries, err)
		}
		e := entries[len(entries)-1]
		if e.Actor != "alice" {
			t.Fatalf("audit actor %q, want alice", e.Actor)
		}
		return e
	}

	t.Run("ErrReasonMissing", func(t *testing.T) {
		for _, action := range []string{"release", "cancel", "resolve"} {
			p := b.post("/ui/operations/rel-now/"+action, url.Values{"reason": {"  "}, "when": {"now"}, "outcome": {"succeeded"}})
			wantIn(t, p, http.StatusUnprocessableEntity, "Nothing was changed", "Reason is required")
		}
		if op := b.op("rel-now"); op.State != scheduler.StateHeld {
			t.Fatalf("state %s after refused actions", op.State)
		}
		p := b.post("/ui/scopes/acct/resume", url.Values{})
		wantIn(t, p, http.StatusUnprocessableEntity, "Reason is required")
	})
	t.Run("ReleaseNow", func(t *testing.T) {
		p := b.post("/ui/operations/rel-now/release", url.Values{"reason": {"checked: not created"}, "when": {"now"}})
		if loc := p.Header.Get("Location"); loc != "/ui/operations/rel-now" {
			t.Fatalf("redirect to %q", loc)
		}
		wantIn(t, b.follow(p), http.StatusOK, "Released: it will be sent again now", "checked: not created", "<strong>alice</strong>", "May have applied")
		if op := b.op("rel-now"); op.State != scheduler.StateScheduled || !op.NextAttemptAt.Equal(b.svc.Now()) || op.RequestIdentity != "rel-now" {
			t.Fatalf("after release: %s at %s", op.State, op.NextAttemptAt)
		}
		if e := audit("rel-now"); e.Action != "release" || e.Reason != "checked: not created" {
			t.Fatalf("audit %+v", e)
		}
	})
	t.Run("ReleaseAt", func(t *testing.T) {
		past := b.svc.Now().Add(-time.Hour).Format("2006-01-02T15:04")
		p := b.post("/ui/operations/rel-later/release", url.Values{"reason": {"later"}, "when": {"at"}, "at": {past}})
		wantIn(t, p, http.StatusUnprocessableEntity, "must lie in the future")
		p = b.post("/ui/operations/rel-later/release", url.Values{"reason": {"later"}, "when": {"at"}, "at": {"tomorrow"}})
		wantIn(t, p, http.StatusUnprocessableEntity, "is not a time")
		// Beyond the policy's horizon (design §11 "Times are bounded").
		latest := b.svc.Now().Add(scheduler.DefaultHorizon)
		for _, far := range []string{"9999-12-31T23:59", latest.Add(time.Minute).Format("2006-01-02T15:04")} {
			p = b.post("/ui/operations/rel-later/release", url.Values{"reason": {"much later"}, "when": {"at"}, "at": {far}})
			wantIn(t, p, http.StatusUnprocessableEntity, "Nothing was changed", "The release time must not be later than "+latest.Format(time.RFC3339))
			if op := b.op("rel-later"); op.State != scheduler.StateHeld {
				t.Fatalf("state %s after a release beyond the horizon", op.State)
			}
		}
		wantIn(t, b.get("/ui/operations/rel-later"), http.StatusOK, `max="`+latest.Format("2006-01-02T15:04")+`"`)
		at := b.svc.Now().Add(3 * time.Hour).Truncate(time.Minute)
		p = b.post("/ui/operations/rel-later/release", url.Values{"reason": {"after the maintenance window"}, "when": {"at"}, "at": {at.Format("2006-01-02T15:04")}})
		wantIn(t, b.follow(p), http.StatusOK, "Released: it will be sent again at "+at.Format("2006-01-02 15:04:05")+" UTC",
			"Released by a person: it will be sent again at its next attempt time") // not "after a temporary failure"
		if op := b.op("rel-later"); op.State != scheduler.StateScheduled || !op.NextAttemptAt.Equal(at) {
			t.Fatalf("after release at: %s at %s, want %s", op.State, op.NextAttemptAt, at)
		}
	})
	t.Run("StoredExtremeStillShows", func(t *testing.T) {
		// A release written before the bounds held: its deadline lies in
		// year 10000. The pages still show it, at the last time there is.
		far := time.Date(9999, 12, 31, 23, 0, 0, 0, time.UTC)
		if _, err := b.store.ReleaseOperation(context.Background(), "far-1", far, scheduler.Action{Actor: "test", At: b.svc.Now(), Reason: "by hand"}); err != nil {
			t.Fatal(err)
		}
		wantIn(t, b.get("/ui/operations/far-1"), http.StatusOK, "9999-12-31 23:00:00 UTC")
		wantIn(t, b.get("/ui/scopes/acct"), http.StatusOK, "acct")
		wantIn(t, b.get("/ui/"), http.StatusOK)
		if _, err := b.store.CancelOperation(context.Background(), "far-1", scheduler.Action{Actor: "test", At: b.svc.Now(), Reason: "undo"}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("ResolveApplied", func(t *testing.T) {
		p := b.post("/ui/operations/res-applied/resolve", url.Values{"reason": {"issue #12 exists"}, "outcome": {"succeeded"}})
		wantIn(t, b.follow(p), http.StatusOK, "marked succeeded")
		if op := b.op("res-applied"); op.State != scheduler.StateSucceeded {
			t.Fatalf("state %s, want succeeded", op.State)
		}
		if e := audit("res-applied"); e.Action != "resolve" {
			t.Fatalf("audit %+v", e)
		}
	})
	t.Run("ResolveNotApplied", func(t *testing.T) {
		p := b.post("/ui/operations/res-not/resolve", url.Values{"reason": {"no such issue"}, "outcome": {"release"}})
		wantIn(t, b.follow(p), http.StatusOK, "Resolved as not applied: it will be sent again now with the same request identity")
		if e := audit("res-not"); e.Action != "resolve" || !strings.Contains(e.Detail, "not applied, sent again") {
			t.Fatalf("audit %+v, want a resolve saying it was sent again", e)
		}
		if op := b.op("res-not"); op.State != scheduler.StateScheduled || op.RequestIdentity != "res-not" {
			t.Fatalf("state %s, want scheduled", op.State)
		}
		// Resolving again is refused: it is no longer held.
		p = b.post("/ui/operations/res-not/resolve", url.Values{"reason": {"again"}, "outcome": {"succeeded"}})
		wantIn(t, p, http.StatusConflict, "Not possible now")
	})
	t.Run("Cancel", func(t *testing.T) {
		p := b.post("/ui/operations/cancel-me/cancel", url.Values{"reason": {"customer withdrew"}})
		wantIn(t, b.follow(p), http.StatusOK, "Canceled: it will not be sent.")
		if op := b.op("cancel-me"); op.State != scheduler.StateCanceled {
			t.Fatalf("state %s", op.State)
		}
	})
	t.Run("ReleaseAllHeld", func(t *testing.T) {
		p := b.post("/ui/scopes/acct/release-held", url.Values{"reason": {"provider recovered"}})
		wantIn(t, p, http.StatusUnprocessableEntity, "may already have been applied")
		if op := b.op("bulk-1"); op.State != scheduler.StateHeld {
			t.Fatalf("released without the confirmation: %s", op.State)
		}
		p = b.post("/ui/scopes/acct/release-held", url.Values{"reason": {"provider recovered"}, "confirm": {"yes"}})
		wantIn(t, b.follow(p), http.StatusOK, "Released 2 held operations", "releaseHeld", "provider recovered")
		for _, id := range []string{"bulk-1", "bulk-2"} {
			if op := b.op(id); op.State != scheduler.StateScheduled {
				t.Fatalf("%s: state %s", id, op.State)
			}
			if e := audit(id); e.Action != "release" {
				t.Fatalf("audit %+v", e)
			}
		}
	})
	t.Run("CredentialsAndResume", func(t *testing.T) {
		// An authRevoked answer holds the scope.
		b.enqueue("acct", "auth-1")
		b.settle(providers.Outcome{Class: providers.ClassAuthRevoked, Status: 401},
			scheduler.Decision{State: scheduler.StateHeld, HoldReason: scheduler.HoldAuthRevoked, Reason: "credentials refused",
				Scope: scheduler.ScopeEffect{Hold: scheduler.HoldAuthRevoked}})
		wantIn(t, b.get("/ui/scopes/acct"), http.StatusOK, "scope-held", "refused this scope&#39;s credentials", "Resume the scope")
		const newToken = "ghp_new-secret-token-77aa"
		b.secrets = append(b.secrets, newToken)
		p := b.post("/ui/scopes/acct/credentials", url.Values{"type": {"bearer"}, "token": {""}, "reason": {"rotated"}})
		wantIn(t, p, http.StatusUnprocessableEntity, "Token is required")
		p = b.post("/ui/scopes/acct/credentials", url.Values{"type": {"bearer"}, "token": {newToken}, "reason": {""}})
		wantIn(t, p, http.StatusUnprocessableEntity, "Reason is required")
		p = b.post("/ui/scopes/acct/credentials", url.Values{"type": {"bearer"}, "token": {newToken}, "reason": {"token rotated"}})
		wantIn(t, b.follow(p), http.StatusOK, "Credentials replaced (bearer).", "hold for refused credentials is lifted", "token rotated")
		sc, err := b.svc.GetScope(context.Background(), "acct")
		if err != nil || sc.Credentials != (scheduler.Credentials{Type: scheduler.CredentialBearer}) || sc.HoldReason != "" {
			t.Fatalf("scope after replace: hold %q, credentials %v, %v", sc.HoldReason, sc.Credentials, err)
		}
		// A paused scope is resumed.
		if _, err := b.svc.ResumeScope(context.Background(), "acct", "setup", "test"); err != nil {
			t.Fatal(err)
		}
		b.enqueue("acct", "paused-1")
		b.settle(providers.Outcome{Class: providers.ClassRateLimited, Status: 429},
			scheduler.Decision{State: scheduler.StateWaitingForBudget, NextAttemptAt: b.svc.Now().Add(time.Hour), Reason: "rate limited",
				Scope: scheduler.ScopeEffect{PauseUntil: b.svc.Now().Add(time.Hour), PauseReason: "rate limited: retry-after 3600"}})
		// The replaced token is what the scope's requests are sent with.
		if len(b.claimed) == 0 {
			t.Fatal("nothing claimed after the replace")
		}
		for _, c := range b.claimed {
			if c.Scope.Name != "acct" || c.Scope.Credentials.Token != newToken {
				t.Fatalf("claim of %s after the replace: scope %s, with the new token: %v", c.Operation.ID, c.Scope.Name, c.Scope.Credentials.Token == newToken)
			}
		}
		wantIn(t, b.get("/ui/scopes/acct"), http.StatusOK, "scope-paused", "rate limited: retry-after 3600")
		p = b.post("/ui/scopes/acct/resume", url.Values{"reason": {"provider confirmed the limit is lifted"}})
		wantIn(t, b.follow(p), http.StatusOK, "Resumed", "provider confirmed the limit is lifted")
		if sc, _ := b.svc.GetScope(context.Background(), "acct"); sc.Status(b.svc.Now()) != scheduler.ScopeOpen {
			t.Fatalf("scope status %s after resume", sc.Status(b.svc.Now()))
		}
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		wantIn(t, b.get("/ui/operations/nope"), http.StatusNotFound, "There is no operation nope")
		wantIn(t, b.get("/ui/scopes/nope"), http.StatusNotFound, "There is no scope nope")
		wantIn(t, b.post("/ui/operations/nope/cancel", url.Values{"reason": {"x"}}), http.StatusNotFound, "There is no operation")
		wantIn(t, b.get("/ui/no/such/page"), http.StatusNotFound, "There is no page")
	})
}

func TestUI_Pages(t *testing.T) {
	t.Parallel()
	b := setupUI(t, uiOpts{Users: []string{"alice"}})
	b.scope("acct")
	b.scope("other")
	ids := make([]string, 120)
	for i := range ids {
		ids[i] = fmt.Sprintf("held-%03d", i)
	}
	b.enqueue("acct", ids...)
	b.enqueue("other", "sync/with-slash")
	b.holdUnknown()
	b.enqueue("other", "failed-1")
	b.settle(providers.Outcome{Class: providers.ClassPermanent, Status: 422, Detail: "validation failed"},
		scheduler.Decision{State: scheduler.StateFailed, FailureReason: scheduler.FailurePermanent, Reason: "provider rejected the request"})
	b.signIn("alice")

	t.Run("AttentionPaging", func(t *testing.T) {
		p := b.get("/ui/")
		wantIn(t, p, http.StatusOK, `<span class="card-num">121</span>`, `<span class="card-num">1</span>`, "Showing 50 of 122", "failed-1", "rel=\"next\"")
		seen := map[string]bool{}
		next := "/ui/"
		for pages := 0; next != ""; pages++ {
			if pages == 5 {
				t.Fatal("paging does not end")
			}
			p := b.get(next)
			for _, id := range append(ids, "failed-1", "sync/with-slash") {
				if strings.Contains(p.Body, ">"+id+"</a>") {
					if seen[id] {
						t.Fatalf("%s on two pages", id)
					}
					seen[id] = true
				}
			}
			next = ""
			if i := strings.Index(p.Body, `rel="next"`); i >= 0 {
				start := strings.LastIndex(p.Body[:i], `href="`) + len(`href="`)
				next = strings.ReplaceAll(p.Body[start:strings.Index(p.Body[start:], `"`)+start], "&amp;", "&")
			}
		}
		if len(seen) != 122 {
			t.Fatalf("saw %d operations over the pages, want 122", len(seen))
		}
	})
	t.Run("Filters", func(t *testing.T) {
		p := b.get("/ui/?scope=other")
		wantIn(t, p, http.StatusOK, "failed-1", "sync/with-slash", "Showing 2 of 2")
		p = b.get("/ui/?state=failed")
		wantIn(t, p, http.StatusOK, "failed-1", "Showing 1 of 1")
		p = b.get("/ui/?reason=unknownOutcome&scope=other")
		wantIn(t, p, http.StatusOK, "sync/with-slash", "Showing 1 of 1")
		wantIn(t, b.get("/ui/?state=bogus"), http.StatusBadRequest, "There is no state")
		wantIn(t, b.get("/ui/?cursor=bogus"), http.StatusBadRequest, "out of date")
		wantIn(t, b.get("/ui/?scope=nope"), http.StatusOK, "There is no scope named")
	})
	t.Run("Operation", func(t *testing.T) {
		p := b.get("/ui/operations/sync%2Fwith-slash")
		wantIn(t, p, http.StatusOK,
			"/<wbr>things?access_token=REDACTED&amp;<wbr>page=2", "X-Tenant: <span class=\"muted\">value not shown", "Accept: application/json",
			"the request may have reached the provider", "Resolve the unknown outcome", "Attempt 1", "502 Bad Gateway",
			"retry-after: soon", "not usable", "outcome unknown: no idempotency key", `action="/ui/operations/sync%2Fwith-slash/resolve"`,
			"access_token=REDACTED")
		for _, leak := range []string{"tok-in-path-3c1f", "tenant-value"} {
			if strings.Contains(p.Body, leak) {
				t.Fatalf("operation page shows %q", leak)
			}
		}
		wantIn(t, b.get("/ui/operations/failed-1"), http.StatusOK, "rejected the request itself", "Release", "Cancel the operation")
	})
	t.Run("Scope", func(t *testing.T) {
		p := b.get("/ui/scopes/acct")
		wantIn(t, p, http.StatusOK, "Held <span class=\"count\">120</span>", "All 120 »", "bearer <span class=\"muted\">configured, write-only", "Release all 120 held operations")
	})
	t.Run("Assets", func(t *testing.T) {
		p := b.get("/ui/static/pacer.css")
		if p.Status != http.StatusOK || !strings.HasPrefix(p.Header.Get("Content-Type"), "text/css") {
			t.Fatalf("css: %d %q", p.Status, p.Header.Get("Content-Type"))
		}
		if p := b.get("/ui/static/"); p.Status != http.StatusNotFound {
			t.Fatalf("static directory listing: %d", p.Status)
		}
		p = b.get("/ui/")
		for h, want := range map[string]string{"X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"} {
			if got := p.Header.Get(h); got != want {
				t.Fatalf("%s: %q, want %q", h, got, want)
			}
		}
		if csp := p.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") || !strings.Contains(csp, "script-src 'self'") {
			t.Fatalf("CSP %q", csp)
		}
	})
}
