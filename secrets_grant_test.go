package main

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/clock"

	"pacer/internal/pacertest"
)

// The secret sweep of design §13 (invariant 8) for renewing grants: pacer
// serve runs scopes with an oauth2 refresh-token grant (rotating at a
// stand-in endpoint, and renewed after a provider's 401), a dead grant
// the endpoint refuses with an error that quotes the refresh token, and a
// GitHub App; the provider echoes the Authorization header it receives.
// No client secret, refresh token (spent or current), access token or
// private key line appears in the database files (WAL included, while it
// runs and after), the logs, the API's responses or the support pages.
func TestNoGrantSecretsAnywhere(t *testing.T) {
	t.Parallel()
	const clientSecret = "grant-SECRET-client-3f9a"
	real := clock.New()
	ts := pacertest.NewTokenServer(t, real, "client-1", clientSecret, time.Hour)
	gh := pacertest.NewTokenServer(t, real, "", "", time.Hour)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	gh.AppID, gh.AppKey = 7, &key.PublicKey
	pemKey := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Echo", r.Header.Get("Authorization"))
		switch {
		case strings.HasPrefix(r.URL.Path, "/revoked"):
			w.WriteHeader(http.StatusUnauthorized)
		case strings.HasPrefix(r.URL.Path, "/bad"):
			w.WriteHeader(http.StatusUnprocessableEntity)
		}
		fmt.Fprintf(w, "you sent %q", r.Header.Get("Authorization"))
	})
	gh.Serve(echo)
	provider := httptest.NewServer(echo)
	defer provider.Close()

	dbPath := filepath.Join(t.TempDir(), "pacer.db")
	p := startPacer(t, dbPath, freeAddr(t))
	liveRefresh, deadRefresh := ts.IssueRefreshToken(), "rt-dead-SECRET-never-issued"
	scopes := map[string]map[string]any{
		"live": {"provider": "generic", "baseURL": provider.URL, "credentials": map[string]any{"type": "oauth2", "tokenURL": ts.TokenURL(),
			"clientID": "client-1", "clientSecret": clientSecret, "refreshToken": liveRefresh}},
		"dead": {"provider": "generic", "baseURL": provider.URL, "credentials": map[string]any{"type": "oauth2", "tokenURL": ts.TokenURL(),
			"clientID": "client-1", "clientSecret": clientSecret, "refreshToken": deadRefresh}},
		"app": {"provider": "github", "baseURL": gh.URL, "credentials": map[string]any{"type": "githubApp", "appID": 7, "installationID": 42, "privateKey": pemKey}},
	}
	var ids []string
	for name, body := range scopes {
		if st, _ := p.call(t, "PUT", "/v1/scopes/"+name, body); st != 201 {
			t.Fatalf("put scope %s: %d", name, st)
		}
		for _, path := range []string{"/ok", "/bad", "/revoked"} {
			id := name + strings.ReplaceAll(path, "/", "-")
			ids = append(ids, id)
			if st, _ := p.call(t, "POST", "/v1/operations", map[string]any{"operationId": id, "providerScope": name,
				"request": map[string]any{"method": "POST", "path": path, "body": map[string]any{"x": 1}}}); st != 201 {
				t.Fatalf("enqueue %s: %d", id, st)
			}
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, id := range ids {
		for {
			_, op := p.call(t, "GET", "/v1/operations/"+id, nil)
			// The dead grant's scope is held by its first refusal: its
			// other operations wait behind it (blockedBy scopeHeld).
			if op["state"] == "succeeded" || op["state"] == "failed" || op["state"] == "held" || op["blockedBy"] == "scopeHeld" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s still %v", id, op["state"])
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if _, op := p.call(t, "GET", "/v1/operations/live-ok", nil); op["state"] != "succeeded" {
		t.Fatalf("live-ok: %v", op["state"])
	}
	if _, op := p.call(t, "GET", "/v1/operations/dead-ok", nil); op["state"] != "held" || !strings.Contains(fmt.Sprint(op["lastOutcome"]), "invalid_grant") {
		t.Fatalf("dead-ok: %v %v", op["state"], op["lastOutcome"])
	}

	secrets := append([]string{clientSecret, liveRefresh, deadRefresh}, ts.Secrets()...)
	secrets = append(secrets, gh.Secrets()...)
	for _, line := range strings.Split(pemKey, "\n") {
		if len(line) > 16 && !strings.HasPrefix(line, "-----") {
			secrets = append(secrets, line)
		}
	}
	if len(ts.Secrets()) < 3 || len(gh.Secrets()) < 1 { // the grant's, a rotated one, an access token
		t.Fatalf("the flow issued too few tokens to sweep: %d, %d", len(ts.Secrets()), len(gh.Secrets()))
	}
	check := func(where, text string) {
		t.Helper()
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("%s holds a secret (%.12s…)", where, s)
			}
		}
	}
	get := func(path string) string {
		t.Helper()
		resp, err := http.Get(p.base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
		}
		return string(b)
	}
	check("GET /v1/scopes", get("/v1/scopes"))
	check("GET /v1/operations", get("/v1/operations?limit=100"))
	check("GET /ui/", get("/ui/"))
	for name := range scopes {
		check("GET /v1/scopes/"+name, get("/v1/scopes/"+name))
		check("GET /ui/scopes/"+name, get("/ui/scopes/"+name))
	}
	for _, id := range ids {
		check("GET /v1/operations/"+id, get("/v1/operations/"+id))
		check("GET /v1/operations/"+id+"/attempts", get("/v1/operations/"+id+"/attempts"))
		check("GET /ui/operations/"+id, get("/ui/operations/"+id))
	}
	if page := get("/ui/scopes/dead"); !strings.Contains(page, "invalid_grant") {
		t.Errorf("the dead grant's page does not name the endpoint's refusal")
	}
	sweepFiles := func(when string) {
		t.Helper()
		files, _ := filepath.Glob(dbPath + "*")
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			check(when+" "+filepath.Base(f), string(b))
		}
	}
	sweepFiles("while running,")
	if err := p.shutdown(); err != nil {
		t.Fatalf("pacer exit: %v", err)
	}
	sweepFiles("after shutdown,")
	check("the logs", p.logs.String())
	if !strings.Contains(p.logs.String(), "resent with a renewed one") {
		t.Errorf("the flow did not renew after a 401 as planned")
	}
}
