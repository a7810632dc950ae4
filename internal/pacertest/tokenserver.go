package pacertest

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"
	"github.com/golang-jwt/jwt/v5"
)

// ClientAuth is how a TokenServer wants its client to authenticate
// (RFC 6749 §2.3.1).
type ClientAuth int

// The client authentications a TokenServer accepts.
const (
	// AuthEither accepts HTTP Basic or the form body.
	AuthEither ClientAuth = iota
	// AuthBasic accepts only HTTP Basic.
	AuthBasic
	// AuthBody accepts only client_id and client_secret in the body.
	AuthBody
)

// TokenAnswer is a scripted answer of a TokenServer, served instead of a
// token.
type TokenAnswer struct {
	Status  int
	Headers map[string]string
	Body    string
}

// TokenServer is an httptest stand-in for an OAuth 2.0 token endpoint
// (RFC 6749 §4.4, §6: the client credentials and refresh token grants;
// form-encoded POST, JSON answers, §5.2 errors) on a mock clock, with
// rotating refresh tokens that invalidate the old one at once. It is also
// the resource server: Valid says whether an access token it issued is
// current, and a GitHub App installation token endpoint
// (/app/installations/{id}/access_tokens, RS256 app JWTs) when AppKey is
// set. Safe for concurrent use.
type TokenServer struct {
	*httptest.Server
	clock clock.Clock

	// ClientID and ClientSecret are the client's; Auth how it must send
	// them. ExpiresIn is the lifetime of issued access tokens.
	ClientID, ClientSecret string
	Auth                   ClientAuth
	ExpiresIn              time.Duration
	// AppID and AppKey are the GitHub App's: its JWTs must be signed by
	// AppKey with iss AppID.
	AppID  int64
	AppKey *rsa.PublicKey

	mu      sync.Mutex
	refresh map[string]bool      // refresh tokens that are current
	access  map[string]time.Time // access token → expiry
	revoked map[string]bool
	// everRefresh are every refresh token issued, spent ones included.
	everRefresh []string
	// revokeNew revokes each access token as it is issued.
	revokeNew bool
	script    []TokenAnswer
	calls     []TokenCall
	inFlight  int
	// MaxInFlight is the most token requests it answered at once.
	maxInFlight int
	// other serves the paths that are not the token endpoints'.
	other http.Handler
	// Hold delays each answer by this much real time, so that requests
	// at once overlap.
	Hold time.Duration
}

// TokenCall is one request the token endpoint answered.
type TokenCall struct {
	At        time.Time
	Grant     string
	BasicAuth bool
	Status    int
	// PreviousValidFor is how long the newest access token issued before
	// this call still had to live when it came (negative once expired;
	// zero for the first).
	PreviousValidFor time.Duration
}

// NewTokenServer starts a token endpoint on clk for the client id and
// secret, issuing tokens that live expiresIn.
func NewTokenServer(t testing.TB, clk clock.Clock, clientID, clientSecret string, expiresIn time.Duration) *TokenServer {
	ts := &TokenServer{clock: clk, ClientID: clientID, ClientSecret: clientSecret, ExpiresIn: expiresIn,
		refresh: map[string]bool{}, access: map[string]time.Time{}, revoked: map[string]bool{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /token", ts.token)
	mux.HandleFunc("POST /app/installations/{id}/access_tokens", ts.installation)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		ts.mu.Lock()
		h := ts.other
		ts.mu.Unlock()
		if h == nil {
			http.NotFound(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
	ts.Server = httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return ts
}

// Serve makes h answer every path but the token endpoints' (a provider
// on the same origin, as GitHub's API is its own app token endpoint).
func (ts *TokenServer) Serve(h http.Handler) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.other = h
}

// TokenURL is the endpoint's URL.
func (ts *TokenServer) TokenURL() string { return ts.URL + "/token" }

// IssueRefreshToken returns a new current refresh token.
func (ts *TokenServer) IssueRefreshToken() string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	rt := "rt-" + random()
	ts.refresh[rt] = true
	ts.everRefresh = append(ts.everRefresh, rt)
	return rt
}

// RevokeRefreshTokens makes every refresh token invalid (a user revoked
// the grant).
func (ts *TokenServer) RevokeRefreshTokens() {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	clear(ts.refresh)
}

// RevokeIssued makes every access token issued from now on revoked at
// once (a provider that refuses the app whatever its token).
func (ts *TokenServer) RevokeIssued() {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.revokeNew = true
}

// RevokeAccess revokes the access token before its expiry.
func (ts *TokenServer) RevokeAccess(token string) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.revoked[token] = true
}

// Script queues answers served, in turn, instead of tokens.
func (ts *TokenServer) Script(as ...TokenAnswer) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.script = append(ts.script, as...)
}

