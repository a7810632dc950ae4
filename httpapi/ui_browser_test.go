package httpapi_test

import (
	"bytes"
	"context"
	"image/png"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/chromedp/chromedp"
	"golang.org/x/crypto/bcrypt"

	"pacer/db"
	"pacer/httpapi"
	"pacer/internal/pacertest"
	"pacer/scheduler"
)

// screenshotsEnv names the environment variable that makes the browser
// test write its screenshots into docs/screenshots (the README links
// them): PACER_UPDATE_SCREENSHOTS=1 go test ./httpapi -run TestUI_Browser
const screenshotsEnv = "PACER_UPDATE_SCREENSHOTS"

// chromiumPath finds Debian's chromium. The browser test fails without it:
// scripts/test.sh installs it.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("chromium is not installed: the support page's browser test needs it (apt-get install -y chromium, as scripts/test.sh does)")
	return ""
}

// fakeProvider is the httptest provider of the browser test. Under /b it
// refuses the credentials (401), under /c it is rate limited for an hour
// (429), /invalid is rejected (422); any other path answers 502 the first
// time (an unknown outcome for a POST without an idempotency key) and 201
// after that.
type fakeProvider struct {
	mu    sync.Mutex
	calls map[string]int // path → requests received
}

func (p *fakeProvider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	p.mu.Lock()
	p.calls[r.URL.Path]++
	n := p.calls[r.URL.Path]
	p.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case strings.HasPrefix(r.URL.Path, "/b/"):
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"message":"Bad credentials"}`)
	case strings.HasPrefix(r.URL.Path, "/c/"):
		w.Header().Set("Retry-After", "3600")
		w.Header().Set("X-RateLimit-Limit", "5000")
		w.Header().Set("X-RateLimit-Remaining", "0")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, `{"message":"API rate limit exceeded"}`)
	case r.URL.Path == "/invalid":
		w.WriteHeader(http.StatusUnprocessableEntity)
		_, _ = io.WriteString(w, `{"message":"Validation Failed","errors":[{"field":"title","code":"missing_field"}]}`)
	case n == 1:
		w.WriteHeader(http.StatusBadGateway)
		_, _ = io.WriteString(w, `{"message":"upstream timed out"}`)
	default:
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":1347,"state":"open"}`)
	}
}

// received counts the requests the provider got for path.
func (p *fakeProvider) received(path string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[path]
}

