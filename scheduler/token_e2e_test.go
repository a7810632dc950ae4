package scheduler_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"pacer/internal/pacertest"
	"pacer/scheduler"
)

// tokenRun is a harness whose scope "acct" renews its token at a stand-in
// token endpoint, in front of a provider that accepts only the
// endpoint's current access tokens and records what it received.
type tokenRun struct {
	*harness
	ts   *pacertest.TokenServer
	prov *httptest.Server

	mu   sync.Mutex
	sent []sentWith
}

type sentWith struct {
	at           time.Time
	token, key   string
	valid        bool
	ahead        time.Duration // how long the token still had to live
	path, status string
}

// tokenEngine is the engine configuration of the token tests: a request
// timeout of one second, so that tokens living seconds are usable.
var tokenEngine = scheduler.EngineConfig{RequestTimeout: time.Second, LeaseDuration: 10 * time.Second, Workers: 8}

func newTokenRun(t *testing.T, expiresIn time.Duration) *tokenRun {
	h := setup(t, tokenEngine)
	r := &tokenRun{harness: h, ts: pacertest.NewTokenServer(t, h.clock, "client-1", "client-secret-1234", expiresIn)}
	r.prov = httptest.NewServer(r.ts.Resource(func(req *http.Request, tok string, valid bool) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.sent = append(r.sent, sentWith{at: h.clock.Now(), token: tok, key: req.Header.Get("Idempotency-Key"), valid: valid, path: req.URL.Path,
			ahead: r.ts.ExpiresAt(tok).Sub(h.clock.Now())})
	}))
	t.Cleanup(r.prov.Close)
	return r
}

// put puts the scope "acct" with the oauth2 grant c (tokenURL and client
// filled in).
func (r *tokenRun) put(c scheduler.Credentials) {
	r.t.Helper()
	c.Type, c.TokenURL, c.ClientID = scheduler.CredentialOAuth2, r.ts.TokenURL(), r.ts.ClientID
	if c.ClientSecret == "" {
		c.ClientSecret = r.ts.ClientSecret
	}
	_, _, err := r.svc.PutScope(context.Background(), scheduler.ScopeInput{
		Name: "acct", Provider: "generic", BaseURL: r.prov.URL, IdempotencyHeader: "Idempotency-Key", MaxConcurrent: 8,
		Credentials: c,
	}, "test")
	if err != nil {
		r.t.Fatal(err)
	}
}

func (r *tokenRun) enqueue(id, method string) {
	r.harness.enqueue(scheduler.OperationInput{ID: id, Scope: "acct", Method: method, Path: "/items/" + id})
}

func (r *tokenRun) requests() []sentWith {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]sentWith(nil), r.sent...)
}