// Calls returns the requests answered so far.
func (ts *TokenServer) Calls() []TokenCall {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return append([]TokenCall(nil), ts.calls...)
}

// MaxInFlight is the most token requests answered at once.
func (ts *TokenServer) MaxInFlight() int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.maxInFlight
}

// Valid says whether token is an access token issued here, not revoked
// and not expired by the mock clock.
func (ts *TokenServer) Valid(token string) bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	exp, ok := ts.access[token]
	return ok && !ts.revoked[token] && ts.clock.Now().Before(exp)
}

// ExpiresAt is when the access token issued here expires; zero for
// another.
func (ts *TokenServer) ExpiresAt(token string) time.Time {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.access[token]
}

// Newest returns the access token issued last.
func (ts *TokenServer) Newest() string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	var (
		best string
		at   time.Time
	)
	for tok, exp := range ts.access {
		if exp.After(at) || best == "" {
			best, at = tok, exp
		}
	}
	return best
}

// Secrets returns every token it issued: refresh tokens (spent ones
// too) and access tokens.
func (ts *TokenServer) Secrets() []string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	out := append([]string(nil), ts.everRefresh...)
	for tok := range ts.access {
		out = append(out, tok)
	}
	return out
}

// Issued counts the access tokens issued.
func (ts *TokenServer) Issued() int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return len(ts.access)
}

// Resource is a handler that answers 200 to a request bearing a valid
// access token and 401 otherwise, calling seen for each with the token
// and whether it was valid.
func (ts *TokenServer) Resource(seen func(r *http.Request, token string, valid bool)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		ok := ts.Valid(tok)
		if seen != nil {
			seen(r, tok, ok)
		}
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			http.Error(w, `{"error":"invalid_token"}`, http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"ok":true}`)
	})
}

func (ts *TokenServer) begin() func() {
	ts.mu.Lock()
	ts.inFlight++
	ts.maxInFlight = max(ts.maxInFlight, ts.inFlight)
	hold := ts.Hold
	ts.mu.Unlock()
	time.Sleep(hold)
	return func() {
		ts.mu.Lock()
		ts.inFlight--
		ts.mu.Unlock()
	}
}

// record notes a call answered with status; called with ts.mu held.
func (ts *TokenServer) record(grant string, basic bool, status int) {
	var prev time.Duration
	if len(ts.access) > 0 {
		var newest time.Time
		for _, exp := range ts.access {
			newest = maxTime(newest, exp)
		}
		prev = newest.Sub(ts.clock.Now())
	}
	ts.calls = append(ts.calls, TokenCall{At: ts.clock.Now(), Grant: grant, BasicAuth: basic, Status: status, PreviousValidFor: prev})
}

func oauthError(w http.ResponseWriter, status int, code, desc string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Basic realm="token"`)
	}
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": desc})
}