// TestUI_Browser drives the support page in a real headless Chromium over
// a real engine: sign in, find a held operation, release it, see it run
// against the provider and see the audit entry. It takes a screenshot of
// each page (written to docs/screenshots with PACER_UPDATE_SCREENSHOTS=1).
func TestUI_Browser(t *testing.T) {
	chromium := chromiumPath(t)
	ctx := context.Background()

	// The service: a real store, engine and clock, and one staff account.
	store := pacertest.OpenStore(t)
	if err := store.AddUser(ctx, db.NewUser{Name: "alice", Password: uiPassword, Cost: bcrypt.MinCost}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := store.AddUser(ctx, db.NewUser{Name: "victor", Password: uiPassword, Cost: bcrypt.MinCost, Role: scheduler.RoleViewer}, time.Now()); err != nil {
		t.Fatal(err)
	}
	clk := clock.New()
	logs := &syncBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	sched, err := scheduler.New(store, clk, scheduler.Config{Engine: scheduler.EngineConfig{
		Workers: 4, RequestTimeout: 5 * time.Second, LeaseDuration: time.Minute, PollInterval: 200 * time.Millisecond,
		ShutdownGrace: time.Second, Logger: logger,
	}})
	if err != nil {
		t.Fatal(err)
	}
	svc := sched.Service
	engineCtx, stopEngine := context.WithCancel(ctx)
	engineDone := make(chan error, 1)
	go func() { engineDone <- sched.Run(engineCtx) }()
	defer func() { stopEngine(); <-engineDone }()

	provider := &fakeProvider{calls: map[string]int{}}
	providerSrv := httptest.NewServer(provider)
	defer providerSrv.Close()
	api, err := httpapi.New(httpapi.Config{Service: svc, Users: store, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	site := httptest.NewServer(api.Handler())
	defer site.Close()

	// The story: three accounts; one call of account a is held with an
	// unknown outcome, one failed; account b's credentials are refused;
	// account c is rate limited.
	for _, sc := range []struct{ name, base string }{
		{"account-example-a", providerSrv.URL}, {"account-example-b", providerSrv.URL + "/b"}, {"account-example-c", providerSrv.URL + "/c"},
	} {
		if _, _, err := svc.PutScope(ctx, scheduler.ScopeInput{
			Name: sc.name, Provider: "generic", BaseURL: sc.base,
			Credentials: scheduler.Credentials{Type: scheduler.CredentialBearer, Token: secretBearer},
		}, "setup"); err != nil {
			t.Fatal(err)
		}
	}
	ops := []scheduler.OperationInput{
		{ID: "sync-example-72", Scope: "account-example-a", Method: "POST", Path: "/repos/acme/app/issues/72/comments"},
		{ID: "sync-example-73", Scope: "account-example-a", Method: "POST", Path: "/repos/acme/app/issues/73/comments"},
		{ID: "sync-example-74", Scope: "account-example-a", Method: "POST", Path: "/invalid"},
		{ID: "sync-example-75", Scope: "account-example-a", Method: "POST", Path: "/repos/acme/app/issues/75/comments"},
		{ID: "invoice-2291", Scope: "account-example-b", Method: "POST", Path: "/v1/invoices/2291/pay"},
		{ID: "report-5512", Scope: "account-example-c", Method: "GET", Path: "/reports/5512"},
	}
	for i := range ops {
		ops[i].Headers = map[string]string{"Accept": "application/json"}
		if ops[i].Method == "POST" {
			ops[i].Body, ops[i].ContentType = []byte(`{"body":"Synced from the CRM"}`), "application/json"
		}
		if _, err := svc.Enqueue(ctx, ops[i:i+1], func(int) string { return "" }); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]scheduler.State{
		"sync-example-72": scheduler.StateHeld, "sync-example-73": scheduler.StateHeld, "sync-example-74": scheduler.StateFailed, "sync-example-75": scheduler.StateHeld,
		"invoice-2291": scheduler.StateHeld, "report-5512": scheduler.StateWaitingForBudget,
	}
	for id, state := range want {
		waitState(t, svc, id, state)
	}

	// The browser.
	allocOpts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium),
		chromedp.NoSandbox, // the tests run as root in CI
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("no-proxy-server", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Env("TZ=Europe/Berlin"), // so the pages show local times next to UTC
		chromedp.WindowSize(1280, 900),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, allocOpts...)
	defer cancelAlloc()
	browser, cancelBrowser := chromedp.NewContext(allocCtx)
	defer cancelBrowser()
	browser, cancelTimeout := context.WithTimeout(browser, 3*time.Minute)
	defer cancelTimeout()

	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(browser, steps...); err != nil {
			t.Fatalf("%s: %v\nserver log:\n%s", what, err, logs.String())
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(browser, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return s
	}
	html := func() string {
		t.Helper()
		s, err := chromedp.Run(browser, chromedp.OuterHTML(chromedp.CSS("html")))
		if err != nil {
			t.Fatalf("read page: %v", err)
		}
		for _, secret := range []string{secretBearer, uiPassword} {
			if strings.Contains(s, secret) {
				t.Fatalf("the page shows a secret")
			}
		}
		return s
	}
	shots := newScreenshots(t)

	// 1. The support page asks to sign in.
	do("open the support page", chromedp.EmulateViewport(1280, 900), chromedp.Navigate(site.URL+"/ui/"), chromedp.WaitVisible(chromedp.ID("password")))
	shots.take(browser, "signin", false)
	do("sign in",
		chromedp.SendKeys(chromedp.ID("name"), "alice"),
		chromedp.SendKeys(chromedp.ID("password"), uiPassword),
		chromedp.Click(chromedp.CSS(`form[action="/ui/signin"] button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(".flash-ok")),
	)
	if got := text(".who-name"); !strings.Contains(got, "alice") {
		t.Fatalf("signed in as %q", got)
	}

	// 2. Needs attention lists the held operation.
	page := html()
	for _, s := range []string{"sync-example-72", "sync-example-74", "invoice-2291", "account-example-b", "account-example-c"} {
		if !strings.Contains(page, s) {
			t.Fatalf("needs attention lacks %s", s)
		}
	}
	shots.take(browser, "attention", true)

	// 3. The held operation's page explains it.
	do("open the held operation",
		chromedp.Click(chromedp.CSS(`a.opid[href="/ui/operations/sync-example-72"]`)),
		chromedp.WaitVisible(chromedp.ID("resolve")),
	)
	if got := text(".words"); !strings.Contains(got, "may have reached the provider") {
		t.Fatalf("state words %q", got)
	}
	if got := text(".timeline"); !strings.Contains(got, "502 Bad Gateway") {
		t.Fatalf("timeline %q", got)
	}
	shots.take(browser, "operation-held", true)
	// The last answer is shown; each attempt's kept answer is collapsed
	// and opens without a script of ours.
	if got := text(`section[aria-labelledby="answer-h"] .answer-body`); !strings.Contains(got, `"message": "upstream timed out"`) {
		t.Fatalf("last answer %q, want the 502's body pretty-printed", got)
	}
	detailsOpen := func() bool {
		t.Helper()
		open, err := chromedp.Run(browser, chromedp.Evaluate[bool](`document.querySelector(".timeline .answer-more").open`))
		if err != nil {
			t.Fatalf("read the attempt's answer: %v", err)
		}
		return open
	}
	if detailsOpen() {
		t.Fatal("the attempt's answer is open before it is asked for")
	}
	do("open an attempt's answer", chromedp.Click(chromedp.CSS(".timeline .answer-more summary")))
	if !detailsOpen() {
		t.Fatal("the attempt's answer does not open")
	}
	if got := text(".timeline .answer-more .answer-body"); !strings.Contains(got, "upstream timed out") {
		t.Fatalf("attempt answer %q", got)
	}

	// 4. The provider did not apply it: release it now, with the same
	// request identity and a reason.
	do("release",
		chromedp.Click(chromedp.CSS(`#resolve input[value=release]`)),
		chromedp.SendKeys(chromedp.ID("resolve-reason"), "Checked GitHub: the comment was not created"),
		chromedp.Click(chromedp.CSS(`#resolve button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(".flash-ok")),
	)
	if got := text(".flash-ok"); !strings.Contains(got, "sent again now with the same request identity") {
		t.Fatalf("flash %q", got)
	}

	// 5. The engine sends it again and the provider accepts it.
	waitState(t, svc, "sync-example-72", scheduler.StateSucceeded)
	if n := provider.received("/repos/acme/app/issues/72/comments"); n != 2 {
		t.Fatalf("the provider got %d requests for the operation, want 2", n)
	}
	do("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(".badge.state-succeeded")))
	audit := text("table.audit")
	for _, s := range []string{"alice", "resolve", "Checked GitHub: the comment was not created", "not applied, sent again: held (unknownOutcome) → scheduled"} {
		if !strings.Contains(audit, s) {
			t.Fatalf("audit trail %q lacks %q", audit, s)
		}
	}
	if got := text(".timeline"); !strings.Contains(got, "201 Created") {
		t.Fatalf("timeline after release %q", got)
	}
	html()
	shots.take(browser, "operation-released", true)

	// 6. The scope page of the account whose credentials were refused.
	do("open the held scope", chromedp.Navigate(site.URL+"/ui/scopes/account-example-b"), chromedp.WaitVisible(chromedp.ID("credentials")))
	if got := text(".words"); !strings.Contains(got, "refused this scope's credentials") {
		t.Fatalf("scope words %q", got)
	}
	html()
	shots.take(browser, "scope", true)

	// At 1280 px the list of waiting operations fits, its "Next attempt"
	// column included (issue 14: it was clipped).
	do("the waiting list", chromedp.Navigate(site.URL+"/ui/?state=waitingForBudget"), chromedp.WaitVisible(chromedp.CSS(".table-wrap")))
	fits, err := chromedp.Run(browser, chromedp.Evaluate[bool](`(() => { const w = document.querySelector(".table-wrap"); return w.scrollWidth <= w.clientWidth; })()`))
	if err != nil || !fits {
		t.Fatalf("at 1280 px the waiting list does not fit its column (%v)", err)
	}

	// 7. Find an operation by its ID (design §14): a prefix lists the
	// matches, an exact ID opens the operation, which shows what was sent.
	search := func(q string) {
		t.Helper()
		do("search "+q, chromedp.SetValue(chromedp.ID("q"), q), chromedp.Submit(chromedp.ID("q")), chromedp.WaitReady(chromedp.CSS("h1")))
	}
	search("sync-example-7")
	do("matches", chromedp.WaitVisible(chromedp.ID("search")))
	if got := text("#search"); !strings.Contains(got, "sync-example-73") || !strings.Contains(got, "sync-example-75") {
		t.Fatalf("search matches %q", got)
	}
	search("sync-example-75")
	do("exact match", chromedp.WaitVisible(chromedp.ID("resolve")))
	if got := text(".request-body"); !strings.Contains(got, `"body": "Synced from the CRM"`) {
		t.Fatalf("sent body %q", got)
	}

	// 8. The other two resolutions, in the words the API and CLI use.
	resolve := func(id, outcome, flash string) {
		t.Helper()
		do("resolve "+id+" "+outcome,
			chromedp.Navigate(site.URL+"/ui/operations/"+id), chromedp.WaitVisible(chromedp.ID("resolve")),
			chromedp.Click(chromedp.CSS(`#resolve input[value=`+outcome+`]`)),
			chromedp.SendKeys(chromedp.ID("resolve-reason"), "Checked at GitHub"),
			chromedp.Click(chromedp.CSS(`#resolve button[type=submit]`)),
			chromedp.WaitVisible(chromedp.CSS(".flash-ok")))
		if got := text(".flash-ok"); !strings.Contains(got, flash) {
			t.Fatalf("resolve %s %s: flash %q", id, outcome, got)
		}
	}
	resolve("sync-example-75", "succeeded", "marked succeeded")
	resolve("sync-example-73", "failed", "marked failed (resolvedFailed)")

	// 9. Pause a scope by hand until a time, and resume it.
	until := time.Now().UTC().Add(2 * time.Hour).Format("2006-01-02T15:04")
	do("pause the scope",
		chromedp.Navigate(site.URL+"/ui/scopes/account-example-a"), chromedp.WaitVisible(chromedp.ID("pause")),
		chromedp.SetValue(chromedp.ID("pause-until"), until),
		chromedp.SendKeys(chromedp.ID("pause-reason"), "GitHub maintenance window"),
		chromedp.Click(chromedp.CSS(`#pause button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(".flash-ok")), chromedp.WaitVisible(chromedp.CSS(".badge.scope-paused")))
	do("resume the scope",
		chromedp.SendKeys(chromedp.ID("resume-reason"), "maintenance over"),
		chromedp.Click(chromedp.CSS(`#resume button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(".badge.scope-open")))
	if got := text(".flash-ok"); !strings.Contains(got, "Resumed at") {
		t.Fatalf("resume flash %q", got)
	}

	// 10. Act on many: release every failed operation of the account, once
	// the confirmation with the count is ticked.
	do("the failed list", chromedp.Navigate(site.URL+"/ui/?scope=account-example-a&state=failed"), chromedp.WaitVisible(chromedp.ID("bulk")))
	if got := text("#bulk-h"); !strings.Contains(got, "Act on all 2 matching") {
		t.Fatalf("bulk heading %q", got)
	}
	do("bulk release",
		chromedp.Click(chromedp.CSS(`#bulk input[value=release]`)),
		chromedp.SendKeys(chromedp.ID("bulk-reason"), "GitHub fixed the validation"),
		chromedp.Click(chromedp.CSS(`#bulk input[name=confirm]`)),
		chromedp.Click(chromedp.CSS(`#bulk button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(".flash-ok")))
	if got := text(".flash-ok"); !strings.Contains(got, "Released 2 operations.") {
		t.Fatalf("bulk flash %q", got)
	}
	waitState(t, svc, "sync-example-73", scheduler.StateSucceeded)
	waitState(t, svc, "sync-example-74", scheduler.StateFailed)

	// 11. Release at a time, change that release, then undo it.
	releaseAt := func(at, flash string) {
		t.Helper()
		do("release at "+at,
			chromedp.Navigate(site.URL+"/ui/operations/sync-example-74"), chromedp.WaitVisible(chromedp.ID("release")),
			chromedp.Click(chromedp.CSS(`#release input[name=when][value=at]`)),
			chromedp.SetValue(chromedp.ID("release-at"), at),
			chromedp.SendKeys(chromedp.ID("release-reason"), "after the deploy"),
			chromedp.Click(chromedp.CSS(`#release button[type=submit]`)),
			chromedp.WaitVisible(chromedp.CSS(".flash-ok")))
		if got := text(".flash-ok"); !strings.Contains(got, flash) {
			t.Fatalf("release at %s: flash %q", at, got)
		}
	}
	releaseAt(time.Now().UTC().Add(48*time.Hour).Format("2006-01-02T15:04"), "Released: it will be sent again at")
	do("the pending release", chromedp.WaitVisible(chromedp.ID("unrelease")))
	releaseAt(time.Now().UTC().Add(3*time.Hour).Format("2006-01-02T15:04"), "Released: it will be sent again at")
	shots.take(browser, "operation-release-pending", true)
	do("undo the release",
		chromedp.SendKeys(chromedp.ID("unrelease-reason"), "the customer retries themselves"),
		chromedp.Click(chromedp.CSS(`#unrelease button[type=submit]`)),
		chromedp.WaitNotPresent(chromedp.ID("unrelease")))
	if got := text(".flash-ok"); !strings.Contains(got, "Release undone") {
		t.Fatalf("undo flash %q", got)
	}

	// 12. A viewer sees the same pages, no forms, and the server refuses
	// what it would post anyway.
	do("sign out", chromedp.Click(chromedp.CSS(`form[action="/ui/signout"] button`)), chromedp.WaitVisible(chromedp.ID("password")))
	do("sign in as a viewer",
		chromedp.SendKeys(chromedp.ID("name"), "victor"),
		chromedp.SendKeys(chromedp.ID("password"), uiPassword),
		chromedp.Click(chromedp.CSS(`form[action="/ui/signin"] button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(".who-name")),
		chromedp.Navigate(site.URL+"/ui/operations/sync-example-74"), chromedp.WaitVisible(chromedp.ID("act-h")))
	if page := html(); strings.Contains(page, `id="release"`) || strings.Contains(page, `id="cancel"`) || !strings.Contains(page, "signed in as a viewer") {
		t.Fatalf("a viewer's operation page offers actions: release %v cancel %v viewer %v; %s", strings.Contains(page, `id="release"`), strings.Contains(page, `id="cancel"`), strings.Contains(page, "signed in as a viewer"), text(".who"))
	}
	// The page's security policy allows no fetch; post the form the
	// page would have had, as a browser does.
	do("a viewer's cancel",
		chromedp.Evaluate[chromedp.Void](`(() => { const f = document.createElement("form"); f.method = "post"; f.action = "/ui/operations/sync-example-74/cancel";
			const r = document.createElement("input"); r.name = "reason"; r.value = "x"; f.append(r); document.body.append(f); f.submit(); })()`),
		chromedp.WaitVisible(chromedp.CSS("h1")))
	if got := text("main"); !strings.Contains(got, "Viewers cannot act") {
		t.Fatalf("a viewer's cancel answered %q, want the refusal", got)
	}
	waitState(t, svc, "sync-example-74", scheduler.StateFailed)

	// 13. The same pages on a phone.
	do("phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile), chromedp.Navigate(site.URL+"/ui/"), chromedp.WaitVisible(chromedp.CSS("h1")))
	shots.take(browser, "attention-phone", true)
	do("phone operation", chromedp.Navigate(site.URL+"/ui/operations/sync-example-74"), chromedp.WaitVisible(chromedp.CSS(".badge.state-failed")))
	shots.take(browser, "operation-phone", false)
}

// waitState waits (a bounded number of short polls) until the operation
// is in state.
func waitState(t *testing.T, svc *scheduler.Service, id string, state scheduler.State) {
	t.Helper()
	var op scheduler.Operation
	for range 600 {
		var err error
		if op, err = svc.GetOperation(context.Background(), id); err == nil && op.State == state {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s stayed %s, want %s", id, op.State, state)
}

// screenshots takes the browser test's screenshots: checked as PNG always,
// written to docs/screenshots when screenshotsEnv is set.
type screenshots struct {
	t   *testing.T
	dir string // empty: do not write
}

func newScreenshots(t *testing.T) *screenshots {
	s := &screenshots{t: t}
	if os.Getenv(screenshotsEnv) != "" {
		s.dir = filepath.Join("..", "docs", "screenshots")
		if err := os.MkdirAll(s.dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// take captures the page (the whole page when full, else the viewport)
// as NAME.png.
func (s *screenshots) take(ctx context.Context, name string, full bool) {
	s.t.Helper()
	shot := chromedp.CaptureScreenshot()
	if full {
		shot = chromedp.FullScreenshot(100)
	}
	buf, err := chromedp.Run(ctx, shot)
	if err != nil {
		s.t.Fatalf("screenshot %s: %v", name, err)
	}
	img, err := png.Decode(bytes.NewReader(buf))
	if err != nil || img.Bounds().Dx() < 300 {
		s.t.Fatalf("screenshot %s is not a usable PNG: %v", name, err)
	}
	if s.dir == "" {
		return
	}
	path := filepath.Join(s.dir, name+".png")
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		s.t.Fatal(err)
	}
	s.t.Logf("wrote %s (%dx%d)", path, img.Bounds().Dx(), img.Bounds().Dy())
}
