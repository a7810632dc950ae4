package httpapi_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"strings"
	"testing"
	"time"

	"pacer/httpapi"
	"pacer/scheduler"
)

// Secrets of the grant fixtures.
const (
	secretClient  = "client-secret-8c1f"
	secretRefresh = "refresh-token-2b7e"
)

// appKeyPEM is an RSA key made for the test, in PEM; short is one of
// 1024 bits, refused.
func appKeyPEM(t *testing.T, bits int) string {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, bits)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
}

// Design §13 at PUT: oauth2 and githubApp grants are accepted, write-only
// (the scope shows the type, configured and, once a token was had, its
// expiry and last refresh), and refused field by field.
func TestPutScopeGrants(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	key := appKeyPEM(t, 2048)
	keyJSON, _ := json.Marshal(key)
	b.secrets = append(b.secrets, secretClient, secretRefresh, strings.Split(key, "\n")[1])

	oauth := `{"provider":"google","baseURL":"https://www.googleapis.com","credentials":{"type":"oauth2",
		"tokenURL":"https://oauth2.googleapis.com/token","clientID":"app.apps.googleusercontent.com",
		"clientSecret":"` + secretClient + `","refreshToken":"` + secretRefresh + `","scopes":["https://www.googleapis.com/auth/calendar"],"authStyle":"params"}}`
	res := b.do(http.MethodPut, "/v1/scopes/g", oauth)
	sc := decodeAs[httpapi.Scope](t, res, http.StatusCreated)
	if sc.Credentials.Type != "oauth2" || !sc.Credentials.Configured || sc.Credentials.TokenExpiresAt != nil {
		t.Fatalf("credentials shown: %+v", sc.Credentials)
	}
	if !bytes.Contains(res.Body, []byte(`"credentials":{"type":"oauth2","configured":true,"tokenExpiresAt":null,"lastRefreshAt":null,"lastRefreshResult":null}`)) {
		t.Fatalf("a grant without a token yet: %s", res.Body)
	}
	app := `{"provider":"github","baseURL":"https://api.github.com","credentials":{"type":"githubApp","appID":7,"installationID":42,"privateKey":` + string(keyJSON) + `}}`
	sc = decodeAs[httpapi.Scope](t, b.do(http.MethodPut, "/v1/scopes/gh", app), http.StatusCreated)
	if sc.Credentials.Type != "githubApp" || !sc.Credentials.Configured {
		t.Fatalf("credentials shown: %+v", sc.Credentials)
	}
	local := `{"provider":"generic","baseURL":"https://api.example.com","credentials":{"type":"oauth2","tokenURL":"http://127.0.0.1:9/token","clientID":"c","clientSecret":"` + secretClient + `"}}`
	decodeAs[httpapi.Scope](t, b.do(http.MethodPut, "/v1/scopes/local", local), http.StatusCreated)

	// Once a token was had, the scope shows its expiry and last refresh.
	ctx := context.Background()
	expires := testNow.Add(time.Hour)
	if _, ok, err := b.store.LeaseTokenRefresh(ctx, "g", "h", testNow, testNow.Add(time.Minute)); err != nil || !ok {
		t.Fatal(ok, err)
	}
	tok := scheduler.Token{AccessToken: "access-token-6d0a", IssuedAt: testNow, ExpiresAt: expires}
	b.secrets = append(b.secrets, tok.AccessToken)
	if _, err := b.store.FinishTokenRefresh(ctx, "g", "h", scheduler.TokenRefresh{At: testNow, Token: &tok, Result: scheduler.RefreshOK}); err != nil {
		t.Fatal(err)
	}
	res = b.do(http.MethodGet, "/v1/scopes/g", "")
	sc = decodeAs[httpapi.Scope](t, res, http.StatusOK)
	if c := sc.Credentials; c.TokenExpiresAt == nil || !c.TokenExpiresAt.Equal(expires) || c.LastRefreshResult == nil || *c.LastRefreshResult != "ok" {
		t.Fatalf("credentials shown after a refresh: %+v", c)
	}
	list := b.do(http.MethodGet, "/v1/scopes", "")
	for _, body := range [][]byte{res.Body, list.Body} {
		for _, s := range b.secrets {
			if bytes.Contains(body, []byte(s)) {
				t.Fatalf("a response carries a secret: %s", body)
			}
		}
	}

	for _, tt := range []struct{ name, creds, field string }{
		{"tokenURLPlainHTTP", `{"type":"oauth2","tokenURL":"http://auth.example.com/token","clientID":"c","clientSecret":"s"}`, "credentials.tokenURL"},
		{"tokenURLMissing", `{"type":"oauth2","clientID":"c","clientSecret":"s"}`, "credentials.tokenURL"},
		{"tokenURLRelative", `{"type":"oauth2","tokenURL":"/token","clientID":"c","clientSecret":"s"}`, "credentials.tokenURL"},
		{"clientID", `{"type":"oauth2","tokenURL":"https://auth.example.com/token","clientSecret":"s"}`, "credentials.clientID"},
		{"secretMissing", `{"type":"oauth2","tokenURL":"https://auth.example.com/token","clientID":"c"}`, "credentials.clientSecret"},
		{"authStyle", `{"type":"oauth2","tokenURL":"https://auth.example.com/token","clientID":"c","clientSecret":"s","authStyle":"cookie"}`, "credentials.authStyle"},
		{"scopeWithSpace", `{"type":"oauth2","tokenURL":"https://auth.example.com/token","clientID":"c","clientSecret":"s","scopes":["read","read write"]}`, "credentials.scopes[1]"},
		{"refreshTwoLines", `{"type":"oauth2","tokenURL":"https://auth.example.com/token","clientID":"c","refreshToken":"a\nb"}`, "credentials.refreshToken"},
		{"scopesOnBearer", `{"type":"bearer","token":"` + secretBearer + `","scopes":["read"]}`, "credentials.scopes"},
		{"appKeyGarbage", `{"type":"githubApp","appID":7,"installationID":42,"privateKey":"-----BEGIN RSA PRIVATE KEY-----\nbm90IGEga2V5\n-----END RSA PRIVATE KEY-----"}`, "credentials.privateKey"},
		{"appKeyMissing", `{"type":"githubApp","appID":7,"installationID":42}`, "credentials.privateKey"},
		{"appKeyShort", `{"type":"githubApp","appID":7,"installationID":42,"privateKey":` + mustJSON(appKeyPEM(t, 1024)) + `}`, "credentials.privateKey"},
		{"appID", `{"type":"githubApp","installationID":42,"privateKey":` + string(keyJSON) + `}`, "credentials.appID"},
		{"installationID", `{"type":"githubApp","appID":7,"privateKey":` + string(keyJSON) + `}`, "credentials.installationID"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			body := `{"provider":"generic","baseURL":"https://api.example.com","credentials":` + tt.creds + `}`
			res := b.do(http.MethodPut, "/v1/scopes/bad", body)
			p := problemOf(t, res, http.StatusUnprocessableEntity)
			if !hasField(p, tt.field, "") {
				t.Fatalf("errors: got %+v, want a field %q", p.Errors, tt.field)
			}
			if bytes.Contains(res.Body, []byte("bm90IGEga2V5")) || bytes.Contains(res.Body, keyJSON[1:40]) {
				t.Fatalf("the problem quotes the key: %s", res.Body)
			}
		})
	}
	problemOf(t, b.do(http.MethodGet, "/v1/scopes/bad", ""), http.StatusNotFound)
}

func mustJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
