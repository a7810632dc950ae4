package httpapi_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"pacer/httpapi"
	"pacer/scheduler"
)

// scopeBody is a valid scope with bearer credentials.
const scopeBody = `{
	"provider": "github",
	"baseURL": "https://api.github.com",
	"credentials": {"type": "bearer", "token": "` + secretBearer + `"},
	"maxConcurrent": 4,
	"rateLimit": {"requests": 5000, "per": "1h"}
}`

// putScope creates scope name with scopeBody.
func putScope(t *testing.T, b *testBundle, name string) httpapi.Scope {
	t.Helper()
	return decodeAs[httpapi.Scope](t, b.do(http.MethodPut, "/v1/scopes/"+name, scopeBody), http.StatusCreated)
}

// setupWithScope starts a server for one test (see setup) that holds the
// scope "account-a", made with scopeBody.
func setupWithScope(t *testing.T) *testBundle {
	t.Helper()
	b := setup(t, setupOpts{})
	putScope(t, b, "account-a")
	return b
}

func TestPutScope(t *testing.T) {
	t.Parallel()

	t.Run("OK", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		res := b.do(http.MethodPut, "/v1/scopes/account-a", scopeBody)
		sc := decodeAs[httpapi.Scope](t, res, http.StatusCreated)
		if got, want := res.Header.Get("Location"), "/v1/scopes/account-a"; got != want {
			t.Fatalf("Location: got %q, want %q", got, want)
		}
		if got, want := sc.ProviderScope, "account-a"; got != want {
			t.Fatalf("providerScope: got %q, want %q", got, want)
		}
		if got, want := sc.Credentials, (httpapi.CredentialsStatus{Type: "bearer", Configured: true}); got != want {
			t.Fatalf("credentials: got %+v, want %+v", got, want)
		}
		if got, want := sc.Status, "open"; got != want {
			t.Fatalf("status: got %q, want %q", got, want)
		}
		if sc.RateLimit == nil || sc.RateLimit.Requests != 5000 || sc.RateLimit.Per != "1h" {
			t.Fatalf("rateLimit: got %+v, want 5000 per 1h", sc.RateLimit)
		}
		if got, want := sc.MaxConcurrent, 4; got != want {
			t.Fatalf("maxConcurrent: got %d, want %d", got, want)
		}
		if sc.Remaining != nil || sc.Limit != nil || sc.ResetAt != nil || sc.PausedUntil != nil || sc.HoldReason != nil {
			t.Fatalf("unknown figures should be null: %s", res.Body)
		}
		if sc.CreatedAt == nil || !sc.CreatedAt.Equal(testNow) {
			t.Fatalf("createdAt: got %v, want %v", sc.CreatedAt, testNow)
		}
		for _, key := range []string{`"resetAt":null`, `"pausedUntil":null`, `"remaining":null`, `"inFlight":0`} {
			if !bytes.Contains(res.Body, []byte(key)) {
				t.Fatalf("body lacks %s: %s", key, res.Body)
			}
		}

		got := decodeAs[httpapi.Scope](t, b.do(http.MethodGet, "/v1/scopes/account-a", ""), http.StatusOK)
		if got.ProviderScope != sc.ProviderScope || got.Credentials != sc.Credentials || got.BaseURL != sc.BaseURL {
			t.Fatalf("GET: got %+v, want %+v", got, sc)
		}
		list := decodeAs[httpapi.ScopeList](t, b.do(http.MethodGet, "/v1/scopes", ""), http.StatusOK)
		if got, want := len(list.Scopes), 1; got != want {
			t.Fatalf("scopes: got %d, want %d", got, want)
		}
	})

	t.Run("OKReplaced", func(t *testing.T) {
		t.Parallel()
		b := setupWithScope(t)
		body := `{"provider":"generic","baseURL":"https://api.example.com/","idempotencyHeader":"Idempotency-Key",
			"credentials":{"type":"header","name":"X-Secret","value":"` + secretHeader + `"}}`
		sc := decodeAs[httpapi.Scope](t, b.do(http.MethodPut, "/v1/scopes/account-a", body), http.StatusOK)
		if got, want := sc.Credentials, (httpapi.CredentialsStatus{Type: "header", Configured: true}); got != want {
			t.Fatalf("credentials: got %+v, want %+v", got, want)
		}
		if sc.IdempotencyHeader == nil || *sc.IdempotencyHeader != "Idempotency-Key" {
			t.Fatalf("idempotencyHeader: got %v, want Idempotency-Key", sc.IdempotencyHeader)
		}
		body = `{"provider":"generic","baseURL":"https://api.example.com",
			"credentials":{"type":"basic","username":"u","password":"` + secretPassword + `"}}`
		decodeAs[httpapi.Scope](t, b.do(http.MethodPut, "/v1/scopes/account-a", body), http.StatusOK)
		body = `{"provider":"generic","baseURL":"https://api.example.com"}`
		sc = decodeAs[httpapi.Scope](t, b.do(http.MethodPut, "/v1/scopes/account-a", body), http.StatusOK)
		if got, want := sc.Credentials, (httpapi.CredentialsStatus{Configured: false}); got != want {
			t.Fatalf("credentials: got %+v, want %+v", got, want)
		}
	})

	t.Run("ErrInvalid", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		for _, tt := range []struct {
			name, body, field string
		}{
			{"provider", `{"provider":"nope","baseURL":"https://x.example"}`, "provider"},
			{"baseURL", `{"provider":"github","baseURL":"ftp://x.example"}`, "baseURL"},
			{"per", `{"provider":"github","baseURL":"https://x.example","rateLimit":{"requests":5,"per":"hourly"}}`, "rateLimit.per"},
			{"token", `{"provider":"github","baseURL":"https://x.example","credentials":{"type":"bearer"}}`, "credentials.token"},
			{"type", `{"provider":"github","baseURL":"https://x.example","credentials":{"type":"magic","token":"` + secretBearer + `"}}`, "credentials.type"},
			// The transport writes these itself: the credential would never
			// be sent.
			{"headerHost", `{"provider":"generic","baseURL":"https://x.example","credentials":{"type":"header","name":"Host","value":"` + secretHeader + `"}}`, "credentials.name"},
			{"headerContentLength", `{"provider":"generic","baseURL":"https://x.example","credentials":{"type":"header","name":"content-length","value":"` + secretHeader + `"}}`, "credentials.name"},
			{"headerTransferEncoding", `{"provider":"generic","baseURL":"https://x.example","credentials":{"type":"header","name":"Transfer-Encoding","value":"` + secretHeader + `"}}`, "credentials.name"},
			{"headerConnection", `{"provider":"generic","baseURL":"https://x.example","credentials":{"type":"header","name":"Connection","value":"` + secretHeader + `"}}`, "credentials.name"},
			{"basePort", `{"provider":"github","baseURL":"https://x.example:99999"}`, "baseURL"},
			{"basePortZero", `{"provider":"github","baseURL":"https://x.example:0/v1"}`, "baseURL"},
			{"baseEmptyPort", `{"provider":"github","baseURL":"https://x.example:"}`, "baseURL"},
			{"baseLong", `{"provider":"github","baseURL":"https://x.example/` + strings.Repeat("a", 100_000) + `"}`, "baseURL"},
			{"baseJustLong", `{"provider":"github","baseURL":"https://x.example/` + strings.Repeat("a", scheduler.MaxBaseURLLength-len("https://x.example/")+1) + `"}`, "baseURL"},
		} {
			t.Run(tt.name, func(t *testing.T) {
				p := problemOf(t, b.do(http.MethodPut, "/v1/scopes/account-a", tt.body), http.StatusUnprocessableEntity)
				if got, want := p.Type, httpapi.ProblemTypeValidation; got != want {
					t.Fatalf("type: got %q, want %q", got, want)
				}
				if !hasField(p, tt.field, "") {
					t.Fatalf("errors: got %+v, want a field %q", p.Errors, tt.field)
				}
				problemOf(t, b.do(http.MethodGet, "/v1/scopes/account-a", ""), http.StatusNotFound)
			})
		}
		t.Run("name", func(t *testing.T) {
			p := problemOf(t, b.do(http.MethodPut, "/v1/scopes/-bad", scopeBody), http.StatusUnprocessableEntity)
			if !hasField(p, "providerScope", "") {
				t.Fatalf("errors: got %+v, want providerScope", p.Errors)
			}
		})
		list := decodeAs[httpapi.ScopeList](t, b.do(http.MethodGet, "/v1/scopes", ""), http.StatusOK)
		if got, want := len(list.Scopes), 0; got != want {
			t.Fatalf("scopes stored: got %d, want %d", got, want)
		}
	})

	t.Run("OKAtTheBounds", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		base := "https://x.example:65535/" + strings.Repeat("a", scheduler.MaxBaseURLLength-len("https://x.example:65535/"))
		decodeAs[httpapi.Scope](t, b.do(http.MethodPut, "/v1/scopes/account-a",
			`{"provider":"generic","baseURL":"`+base+`","credentials":{"type":"header","name":"X-Api-Key","value":"`+secretHeader+`"}}`), http.StatusCreated)
	})

	t.Run("ErrMalformed", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOpts{})
		problemOf(t, b.do(http.MethodPut, "/v1/scopes/account-a", `{"provider":"github","baseURL":"https://x.example","providerScope":"x"}`), http.StatusBadRequest)
		problemOf(t, b.do(http.MethodPut, "/v1/scopes/account-a", `{"provider":"github"`), http.StatusBadRequest)
		problemOf(t, b.do(http.MethodPut, "/v1/scopes/account-a", `{"provider":"github","baseURL":"https://x.example","maxConcurrent":"4"}`), http.StatusBadRequest)
		problemOf(t, b.do(http.MethodGet, "/v1/scopes/account-a", ""), http.StatusNotFound)
	})
}