func (ts *TokenServer) token(w http.ResponseWriter, r *http.Request) {
	defer ts.begin()()
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		oauthError(w, 400, "invalid_request", "the request must be form-encoded")
		return
	}
	if err := r.ParseForm(); err != nil {
		oauthError(w, 400, "invalid_request", "unreadable form")
		return
	}
	id, secret, basic := r.BasicAuth()
	if !basic {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	grant := r.PostForm.Get("grant_type")
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if len(ts.script) > 0 {
		a := ts.script[0]
		ts.script = ts.script[1:]
		ts.record(grant, basic, a.Status)
		for k, v := range a.Headers {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(a.Status)
		fmt.Fprint(w, a.Body)
		return
	}
	authOK := id == ts.ClientID && secret == ts.ClientSecret &&
		!(ts.Auth == AuthBasic && !basic) && !(ts.Auth == AuthBody && basic)
	if !authOK {
		ts.record(grant, basic, 401)
		oauthError(w, 401, "invalid_client", "client authentication failed")
		return
	}
	answer := map[string]any{"token_type": "Bearer", "expires_in": int(ts.ExpiresIn / time.Second)}
	switch grant {
	case "refresh_token":
		rt := r.PostForm.Get("refresh_token")
		if !ts.refresh[rt] {
			ts.record(grant, basic, 400)
			oauthError(w, 400, "invalid_grant", "refresh token "+rt+" is invalid, expired or revoked")
			return
		}
		delete(ts.refresh, rt) // rotation: the old one is spent at once
		next := "rt-" + random()
		ts.refresh[next] = true
		ts.everRefresh = append(ts.everRefresh, next)
		answer["refresh_token"] = next
	case "client_credentials":
	default:
		ts.record(grant, basic, 400)
		oauthError(w, 400, "unsupported_grant_type", grant)
		return
	}
	ts.record(grant, basic, 200)
	at := "at-" + random()
	ts.access[at] = ts.clock.Now().Add(ts.ExpiresIn)
	ts.revoked[at] = ts.revokeNew
	answer["access_token"] = at
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(answer)
}

// installation issues a GitHub App installation token for a request
// bearing a valid app JWT: RS256 by AppKey, iss AppID, iat not in the
// future and exp at most 10 minutes after iat, by the mock clock.
func (ts *TokenServer) installation(w http.ResponseWriter, r *http.Request) {
	defer ts.begin()()
	raw := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	now := ts.clock.Now()
	claims := &jwt.RegisteredClaims{}
	_, err := jwt.ParseWithClaims(raw, claims, func(*jwt.Token) (any, error) { return ts.AppKey, nil },
		jwt.WithValidMethods([]string{"RS256"}), jwt.WithTimeFunc(func() time.Time { return now }),
		jwt.WithIssuedAt(), jwt.WithExpirationRequired(), jwt.WithIssuer(strconv.FormatInt(ts.AppID, 10)))
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if err == nil && (claims.IssuedAt == nil || claims.ExpiresAt.Sub(claims.IssuedAt.Time) > 10*time.Minute+time.Minute) {
		err = fmt.Errorf("exp more than 10 minutes after iat")
	}
	if err == nil && claims.ExpiresAt.Sub(now) > 10*time.Minute {
		err = fmt.Errorf("exp more than 10 minutes ahead")
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Date", now.UTC().Format(http.TimeFormat))
	if err != nil {
		ts.record("app-jwt", false, 401)
		w.WriteHeader(http.StatusUnauthorized)
		json.NewEncoder(w).Encode(map[string]string{"message": "A JSON web token could not be decoded: " + err.Error()})
		return
	}
	if r.PathValue("id") != "42" {
		ts.record("app-jwt", false, 404)
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"message":"Not Found"}`)
		return
	}
	ts.record("app-jwt", false, 201)
	tok := "ghs_" + random()
	exp := now.Add(ts.ExpiresIn)
	ts.access[tok] = exp
	w.WriteHeader(http.StatusCreated)
	json.NewEncoder(w).Encode(map[string]any{"token": tok, "expires_at": exp.UTC().Format(time.RFC3339)})
}

func random() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