// Design §13 over a run of sends: tokens living 10 s (request timeout
// 1 s), 4 sends every 500 ms for a minute. No request reaches the
// provider with an expired or otherwise invalid token; the endpoint is
// asked about once per lifetime (ahead of expiry, while the old token
// still lives longer than the request timeout, so no send waits), never
// twice at once; every operation succeeds at its first attempt.
func TestTokenRenewsAheadOverARunOfSends(t *testing.T) {
	for _, tc := range []struct {
		name  string
		auth  pacertest.ClientAuth
		style string
		grant string // "refresh" or "client"
	}{
		{"RefreshTokenBasicAuth", pacertest.AuthBasic, scheduler.AuthStyleHeader, "refresh"},
		{"RefreshTokenBodyAuth", pacertest.AuthBody, scheduler.AuthStyleParams, "refresh"},
		{"RefreshTokenAutoDetectsBodyAuth", pacertest.AuthBody, "", "refresh"},
		{"ClientCredentials", pacertest.AuthEither, scheduler.AuthStyleAuto, "client"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const life = 10 * time.Second
			r := newTokenRun(t, life)
			r.ts.Auth = tc.auth
			r.ts.Hold = 2 * time.Millisecond
			c := scheduler.Credentials{AuthStyle: tc.style}
			if tc.grant == "refresh" {
				c.RefreshToken = r.ts.IssueRefreshToken()
			}
			r.put(c)
			const steps = 120
			for i := range steps {
				for j := range 4 {
					r.enqueue(fmt.Sprintf("op-%d-%d", i, j), "POST")
				}
				r.runAll()
				r.clock.Add(500 * time.Millisecond)
			}
			sent := r.requests()
			if len(sent) != steps*4 {
				t.Fatalf("provider saw %d requests, want %d (one per operation)", len(sent), steps*4)
			}
			for _, s := range sent {
				if !s.valid || s.ahead <= tokenEngine.RequestTimeout {
					t.Fatalf("a request reached the provider at %s with a token valid %v, expiring in %s (request timeout %s)", s.at, s.valid, s.ahead, tokenEngine.RequestTimeout)
				}
			}
			calls := r.ts.Calls()
			elapsed := time.Duration(steps) * 500 * time.Millisecond
			lifetimes := int(elapsed / life)
			var ok int
			for i, c := range calls {
				if c.Status != 200 {
					continue
				}
				ok++
				if ok > 1 && c.PreviousValidFor <= tokenEngine.RequestTimeout {
					t.Errorf("refresh %d came when the last token had only %s left: a send waited for it", i, c.PreviousValidFor)
				}
			}
			// About once per lifetime: renewed 2 s ahead, each token serves 8 s.
			if ok < lifetimes || ok > lifetimes*2 {
				t.Errorf("%d token requests succeeded over %s of %s tokens, want about one per lifetime (%d..%d); calls %+v", ok, elapsed, life, lifetimes, lifetimes*2, calls)
			}
			t.Logf("%d sends, %d token requests (%d granted) over %s of %s tokens", len(sent), len(calls), ok, elapsed, life)
			if n := r.ts.MaxInFlight(); n != 1 {
				t.Errorf("token endpoint saw %d requests at once, want 1", n)
			}
			if tc.auth == pacertest.AuthBody && tc.style == "" && len(calls) > ok+1 {
				t.Errorf("auto-detected auth style probed more than once: %d calls for %d tokens", len(calls), ok)
			}
			for i := range steps {
				op := r.wantState(fmt.Sprintf("op-%d-0", i), scheduler.StateSucceeded)
				if op.Attempt != 1 {
					t.Fatalf("%s took %d attempts", op.ID, op.Attempt)
				}
			}
			sc, err := r.svc.GetScope(context.Background(), "acct")
			if err != nil || sc.Token.RefreshResult != scheduler.RefreshOK || sc.Token.ExpiresAt.IsZero() {
				t.Fatalf("scope token status %+v, %v", sc.Token, err)
			}
		})
	}
}

// After an idle spell the stored token has less than the request timeout
// left: it is not sent; the send goes with a new one.
func TestTokenExpiringWithinTheRequestTimeoutIsNotSent(t *testing.T) {
	r := newTokenRun(t, time.Hour)
	r.put(scheduler.Credentials{RefreshToken: r.ts.IssueRefreshToken()})
	r.enqueue("first", "GET")
	r.runAll()
	r.clock.Add(time.Hour - 500*time.Millisecond)
	r.enqueue("later", "GET")
	r.runAll()
	r.wantState("later", scheduler.StateSucceeded)
	sent := r.requests()
	if len(sent) != 2 || sent[0].token == sent[1].token || sent[1].ahead <= tokenEngine.RequestTimeout {
		t.Fatalf("sends %+v: the second must carry a new token living longer than %s", sent, tokenEngine.RequestTimeout)
	}
}

// A scope quiet for most of its token's life: the loop's housekeeping
// renews the token ahead of expiry without a send (design §13: sends never
// wait on a refresh), so the send after the quiet spell goes at once with
// a token the endpoint issued before it. A scope whose grant was refused
// is not renewed in the background.
func TestTokenKeptFreshThroughAQuietSpell(t *testing.T) {
	r := newTokenRun(t, time.Hour)
	r.put(scheduler.Credentials{RefreshToken: r.ts.IssueRefreshToken()})
	r.enqueue("first", "GET")
	r.runAll()
	r.clock.Add(time.Hour - 30*time.Second) // within a minute of expiry
	r.pass()                                // housekeeping, nothing due
	calls := r.ts.Calls()
	if len(calls) != 2 || calls[1].Status != 200 || calls[1].PreviousValidFor <= tokenEngine.RequestTimeout {
		t.Fatalf("token calls after a quiet spell %+v: want the token renewed once in the background, ahead of expiry", calls)
	}
	r.clock.Add(20 * time.Second)
	r.enqueue("later", "GET")
	r.runAll()
	r.wantState("later", scheduler.StateSucceeded)
	sent := r.requests()
	if len(sent) != 2 || sent[0].token == sent[1].token || !sent[1].valid {
		t.Fatalf("sends %+v: the second must carry the token renewed in the background", sent)
	}
	if n := len(r.ts.Calls()); n != 2 {
		t.Fatalf("%d token calls; the send after the quiet spell asked for another", n)
	}
	// Quiet for longer than keepFreshFor: the token is left to expire.
	r.clock.Add(2 * time.Hour)
	r.pass()
	if n := len(r.ts.Calls()); n != 2 {
		t.Fatalf("%d token calls: a token renewed for a scope quiet for two hours", n)
	}
}