func TestGetScope_ErrNotFound(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	p := problemOf(t, b.do(http.MethodGet, "/v1/scopes/account-z", ""), http.StatusNotFound)
	if got, want := p.Detail, `no scope "account-z"`; got != want {
		t.Fatalf("detail: got %q, want %q", got, want)
	}
}

func TestResumeScope(t *testing.T) {
	t.Parallel()
	b := setupWithScope(t)

	t.Run("ErrReasonRequired", func(t *testing.T) {
		for _, body := range []string{"", `{}`, `{"reason":"  "}`} {
			p := problemOf(t, b.do(http.MethodPost, "/v1/scopes/account-a/resume", body), http.StatusUnprocessableEntity)
			if !hasField(p, "reason", "required") {
				t.Fatalf("errors: got %+v, want reason", p.Errors)
			}
		}
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		problemOf(t, b.do(http.MethodPost, "/v1/scopes/account-z/resume", `{"reason":"checked"}`), http.StatusNotFound)
	})
	t.Run("OK", func(t *testing.T) {
		sc := decodeAs[httpapi.Scope](t, b.do(http.MethodPost, "/v1/scopes/account-a/resume", `{"reason":"checked"}`), http.StatusOK)
		if got, want := sc.Status, "open"; got != want {
			t.Fatalf("status: got %q, want %q", got, want)
		}
	})
}

