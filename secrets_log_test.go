package main

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestNoSecretsInLogs runs pacer at debug level (JSON logs: stderr is not
// a terminal) through a request flow that touches every secret: the API
// token (and a wrong guess), and scope credentials of every type, echoed
// back by a provider in successful, refused and failed answers. None may
// appear anywhere in the logs.
func TestNoSecretsInLogs(t *testing.T) {
	t.Parallel()
	const apiToken = "api-SECRET-token-4711"
	secrets := []string{apiToken, "wrong-SECRET-guess", "cred-SECRET-bearer", "cred-SECRET-header", "cred-SECRET-pass",
		base64.StdEncoding.EncodeToString([]byte("user:cred-SECRET-pass"))}
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		echo := fmt.Sprintf("auth=%q key=%q", r.Header.Get("Authorization"), r.Header.Get("X-Api-Secret"))
		switch {
		case strings.HasPrefix(r.URL.Path, "/revoked"):
			w.WriteHeader(http.StatusUnauthorized)
		case strings.HasPrefix(r.URL.Path, "/unsure"):
			w.WriteHeader(http.StatusBadGateway)
		case strings.HasPrefix(r.URL.Path, "/bad"):
			w.WriteHeader(http.StatusUnprocessableEntity)
		}
		fmt.Fprint(w, echo)
	}))
	defer provider.Close()
	p := startPacerBinary(t, filepath.Join(t.TempDir(), "pacer.db"), freeAddr(t), "--api-token", apiToken)

	call := func(token, method, path string, body any) int {
		t.Helper()
		st, _ := p.callAs(t, token, method, path, body)
		return st
	}
	scopes := map[string]map[string]any{
		"bearer": {"type": "bearer", "token": "cred-SECRET-bearer"},
		"header": {"type": "header", "name": "X-Api-Secret", "value": "cred-SECRET-header"},
		"basic":  {"type": "basic", "username": "user", "password": "cred-SECRET-pass"},
	}
	for name, creds := range scopes {
		if st := call(apiToken, "PUT", "/v1/scopes/"+name, map[string]any{"provider": "generic", "baseURL": provider.URL, "credentials": creds}); st != 201 {
			t.Fatalf("put scope %s: %d", name, st)
		}
		for _, path := range []string{"/ok", "/bad", "/unsure", "/revoked"} {
			id := name + strings.ReplaceAll(path, "/", "-")
			if st := call(apiToken, "POST", "/v1/operations", map[string]any{"operationId": id, "providerScope": name,
				"request": map[string]any{"method": "POST", "path": path, "body": map[string]any{"x": 1}}}); st != 201 {
				t.Fatalf("enqueue %s: %d", id, st)
			}
		}
	}
	if st := call("wrong-SECRET-guess", "GET", "/v1/scopes", nil); st != 401 {
		t.Fatalf("wrong token: %d, want 401", st)
	}
	if st := call(apiToken, "GET", "/metrics", nil); st != 200 {
		t.Fatalf("metrics: %d", st)
	}
	// Wait until every operation has had its attempt.
	deadline := time.Now().Add(30 * time.Second)
	for _, name := range []string{"bearer", "header", "basic"} {
		for _, suffix := range []string{"-ok", "-bad", "-unsure"} {
			for {
				_, op := p.callAs(t, apiToken, "GET", "/v1/operations/"+name+suffix, nil)
				if op["state"] == "succeeded" || op["state"] == "failed" || op["state"] == "held" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s%s still %v", name, suffix, op["state"])
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("pacer exit: %v", err)
	}
	logs := p.logs.String()
	for _, s := range secrets {
		if strings.Contains(logs, s) {
			t.Errorf("secret %q appears in the logs", s)
		}
	}
	for _, want := range []string{`"msg":"http request"`, `"msg":"attempt recorded"`, `"msg":"stopped"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("the logs lack %s: the flow did not run as planned", want)
		}
	}
	if t.Failed() {
		t.Logf("logs:\n%s", logs)
	}
}