// A provider that revokes the access token mid-run (the token endpoint
// still grants): the 401 is answered by one refresh and an immediate
// resend with the same idempotency key, in the same attempt.
func TestTokenRevokedMidRunIsRenewedAndResent(t *testing.T) {
	r := newTokenRun(t, time.Hour)
	r.put(scheduler.Credentials{RefreshToken: r.ts.IssueRefreshToken()})
	r.enqueue("first", "POST")
	r.runAll()
	r.wantState("first", scheduler.StateSucceeded)
	before := len(r.ts.Calls())
	r.ts.RevokeAccess(r.ts.Newest())
	r.clock.Add(time.Second)

	r.enqueue("second", "POST")
	r.runAll()
	op := r.wantState("second", scheduler.StateSucceeded)
	if op.Attempt != 1 || op.BudgetAttempts > 1 {
		t.Fatalf("the resend counted as an attempt: attempt %d, budget %d", op.Attempt, op.BudgetAttempts)
	}
	var mine []sentWith
	for _, s := range r.requests() {
		if s.path == "/items/second" {
			mine = append(mine, s)
		}
	}
	if len(mine) != 2 || mine[0].valid || !mine[1].valid || mine[0].key != mine[1].key || mine[0].key != op.RequestIdentity {
		t.Fatalf("sends of the revoked operation: %+v; want a refused one and a resend with the same key %q", mine, op.RequestIdentity)
	}
	if got := len(r.ts.Calls()) - before; got != 1 {
		t.Fatalf("%d token requests after the revocation, want 1", got)
	}
	// A 401 to the token just refreshed is a real revocation: held at
	// once, after one refresh and one request.
	r.clock.Add(2 * time.Hour) // the token expired
	r.ts.RevokeIssued()
	before = len(r.ts.Calls())
	r.enqueue("third", "GET")
	r.runAll()
	if op := r.wantState("third", scheduler.StateHeld); op.HoldReason != scheduler.HoldAuthRevoked || op.LastOutcome.Status != 401 {
		t.Fatalf("third: hold %s after %+v", op.HoldReason, op.LastOutcome)
	}
	var third int
	for _, s := range r.requests() {
		if s.path == "/items/third" {
			third++
		}
	}
	if got := len(r.ts.Calls()) - before; got != 1 || third != 1 {
		t.Fatalf("a 401 to a fresh token: %d token requests and %d sends, want 1 and 1", got, third)
	}
}

// A token endpoint that refuses the grant for good (invalid_grant) holds
// the scope, authRevoked, with a reason naming the error and its
// description, redacted (the description echoes the refresh token); new
// credentials resume it.
func TestTokenInvalidGrantHoldsTheScope(t *testing.T) {
	r := newTokenRun(t, 10*time.Second)
	rt := r.ts.IssueRefreshToken()
	r.put(scheduler.Credentials{RefreshToken: rt})
	r.enqueue("a", "GET")
	r.runAll()
	r.wantState("a", scheduler.StateSucceeded)
	r.ts.RevokeRefreshTokens()
	r.clock.Add(20 * time.Second) // the token expired

	r.enqueue("b", "POST")
	r.runAll()
	op := r.wantState("b", scheduler.StateHeld)
	if op.HoldReason != scheduler.HoldAuthRevoked || op.MaybeApplied {
		t.Fatalf("hold %s, maybeApplied %v", op.HoldReason, op.MaybeApplied)
	}
	// A grant refused for good is not tried again in the background.
	refused := len(r.ts.Calls())
	for range 5 {
		r.clock.Add(2 * time.Second)
		r.pass()
	}
	if n := len(r.ts.Calls()); n != refused {
		t.Fatalf("%d token requests after the grant was refused, want none", n-refused)
	}
	detail := op.LastOutcome.Detail
	if !strings.Contains(detail, "invalid_grant") || !strings.Contains(detail, "is invalid, expired or revoked") {
		t.Fatalf("the hold's detail %q does not name the endpoint's error and description", detail)
	}
	sc, err := r.svc.GetScope(context.Background(), "acct")
	if err != nil || sc.HoldReason != scheduler.HoldAuthRevoked || !strings.Contains(sc.Token.RefreshResult, "invalid_grant") {
		t.Fatalf("scope hold %q, refresh result %q: %v", sc.HoldReason, sc.Token.RefreshResult, err)
	}
	for _, text := range []string{detail, sc.Token.RefreshResult} {
		if strings.Contains(text, "rt-") {
			t.Fatalf("a refresh token reached the reason: %q", text)
		}
	}
	for _, s := range r.requests() {
		if !s.valid {
			t.Fatalf("a request reached the provider with an invalid token: %+v", s)
		}
	}
	// New credentials lift the hold; the released operation goes through.
	r.put(scheduler.Credentials{RefreshToken: r.ts.IssueRefreshToken()})
	if _, err := r.svc.Release(context.Background(), "b", nil, "new grant", "test"); err != nil {
		t.Fatal(err)
	}
	r.runAll()
	r.wantState("b", scheduler.StateSucceeded)
}