// Design §14: a person pauses a scope until a time, with a reason; the
// scope reads paused with that reason, its operations wait for the end,
// and resume lifts it. Every field at fault is named at once.
func TestPauseScope(t *testing.T) {
	t.Parallel()
	b := setupWithScope(t)
	now := b.clock.Now()
	until := now.Add(2 * time.Hour).UTC().Truncate(time.Second)

	t.Run("ErrEveryField", func(t *testing.T) {
		p := problemOf(t, b.do(http.MethodPost, "/v1/scopes/account-a/pause", `{"until":"tomorrow","reason":" "}`), http.StatusUnprocessableEntity)
		if !hasField(p, "until", "RFC 3339") || !hasField(p, "reason", "required") {
			t.Fatalf("errors: got %+v, want until and reason", p.Errors)
		}
		for body, want := range map[string]string{
			`{"reason":"x"}`: "required",
			`{"until":"` + now.Add(-time.Minute).UTC().Format(time.RFC3339) + `","reason":"x"}`: "future",
			`{"until":"` + now.AddDate(5, 0, 0).UTC().Format(time.RFC3339) + `","reason":"x"}`:  "later than",
		} {
			p := problemOf(t, b.do(http.MethodPost, "/v1/scopes/account-a/pause", body), http.StatusUnprocessableEntity)
			if !hasField(p, "until", want) {
				t.Errorf("%s: errors %+v, want until %q", body, p.Errors, want)
			}
		}
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		problemOf(t, b.do(http.MethodPost, "/v1/scopes/account-z/pause", `{"until":"`+until.Format(time.RFC3339)+`","reason":"x"}`), http.StatusNotFound)
	})
	t.Run("PausesAndResumes", func(t *testing.T) {
		sc := decodeAs[httpapi.Scope](t, b.do(http.MethodPost, "/v1/scopes/account-a/pause", `{"until":"`+until.Format(time.RFC3339)+`","reason":"provider maintenance"}`), http.StatusOK)
		if sc.Status != "paused" || sc.PausedUntil == nil || !sc.PausedUntil.Equal(until) || sc.PauseReason == nil || !strings.Contains(*sc.PauseReason, "provider maintenance") {
			t.Fatalf("after pause: %s until %v (%v), want paused until %s with the reason", sc.Status, sc.PausedUntil, sc.PauseReason, until)
		}
		op := enqueue(t, b, "behind-pause", "account-a")
		if op.State != "waitingForBudget" || op.NextAttemptAt == nil || !op.NextAttemptAt.Equal(until) {
			t.Fatalf("operation behind the pause: %s at %v, want waitingForBudget until %s", op.State, op.NextAttemptAt, until)
		}
		// A shorter pause keeps the longer one in place.
		sc = decodeAs[httpapi.Scope](t, b.do(http.MethodPost, "/v1/scopes/account-a/pause", `{"until":"`+now.Add(time.Hour).UTC().Format(time.RFC3339)+`","reason":"shorter"}`), http.StatusOK)
		if !sc.PausedUntil.Equal(until) {
			t.Fatalf("a shorter pause moved the end to %v, want %s kept", sc.PausedUntil, until)
		}
		sc = decodeAs[httpapi.Scope](t, b.do(http.MethodPost, "/v1/scopes/account-a/resume", `{"reason":"maintenance over"}`), http.StatusOK)
		if sc.Status != "open" {
			t.Fatalf("after resume: %s", sc.Status)
		}
		audit, err := b.svc.ListScopeAudit(context.Background(), "account-a")
		if err != nil {
			t.Fatal(err)
		}
		var actions []string
		for _, e := range audit {
			actions = append(actions, e.Action+": "+e.Detail)
		}
		if joined := strings.Join(actions, "; "); !strings.Contains(joined, "pause: paused until "+until.Format(time.RFC3339)) || !strings.Contains(joined, "which is kept") {
			t.Errorf("audit %s, want both pauses, the second kept", joined)
		}
	})
}
