package main

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"

	"pacer/scheduler"
	"pacer/scheduler/storetest"
)

// scopes set with oauth2 and githubApp grants: the secrets come from
// files and environment variables (never argv) and reach the server
// whole; flags that do not go with the type are refused.
func TestCLIScopesSetGrants(t *testing.T) { // not parallel: t.Setenv
	e := newCLIEnv(t)
	const clientSecret, refresh = "cli-client-secret-5e2d", "cli-refresh-token-9a1c"
	t.Setenv("CLI_TEST_CLIENT_SECRET", clientSecret)
	rtFile := writeFile(t, "refresh", refresh+"\n")
	r := e.pacer("", "scopes", "set", "g", "--provider", "google", "--base-url", e.provider,
		"--credentials", "oauth2", "--token-url", "https://oauth2.googleapis.com/token", "--client-id", "app-1",
		"--client-secret-env", "CLI_TEST_CLIENT_SECRET", "--refresh-token-file", rtFile,
		"--scope", "https://www.googleapis.com/auth/calendar", "--scope", "openid", "--auth-style", "params")
	if out := r.ok(t); !strings.Contains(out, "created scope g") || !strings.Contains(out, "oauth2") {
		t.Fatalf("set oauth2: %s", out)
	}
	show := e.pacer("", "scopes", "show", "g")
	if out := show.ok(t); !strings.Contains(out, "token expires") {
		t.Fatalf("show: %s", out)
	}
	for _, res := range []cliResult{r, show} {
		if s := res.stdout + res.stderr; strings.Contains(s, clientSecret) || strings.Contains(s, refresh) {
			t.Fatalf("output carries a secret: %s", s)
		}
	}

	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pemKey := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
	keyFile := writeFile(t, "app.pem", pemKey)
	e.pacer("", "scopes", "set", "gh", "--provider", "github", "--base-url", e.provider,
		"--credentials", "githubApp", "--app-id", "7", "--installation-id", "42", "--private-key-file", keyFile).ok(t)

	storetest.Enqueue(t, e.store, storetest.T0, storetest.NewOp("op-g", "g", storetest.T0), storetest.NewOp("op-gh", "gh", storetest.T0))
	got := map[string]scheduler.Credentials{}
	for _, c := range storetest.Claim(t, e.store, storetest.T0, 2) {
		got[c.Scope.Name] = c.Scope.Credentials
	}
	if c := got["g"]; c.ClientSecret != clientSecret || c.RefreshToken != refresh || c.ClientID != "app-1" ||
		c.Scopes != "https://www.googleapis.com/auth/calendar openid" || c.AuthStyle != "params" {
		t.Fatalf("stored oauth2 grant: %v (scopes %q, style %q)", c, c.Scopes, c.AuthStyle)
	}
	if c := got["gh"]; c.AppID != 7 || c.InstallationID != 42 || c.PrivateKey != pemKey {
		t.Fatalf("stored githubApp grant: %v", c)
	}

	base := []string{"scopes", "set", "x", "--provider", "generic", "--base-url", e.provider}
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"--token-file", rtFile, "--client-id", "c"}, exitUsage, "--client-id needs --credentials oauth2"},
		{[]string{"--credentials", "oauth2", "--token-url", "https://a.example/t", "--client-id", "c", "--app-id", "3"}, exitUsage, "--app-id does not go with"},
		{[]string{"--credentials", "oauth2", "--token-url", "https://a.example/t", "--client-id", "c", "--client-secret-file", rtFile, "--client-secret-env", "CLI_TEST_CLIENT_SECRET"}, exitUsage, "give the client secret once"},
		{[]string{"--credentials", "oauth2", "--client-id", "c", "--client-secret-env", "CLI_TEST_CLIENT_SECRET"}, exitUsage, "needs --token-url"},
		{[]string{"--credentials", "oauth2", "--token-url", "https://a.example/t", "--client-id", "c", "--refresh-token-env", "CLI_TEST_UNSET_VAR"}, exitUsage, "is not set"},
		{[]string{"--credentials", "githubApp", "--app-id", "7", "--installation-id", "42"}, exitUsage, "needs --private-key-file"},
		{[]string{"--credentials", "githubApp", "--app-id", "7", "--installation-id", "42", "--private-key-file", rtFile}, exitUsage, "privateKey"},
		{[]string{"--credentials", "oauth2", "--token-url", "http://auth.example/t", "--client-id", "c", "--client-secret-env", "CLI_TEST_CLIENT_SECRET"}, exitUsage, "tokenURL"},
	} {
		res := e.pacer("", append(base, tc.args...)...)
		res.fails(t, tc.code, tc.msg)
		if s := res.stdout + res.stderr + res.msg; strings.Contains(s, clientSecret) || strings.Contains(s, refresh) {
			t.Fatalf("a refusal quotes a secret: %s", s)
		}
	}
}
