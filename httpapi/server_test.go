package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/benbjohnson/clock"

	"pacer/db"
	"pacer/httpapi"
	"pacer/internal/pacertest"
	"pacer/scheduler"
)

// testNow is where every test's mock clock starts.
var testNow = time.Date(2026, 9, 11, 2, 0, 0, 0, time.UTC)

// testToken is the API token of servers that require one.
const testToken = "api-token-7f3c9e1d"

// Secrets used by the scope fixtures; no response body or log line may
// ever contain them.
const (
	secretBearer   = "ghp_bearer-secret-5d2a"
	secretHeader   = "header-secret-91be"
	secretPassword = "basic-password-secret-44f0"
)

// setupOpts shape one test server; zero values are the defaults.
type setupOpts struct {
	// NoToken runs the server without authentication.
	NoToken      bool
	MaxBodyBytes int64
	Ready        func(ctx context.Context) error
}

// testBundle is a running server over a real store in a TempDir, with what
// a test needs to drive and inspect it.
type testBundle struct {
	t       *testing.T
	url     string
	token   string
	clock   *clock.Mock
	store   *db.DB
	svc     *scheduler.Service
	logs    *syncBuffer
	secrets []string
}

// setup starts a server for one test; everything is closed at cleanup,
// after checking that no secret reached the log.
func setup(t *testing.T, opts setupOpts) *testBundle {
	t.Helper()
	store, mock, svc := newService(t)
	b := &testBundle{
		t: t, clock: mock, store: store, svc: svc, logs: &syncBuffer{},
		secrets: []string{secretBearer, secretHeader, secretPassword, testToken},
	}
	cfg := httpapi.Config{
		Service:      svc,
		Logger:       slog.New(slog.NewTextHandler(b.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		MaxBodyBytes: opts.MaxBodyBytes,
		Ready:        opts.Ready,
	}
	if !opts.NoToken {
		cfg.Token, b.token = testToken, testToken
	}
	b.url = startServer(t, store, cfg, b.logs, b.secrets)
	return b
}

// newService is a scheduler service over a new store, on a mock clock
// set to testNow.
func newService(t *testing.T) (*db.DB, *clock.Mock, *scheduler.Service) {
	t.Helper()
	store := pacertest.OpenStore(t)
	mock := clock.NewMock()
	mock.Set(testNow)
	sched, err := scheduler.New(store, mock, scheduler.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return store, mock, sched.Service
}

// startServer serves cfg over HTTP for one test and returns its URL. At
// cleanup it closes the server and the store, and fails t when a secret
// reached logs.
func startServer(t *testing.T, store *db.DB, cfg httpapi.Config, logs *syncBuffer, secrets []string) string {
	t.Helper()
	srv, err := httpapi.New(cfg)
	if err != nil {
		t.Fatalf("new server: %v", err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		ts.Close()
		if err := store.Close(); err != nil {
			t.Errorf("close db: %v", err)
		}
		logs := logs.String()
		for _, s := range secrets {
			if strings.Contains(logs, s) {
				t.Errorf("log contains secret %q:\n%s", s, logs)
			}
		}
	})
	return ts.URL
}

// roundTrip runs req with client and reads the answer, failing t when a
// secret is in its body or its headers.
func roundTrip(t *testing.T, client *http.Client, req *http.Request, secrets []string) (*http.Response, []byte) {
	t.Helper()
	res, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	for _, s := range secrets {
		if bytes.Contains(body, []byte(s)) {
			t.Errorf("%s %s: answer contains secret %q: %s", req.Method, req.URL.Path, s, body)
		}
		for _, vs := range res.Header {
			for _, v := range vs {
				if strings.Contains(v, s) {
					t.Errorf("%s %s: header contains secret %q", req.Method, req.URL.Path, s)
				}
			}
		}
	}
	return res, body
}

// response is a finished HTTP exchange.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

// request builds a request to path with the bundle's token and, for a
// non-empty body, Content-Type application/json.
func (b *testBundle) request(method, path, body string) *http.Request {
	b.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, b.url+path, rd)
	if err != nil {
		b.t.Fatalf("new request: %v", err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if b.token != "" {
		req.Header.Set("Authorization", "Bearer "+b.token)
	}
	return req
}

// send runs req and checks that the response carries no secret.
func (b *testBundle) send(req *http.Request) response {
	b.t.Helper()
	res, body := roundTrip(b.t, http.DefaultClient, req, b.secrets)
	return response{Status: res.StatusCode, Header: res.Header, Body: body}
}

// do sends a request built by request.
func (b *testBundle) do(method, path, body string) response {
	b.t.Helper()
	return b.send(b.request(method, path, body))
}

// decodeAs decodes a JSON response of status want into T.
func decodeAs[T any](t *testing.T, res response, want int) T {
	t.Helper()
	if got := res.Status; got != want {
		t.Fatalf("status: got %d, want %d; body: %s", got, want, res.Body)
	}
	if got, want := res.Header.Get("Content-Type"), "application/json"; got != want {
		t.Fatalf("content type: got %q, want %q", got, want)
	}
	var v T
	if err := json.Unmarshal(res.Body, &v); err != nil {
		t.Fatalf("decode %s: %v", res.Body, err)
	}
	return v
}

// problemOf decodes a problem response of status want.
func problemOf(t *testing.T, res response, want int) httpapi.Problem {
	t.Helper()
	if got := res.Status; got != want {
		t.Fatalf("status: got %d, want %d; body: %s", got, want, res.Body)
	}
	if got, want := res.Header.Get("Content-Type"), "application/problem+json"; got != want {
		t.Fatalf("content type: got %q, want %q", got, want)
	}
	var p httpapi.Problem
	dec := json.NewDecoder(bytes.NewReader(res.Body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("decode problem %s: %v", res.Body, err)
	}
	if p.Status != want || p.Title == "" || p.Type == "" || p.Detail == "" {
		t.Fatalf("problem lacks type, title, status or detail: %s", res.Body)
	}
	if !strings.HasPrefix(p.Instance, "/") {
		t.Fatalf("problem lacks its instance (the request path): %s", res.Body)
	}
	return p
}

// hasField reports whether p lists a field error on field whose message
// contains msg.
func hasField(p httpapi.Problem, field, msg string) bool {
	for _, f := range p.Errors {
		if f.Field == field && strings.Contains(f.Message, msg) {
			return true
		}
	}
	return false
}

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

func TestAuth(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})

	t.Run("ErrTokenMissing", func(t *testing.T) {
		req := b.request(http.MethodGet, "/v1/scopes", "")
		req.Header.Del("Authorization")
		res := b.send(req)
		problemOf(t, res, http.StatusUnauthorized)
		if got := res.Header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer") {
			t.Fatalf("WWW-Authenticate: got %q, want Bearer…", got)
		}
	})
	t.Run("ErrTokenWrong", func(t *testing.T) {
		for _, h := range []string{"Bearer wrong", "Bearer " + testToken + "x", "Basic " + testToken, testToken} {
			req := b.request(http.MethodGet, "/v1/scopes", "")
			req.Header.Set("Authorization", h)
			res := b.send(req)
			problemOf(t, res, http.StatusUnauthorized)
			if got := res.Header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer") {
				t.Fatalf("WWW-Authenticate: got %q, want Bearer…", got)
			}
		}
	})
	t.Run("ErrTokenMissingOnUnknownRoute", func(t *testing.T) {
		req := b.request(http.MethodGet, "/v1/nothing-here", "")
		req.Header.Del("Authorization")
		problemOf(t, b.send(req), http.StatusUnauthorized)
	})
	t.Run("ErrTokenMissingOnWrite", func(t *testing.T) {
		req := b.request(http.MethodPut, "/v1/scopes/account-a", scopeBody)
		req.Header.Del("Authorization")
		problemOf(t, b.send(req), http.StatusUnauthorized)
		problemOf(t, b.do(http.MethodGet, "/v1/scopes/account-a", ""), http.StatusNotFound)
	})
	t.Run("OK", func(t *testing.T) {
		decodeAs[httpapi.ScopeList](t, b.do(http.MethodGet, "/v1/scopes", ""), http.StatusOK)
	})
	t.Run("HealthWithoutToken", func(t *testing.T) {
		for _, path := range []string{"/healthz", "/readyz"} {
			req := b.request(http.MethodGet, path, "")
			req.Header.Del("Authorization")
			decodeAs[map[string]string](t, b.send(req), http.StatusOK)
		}
	})
}

func TestAuth_NoTokenConfigured(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{NoToken: true})
	decodeAs[httpapi.ScopeList](t, b.do(http.MethodGet, "/v1/scopes", ""), http.StatusOK)
	decodeAs[httpapi.Scope](t, b.do(http.MethodPut, "/v1/scopes/account-a", scopeBody), http.StatusCreated)

	// Manual actions are recorded as "local".
	enqueue(t, b, "op-1", "account-a")
	decodeAs[httpapi.Operation](t, b.do(http.MethodPost, "/v1/operations/op-1/cancel", `{"reason":"test"}`), http.StatusOK)
	audit := decodeAs[httpapi.AuditList](t, b.do(http.MethodGet, "/v1/operations/op-1/audit", ""), http.StatusOK)
	if got, want := len(audit.Audit), 1; got != want {
		t.Fatalf("audit entries: got %d, want %d", got, want)
	}
	if got, want := audit.Audit[0].Actor, httpapi.ActorLocal; got != want {
		t.Fatalf("actor: got %q, want %q", got, want)
	}
}