// A token endpoint answering 503 twice pauses the scope (honouring its
// Retry-After), not a hold, and the scope recovers by itself.
func TestTokenEndpointUnavailablePausesAndRecovers(t *testing.T) {
	r := newTokenRun(t, time.Hour)
	r.put(scheduler.Credentials{RefreshToken: r.ts.IssueRefreshToken()})
	unavailable := pacertest.TokenAnswer{Status: 503, Headers: map[string]string{"Retry-After": "3"}, Body: `{"error":"temporarily_unavailable"}`}
	r.ts.Script(unavailable, unavailable)
	r.enqueue("x", "POST")
	r.runAll()
	op := r.wantState("x", scheduler.StateWaitingForBudget)
	sc, _ := r.svc.GetScope(context.Background(), "acct")
	if sc.Status(r.clock.Now()) != scheduler.ScopePaused || sc.HoldReason != "" {
		t.Fatalf("scope after a 503: status %s, hold %q", sc.Status(r.clock.Now()), sc.HoldReason)
	}
	if wait := op.NextAttemptAt.Sub(r.clock.Now()); wait < 3*time.Second {
		t.Fatalf("next attempt in %s, before the endpoint's Retry-After of 3s", wait)
	}
	for range 20 {
		r.clock.Add(time.Second)
		r.runAll()
		if r.op("x").State == scheduler.StateSucceeded {
			break
		}
	}
	op = r.wantState("x", scheduler.StateSucceeded)
	if op.BudgetAttempts > 1 {
		t.Fatalf("the endpoint's 503s spent %d attempts of the budget", op.BudgetAttempts)
	}
	if calls := r.ts.Calls(); len(calls) != 3 || calls[0].Status != 503 || calls[1].Status != 503 || calls[2].Status != 200 {
		t.Fatalf("token calls %+v, want 503, 503, 200", calls)
	}
	if len(r.requests()) != 1 {
		t.Fatalf("provider saw %d requests, want 1", len(r.requests()))
	}
}

// A GitHub App: an RSA key made here; the stand-in verifies each RS256
// app JWT (iss, iat, exp within 10 minutes) and issues installation
// tokens living an hour. Over three hours of sends every request carries
// a valid token, and a token is asked for about once an hour.
func TestGitHubAppInstallationTokens(t *testing.T) {
	h := setup(t, tokenEngine)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ts := pacertest.NewTokenServer(t, h.clock, "", "", time.Hour)
	ts.AppID, ts.AppKey = 7, &key.PublicKey
	var (
		mu      sync.Mutex
		invalid int
		seen    int
	)
	ts.Serve(ts.Resource(func(_ *http.Request, _ string, valid bool) {
		mu.Lock()
		defer mu.Unlock()
		seen++
		if !valid {
			invalid++
		}
	}))
	pemKey := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
	put := func(appID int64) error {
		_, _, err := h.svc.PutScope(context.Background(), scheduler.ScopeInput{
			Name: "gh", Provider: "github", BaseURL: ts.URL,
			Credentials: scheduler.Credentials{Type: scheduler.CredentialGitHubApp, AppID: appID, InstallationID: 42, PrivateKey: pemKey},
		}, "test")
		return err
	}
	if err := put(7); err != nil {
		t.Fatal(err)
	}
	for i := range 36 { // every 5 minutes for 3 hours
		h.enqueue(scheduler.OperationInput{ID: fmt.Sprintf("gh-%d", i), Scope: "gh", Method: "GET", Path: "/repos/acme/app"})
		h.runAll()
		h.wantState(fmt.Sprintf("gh-%d", i), scheduler.StateSucceeded)
		h.clock.Add(5 * time.Minute)
	}
	mu.Lock()
	defer mu.Unlock()
	if seen != 36 || invalid != 0 {
		t.Fatalf("provider saw %d requests, %d with an invalid token", seen, invalid)
	}
	if n := ts.Issued(); n < 3 || n > 5 {
		t.Fatalf("%d installation tokens over 3 hours of 1-hour tokens", n)
	}
	// A JWT the stand-in refuses (another app's ID): held, naming why.
	mu.Unlock()
	if err := put(8); err != nil {
		t.Fatal(err)
	}
	h.enqueue(scheduler.OperationInput{ID: "gh-other", Scope: "gh", Method: "GET", Path: "/repos/acme/app"})
	h.runAll()
	op := h.wantState("gh-other", scheduler.StateHeld)
	mu.Lock()
	if !strings.Contains(op.LastOutcome.Detail, "HTTP 401") || !strings.Contains(op.LastOutcome.Detail, "issuer") {
		t.Fatalf("detail %q does not say the endpoint refused the JWT's issuer", op.LastOutcome.Detail)
	}
}