// Behind a local reverse proxy every connection is loopback: a token-less
// server refuses a request that says it came through one.
func TestAuth_NoTokenBehindProxy(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{NoToken: true})
	for _, h := range []string{"Forwarded", "X-Forwarded-For", "X-Real-IP"} {
		req := b.request(http.MethodGet, "/v1/scopes", "")
		req.Header.Set(h, "for=203.0.113.7")
		res := b.send(req)
		p := problemOf(t, res, http.StatusForbidden)
		if !strings.Contains(p.Detail, "--api-token") || !strings.Contains(p.Detail, "proxy") {
			t.Fatalf("%s: detail %q does not say to set --api-token", h, p.Detail)
		}
	}
	decodeAs[httpapi.ScopeList](t, b.do(http.MethodGet, "/v1/scopes", ""), http.StatusOK)
}

func TestReadyz(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{Ready: func(context.Context) error { return errors.New("database locked by pid 4242") }})
	res := b.do(http.MethodGet, "/readyz", "")
	problemOf(t, res, http.StatusServiceUnavailable)
	if bytes.Contains(res.Body, []byte("4242")) {
		t.Fatalf("internal error echoed: %s", res.Body)
	}
	decodeAs[map[string]string](t, b.do(http.MethodGet, "/healthz", ""), http.StatusOK)
}

func TestRouting(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})

	t.Run("ErrUnknownRoute", func(t *testing.T) {
		problemOf(t, b.do(http.MethodGet, "/v1/nothing-here", ""), http.StatusNotFound)
		problemOf(t, b.do(http.MethodGet, "/elsewhere", ""), http.StatusNotFound)
	})
	t.Run("ErrMethodNotAllowed", func(t *testing.T) {
		res := b.do(http.MethodDelete, "/v1/scopes/account-a", "")
		problemOf(t, res, http.StatusMethodNotAllowed)
		if got, want := res.Header.Get("Allow"), "GET, PUT"; got != want {
			t.Fatalf("Allow: got %q, want %q", got, want)
		}
		res = b.do(http.MethodGet, "/v1/operations/op-1/cancel", "")
		problemOf(t, res, http.StatusMethodNotAllowed)
		if got, want := res.Header.Get("Allow"), "POST"; got != want {
			t.Fatalf("Allow: got %q, want %q", got, want)
		}
	})
}

func TestInternalError(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	if err := b.store.Close(); err != nil {
		t.Fatalf("close db: %v", err)
	}
	p := problemOf(t, b.do(http.MethodGet, "/v1/scopes", ""), http.StatusInternalServerError)
	if strings.Contains(p.Detail, "database") || strings.Contains(p.Detail, "sql") {
		t.Fatalf("detail echoes the internal error: %q", p.Detail)
	}
	if logs := b.logs.String(); !strings.Contains(logs, "internal error") || !strings.Contains(logs, "closed") {
		t.Fatalf("log lacks the internal error:\n%s", logs)
	}
}