// A refresh ahead of expiry that fails (503) leaves the sends going on
// with the current token, and is not tried again by every send: once per
// backoff.
func TestTokenRefreshAheadFailingIsNotHammered(t *testing.T) {
	r := newTokenRun(t, time.Hour)
	r.put(scheduler.Credentials{RefreshToken: r.ts.IssueRefreshToken()})
	r.enqueue("first", "GET")
	r.runAll()
	unavailable := pacertest.TokenAnswer{Status: 503, Body: `{"error":"temporarily_unavailable"}`}
	r.ts.Script(unavailable, unavailable, unavailable, unavailable, unavailable)
	r.clock.Add(time.Hour - 30*time.Second) // due for renewal, still usable
	for i := range 5 {
		for j := range 4 {
			r.enqueue(fmt.Sprintf("op-%d-%d", i, j), "GET")
		}
		r.runAll()
		r.clock.Add(100 * time.Millisecond)
	}
	for i := range 5 {
		r.wantState(fmt.Sprintf("op-%d-3", i), scheduler.StateSucceeded)
	}
	if calls := r.ts.Calls(); len(calls) != 2 { // the first token, one try ahead
		t.Fatalf("%d token requests: every send retried the failing refresh ahead", len(calls))
	}
	r.clock.Add(2 * time.Second) // past the backoff: tried again
	r.enqueue("later", "GET")
	r.runAll()
	if calls := r.ts.Calls(); len(calls) != 3 {
		t.Fatalf("%d token requests after the backoff, want 3", len(calls))
	}
}

// A token endpoint that echoes the grant's secrets in its error (in
// Retry-After and in the description) gets none of them stored.
func TestTokenEndpointEchoedSecretsAreRedacted(t *testing.T) {
	r := newTokenRun(t, time.Hour)
	rt := r.ts.IssueRefreshToken()
	r.put(scheduler.Credentials{RefreshToken: rt, AuthStyle: scheduler.AuthStyleHeader}) // auto would probe again on the 429
	r.ts.Script(pacertest.TokenAnswer{Status: 429, Headers: map[string]string{"Retry-After": r.ts.ClientSecret},
		Body: `{"error":"slow_down","error_description":"client ` + r.ts.ClientSecret + ` with ` + rt + `"}`})
	r.enqueue("x", "GET")
	r.runAll()
	op := r.wantState("x", scheduler.StateWaitingForBudget)
	atts, err := r.svc.ListAttempts(context.Background(), "x")
	if err != nil {
		t.Fatal(err)
	}
	sc, _ := r.svc.GetScope(context.Background(), "acct")
	texts := []string{fmt.Sprintf("%+v", *op.LastOutcome), fmt.Sprintf("%+v", op.LastOutcome.Hint), fmt.Sprintf("%+v", atts), sc.Token.RefreshResult, sc.PauseReason}
	for _, text := range texts {
		for _, s := range []string{r.ts.ClientSecret, rt} {
			if strings.Contains(text, s) {
				t.Fatalf("a secret the endpoint echoed was stored: %s", text)
			}
		}
	}
	if !strings.Contains(sc.Token.RefreshResult, "slow_down") {
		t.Fatalf("refresh result %q does not name the endpoint's error", sc.Token.RefreshResult)
	}
}
